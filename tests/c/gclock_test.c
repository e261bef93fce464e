/*
 * gclock_test: exercises include/gclock.h against a page written by the Go
 * writer (run by gtime's TestCHeader).
 *
 *   gclock_test PAGE X...   prints "at X EST EARLIEST LATEST STATUS TIMESCALE"
 *                           for each local time X, then checks that
 *                           gclock_now never goes backwards over many reads,
 *                           then times gclock_now against clock_gettime.
 *   gclock_test PAGE -watch MS X
 *                           reads with gclock_now for MS milliseconds while
 *                           the writer publishes, checks it never goes back,
 *                           prints "watch REFRESHES", waits for EOF on stdin
 *                           (the writer is done), then "at X ..." as above.
 *   gclock_test PAGE -open OWNER
 *                           opens with opts.owner = OWNER and prints
 *                           "open 0" or "open -ERRNO".
 *   gclock_test PAGE -loop MS CHECK
 *                           opens with opts.check_size = CHECK, prints
 *                           "ready", then reads with gclock_now until stdin
 *                           is closed (at most MS ms), printing "status NAME"
 *                           or "err -ERRNO" whenever the outcome changes and
 *                           "end ..." after a last read;
 *                           exits 1 if est went backwards. CHECK 2: reads
 *                           with gclock_mapping instead, printing "mapping
 *                           valid" or "mapping invalid"; exits 1 if the
 *                           sequence counter went backwards.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include "gclock.h"
#include "gclock_trace.h" /* gct_poll_page compiles against this gclock.h */

static int64_t ns_since(const struct timespec *a)
{
	struct timespec b;
	clock_gettime(CLOCK_MONOTONIC, &b);
	return (int64_t)(b.tv_sec - a->tv_sec) * 1000000000 + (b.tv_nsec - a->tv_nsec);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: gclock_test PAGE [X...]\n");
		return 2;
	}
	struct gclock_reader r;
	if (argc == 4 && strcmp(argv[2], "-open") == 0) {
		struct gclock_options o = {0};
		o.owner = atoi(argv[3]);
		int err = gclock_open_opts(&r, argv[1], &o);
		printf("open %d\n", err);
		if (err == 0)
			gclock_close(&r);
		return 0;
	}
	if (argc == 5 && strcmp(argv[2], "-loop") == 0) {
		struct gclock_options o = {0};
		int mode = atoi(argv[4]);
		o.check_size = mode == 1;
		int err = gclock_open_opts(&r, argv[1], &o);
		if (err != 0) {
			fprintf(stderr, "gclock_open_opts(%s): %s\n", argv[1], strerror(-err));
			return 1;
		}
		printf("ready\n");
		fflush(stdout);
		int64_t end = gclock_raw_now() + strtoll(argv[3], 0, 10) * 1000000;
		int64_t prev = INT64_MIN;
		uint64_t prev_seq = 0;
		int last = 1000;
		for (int final = 0; !final;) {
			/* Stop after one more read once stdin is closed (or at MS). */
			struct pollfd p = {0, POLLIN, 0};
			final = poll(&p, 1, 0) > 0 || gclock_raw_now() >= end;
			struct gclock_time t;
			if (mode == 2) {
				struct gclock_mapping m;
				err = gclock_mapping(&r, &m);
				int outcome = err != 0 ? err : 100 + m.valid;
				if (outcome != last) {
					if (err != 0)
						printf("err %d\n", err);
					else
						printf("mapping %s\n", m.valid ? "valid" : "invalid");
					fflush(stdout);
					last = outcome;
				}
				if (err == 0) {
					if (m.seq < prev_seq) {
						fprintf(stderr, "sequence counter went back: %llu after %llu\n",
							(unsigned long long)m.seq, (unsigned long long)prev_seq);
						return 1;
					}
					prev_seq = m.seq;
				}
				struct timespec ts = {0, 100000};
				nanosleep(&ts, 0);
				continue;
			}
			err = gclock_now(&r, &t);
			int outcome = err != 0 ? err : t.status;
			if (outcome != last) {
				if (err != 0)
					printf("err %d\n", err);
				else
					printf("status %s\n", gclock_status_name(t.status));
				fflush(stdout);
				last = outcome;
			}
			if (err == 0) {
				if (t.est < prev) {
					fprintf(stderr, "gclock_now went backwards: %lld after %lld\n", (long long)t.est, (long long)prev);
					return 1;
				}
				prev = t.est;
			}
			struct timespec ts = {0, 100000};
			nanosleep(&ts, 0);
		}
		if (last < 0)
			printf("end err %d\n", last);
		else if (last >= 100)
			printf("end mapping %s\n", last == 101 ? "valid" : "invalid");
		else
			printf("end status %s\n", gclock_status_name(last));
		gclock_close(&r);
		return 0;
	}
	int err = gclock_open(&r, "/nonexistent/gclock-page");
	if (err != -ENOENT) {
		fprintf(stderr, "gclock_open(missing) = %d, want -ENOENT\n", err);
		return 1;
	}
	err = gclock_open(&r, argv[1]);
	if (err != 0) {
		fprintf(stderr, "gclock_open(%s): %s\n", argv[1], strerror(-err));
		return 1;
	}
	if (argc == 5 && strcmp(argv[2], "-watch") == 0) {
		int64_t end = gclock_raw_now() + strtoll(argv[3], 0, 10) * 1000000;
		int64_t prev = INT64_MIN;
		uint64_t seq = 0;
		long refreshes = 0;
		while (gclock_raw_now() < end) {
			struct gclock_time t;
			if ((err = gclock_now(&r, &t)) != 0) {
				fprintf(stderr, "gclock_now: %s\n", strerror(-err));
				return 1;
			}
			if (t.est < prev) {
				fprintf(stderr, "gclock_now went backwards: %lld after %lld\n", (long long)t.est, (long long)prev);
				return 1;
			}
			prev = t.est;
			if (r.cache[GCLOCK_W_SEQ] != seq) {
				seq = r.cache[GCLOCK_W_SEQ];
				refreshes++;
			}
		}
		printf("watch %ld\n", refreshes);
		/* The final read comes after the writer's last publish: it
		 * closes our stdin when done (a loaded host may make it slower
		 * than MS). */
		while (getchar() != EOF)
			;
		struct gclock_time t;
		int64_t x = strtoll(argv[4], 0, 10);
		if ((err = gclock_at(&r, x, &t)) != 0) {
			fprintf(stderr, "gclock_at: %s\n", strerror(-err));
			return 1;
		}
		printf("at %lld %lld %lld %lld %s %d\n", (long long)x, (long long)t.est,
		       (long long)t.earliest, (long long)t.latest, gclock_status_name(t.status), t.timescale);
		return 0;
	}
	for (int i = 2; i < argc; i++) {
		struct gclock_time t;
		int64_t x = strtoll(argv[i], 0, 10);
		err = gclock_at(&r, x, &t);
		if (err != 0) {
			fprintf(stderr, "gclock_at(%lld): %s\n", (long long)x, strerror(-err));
			return 1;
		}
		printf("at %lld %lld %lld %lld %s %d\n", (long long)x, (long long)t.est,
		       (long long)t.earliest, (long long)t.latest, gclock_status_name(t.status), t.timescale);
	}

	uint32_t node, reference;
	if ((err = gclock_reference(&r, &node, &reference)) != 0) {
		fprintf(stderr, "gclock_reference: %s\n", strerror(-err));
		return 1;
	}
	printf("nodes %u %u\n", node, reference);

	struct gclock_scale sc;
	if ((err = gclock_scale_of(&r, &sc)) != 0) {
		fprintf(stderr, "gclock_scale_of: %s\n", strerror(-err));
		return 1;
	}
	printf("scale %u %d %lld %lld %.17g", sc.term, sc.defined, (long long)sc.x0, (long long)sc.y0, sc.skew);
	for (int i = 2; i < argc; i++)
		printf(" %lld", (long long)gclock_scale_at(&sc, strtoll(argv[i], 0, 10)));
	printf("\n");

	enum { N = 200000 };
	int64_t prev = INT64_MIN;
	for (int i = 0; i < N; i++) {
		struct gclock_time t;
		if ((err = gclock_now(&r, &t)) != 0) {
			fprintf(stderr, "gclock_now: %s\n", strerror(-err));
			return 1;
		}
		if (t.est < prev) {
			fprintf(stderr, "gclock_now went backwards: %lld after %lld\n", (long long)t.est, (long long)prev);
			return 1;
		}
		prev = t.est;
	}
	printf("monotone %d\n", N);

	/* Alternating batches, best of several, so that warm-up and noisy
	 * neighbours do not decide the ratio. */
	volatile int64_t sink = 0;
	double best_clock = 1e18, best_read = 1e18;
	for (int rep = 0; rep < 20; rep++) {
		enum { B = 20000 };
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < B; i++)
			sink += gclock_raw_now();
		double c = (double)ns_since(&t0) / B;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < B; i++) {
			struct gclock_time t = {0};
			gclock_now(&r, &t);
			sink += t.est;
		}
		double rd = (double)ns_since(&t0) / B;
		if (c < best_clock)
			best_clock = c;
		if (rd < best_read)
			best_read = rd;
	}
	printf("bench clock_ns=%.1f read_ns=%.1f ratio=%.2f\n", best_clock, best_read, best_read / best_clock);
	gclock_close(&r);

	/* The same read with check_size: one fstat per read. */
	struct gclock_options o = {0};
	o.check_size = 1;
	if ((err = gclock_open_opts(&r, argv[1], &o)) != 0) {
		fprintf(stderr, "gclock_open_opts(check_size): %s\n", strerror(-err));
		return 1;
	}
	double best_checked = 1e18;
	for (int rep = 0; rep < 20; rep++) {
		enum { B = 5000 };
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < B; i++) {
			struct gclock_time t = {0};
			if ((err = gclock_now(&r, &t)) != 0) {
				fprintf(stderr, "gclock_now(check_size): %s\n", strerror(-err));
				return 1;
			}
			sink += t.est;
		}
		double rd = (double)ns_since(&t0) / B;
		if (rd < best_checked)
			best_checked = rd;
	}
	printf("bench_checked read_ns=%.1f\n", best_checked);
	gclock_close(&r);
	return 0;
}
