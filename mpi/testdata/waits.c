/*
 * waits.c: MPI waits known by construction, for the wait-state test
 * (otf2_test.go's TestWaitStatesOTF2). Run on 4 ranks: waits ROUNDS LS LR NB
 * (sleeps in ms). Every round has two phases, each started at a barrier on
 * MPI_COMM_WORLD:
 *
 *   phase 1, tag 1, late sender: rank 1 sleeps LS ms, then MPI_Send to
 *          rank 0, which waits in MPI_Recv since the barrier (about LS ms).
 *   phase 1, tag 2, late receiver: rank 2 MPI_Ssend to rank 3, which
 *          sleeps LR ms before its MPI_Recv: the synchronous send waits
 *          about LR ms.
 *   phase 2, tag 3, late sender, nonblocking: rank 0 posts MPI_Irecv and
 *          waits in MPI_Wait; rank 3 sleeps NB ms, then MPI_Isend and
 *          MPI_Wait: rank 0's MPI_Wait waits about NB ms.
 *   phase 2, tag 4, no wait: rank 1 sends 4 bytes (an eager standard
 *          MPI_Send, which does not wait for the receive) to rank 2, which
 *          sleeps LR ms before its MPI_Recv: no late sender, and no late
 *          receiver beyond the send's own few microseconds.
 *
 * Each rank prints "stamp RANK TAG ROUND NS": CLOCK_MONOTONIC_RAW just before
 * the call of the scenario's message (the tracer's clock, without the test
 * build's emulation), and "ok RANK" at the end.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long raw_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0)
		;
}

static int rank;

static void stamp(int tag, int round) { printf("stamp %d %d %d %lld\n", rank, tag, round, raw_now()); }

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc != 5 || size != 4) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -np 4 waits ROUNDS LS_MS LR_MS NB_MS\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int rounds = atoi(argv[1]), ls = atoi(argv[2]), lr = atoi(argv[3]), nb = atoi(argv[4]);
	int v = rank, got = 0;
	for (int r = 0; r < rounds; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		switch (rank) {
		case 0:
			stamp(1, r);
			MPI_Recv(&got, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			break;
		case 1:
			sleep_ms(ls);
			stamp(1, r);
			MPI_Send(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
			break;
		case 2:
			stamp(2, r);
			MPI_Ssend(&v, 1, MPI_INT, 3, 2, MPI_COMM_WORLD);
			break;
		case 3:
			sleep_ms(lr);
			stamp(2, r);
			MPI_Recv(&got, 1, MPI_INT, 2, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			break;
		}
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Request q;
		switch (rank) {
		case 0:
			MPI_Irecv(&got, 1, MPI_INT, 3, 3, MPI_COMM_WORLD, &q);
			stamp(3, r);
			MPI_Wait(&q, MPI_STATUS_IGNORE);
			break;
		case 1:
			stamp(4, r);
			MPI_Send(&v, 1, MPI_INT, 2, 4, MPI_COMM_WORLD);
			break;
		case 2:
			sleep_ms(lr);
			stamp(4, r);
			MPI_Recv(&got, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			break;
		case 3:
			sleep_ms(nb);
			stamp(3, r);
			MPI_Isend(&v, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, &q);
			MPI_Wait(&q, MPI_STATUS_IGNORE);
			break;
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	printf("ok %d\n", rank);
	MPI_Finalize();
	return 0;
}
