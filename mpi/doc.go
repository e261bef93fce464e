// Package mpi holds libgclockmpi, gclock's global MPI_Wtime for unmodified
// MPI programs, and its tests; the sources are C (built with mpicc, see
// Makefile and docs/mpi.md):
//
//   - src/gclock_mpi.c: libgclockmpi.so. Defines MPI_Wtime and MPI_Wtick over
//     MPI's profiling interface (PMPI), reading global time from the host's
//     gclock page (include/gclock.h), with the C API of include/gclock_mpi.h
//     (bounds, mode, origin). Preloaded (mpirun -x LD_PRELOAD=...) or linked
//     before -lmpi. With GCLOCK_MPI_TRACE=DIR it records every rank's
//     messages and collectives, the daemon's mappings and sync sessions
//     with rank 0, in gclock's trace format (include/gclock_trace.h), so
//     that `gclock merge` corrects C/MPI traces as it does Go traces, with
//     a daemon (-method daemon) or without (linear, spline).
//     Makefile's libgclockmpi-test.so is the tests' build: it can give each
//     rank an emulated trace clock (GCLOCK_MPI_TEST_CLOCK).
//   - src/collbench.c: the sample program. Times MPI_Reduce and MPI_Allreduce on
//     every rank after an MPI_Barrier on the local clock and from a common
//     start in global time, and prints each rank's deviation from the
//     ranks' mean, as seed 003 (Hayakawa et al.) did with a hardware counter.
//   - testdata/ring.c and testdata/calls.c: ordinary MPI programs (no gclock
//     header) exercising the traced calls (calls.c: scans, Alltoallw,
//     nonblocking forms, persistent requests, one-sided calls, with
//     arguments the tests check in the trace); testdata/api.c prints the C
//     API's answers; testdata/wtime.f90 prints Fortran's MPI_WTIME and
//     testdata/calls.f90 makes the Fortran calls the library traces.
//
// The tests build them with mpicc and run them with mpirun on 4 ranks of
// this machine, against pages written by gtime.Writer with known mappings
// and against real daemons.
package mpi
