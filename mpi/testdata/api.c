/*
 * api: prints what gclock_mpi.h's C API returns, for the tests.
 * usage: api N   (N readings per rank)
 * prints "mode RANK MODE", then per reading
 * "bounds RANK STATUS RAW_BEFORE WTIME EARLIEST LATEST RAW_AFTER" and
 * "now RANK RC EST EARLIEST LATEST STATUS", and "origin RANK NS".
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "gclock.h"
#include "gclock_mpi.h"

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines: mpirun interleaves the ranks' output */
	int n = argc > 1 ? atoi(argv[1]) : 3;
	const char *why;
	int mode = gclock_mpi_mode(&why);
	printf("mode %d %d %s\n", rank, mode, why);
	printf("origin %d %lld\n", rank, (long long)gclock_mpi_origin_ns());
	for (int i = 0; i < n; i++) {
		double w, lo, hi;
		long long a = gclock_raw_now();
		int st = gclock_mpi_wtime_bounds(&w, &lo, &hi);
		long long b = gclock_raw_now();
		printf("bounds %d %d %lld %.9f %.9f %.9f %lld\n", rank, st, a, w, lo, hi, b);
		struct gclock_time t;
		a = gclock_raw_now();
		int rc = gclock_mpi_now(&t);
		b = gclock_raw_now();
		printf("now %d %d %lld %lld %lld %lld %d %lld\n", rank, rc, a, (long long)t.est, (long long)t.earliest,
		       (long long)t.latest, rc == 0 ? t.status : -1, b);
	}
	MPI_Finalize();
	return 0;
}
