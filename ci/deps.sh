#!/usr/bin/env bash
# Installs the system packages gclock's tests use: a C compiler (C headers are tested),
# iproute2 (the lab's network namespaces), chrony and linuxptp (the lab's peers).
# Idempotent: installs only what is missing; never fails the build for an optional peer.
set -u
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v chronyd >/dev/null 2>&1 || need+=(chrony)
command -v ptp4l >/dev/null 2>&1 || need+=(linuxptp)
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || echo "ci/deps.sh: could not install ${need[*]} (tests that need them will skip and say so)"
fi
exit 0
