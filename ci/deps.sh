#!/usr/bin/env bash
# Installs the system packages gclock's tests use: a C compiler and make (C headers and mpi/ are tested),
# iproute2 (the lab's network namespaces), chrony and linuxptp (the lab's peers).
# Idempotent: installs only what is missing; never fails the build for an optional peer.
set -u
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need+=(make) # mpi/Makefile (go test ./mpi builds through it)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v chronyd >/dev/null 2>&1 || need+=(chrony)
command -v ptp4l >/dev/null 2>&1 || need+=(linuxptp)
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
  # A stock chronyd started anyway (no policy-rc.d honoured) would adjust the clock: stop it.
  pkill -x chronyd 2>/dev/null || true
fi
# OpenMPI (mpi/: the global MPI_Wtime library and its sample program run with 4 ranks):
# about 24 MB to download, 96 MB installed (gfortran comes with libopenmpi-dev).
# A block of its own, so that a failure here never holds back the packages above.
if ! { command -v mpicc && command -v mpirun; } >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null 2>&1; } ||
    echo "ci/deps.sh: could not install openmpi-bin libopenmpi-dev (the MPI tests will skip and say so)"
fi
exit 0
