/*
 * gclock's clock shim: a program run with LD_PRELOAD=clockshim.so sees the
 * lab's emulated clock of its host instead of the kernel's CLOCK_REALTIME,
 * in every clock read and in the kernel's packet timestamps, so that
 * chronyd meets the same clock errors as gclock's daemon on that host.
 *
 * The clock comes from a table (GCLOCK_CLOCKSHIM names its file) written by
 * the lab: knots of CLOCK_MONOTONIC_RAW time T where the emulated clock's
 * rate changes, with dev = emulated - raw at T and the rate error after T.
 * A realtime reading x becomes x + dev(x - (REALTIME - MONOTONIC_RAW)).
 *
 * A missing or malformed table is fatal: the program stops at start with a
 * message naming the file and what is wrong, never runs on the wrong clock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

struct knot {
	int64_t t;   /* CLOCK_MONOTONIC_RAW ns where this rate starts */
	int64_t dev; /* emulated - raw at t, ns */
	double skew; /* rate error from t on */
};

static struct knot *knots;
static size_t nknots;
static int64_t real_minus_raw;

static int (*next_clock_gettime)(clockid_t, struct timespec *);
static int (*next_gettimeofday)(struct timeval *, void *);
static ssize_t (*next_recvmsg)(int, struct msghdr *, int);
static int (*next_recvmmsg)(int, struct mmsghdr *, unsigned int, int, struct timespec *);

static void die(const char *path, const char *what)
{
	fprintf(stderr, "gclock clockshim: %s: %s\n", path ? path : "GCLOCK_CLOCKSHIM", what);
	_exit(127);
}

static void resolve(void)
{
	if (!next_clock_gettime)
		next_clock_gettime = dlsym(RTLD_NEXT, "clock_gettime");
	if (!next_gettimeofday)
		next_gettimeofday = dlsym(RTLD_NEXT, "gettimeofday");
	if (!next_recvmsg)
		next_recvmsg = dlsym(RTLD_NEXT, "recvmsg");
	if (!next_recvmmsg)
		next_recvmmsg = dlsym(RTLD_NEXT, "recvmmsg");
}

static int64_t ts_ns(const struct timespec *ts) { return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec; }

static void ns_ts(int64_t ns, struct timespec *ts)
{
	int64_t s = ns / 1000000000, r = ns % 1000000000;
	if (r < 0) {
		r += 1000000000;
		s--;
	}
	ts->tv_sec = (time_t)s;
	ts->tv_nsec = (long)r;
}

static int64_t get_le64(const unsigned char *b)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return (int64_t)v;
}

/* The table: "GCLKSHM1", uint32 count, uint32 0, then count knots of
 * int64 t, int64 dev, float64 skew (little-endian), t strictly increasing. */
__attribute__((constructor)) static void init(void)
{
	resolve();
	const char *path = getenv("GCLOCK_CLOCKSHIM");
	if (!path || !*path)
		die(NULL, "not set: the shim needs its clock table");
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size < 16 || st.st_size > (1 << 26))
		die(path, "not a clock table (size)");
	unsigned char *b = malloc(st.st_size);
	if (!b)
		die(path, "out of memory");
	ssize_t got = 0;
	while (got < st.st_size) {
		ssize_t n = read(fd, b + got, st.st_size - got);
		if (n <= 0)
			die(path, n < 0 ? strerror(errno) : "short read");
		got += n;
	}
	close(fd);
	if (memcmp(b, "GCLKSHM1", 8) != 0)
		die(path, "not a clock table (magic)");
	uint32_t n = b[8] | b[9] << 8 | b[10] << 16 | (uint32_t)b[11] << 24;
	if (n == 0 || (uint64_t)st.st_size != 16 + (uint64_t)n * 24)
		die(path, "knot count does not match the file's size");
	knots = calloc(n, sizeof *knots);
	if (!knots)
		die(path, "out of memory");
	for (uint32_t i = 0; i < n; i++) {
		const unsigned char *k = b + 16 + (size_t)i * 24;
		int64_t sk = get_le64(k + 16);
		knots[i].t = get_le64(k);
		knots[i].dev = get_le64(k + 8);
		memcpy(&knots[i].skew, &sk, 8);
		if (knots[i].skew != knots[i].skew || knots[i].skew <= -0.5 || knots[i].skew >= 0.5)
			die(path, "a knot's rate error is not a number in (-0.5, 0.5)");
		if (i > 0 && knots[i].t <= knots[i - 1].t)
			die(path, "knot times not strictly increasing");
	}
	free(b);
	/* REALTIME - MONOTONIC_RAW, from a raw reading either side of a real one.
	 * Both run at the oscillator's rate here (the lab never slews the
	 * machine's clock); an error of the difference only moves the point at
	 * which dev is read, by ns: a tiny fraction of a ns of dev. */
	struct timespec r1, re, r2;
	next_clock_gettime(CLOCK_MONOTONIC_RAW, &r1);
	next_clock_gettime(CLOCK_REALTIME, &re);
	next_clock_gettime(CLOCK_MONOTONIC_RAW, &r2);
	real_minus_raw = ts_ns(&re) - (ts_ns(&r1) + (ts_ns(&r2) - ts_ns(&r1)) / 2);
	nknots = n;
}

/* dev at raw time t: the last knot at or before t (the first before it). */
static int64_t dev_at(int64_t t)
{
	size_t lo = 0, hi = nknots;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (knots[mid].t <= t)
			lo = mid;
		else
			hi = mid;
	}
	const struct knot *k = &knots[lo];
	/* t - k->t is small (seconds to minutes): exact in a double. */
	double d = (double)(t - k->t) * k->skew;
	return k->dev + (int64_t)(d < 0 ? d - 0.5 : d + 0.5);
}

static int64_t emulate(int64_t real_ns)
{
	if (nknots == 0) /* before init: the program's own constructors */
		return real_ns;
	return real_ns + dev_at(real_ns - real_minus_raw);
}

static int realtime_clock(clockid_t id)
{
	return id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE || id == CLOCK_TAI;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	resolve();
	int rc = next_clock_gettime(id, ts);
	if (rc == 0 && realtime_clock(id))
		ns_ts(emulate(ts_ns(ts)), ts);
	return rc;
}

int gettimeofday(struct timeval *tv, void *tz)
{
	resolve();
	int rc = next_gettimeofday(tv, tz);
	if (rc == 0) {
		struct timespec ts = {tv->tv_sec, (long)tv->tv_usec * 1000 + 500};
		ns_ts(emulate(ts_ns(&ts)), &ts);
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return rc;
}

time_t time(time_t *out)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (out)
		*out = ts.tv_sec;
	return ts.tv_sec;
}

/* The kernel's packet timestamps are CLOCK_REALTIME too: SCM_TIMESTAMP
 * (timeval), SCM_TIMESTAMPNS (timespec) and SCM_TIMESTAMPING (three
 * timespecs: software, legacy, hardware; the software one is converted,
 * the hardware one is a NIC's clock and left alone), old and new (64-bit
 * time) forms, which are laid out alike on 64-bit Linux. */
#define SHIM_SO_TIMESTAMP_OLD 29
#define SHIM_SO_TIMESTAMPNS_OLD 35
#define SHIM_SO_TIMESTAMPING_OLD 37
#define SHIM_SO_TIMESTAMP_NEW 63
#define SHIM_SO_TIMESTAMPNS_NEW 64
#define SHIM_SO_TIMESTAMPING_NEW 65

static void convert_ts(unsigned char *p)
{
	int64_t v[2];
	memcpy(v, p, sizeof v);
	if (v[0] == 0 && v[1] == 0)
		return;
	struct timespec ts = {(time_t)v[0], (long)v[1]};
	ns_ts(emulate(ts_ns(&ts)), &ts);
	v[0] = ts.tv_sec;
	v[1] = ts.tv_nsec;
	memcpy(p, v, sizeof v);
}

static void convert_tv(unsigned char *p)
{
	int64_t v[2];
	memcpy(v, p, sizeof v);
	if (v[0] == 0 && v[1] == 0)
		return;
	struct timespec ts = {(time_t)v[0], (long)(v[1] * 1000 + 500)};
	ns_ts(emulate(ts_ns(&ts)), &ts);
	v[0] = ts.tv_sec;
	v[1] = ts.tv_nsec / 1000;
	memcpy(p, v, sizeof v);
}

static void convert_cmsgs(struct msghdr *m)
{
	if (!m || !m->msg_control || m->msg_controllen < sizeof(struct cmsghdr))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		size_t len = c->cmsg_len - CMSG_LEN(0);
		unsigned char *d = CMSG_DATA(c);
		switch (c->cmsg_type) {
		case SHIM_SO_TIMESTAMP_OLD:
		case SHIM_SO_TIMESTAMP_NEW:
			if (len >= 16)
				convert_tv(d);
			break;
		case SHIM_SO_TIMESTAMPNS_OLD:
		case SHIM_SO_TIMESTAMPNS_NEW:
			if (len >= 16)
				convert_ts(d);
			break;
		case SHIM_SO_TIMESTAMPING_OLD:
		case SHIM_SO_TIMESTAMPING_NEW:
			if (len >= 16)
				convert_ts(d);
			break;
		}
	}
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
	resolve();
	ssize_t n = next_recvmsg(fd, m, flags);
	if (n >= 0)
		convert_cmsgs(m);
	return n;
}

int recvmmsg(int fd, struct mmsghdr *v, unsigned int len, int flags, struct timespec *timeout)
{
	resolve();
	int n = next_recvmmsg(fd, v, len, flags, timeout);
	for (int i = 0; i < n; i++)
		convert_cmsgs(&v[i].msg_hdr);
	return n;
}
