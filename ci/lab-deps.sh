#!/usr/bin/env bash
# Installs what `gclock lab` needs: iproute2 (network namespaces, veth),
# chrony and linuxptp (the peers measured by `gclock lab --compare`).
# Idempotent: installs only what is missing. Never starts a stock service:
# a stock chronyd would steer this machine's clock; gclock runs chronyd only
# with -x and ptp4l only with free_running 1, itself.
set -u
need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v chronyd >/dev/null 2>&1 || need+=(chrony)
command -v ptp4l >/dev/null 2>&1 || need+=(linuxptp)
if [ ${#need[@]} -eq 0 ]; then
  echo "ci/lab-deps.sh: iproute2, chrony and linuxptp present"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "ci/lab-deps.sh: not root, cannot install ${need[*]} (lab tests will skip and say so)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && created_policy=1
fi
apt-get update -qq >/dev/null 2>&1 || true
if ! apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
  echo "ci/lab-deps.sh: could not install ${need[*]} (lab tests that need them will skip and say so)"
fi
[ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
# A stock chronyd started anyway would adjust the clock: stop it (exact name, its pid file).
if [ -s /run/chrony/chronyd.pid ]; then
  kill "$(cat /run/chrony/chronyd.pid)" 2>/dev/null || true
fi
exit 0
