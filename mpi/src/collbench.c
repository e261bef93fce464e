/*
 * collbench: time MPI_Reduce and MPI_Allreduce on every rank in two ways
 * and print how far each rank's figure is from the ranks' mean, as
 * Hayakawa, Iwane and Sekiguchi did with their pseudo global clock counter
 * (seed 003; docs/mpi.md):
 *
 *   barrier: MPI_Barrier; t0 = local clock; op; MPI_Barrier; t1 = local
 *            clock. Each rank starts its clock when it leaves the barrier,
 *            and ranks leave it at different times.
 *   global:  rank 0 picks a start T0 a little ahead in global time
 *            (MPI_Bcast, -lead-us); every rank sleeps until -spin-us before
 *            T0, then spins until MPI_Wtime() >= T0; op;
 *            MPI_Barrier; t1 = MPI_Wtime(). All ranks start on one clock.
 *
 * Per repetition each rank's time d_i is compared with the mean over ranks:
 * deviation = (d_i - mean) / mean, in percent (the paper's figures 10-14).
 * With -truth (ranks on one kernel: one host, or the lab's namespaces) each
 * rank also stamps CLOCK_MONOTONIC_RAW where its measurement starts, which
 * is the same clock on every rank there: the spread of these stamps is the
 * true start skew of each method, which neither method can see.
 *
 * MPI_Wtime must be gclock's (link with -lgclockmpi before -lmpi, or preload
 * libgclockmpi.so); PMPI_Wtime is the MPI library's own local clock.
 *
 * usage: collbench [-reps N] [-count N] [-lead-us N] [-spin-us N] [-truth] [-raw FILE]
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gclock.h"
#include "gclock_mpi.h"

enum { BARRIER, GLOBAL, NMETHOD };
enum { REDUCE, ALLREDUCE, NOP };
static const char *method_name[NMETHOD] = {"barrier", "global"};
static const char *op_name[NOP] = {"MPI_Reduce", "MPI_Allreduce"};

/* What one rank sends rank 0 per repetition, op and method. */
struct sample {
	double d;      /* measured time, s */
	double raw;    /* CLOCK_MONOTONIC_RAW at the start, s (truth), relative to raw0 */
	double raw_end; /* and at the stop */
	double halfw;  /* global: half-width of the bounds at the start, s */
	double late;   /* global: 1 if the rank reached T0 after T0 */
};

static double raw_s(int64_t raw0) { return (double)(gclock_raw_now() - raw0) / 1e9; }

static void run_op(int op, int *in, int *out, int count)
{
	if (op == REDUCE)
		MPI_Reduce(in, out, count, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	else
		MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double quantile(double *v, int n, double q)
{
	if (n == 0)
		return NAN;
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	int i = (int)ceil(q * n) - 1;
	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void usage(void)
{
	fprintf(stderr, "usage: collbench [-reps N] [-count N] [-lead-us N] [-spin-us N] [-truth] [-raw FILE]\n");
	MPI_Abort(MPI_COMM_WORLD, 2);
}

static long arg_long(int argc, char **argv, int *i, long lo, long hi)
{
	if (*i + 1 >= argc)
		usage();
	char *end;
	errno = 0;
	long v = strtol(argv[++*i], &end, 10);
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "collbench: %s %s: want an integer in [%ld, %ld]\n", argv[*i - 1], argv[*i], lo, hi);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	return v;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long reps = 200, count = 1, lead_us = 2000, spin_us = 200;
	int truth = 0;
	const char *rawpath = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-reps"))
			reps = arg_long(argc, argv, &i, 1, 10000000);
		else if (!strcmp(argv[i], "-count"))
			count = arg_long(argc, argv, &i, 1, 1 << 24);
		else if (!strcmp(argv[i], "-lead-us"))
			lead_us = arg_long(argc, argv, &i, 1, 10000000);
		else if (!strcmp(argv[i], "-spin-us"))
			spin_us = arg_long(argc, argv, &i, 0, 10000000);
		else if (!strcmp(argv[i], "-truth"))
			truth = 1;
		else if (!strcmp(argv[i], "-raw") && i + 1 < argc)
			rawpath = argv[++i];
		else
			usage();
	}
	const char *why;
	int global = gclock_mpi_mode(&why) != GCLOCK_MPI_LOCAL; /* the page, or the library's own sync (synced mode) */
	int all_global = 0;
	MPI_Allreduce(&global, &all_global, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	int *in = calloc((size_t)count, sizeof *in), *out = calloc((size_t)count, sizeof *out);
	struct sample *mine = calloc(NOP * NMETHOD, sizeof *mine);
	struct sample *all = rank == 0 ? calloc((size_t)reps * NOP * NMETHOD * (size_t)size, sizeof *all) : NULL;
	if (!in || !out || !mine || (rank == 0 && !all)) {
		fprintf(stderr, "collbench: out of memory for %ld repetitions of %d ranks\n", reps, size);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (long i = 0; i < count; i++)
		in[i] = rank + 1;
	/* A common raw origin for the truth stamps (meaningful with -truth only). */
	int64_t raw0 = gclock_raw_now();
	MPI_Bcast(&raw0, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("# collbench: %d ranks, %ld repetitions, %ld int(s) per rank; MPI_Wtime: %s\n", size, reps, count, why);
		if (!all_global)
			printf("# global way skipped: MPI_Wtime is not global time on every rank\n");
	}
	double lead = lead_us / 1e6, spin_s = spin_us / 1e6;
	long extended = 0;
	for (int warm = 0; warm < 10; warm++) { /* first-call costs out of the way */
		run_op(REDUCE, in, out, (int)count);
		run_op(ALLREDUCE, in, out, (int)count);
	}
	for (long r = 0; r < reps; r++) {
		for (int op = 0; op < NOP; op++) {
			/* barrier */
			struct sample *s = &mine[op * NMETHOD + BARRIER];
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = PMPI_Wtime();
			s->raw = raw_s(raw0);
			run_op(op, in, out, (int)count);
			MPI_Barrier(MPI_COMM_WORLD);
			s->d = PMPI_Wtime() - t0;
			s->raw_end = raw_s(raw0);
			/* global */
			s = &mine[op * NMETHOD + GLOBAL];
			memset(s, 0, sizeof *s);
			if (all_global) {
				double T0 = 0, now = 0, lo = 0, hi = 0;
				if (rank == 0)
					T0 = MPI_Wtime() + lead;
				MPI_Bcast(&T0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
				gclock_mpi_wtime_bounds(&now, &lo, &hi);
				s->late = now >= T0;
				/* Sleep until shortly before T0, then spin: spinning ranks
				 * would take the cores from ranks still on their way. */
				if (T0 - now > spin_s) {
					double z = T0 - now - spin_s;
					struct timespec ts = {(time_t)z, (long)((z - (time_t)z) * 1e9)};
					nanosleep(&ts, NULL);
					gclock_mpi_wtime_bounds(&now, &lo, &hi);
				}
				while (now < T0)
					gclock_mpi_wtime_bounds(&now, &lo, &hi);
				s->raw = raw_s(raw0);
				s->halfw = (hi - lo) / 2;
				run_op(op, in, out, (int)count);
				MPI_Barrier(MPI_COMM_WORLD);
				s->d = MPI_Wtime() - T0;
				s->raw_end = raw_s(raw0);
			}
		}
		/* Outside the timed parts: collect, and lengthen the lead if a rank was late. */
		MPI_Gather(mine, (int)(sizeof *mine * NOP * NMETHOD), MPI_BYTE,
			   all ? all + (size_t)r * NOP * NMETHOD * (size_t)size : NULL, (int)(sizeof *mine * NOP * NMETHOD),
			   MPI_BYTE, 0, MPI_COMM_WORLD);
		double late = mine[REDUCE * NMETHOD + GLOBAL].late + mine[ALLREDUCE * NMETHOD + GLOBAL].late, anylate = 0;
		MPI_Allreduce(&late, &anylate, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (anylate > 0 && lead < 0.1) {
			lead *= 2;
			extended++;
		}
	}
	if (rank == 0) {
		FILE *rf = NULL;
		if (rawpath && !(rf = fopen(rawpath, "w")))
			fprintf(stderr, "collbench: -raw %s: %s\n", rawpath, strerror(errno));
		if (rf)
			fprintf(rf, "rep,op,method,rank,time_s,deviation_pct,start_raw_s,stop_raw_s,halfwidth_s,late\n");
		int nm = all_global ? NMETHOD : 1;
		double *dev = malloc(sizeof *dev * (size_t)reps * (size_t)size);
		double *spread = malloc(sizeof *spread * (size_t)reps);
		double *terr = malloc(sizeof *terr * (size_t)reps * (size_t)size);
		double *means = malloc(sizeof *means * (size_t)reps);
		double *derr = malloc(sizeof *derr * (size_t)reps);
		char truthtab[8192] = "";
		size_t tlen = 0;
		double *rankdev = calloc((size_t)size * 2, sizeof *rankdev);
		printf("%-13s %-7s %9s %9s %9s %9s %10s %10s %5s\n", "op", "method", "time_us", "dev_p50%", "dev_p95%",
		       "dev_max%", "dev_max_us", "halfw_max", "late");
		for (int op = 0; op < NOP; op++)
			for (int m = 0; m < nm; m++) {
				long nd = 0, nlate = 0;
				double maxus = 0, halfw = 0;
				memset(rankdev, 0, sizeof *rankdev * (size_t)size * 2);
				for (long r = 0; r < reps; r++) {
					struct sample *row = all + (size_t)r * NOP * NMETHOD * (size_t)size;
					double mean = 0, rmin = INFINITY, rmax = -INFINITY, emax = -INFINITY;
					for (int k = 0; k < size; k++) {
						struct sample *s = &row[(size_t)k * NOP * NMETHOD + op * NMETHOD + m];
						rmin = fmin(rmin, s->raw);
						emax = fmax(emax, s->raw_end);
					}
					double span = emax - rmin; /* the true time from the first start to the last stop */
					double dmax = -INFINITY;   /* the collective's time as a benchmark reports it: the longest rank's */
					for (int k = 0; k < size; k++)
						dmax = fmax(dmax, row[(size_t)k * NOP * NMETHOD + op * NMETHOD + m].d);
					derr[r] = fabs(dmax - span) * 1e6;
					for (int k = 0; k < size; k++)
						mean += row[(size_t)k * NOP * NMETHOD + op * NMETHOD + m].d / size;
					for (int k = 0; k < size; k++) {
						struct sample *s = &row[(size_t)k * NOP * NMETHOD + op * NMETHOD + m];
						double pct = 100 * (s->d - mean) / mean;
						dev[nd++] = fabs(pct);
						rankdev[2 * k] += pct / reps;
						if (fabs(pct) > rankdev[2 * k + 1])
							rankdev[2 * k + 1] = fabs(pct);
						if (fabs(s->d - mean) * 1e6 > maxus)
							maxus = fabs(s->d - mean) * 1e6;
						if (s->halfw > halfw)
							halfw = s->halfw;
						nlate += s->late > 0;
						rmax = fmax(rmax, s->raw);
						terr[(size_t)r * (size_t)size + (size_t)k] = fabs(s->d - span) * 1e6;
						if (rf)
							fprintf(rf, "%ld,%s,%s,%d,%.9f,%.6f,%.9f,%.9f,%.9f,%d\n", r, op_name[op], method_name[m],
								k, s->d, pct, s->raw, s->raw_end, s->halfw, s->late > 0);
					}
					means[r] = mean;
					spread[r] = (rmax - rmin) * 1e6;
				}
				if (truth) {
					int nt = (int)reps * size;
					double t50 = quantile(terr, nt, 0.5), t95 = quantile(terr, nt, 0.95), tmax = quantile(terr, nt, 1);
					double s50 = quantile(spread, (int)reps, 0.5), s95 = quantile(spread, (int)reps, 0.95),
					       smax = quantile(spread, (int)reps, 1);
					double d50 = quantile(derr, (int)reps, 0.5), d95 = quantile(derr, (int)reps, 0.95);
					int w = snprintf(truthtab + tlen, sizeof truthtab - tlen,
							 "%-13s %-7s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", op_name[op],
							 method_name[m], s50, s95, smax, t50, t95, tmax, d50, d95);
					if (w > 0 && (size_t)w < sizeof truthtab - tlen)
						tlen += (size_t)w;
				}
				double p50 = quantile(dev, (int)nd, 0.5), p95 = quantile(dev, (int)nd, 0.95),
				       pmax = quantile(dev, (int)nd, 1);
				char hw[32] = "-";
				if (m == GLOBAL)
					snprintf(hw, sizeof hw, "%.3fus", halfw * 1e6);
				printf("%-13s %-7s %9.2f %9.3f %9.3f %9.3f %10.2f %10s %5ld\n", op_name[op], method_name[m],
				       quantile(means, (int)reps, 0.5) * 1e6, p50, p95, pmax, maxus, hw, nlate);
				for (int k = 0; k < size; k++)
					printf("  rank %-4d %-13s %-7s mean_dev %+8.3f%%  max_abs_dev %7.3f%%\n", k, op_name[op],
					       method_name[m], rankdev[2 * k], rankdev[2 * k + 1]);
			}
		if (truth)
			printf("\nagainst the truth (CLOCK_MONOTONIC_RAW, one kernel), us:\n%-13s %-7s %10s %10s %10s %10s %10s %10s "
			       "%10s %10s\n%s"
			       "# skew: max - min of the ranks' true start instants per repetition; rankerr: |a rank's time - the true "
			       "span, from the first rank's start to the last rank's stop|; collerr: |the longest rank's time - the "
			       "true span| (the collective's time as benchmarks report it)\n",
			       "op", "method", "skew_p50", "skew_p95", "skew_max", "rankerr_p50", "rankerr_p95", "rankerr_max",
			       "collerr_p50", "collerr_p95", truthtab);
		if (extended)
			printf("# the global start lead was doubled %ld times (ranks reached T0 late); final lead %.0f us\n",
			       extended, lead * 1e6);
		printf("# time: median over repetitions of the ranks' mean; dev: |d_rank - mean over ranks| / mean per "
		       "repetition (seed 003's figures); halfw: widest "
		       "half-width of the global bounds at a start; late: ranks that reached T0 after it\n");
		if (rf)
			fclose(rf);
		free(dev);
		free(spread);
		free(terr);
		free(means);
		free(derr);
		free(rankdev);
	}
	free(in);
	free(out);
	free(mine);
	free(all);
	MPI_Finalize();
	return 0;
}
