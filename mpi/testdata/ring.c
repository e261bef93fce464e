/*
 * ring: an ordinary MPI program (no gclock header) that the tests run under
 * libgclockmpi: point-to-point messages of every traced kind, collectives on
 * MPI_COMM_WORLD and on a split communicator, and MPI_Wtime read between two
 * CLOCK_MONOTONIC_RAW stamps so that a test can check its value against the
 * page's mapping.
 *
 * usage: ring ROUNDS PAUSE_MS [SYNC_EVERY]
 * With SYNC_EVERY > 0 each round also runs MPI_Gather, MPI_Scatter,
 * MPI_Allgather, MPI_Alltoall, their v variants, MPI_Reduce_scatter_block,
 * MPI_Reduce_scatter, MPI_Ibarrier, MPI_Iallreduce, MPI_Ibcast and
 * MPI_Ireduce (on the halves), and every SYNC_EVERY rounds
 * gclock_timesync() when the library defines it (weak: still no header).
 * prints per rank: "wtime RANK RAW_BEFORE WTIME RAW_AFTER" lines, then
 * "attr RANK IS_GLOBAL FLAG" and "tick RANK WTICK".
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int gclock_timesync(void) __attribute__((weak));

static long long raw(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void stamp(int rank)
{
	long long a = raw();
	double w = MPI_Wtime();
	long long b = raw();
	printf("wtime %d %lld %.9f %lld\n", rank, a, w, b);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines: mpirun interleaves the ranks' output */
	int rounds = argc > 1 ? atoi(argv[1]) : 10;
	int pause_ms = argc > 2 ? atoi(argv[2]) : 0;
	int sync_every = argc > 3 ? atoi(argv[3]) : 0;
	int *all = calloc((size_t)size, sizeof *all), *all2 = calloc((size_t)size, sizeof *all2);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	MPI_Comm half;
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	int hrank, hsize;
	MPI_Comm_rank(half, &hrank);
	MPI_Comm_size(half, &hsize);
	stamp(rank);
	for (int r = 0; r < rounds; r++) {
		int v = rank * 1000 + r, got = 0, got2 = 0;
		/* blocking ring, receiving from any source */
		if (rank == 0) {
			MPI_Send(&v, 1, MPI_INT, next, 1, MPI_COMM_WORLD);
			MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(&got, 1, MPI_INT, prev, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(&v, 1, MPI_INT, next, 1, MPI_COMM_WORLD);
		}
		/* non-blocking both ways, two tags */
		MPI_Request q[4];
		int a[2];
		MPI_Irecv(&a[0], 1, MPI_INT, prev, 2, MPI_COMM_WORLD, &q[0]);
		MPI_Irecv(&a[1], 1, MPI_INT, next, 3, MPI_COMM_WORLD, &q[1]);
		MPI_Isend(&v, 1, MPI_INT, next, 2, MPI_COMM_WORLD, &q[2]);
		MPI_Isend(&v, 1, MPI_INT, prev, 3, MPI_COMM_WORLD, &q[3]);
		if (r % 2 == 0) {
			MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
		} else {
			int idx;
			MPI_Waitany(4, q, &idx, MPI_STATUS_IGNORE);
			for (int i = 0; i < 4; i++)
				MPI_Wait(&q[i], MPI_STATUS_IGNORE);
		}
		/* sendrecv, and an Irecv completed by MPI_Test */
		MPI_Sendrecv(&v, 1, MPI_INT, next, 4, &got, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		MPI_Request t;
		int flag = 0;
		MPI_Irecv(&got2, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, &t);
		MPI_Send(&v, 1, MPI_INT, next, 5, MPI_COMM_WORLD);
		while (!flag)
			MPI_Test(&t, &flag, MPI_STATUS_IGNORE);
		/* the same tag on the split communicator */
		if (hsize > 1)
			MPI_Sendrecv(&v, 1, MPI_INT, (hrank + 1) % hsize, 1, &got, 1, MPI_INT, (hrank + hsize - 1) % hsize, 1,
				     half, MPI_STATUS_IGNORE);
		/* collectives */
		int sum = 0;
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Bcast(&v, 1, MPI_INT, r % size, MPI_COMM_WORLD);
		MPI_Reduce(&v, &sum, 1, MPI_INT, MPI_SUM, (r + 1) % size, MPI_COMM_WORLD);
		MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_MAX, half);
		if (sync_every > 0) {
			int one = 0;
			MPI_Gather(&v, 1, MPI_INT, all, 1, MPI_INT, r % size, MPI_COMM_WORLD);
			MPI_Scatter(all, 1, MPI_INT, &one, 1, MPI_INT, (r + 1) % size, MPI_COMM_WORLD);
			MPI_Allgather(&v, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
			MPI_Alltoall(all, 1, MPI_INT, all2, 1, MPI_INT, MPI_COMM_WORLD);
			int *cnt = calloc((size_t)size, sizeof *cnt), *dsp = calloc((size_t)size, sizeof *dsp);
			for (int i = 0; i < size; i++)
				cnt[i] = 1, dsp[i] = i;
			MPI_Gatherv(&v, 1, MPI_INT, all, cnt, dsp, MPI_INT, (r + 1) % size, MPI_COMM_WORLD);
			MPI_Scatterv(all, cnt, dsp, MPI_INT, &one, 1, MPI_INT, r % size, MPI_COMM_WORLD);
			MPI_Allgatherv(&v, 1, MPI_INT, all, cnt, dsp, MPI_INT, MPI_COMM_WORLD);
			MPI_Alltoallv(all, cnt, dsp, MPI_INT, all2, cnt, dsp, MPI_INT, MPI_COMM_WORLD);
			MPI_Reduce_scatter_block(all, &one, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
			MPI_Reduce_scatter(all, &one, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
			free(cnt);
			free(dsp);
			MPI_Request nb[4];
			int s1 = 0, s2 = v;
			MPI_Ibarrier(MPI_COMM_WORLD, &nb[0]);
			MPI_Iallreduce(&v, &s1, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &nb[1]);
			MPI_Ibcast(&s2, 1, MPI_INT, (r + 2) % size, MPI_COMM_WORLD, &nb[2]);
			MPI_Ireduce(&v, all2, 1, MPI_INT, MPI_MAX, (r + 3) % hsize, half, &nb[3]);
			MPI_Waitall(2, nb, MPI_STATUSES_IGNORE);
			MPI_Wait(&nb[2], MPI_STATUS_IGNORE);
			int done = 0;
			while (!done)
				MPI_Test(&nb[3], &done, MPI_STATUS_IGNORE);
			if (r > 0 && r % sync_every == 0 && gclock_timesync)
				gclock_timesync();
		}
		if (pause_ms > 0) {
			struct timespec ts = {pause_ms / 1000, (pause_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
		}
		if (r % 8 == 0)
			stamp(rank);
	}
	stamp(rank);
	int *g, f;
	MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &g, &f);
	printf("attr %d %d %d\n", rank, f ? *g : -1, f);
	printf("tick %d %g\n", rank, MPI_Wtick());
	MPI_Comm_free(&half);
	free(all);
	free(all2);
	MPI_Finalize();
	return 0;
}
