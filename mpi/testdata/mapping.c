/*
 * mapping: exercises gclock_trace.h's mapping records without MPI.
 * usage: mapping FILE; prints one "RESULT" line per call, for the tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>

#define GCLOCK_TRACE_IMPLEMENTATION
#include "gclock_trace.h"

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	gct_writer *w = gct_open(argv[1], 5, 9, "mapping test", GCT_FLAG_SYNCED_HOST);
	if (!w)
		return 1;
	gct_mapping m = {.from = 1000, .x0 = 1000, .y0 = 5000000000LL, .skew = 12.5e-6, .w0 = 300,
			 .skew_err = 1e-6, .wander = 1e-18, .valid = 1};
	gct_instant(w, 0, 1);
	printf("poll %d\n", gct_poll_mapping(w, &m));  /* 1: new */
	printf("poll %d\n", gct_poll_mapping(w, &m));  /* 0: the same */
	gct_mapping inv = m;
	inv.valid = 0;
	inv.from = 2000;
	printf("poll %d\n", gct_poll_mapping(w, &inv)); /* 0: invalid is never recorded */
	m.from = 3000;
	m.skew = -7e-6;
	printf("poll %d\n", gct_poll_mapping(w, &m)); /* 1: changed */
	gct_mapping bad = m;
	bad.skew = NAN;
	errno = 0;
	int r = gct_mapping_record(w, &bad);
	printf("record %d %d\n", r, errno == EINVAL); /* -1 1 */
	bad.skew = -1;
	errno = 0;
	r = gct_poll_mapping(w, &bad);
	printf("poll %d %d\n", r, errno == EINVAL); /* -1 1 */
	gct_mapping rec = inv; /* recorded as given, invalid included */
	printf("record %d\n", gct_mapping_record(w, &rec));
	gct_instant(w, 0, 2);
	printf("close %d\n", gct_close(w));
	return 0;
}
