/*
 * gclock.h: read gclock's global time from C (header only).
 *
 * The gclock daemon publishes its local->global mapping in a shared-memory
 * page (by default /dev/shm/gclock); this header maps the page read-only and
 * computes global time itself: one clock_gettime(CLOCK_MONOTONIC_RAW) (the
 * vDSO, no system call) plus a seqlock copy and some arithmetic. It computes
 * exactly what the Go package github.com/gclock/gclock/gtime computes
 * (gtime/page.go, eval); see docs/gtime.md.
 *
 *     struct gclock_reader r;
 *     struct gclock_time t;
 *     if (gclock_open(&r, GCLOCK_DEFAULT_PATH) != 0) perror("gclock_open");
 *     if (gclock_now(&r, &t) == 0)
 *         printf("%lld in [%lld, %lld] %s\n", (long long)t.est,
 *                (long long)t.earliest, (long long)t.latest,
 *                gclock_status_name(t.status));
 *     gclock_close(&r);
 *
 * Build with GCC or Clang (__atomic builtins) as gnu99 or later, or as c99
 * with _POSIX_C_SOURCE=200809L (tested: gcc -std=c99 -pedantic, g++ -std=c++11).
 * No libm needed.
 * Errors are returned as negative errno values (-ENOENT: no page, is the
 * daemon running?; -EPROTO: not a gclock page of this version; -EBUSY: the
 * writer stayed mid-update; -EINVAL: a field holds an invalid value).
 * A reader is not thread-safe (the no-backwards clamp is per reader): use
 * one per thread.
 */
#ifndef GCLOCK_H
#define GCLOCK_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GCLOCK_DEFAULT_PATH "/dev/shm/gclock"
#define GCLOCK_MAGIC 0x314d48534b4c4347ULL /* "GCLKSHM1" little-endian */
#define GCLOCK_VERSION 2u
#define GCLOCK_PAGE_SIZE 4096u

/* Statuses, as gtime.Status. */
enum gclock_status {
	GCLOCK_UNSYNCED = 0,  /* no estimate yet: bounds unbounded */
	GCLOCK_SYNCED = 1,    /* recently updated by the daemon */
	GCLOCK_STALE = 2,     /* page older than its limit: bounds widen at the worst-case drift */
	GCLOCK_NO_DAEMON = 3, /* the daemon closed the page: bounds widen as for stale */
	GCLOCK_DEGRADED = 4   /* the data contradicted the daemon's clock model: the bounds are
	                         what it still holds certain, not synced until it re-acquires */
};

/* Timescales, as gtime.Timescale. */
enum gclock_timescale {
	GCLOCK_TS_REFERENCE = 0, /* the reference node's CLOCK_MONOTONIC_RAW, ns */
	GCLOCK_TS_REALTIME = 1,  /* UTC ns since the Unix epoch: the reference's CLOCK_REALTIME */
	GCLOCK_TS_MEAN_DRIFT = 2 /* ns since the Unix epoch at the mean rate of all clocks */
};

struct gclock_time {
	int64_t est;      /* global time, never decreasing on one reader */
	int64_t earliest; /* guaranteed lower bound */
	int64_t latest;   /* guaranteed upper bound */
	int status;       /* enum gclock_status */
	int timescale;    /* enum gclock_timescale */
};

/* Word indexes of the page (byte offset / 8), as gtime/page.go. */
enum {
	GCLOCK_W_MAGIC = 0, GCLOCK_W_VERSION = 1, GCLOCK_W_SEQ = 2, GCLOCK_W_PID = 3,
	GCLOCK_W_X0 = 4, GCLOCK_W_Y0 = 5, GCLOCK_W_SKEW = 6, GCLOCK_W_W0 = 7,
	GCLOCK_W_SKEWERR = 8, GCLOCK_W_WANDER = 9, GCLOCK_W_UPDATED = 10,
	GCLOCK_W_STALEAFTER = 11, GCLOCK_W_MAXDRIFT = 12, GCLOCK_W_SLEWX = 13,
	GCLOCK_W_SLEWC = 14, GCLOCK_W_SLEWRATE = 15, GCLOCK_W_FLAGS = 16,
	GCLOCK_W_NODES = 17, /* node id | current reference id << 32; 0: unknown */
	GCLOCK_W_END = 18
};

struct gclock_reader {
	const volatile uint64_t *page; /* 64-bit words of the mapped page */
	int64_t last;                  /* largest est returned */
	uint64_t cache[GCLOCK_W_END];  /* last checked copy of the page */
	int cached;                    /* cache holds a checked copy */
};

#define GCLOCK_FLAG_VALID (1ULL << 16)
#define GCLOCK_FLAG_CLOSED (1ULL << 17)
#define GCLOCK_MAX_HALF_WIDTH (INT64_MAX / 4)
/* Retry a copy that overlapped an update: spin, then yield, for at most
 * 100 ms (a writer that died mid-update must not hang its readers). */
#define GCLOCK_SPIN_TRIES 64
#define GCLOCK_BUSY_LIMIT_NS 100000000LL

static inline const char *gclock_status_name(int s)
{
	switch (s) {
	case GCLOCK_UNSYNCED: return "unsynced";
	case GCLOCK_SYNCED: return "synced";
	case GCLOCK_STALE: return "stale";
	case GCLOCK_NO_DAEMON: return "no-daemon";
	case GCLOCK_DEGRADED: return "degraded";
	default: return "unknown";
	}
}

/* gclock_raw_now reads CLOCK_MONOTONIC_RAW in ns (0 on failure). */
static inline int64_t gclock_raw_now(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC_RAW, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t gclock__sat_add(int64_t a, int64_t b)
{
	int64_t s;
	if (__builtin_add_overflow(a, b, &s))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return s;
}

static inline int64_t gclock__sat_sub(int64_t a, int64_t b)
{
	int64_t s;
	if (__builtin_sub_overflow(a, b, &s))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return s;
}

static inline double gclock__f(uint64_t bits)
{
	double f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

static inline int64_t gclock__f2i(double f)
{
	if (f != f)
		return 0;
	if (f >= 9223372036854775807.0)
		return INT64_MAX;
	if (f <= -9223372036854775808.0)
		return INT64_MIN;
	return (int64_t)f;
}

/* gclock__round is Go's math.Round (half away from zero), bit for bit and
 * without a libm call. */
static inline double gclock__round(double x)
{
	uint64_t bits;
	memcpy(&bits, &x, sizeof bits);
	unsigned e = (unsigned)(bits >> 52) & 0x7ff;
	if (e < 1023) {
		bits &= 1ULL << 63;
		if (e == 1022)
			bits |= 0x3ff0000000000000ULL;
	} else if (e < 1023 + 52) {
		e -= 1023;
		bits += (1ULL << 51) >> e;
		bits &= ~(((1ULL << 52) - 1) >> e);
	}
	memcpy(&x, &bits, sizeof x);
	return x;
}

/* gclock__ceil_width is ceil(w) for 0 <= w < 2^62, without libm. */
static inline int64_t gclock__ceil_width(double w)
{
	int64_t i = (int64_t)w;
	return (double)i < w ? i + 1 : i;
}

static inline int gclock__finite(double f) { return f == f && f - f == 0; }

/* gclock_snapshot copies the page's words under the seqlock into w[]. */
static inline int gclock_snapshot(const struct gclock_reader *r, uint64_t w[GCLOCK_W_END])
{
	int64_t start = 0;
	for (long i = 0;; i++) {
		if (i >= GCLOCK_SPIN_TRIES) {
			if (start == 0)
				start = gclock_raw_now();
			else if (i % GCLOCK_SPIN_TRIES == 0 && gclock_raw_now() - start > GCLOCK_BUSY_LIMIT_NS)
				return -EBUSY;
			sched_yield();
		}
		uint64_t s1 = __atomic_load_n(&r->page[GCLOCK_W_SEQ], __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		for (int k = 0; k < GCLOCK_W_END; k++)
			w[k] = __atomic_load_n(&r->page[k], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->page[GCLOCK_W_SEQ], __ATOMIC_RELAXED) != s1)
			continue;
		if (w[GCLOCK_W_MAGIC] != GCLOCK_MAGIC ||
		    w[GCLOCK_W_VERSION] != (GCLOCK_VERSION | ((uint64_t)GCLOCK_PAGE_SIZE << 32)))
			return -EPROTO;
		return 0;
	}
}

/* gclock__check rejects values no writer publishes (-EINVAL). */
static inline int gclock__check(const uint64_t w[GCLOCK_W_END])
{
	uint64_t flags = w[GCLOCK_W_FLAGS];
	int st = (int)(flags & 0xff);
	int ts = (int)((flags >> 8) & 0xff);
	int valid = (flags & GCLOCK_FLAG_VALID) != 0;
	int64_t w0 = (int64_t)w[GCLOCK_W_W0], staleafter = (int64_t)w[GCLOCK_W_STALEAFTER];
	double skew = gclock__f(w[GCLOCK_W_SKEW]), skewerr = gclock__f(w[GCLOCK_W_SKEWERR]);
	double wander = gclock__f(w[GCLOCK_W_WANDER]), maxdrift = gclock__f(w[GCLOCK_W_MAXDRIFT]);
	double slewrate = gclock__f(w[GCLOCK_W_SLEWRATE]);
	if (st > GCLOCK_DEGRADED || ts > GCLOCK_TS_MEAN_DRIFT)
		return -EINVAL;
	if (valid && (!gclock__finite(skew) || !gclock__finite(skewerr) || skewerr < 0 ||
		      !gclock__finite(wander) || wander < 0 || w0 < 0 || staleafter <= 0 ||
		      !gclock__finite(maxdrift) || maxdrift < 0 || !gclock__finite(slewrate) ||
		      slewrate <= 0 || slewrate >= 1))
		return -EINVAL;
	return 0;
}

/* gclock__eval is gclock_eval on a checked copy. */
static inline void gclock__eval(const uint64_t w[GCLOCK_W_END], int64_t x, struct gclock_time *t)
{
	uint64_t flags = w[GCLOCK_W_FLAGS];
	int st = (int)(flags & 0xff);
	int ts = (int)((flags >> 8) & 0xff);
	int valid = (flags & GCLOCK_FLAG_VALID) != 0;
	int64_t x0 = (int64_t)w[GCLOCK_W_X0], y0 = (int64_t)w[GCLOCK_W_Y0], w0 = (int64_t)w[GCLOCK_W_W0];
	double skew = gclock__f(w[GCLOCK_W_SKEW]), skewerr = gclock__f(w[GCLOCK_W_SKEWERR]);
	double wander = gclock__f(w[GCLOCK_W_WANDER]), maxdrift = gclock__f(w[GCLOCK_W_MAXDRIFT]);
	double slewrate = gclock__f(w[GCLOCK_W_SLEWRATE]);
	int64_t updated = (int64_t)w[GCLOCK_W_UPDATED], staleafter = (int64_t)w[GCLOCK_W_STALEAFTER];
	int64_t slewx = (int64_t)w[GCLOCK_W_SLEWX], corr = (int64_t)w[GCLOCK_W_SLEWC];

	if (flags & GCLOCK_FLAG_CLOSED)
		st = GCLOCK_NO_DAEMON;
	t->status = st;
	t->timescale = ts;
	if (!valid) {
		t->est = 0;
		t->earliest = INT64_MIN;
		t->latest = INT64_MAX;
		return;
	}
	int64_t dx = gclock__sat_sub(x, x0);
	double fdx = (double)dx;
	int64_t est = gclock__sat_add(gclock__sat_add(y0, dx), gclock__f2i(gclock__round(skew * fdx)));
	double wd = (double)w0 + skewerr * fabs(fdx) + wander * fdx * fdx / 2;
	int64_t age = gclock__sat_sub(x, updated);
	if (age > staleafter) {
		wd += maxdrift * (double)(age - staleafter);
		if (st == GCLOCK_SYNCED)
			st = GCLOCK_STALE;
	}
	t->status = st;
	int64_t iw = GCLOCK_MAX_HALF_WIDTH;
	if (wd < (double)GCLOCK_MAX_HALF_WIDTH)
		iw = wd > 0 ? gclock__ceil_width(wd) : 0;
	int64_t lo = gclock__sat_sub(est, iw), hi = gclock__sat_add(est, iw);
	if (corr != 0 && x > slewx) {
		double dec = slewrate * (double)gclock__sat_sub(x, slewx);
		if (dec >= fabs((double)corr))
			corr = 0;
		else if (corr > 0)
			corr -= (int64_t)dec;
		else
			corr += (int64_t)dec;
	}
	int64_t mono = gclock__sat_add(est, corr);
	if (mono < lo)
		mono = lo;
	if (mono > hi)
		mono = hi;
	t->est = mono;
	t->earliest = lo;
	t->latest = hi;
}

/* gclock_eval computes the reading at local time x from a snapshot: the
 * same function as gtime's eval. Returns -EINVAL for an invalid page. */
static inline int gclock_eval(const uint64_t w[GCLOCK_W_END], int64_t x, struct gclock_time *t)
{
	int err = gclock__check(w);
	if (err != 0)
		return err;
	gclock__eval(w, x, t);
	return 0;
}

/* gclock_at evaluates the page at a given CLOCK_MONOTONIC_RAW reading,
 * without the per-reader clamp. */
static inline int gclock_at(const struct gclock_reader *r, int64_t x, struct gclock_time *t)
{
	uint64_t w[GCLOCK_W_END];
	int err = gclock_snapshot(r, w);
	if (err != 0)
		return err;
	return gclock_eval(w, x, t);
}

/* gclock_now reads global time now; est never decreases on this reader.
 * While the sequence counter has not moved since the last read, the page is
 * unchanged and the reader's checked copy is used: one atomic load instead
 * of a seqlock copy. */
static inline int gclock_now(struct gclock_reader *r, struct gclock_time *t)
{
	int64_t x = gclock_raw_now();
	uint64_t seq = __atomic_load_n(&r->page[GCLOCK_W_SEQ], __ATOMIC_ACQUIRE);
	if (!r->cached || seq != r->cache[GCLOCK_W_SEQ]) {
		uint64_t w[GCLOCK_W_END];
		int err = gclock_snapshot(r, w);
		if (err == 0)
			err = gclock__check(w);
		if (err != 0) {
			r->cached = 0;
			return err;
		}
		memcpy(r->cache, w, sizeof w);
		r->cached = 1;
	}
	gclock__eval(r->cache, x, t);
	if (t->est < r->last)
		t->est = r->last;
	else
		r->last = t->est;
	return 0;
}

/* gclock_open maps the page at path (NULL: the default) read-only. */
static inline int gclock_open(struct gclock_reader *r, const char *path)
{
	struct stat st;
	r->page = 0;
	r->last = INT64_MIN;
	r->cached = 0;
	int fd = open(path ? path : GCLOCK_DEFAULT_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	if (!S_ISREG(st.st_mode) || st.st_size != GCLOCK_PAGE_SIZE) {
		close(fd);
		return -EPROTO;
	}
	void *p = mmap(0, GCLOCK_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	int e = errno;
	close(fd);
	if (p == MAP_FAILED)
		return -e;
	r->page = (const volatile uint64_t *)p;
	uint64_t w[GCLOCK_W_END];
	int err = gclock_snapshot(r, w);
	if (err == -EPROTO) {
		munmap(p, GCLOCK_PAGE_SIZE);
		r->page = 0;
		return err;
	}
	return 0;
}

/* The daemon's local->global mapping as published (estimate.Mapping; local
 * = CLOCK_MONOTONIC_RAW, ns) and the local time of the publish, `from`, at
 * which it starts to hold: what gtime's Reader.Mapping returns. valid is 0
 * while the daemon is unsynced or has closed the page; the stale-page
 * widening that gclock_now applies is not part of it. seq is the page's
 * sequence counter of the copy: equal seqs, equal mappings. */
struct gclock_mapping {
	int64_t from;     /* local time of the publish */
	int64_t x0, y0;   /* anchor: global y0 at local x0 */
	double skew;      /* dy/dx - 1 */
	int64_t w0;       /* bound half-width at x0 */
	double skew_err;  /* bound on |true skew - skew| */
	double wander;    /* per ns, quadratic growth of the bound */
	int valid;
	uint64_t seq;
};

/* gclock_mapping reads the daemon's current mapping (as gtime's
 * Reader.Mapping; trace recorders log it, see gct_poll_page in
 * gclock_trace.h). Returns 0 or -errno. */
static inline int gclock_mapping(const struct gclock_reader *r, struct gclock_mapping *m)
{
	uint64_t w[GCLOCK_W_END];
	int err = gclock_snapshot(r, w);
	if (err == 0)
		err = gclock__check(w);
	if (err != 0)
		return err;
	uint64_t flags = w[GCLOCK_W_FLAGS];
	m->from = (int64_t)w[GCLOCK_W_UPDATED];
	m->x0 = (int64_t)w[GCLOCK_W_X0];
	m->y0 = (int64_t)w[GCLOCK_W_Y0];
	m->skew = gclock__f(w[GCLOCK_W_SKEW]);
	m->w0 = (int64_t)w[GCLOCK_W_W0];
	m->skew_err = gclock__f(w[GCLOCK_W_SKEWERR]);
	m->wander = gclock__f(w[GCLOCK_W_WANDER]);
	m->valid = (flags & GCLOCK_FLAG_VALID) != 0 && (flags & GCLOCK_FLAG_CLOSED) == 0 &&
		   (int)(flags & 0xff) != GCLOCK_UNSYNCED;
	m->seq = w[GCLOCK_W_SEQ];
	return 0;
}

/* gclock_seq returns the page's sequence counter: a cheap test (one atomic
 * load) of whether the page changed since a gclock_mapping copy. */
static inline uint64_t gclock_seq(const struct gclock_reader *r)
{
	return __atomic_load_n(&r->page[GCLOCK_W_SEQ], __ATOMIC_ACQUIRE);
}

/* gclock_reference stores the publishing daemon's node id and the node whose
 * clock global time currently is (it changes on failover) in *node and
 * *reference; 0 means the daemon did not say. Returns 0 or -errno. */
static inline int gclock_reference(const struct gclock_reader *r, uint32_t *node, uint32_t *reference)
{
	uint64_t w[GCLOCK_W_END];
	int err = gclock_snapshot(r, w);
	if (err)
		return err;
	*node = (uint32_t)w[GCLOCK_W_NODES];
	*reference = (uint32_t)(w[GCLOCK_W_NODES] >> 32);
	return 0;
}

/* gclock_close unmaps the page. */
static inline void gclock_close(struct gclock_reader *r)
{
	if (r->page)
		munmap((void *)r->page, GCLOCK_PAGE_SIZE);
	r->page = 0;
}

#ifdef __cplusplus
}
#endif
#endif /* GCLOCK_H */
