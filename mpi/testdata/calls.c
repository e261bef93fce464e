/*
 * calls: an ordinary MPI program (no gclock header) making each call the
 * tracer follows beyond ring.c once per round with arguments the tests know
 * (mpi_test.go's TestTraceCalls lists what each call must record): scans,
 * MPI_Alltoallw and their nonblocking forms, a rooted collective on a split
 * communicator, persistent requests and one-sided communication. 4 ranks.
 *
 * usage: calls ROUNDS
 * prints "ok RANK" at the end when every result was right.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int bad;

static void check(int rank, const char *what, long got, long want)
{
	if (got != want) {
		printf("bad %d %s: got %ld, want %ld\n", rank, what, got, want);
		bad = 1;
	}
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rounds = argc > 1 ? atoi(argv[1]) : 2;
	MPI_Comm half;
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	int hrank, hsize;
	MPI_Comm_rank(half, &hrank);
	MPI_Comm_size(half, &hsize);
	int next = (rank + 1) % size, prev = (rank + size - 1) % size;
	int *sc = malloc(sizeof(int) * (size_t)size), *rc = malloc(sizeof(int) * (size_t)size);
	int *sd = malloc(sizeof(int) * (size_t)size), *rd = malloc(sizeof(int) * (size_t)size);
	MPI_Datatype *ty = malloc(sizeof(MPI_Datatype) * (size_t)size);
	int *sb = calloc(64, sizeof(int)), *rb = calloc(64, sizeof(int));
	for (int r = 0; r < rounds; r++) {
		/* scans: 3 ints on the world, 2 on the halves */
		int v[3] = {rank, 1, r}, s[3] = {0};
		MPI_Scan(v, s, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
		check(rank, "scan", s[0], rank * (rank + 1) / 2);
		MPI_Exscan(v, s, 2, MPI_INT, MPI_SUM, half);
		if (hrank > 0)
			check(rank, "exscan", s[1], hrank);
		/* alltoallw: rank i sends j+1 ints to rank j */
		for (int i = 0, o = 0; i < size; i++) {
			sc[i] = i + 1, sd[i] = o * (int)sizeof(int), o += i + 1;
			rc[i] = rank + 1, rd[i] = i * (rank + 1) * (int)sizeof(int);
			ty[i] = MPI_INT;
		}
		for (int i = 0; i < 64; i++)
			sb[i] = rank;
		MPI_Alltoallw(sb, sc, sd, ty, rb, rc, rd, ty, MPI_COMM_WORLD);
		check(rank, "alltoallw", rb[(rank + 1) * 2], 2);
		/* a rooted collective on a split communicator: root 1 of each half */
		MPI_Bcast(v, 2, MPI_INT, 1, half);
		/* the nonblocking forms */
		MPI_Request q[3];
		int s2[3] = {0}, s3[2] = {0};
		MPI_Iscan(v, s2, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q[0]);
		MPI_Iexscan(v, s3, 2, MPI_INT, MPI_SUM, half, &q[1]);
		MPI_Ialltoallw(sb, sc, sd, ty, rb, rc, rd, ty, MPI_COMM_WORLD, &q[2]);
		MPI_Waitall(3, q, MPI_STATUSES_IGNORE);
		/* persistent requests: tag 7 around the world (Startall, Waitall), tag 8 on the halves (Start, Wait) */
		MPI_Request p[4];
		int out[3] = {rank, r, 7}, in[3] = {0}, hout = rank, hin = -1;
		MPI_Send_init(out, 3, MPI_INT, next, 7, MPI_COMM_WORLD, &p[0]);
		MPI_Recv_init(in, 3, MPI_INT, prev, 7, MPI_COMM_WORLD, &p[1]);
		MPI_Recv_init(&hin, 1, MPI_INT, (hrank + hsize - 1) % hsize, 8, half, &p[2]);
		MPI_Ssend_init(&hout, 1, MPI_INT, (hrank + 1) % hsize, 8, half, &p[3]);
		for (int k = 0; k < 3; k++) {
			MPI_Startall(2, p);
			MPI_Waitall(2, p, MPI_STATUSES_IGNORE);
			check(rank, "persistent", in[0], prev);
			MPI_Start(&p[2]);
			MPI_Start(&p[3]);
			MPI_Wait(&p[3], MPI_STATUS_IGNORE);
			int flag = 0;
			while (!flag)
				MPI_Test(&p[2], &flag, MPI_STATUS_IGNORE);
		}
		for (int i = 0; i < 4; i++)
			MPI_Request_free(&p[i]);
		/* one-sided: a window of 16 ints on the world, one of 8 on the halves */
		MPI_Win w, hw;
		int *base;
		MPI_Win_allocate(16 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &w);
		for (int i = 0; i < 16; i++)
			base[i] = rank;
		MPI_Win_fence(0, w);
		int two[2] = {rank, rank}, three[3] = {0}, one = 1;
		MPI_Put(two, 2, MPI_INT, next, 4, 2, MPI_INT, w);
		MPI_Win_fence(0, w);
		MPI_Get(three, 3, MPI_INT, (rank + 2) % size, 8, 3, MPI_INT, w);
		MPI_Win_fence(MPI_MODE_NOSUCCEED, w);
		check(rank, "get", three[0], (rank + 2) % size);
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, (rank + 3) % size, 0, w);
		MPI_Accumulate(&one, 1, MPI_INT, (rank + 3) % size, 0, 1, MPI_INT, MPI_SUM, w);
		MPI_Win_unlock((rank + 3) % size, w);
		MPI_Win_lock_all(0, w);
		MPI_Win_unlock_all(w);
		MPI_Barrier(MPI_COMM_WORLD);
		check(rank, "accumulate", base[0], rank + 1);
		MPI_Win_free(&w);
		int hbase[8] = {0};
		MPI_Win_create(hbase, sizeof hbase, sizeof(int), MPI_INFO_NULL, half, &hw);
		MPI_Win_fence(0, hw);
		MPI_Put(&one, 1, MPI_INT, (hrank + 1) % hsize, 0, 1, MPI_INT, hw);
		MPI_Win_fence(MPI_MODE_NOSUCCEED, hw);
		MPI_Win_lock(MPI_LOCK_SHARED, (hrank + 1) % hsize, 0, hw);
		MPI_Win_unlock((hrank + 1) % hsize, hw);
		MPI_Win_free(&hw);
	}
	MPI_Comm_free(&half);
	free(sc), free(rc), free(sd), free(rd), free(ty), free(sb), free(rb);
	if (!bad)
		printf("ok %d\n", rank);
	MPI_Finalize();
	return 0;
}
