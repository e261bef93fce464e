#!/usr/bin/env bash
# Installs the system packages gclock's tests use: a C compiler and make (C headers and mpi/ are tested),
# iproute2 (the lab's network namespaces), chrony and linuxptp (the lab's peers),
# protoc (decodes the Perfetto export independently of gclock's decoder),
# systemd (systemd-analyze for the unit file) and chromium (the status page in a browser).
# Idempotent: installs only what is missing; never fails the build for an optional peer.
set -u
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need+=(make) # mpi/Makefile (go test ./mpi builds through it)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v chronyd >/dev/null 2>&1 || need+=(chrony)
command -v ptp4l >/dev/null 2>&1 || need+=(linuxptp)
# Stock NTP clients that query gclock's NTP server (lab/ntp.go): ntpdig (sntp's successor) and
# ntpdate (a shim over ntpdig); gclock runs them only without -S/-s (ntpdate only with -q).
command -v ntpdig >/dev/null 2>&1 || need+=(ntpsec-ntpdig)
command -v ntpdate >/dev/null 2>&1 || need+=(ntpsec-ntpdate)
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  # Never let a package start a service: a stock chronyd would steer this machine's clock.
  # gclock runs chronyd only with -x and ptp4l only with free_running 1, itself.
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && created_policy=1
  fi
  apt-get update -qq >/dev/null 2>&1 || true
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || echo "ci/deps.sh: could not install ${need[*]} (tests that need them will skip and say so)"
  [ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  # A stock chronyd started anyway (no policy-rc.d honoured) would adjust the clock: stop it,
  # by its own pid file, never by name: a lab's chronyd -x (its pid file in the lab's run
  # directory) may be measuring at the time, and killing it failed a running bench.
  if [ -s /run/chrony/chronyd.pid ]; then
    kill "$(cat /run/chrony/chronyd.pid)" 2>/dev/null || true
  fi
fi
# ntpsec-ntpdate's ifupdown hook steps the clock when an interface comes up: keep it from running.
[ -x /etc/network/if-up.d/ntpsec-ntpdate ] && [ "$(id -u)" = 0 ] && chmod -x /etc/network/if-up.d/ntpsec-ntpdate
# OpenMPI (mpi/: the global MPI_Wtime library and its sample program run with 4 ranks):
# about 24 MB to download, 96 MB installed (gfortran comes with libopenmpi-dev).
# A block of its own, so that a failure here never holds back the packages above.
if ! { command -v mpicc && command -v mpirun; } >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null 2>&1; } ||
    echo "ci/deps.sh: could not install openmpi-bin libopenmpi-dev (the MPI tests will skip and say so)"
fi
# gfortran (mpifort's compiler): mpi's Fortran tests (MPI_WTIME, the traced Fortran calls). libopenmpi-dev
# pulls in a versioned gfortran-NN only; the tests find it (OMPI_FC), this gives the plain name too.
if ! command -v gfortran >/dev/null 2>&1 && command -v mpifort >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends gfortran >/dev/null 2>&1 ||
    echo "ci/deps.sh: could not install gfortran (the Fortran MPI tests use gfortran-NN if present, else skip and say so)"
fi
# promtool (Debian's prometheus package, about 25 MB to download): deploy's TestAlertRules checks
# deploy/prometheus/gclock-rules.yaml and runs its unit tests. The package's server is never started
# (policy-rc.d, and no init system here).
if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && created_policy=1
  fi
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; } ||
    echo "ci/deps.sh: could not install prometheus (promtool; the alert rules' promtool checks will skip and say so)"
  [ "$created_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  pkill -x prometheus 2>/dev/null || true
fi
# protoc: trace/perfetto's TestProtocDecodes decodes the Perfetto export with it (about 3 MB).
if ! command -v protoc >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null 2>&1; } ||
    echo "ci/deps.sh: could not install protobuf-compiler (the protoc cross-check will skip and say so)"
fi
# Chrome DevTools' trace engine (npm @paulirish/trace_engine, about 25 MB): trace/chrome's
# TestDevToolsImportsEveryFlow imports the Chrome JSON with it and counts the arrows.
# Keep the version in step with traceEngine in trace/chrome/devtools_test.go.
if ! { command -v node && command -v npm; } >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null 2>&1; } ||
    echo "ci/deps.sh: could not install nodejs npm (the DevTools import check will skip and say so)"
fi
if command -v npm >/dev/null 2>&1 && [ ! -e /opt/gclock/trace-engine/node_modules/@paulirish/trace_engine/models/trace/trace.js ]; then
  timeout 300 npm install --prefix /opt/gclock/trace-engine --no-audit --no-fund --loglevel=error @paulirish/trace_engine@0.0.65 >/dev/null 2>&1 ||
    echo "ci/deps.sh: could not install @paulirish/trace_engine (the DevTools import check will try again, then skip and say so)"
fi
# systemd-analyze verifies deploy/gclockd.service (deploy/deploy_test.go); a block of
# its own. policy-rc.d is not needed: the package starts no service in a container.
if ! command -v systemd-analyze >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends systemd >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends systemd >/dev/null 2>&1; } ||
    echo "ci/deps.sh: could not install systemd (deploy's unit-file test will skip and say so)"
fi
# Headless Chromium loads the daemon's status page (daemon/internal/statuspage browser tests):
# about 100 MB to download. A block of its own, as OpenMPI's.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1; } ||
    echo "ci/deps.sh: could not install chromium (the status page's browser tests will skip and say so)"
fi
# OTF2 (trace/otf2): libotf2 for the -tags otf2 sink, otf2-print (otf2-tools) and python3-otf2 to
# read archives back and to write reference archives (about 2 MB). A block of its own; without them the OTF2 tests skip.
if ! { command -v otf2-print && pkg-config --exists otf2 && /usr/bin/python3 -c 'import otf2'; } >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends pkg-config libotf2-trace-dev otf2-tools python3-otf2 >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends pkg-config libotf2-trace-dev otf2-tools python3-otf2 >/dev/null 2>&1; } ||
    echo "ci/deps.sh: could not install libotf2-trace-dev otf2-tools python3-otf2 (the OTF2 read-back will skip and say so)"
fi
exit 0
