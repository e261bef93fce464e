/*
 * gclock.h: read gclock's global time from C (header only).
 *
 * The gclock daemon publishes its local->global mapping in a shared-memory
 * page (by default /run/gclock/page); this header maps the page read-only and
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
 * daemon running?; -EPROTO: not a gclock page of this version; -EPERM: the
 * page is refused as unsafe (see below); -ELOOP: the path is a symbolic
 * link, refused; -EBUSY: the writer stayed mid-update; -EINVAL: a field
 * holds an invalid value; -EIO: the page file shrank (check_size only);
 * -ENAMETOOLONG: a path of GCLOCK_PATH_MAX bytes or more).
 * A reader is not thread-safe (the no-backwards clamp is per reader): use
 * one per thread.
 *
 * Safety (as gtime.OpenWith; docs/gtime.md "Security"): gclock_open maps
 * only a regular file (opened O_NOFOLLOW) of the page size, with one link,
 * not writable by group or others, owned by root, by the caller's euid, by
 * opts->owner, or by the owner of the page's directory if that directory is
 * not writable by group or others and sits in a root-owned directory that
 * is not either (/run/gclock). Anyone else could have planted or written it.
 * So only root or the daemon's user can shrink a mapped page; a read of a
 * page that shrank faults with SIGBUS, unless the reader was opened with
 * check_size, which fstat()s the page before each read and returns -EIO
 * (one system call per read; a truncation in the nanoseconds between the
 * check and the read still faults).
 *
 * A restarted daemon puts a new page at the path and marks the old one
 * replaced: gclock_now and gclock_mapping then map the new page
 * (gclock_refresh). They also check, at most every 100 ms while the page
 * does not read synced, whether the path names another file (page removed
 * and created again). gclock_at and gclock_reference read the page the
 * reader holds: programs that use only those call gclock_refresh now and
 * then. The sequence counter continues across a restart (never goes back).
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

#define GCLOCK_DEFAULT_PATH "/run/gclock/page"
#define GCLOCK_MAGIC 0x314d48534b4c4347ULL /* "GCLKSHM1" little-endian */
#define GCLOCK_VERSION 2u
#define GCLOCK_PAGE_SIZE 4096u
/* A reader keeps a copy of its page's path, shorter than this. */
#define GCLOCK_PATH_MAX 256

/* Statuses, as gtime.Status. */
enum gclock_status {
	GCLOCK_UNSYNCED = 0,  /* no estimate yet: bounds unbounded */
	GCLOCK_SYNCED = 1,    /* recently updated by the daemon */
	GCLOCK_STALE = 2,     /* page older than its limit: bounds widen at the worst-case drift */
	GCLOCK_NO_DAEMON = 3, /* the daemon closed the page: bounds widen as for stale */
	GCLOCK_DEGRADED = 4   /* the data contradicted the daemon's clock model: the
	                         bounds are what it still holds certain, not synced */
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
	GCLOCK_W_TERM = 18,  /* election term | scale defined << 32; 0: none */
	GCLOCK_W_SCALE_X0 = 19, GCLOCK_W_SCALE_Y0 = 20, GCLOCK_W_SCALE_SKEW = 21,
	GCLOCK_W_END = 22
};

/* The definition of global time in one election term, as gtime.Scale:
 * global = y0 + (l - x0)(1 + skew) at the term's reference's own clock l.
 * Only the term's reference publishes it (defined != 0). */
struct gclock_scale {
	uint32_t term; /* the election term of the page's reading (0 without failover) */
	int defined;   /* this page's writer is the term's reference and says so */
	int64_t x0, y0;
	double skew;
};

/* Options of gclock_open_opts; zero-initialize, then set what you need. */
struct gclock_options {
	int owner;      /* > 0: a uid trusted to own the page (the daemon's user) */
	int check_size; /* fstat the page before each read: -EIO, not SIGBUS, if it shrank */
};

struct gclock_reader {
	const volatile uint64_t *page; /* 64-bit words of the mapped page */
	int64_t last;                  /* largest est returned */
	uint64_t cache[GCLOCK_W_END];  /* last checked copy of the page */
	int cached;                    /* cache holds a checked copy */
	/* Following the path (gclock_refresh). */
	int fd;                        /* the page's descriptor with check_size, else -1 */
	int owner, check_size;         /* the options */
	int followed;                  /* a refresh was tried after the page read as replaced */
	uint64_t dev, ino;             /* the mapped file */
	int64_t next_check;            /* local time before which the path is not checked again */
	char path[GCLOCK_PATH_MAX];
};

#define GCLOCK_FLAG_VALID (1ULL << 16)
#define GCLOCK_FLAG_CLOSED (1ULL << 17)
#define GCLOCK_FLAG_REPLACED (1ULL << 18) /* a restarted daemon replaced this page */
#define GCLOCK_FLAG_UPSTREAM_UNSYNC (1ULL << 19) /* UTC unsynced: the reference's CLOCK_REALTIME is unsynchronised */
#define GCLOCK_CHECK_EVERY_NS 100000000LL
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

/* gclock__size_ok returns -EIO if the reader checks the page's size and
 * the file shrank (reading it would fault). */
static inline int gclock__size_ok(const struct gclock_reader *r)
{
	struct stat st;
	if (r->fd < 0)
		return 0;
	if (fstat(r->fd, &st) != 0)
		return -errno;
	return st.st_size < (off_t)GCLOCK_PAGE_SIZE ? -EIO : 0;
}

/* gclock__copy copies the page's words under the seqlock into w[]. */
static inline int gclock__copy(const volatile uint64_t *page, uint64_t w[GCLOCK_W_END])
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
		uint64_t s1 = __atomic_load_n(&page[GCLOCK_W_SEQ], __ATOMIC_ACQUIRE);
		if (s1 & 1)
			continue;
		for (int k = 0; k < GCLOCK_W_END; k++)
			w[k] = __atomic_load_n(&page[k], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&page[GCLOCK_W_SEQ], __ATOMIC_RELAXED) != s1)
			continue;
		if (w[GCLOCK_W_MAGIC] != GCLOCK_MAGIC ||
		    w[GCLOCK_W_VERSION] != (GCLOCK_VERSION | ((uint64_t)GCLOCK_PAGE_SIZE << 32)))
			return -EPROTO;
		return 0;
	}
}

/* gclock_snapshot copies the reader's page's words under the seqlock into w[]. */
static inline int gclock_snapshot(const struct gclock_reader *r, uint64_t w[GCLOCK_W_END])
{
	int err = gclock__size_ok(r);
	if (err != 0)
		return err;
	return gclock__copy(r->page, w);
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

/* gclock__dirname cuts buf (a path) to its directory, as Go's filepath.Dir
 * does for clean paths: "a/b" -> "a", "/a" -> "/", "a" -> ".". */
static inline void gclock__dirname(char *buf)
{
	size_t n = strlen(buf);
	while (n > 1 && buf[n - 1] == '/')
		n--;
	while (n > 0 && buf[n - 1] != '/')
		n--;
	while (n > 1 && buf[n - 1] == '/')
		n--;
	if (n == 0)
		buf[n++] = '.';
	buf[n] = 0;
}

/* gclock__trusted says whether a page owned by uid may be read: root, the
 * caller's euid, owner (> 0), or the owner of the page's directory when
 * nobody else can create files there: the directory is not writable by
 * group or others and sits in a root-owned directory that is not either
 * (a daemon's /run/gclock). As gtime's trustedOwner. */
static inline int gclock__trusted(uid_t uid, const char *path, int owner)
{
	char dir[GCLOCK_PATH_MAX];
	struct stat st;
	if (uid == 0 || uid == geteuid() || (owner > 0 && uid == (uid_t)owner))
		return 1;
	memcpy(dir, path, strlen(path) + 1);
	gclock__dirname(dir);
	if (stat(dir, &st) != 0 || st.st_uid != uid || (st.st_mode & 022) != 0)
		return 0;
	if (strcmp(dir, ".") == 0)
		memcpy(dir, "..", 3);
	else
		gclock__dirname(dir);
	return stat(dir, &st) == 0 && st.st_uid == 0 && (st.st_mode & 022) == 0;
}

/* gclock__map opens (O_NOFOLLOW: no symbolic link; O_NONBLOCK: no FIFO
 * hang), checks and maps the page at path. On success *page is mapped and
 * *fd is the open descriptor (the caller closes or keeps it). */
static inline int gclock__map(const char *path, int owner, const volatile uint64_t **page, int *fd,
			      uint64_t *dev, uint64_t *ino)
{
	struct stat st;
	uint64_t w[GCLOCK_W_END];
	int f = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (f < 0)
		return -errno;
	if (fstat(f, &st) != 0) {
		int e = -errno;
		close(f);
		return e;
	}
	int err = 0;
	if (!S_ISREG(st.st_mode))
		err = -EPROTO;
	else if (!gclock__trusted(st.st_uid, path, owner) || (st.st_mode & 022) != 0 || st.st_nlink != 1)
		err = -EPERM;
	else if (st.st_size != (off_t)GCLOCK_PAGE_SIZE)
		err = -EPROTO;
	if (err != 0) {
		close(f);
		return err;
	}
	void *p = mmap(0, GCLOCK_PAGE_SIZE, PROT_READ, MAP_SHARED, f, 0);
	if (p == MAP_FAILED) {
		int e = -errno;
		close(f);
		return e;
	}
	if (gclock__copy((const volatile uint64_t *)p, w) == -EPROTO) {
		munmap(p, GCLOCK_PAGE_SIZE);
		close(f);
		return -EPROTO;
	}
	*page = (const volatile uint64_t *)p;
	*fd = f;
	*dev = (uint64_t)st.st_dev;
	*ino = (uint64_t)st.st_ino;
	return 0;
}

/* gclock_refresh maps the page the reader's path names now if that is
 * another file than the mapped one (a restarted daemon replaced the page,
 * or it was removed and created again). Returns 1 if it did, 0 if the path
 * names the mapped page, or -errno (the reader keeps its page). gclock_now
 * calls it when needed. */
static inline int gclock_refresh(struct gclock_reader *r)
{
	struct stat st;
	const volatile uint64_t *page;
	uint64_t dev, ino;
	int fd;
	if (stat(r->path, &st) != 0)
		return -errno;
	if ((uint64_t)st.st_dev == r->dev && (uint64_t)st.st_ino == r->ino)
		return 0;
	int err = gclock__map(r->path, r->owner, &page, &fd, &dev, &ino);
	if (err != 0)
		return err;
	if (dev == r->dev && ino == r->ino) {
		munmap((void *)page, GCLOCK_PAGE_SIZE);
		close(fd);
		return 0;
	}
	if (!r->check_size) {
		close(fd);
		fd = -1;
	}
	if (r->page)
		munmap((void *)r->page, GCLOCK_PAGE_SIZE);
	if (r->fd >= 0)
		close(r->fd);
	r->page = page;
	r->fd = fd;
	r->dev = dev;
	r->ino = ino;
	r->cached = 0;
	r->followed = 0;
	return 1;
}

/* gclock__due says whether the path may be checked at local time x. */
static inline int gclock__due(struct gclock_reader *r, int64_t x)
{
	if (x < r->next_check)
		return 0;
	r->next_check = gclock__sat_add(x, GCLOCK_CHECK_EVERY_NS);
	return 1;
}

/* gclock__current makes r->cache a checked copy of the page the reader's
 * path holds at local time x: the cached copy while the counter has not
 * moved (one atomic load), following a replaced page (see the top). With
 * check_path, a page that does not read synced also makes it look at the
 * path (at most every 100 ms). */
static inline int gclock__current(struct gclock_reader *r, int64_t x, int check_path)
{
	for (int attempt = 0;; attempt++) {
		int err = gclock__size_ok(r);
		if (err == -EIO && attempt == 0 && gclock__due(r, x) && gclock_refresh(r) == 1)
			continue; /* the daemon replaces a page it finds truncated */
		if (err != 0) {
			r->cached = 0;
			return err;
		}
		uint64_t seq = __atomic_load_n(&r->page[GCLOCK_W_SEQ], __ATOMIC_ACQUIRE);
		if (!r->cached || seq != r->cache[GCLOCK_W_SEQ]) {
			uint64_t w[GCLOCK_W_END];
			err = gclock__copy(r->page, w);
			if (err == 0)
				err = gclock__check(w);
			if (err != 0) {
				r->cached = 0;
				return err;
			}
			memcpy(r->cache, w, sizeof w);
			r->cached = 1;
		}
		if (attempt > 0)
			return 0;
		uint64_t flags = r->cache[GCLOCK_W_FLAGS];
		if (flags & GCLOCK_FLAG_REPLACED) {
			int first = !r->followed;
			r->followed = 1;
			if ((first || gclock__due(r, x)) && gclock_refresh(r) == 1)
				continue;
		} else if (check_path &&
			   ((flags & (GCLOCK_FLAG_VALID | GCLOCK_FLAG_CLOSED)) != GCLOCK_FLAG_VALID ||
			   (int)(flags & 0xff) != GCLOCK_SYNCED ||
			    gclock__sat_sub(x, (int64_t)r->cache[GCLOCK_W_UPDATED]) >
				    (int64_t)r->cache[GCLOCK_W_STALEAFTER])) {
			/* Not synced: does the path name another page? */
			if (gclock__due(r, x) && gclock_refresh(r) == 1)
				continue;
		}
		return 0;
	}
}

/* gclock_now reads global time now; est never decreases on this reader.
 * While the sequence counter has not moved since the last read, the page is
 * unchanged and the reader's checked copy is used: one atomic load instead
 * of a seqlock copy. It follows a replaced page (see the top of the file). */
static inline int gclock_now(struct gclock_reader *r, struct gclock_time *t)
{
	int64_t x = gclock_raw_now();
	/* Fast path: an unchanged, not replaced page and no size check. */
	if (!(r->fd < 0 && r->cached &&
	      __atomic_load_n(&r->page[GCLOCK_W_SEQ], __ATOMIC_ACQUIRE) == r->cache[GCLOCK_W_SEQ] &&
	      !(r->cache[GCLOCK_W_FLAGS] & GCLOCK_FLAG_REPLACED))) {
		int err = gclock__current(r, x, 0);
		if (err != 0)
			return err;
	}
	gclock__eval(r->cache, x, t);
	if (t->status != GCLOCK_SYNCED && gclock__due(r, x) && gclock_refresh(r) == 1) {
		/* Not synced, and the path names another page: read that. */
		int err = gclock__current(r, x, 0);
		if (err != 0)
			return err;
		gclock__eval(r->cache, x, t);
	}
	if (t->est < r->last)
		t->est = r->last;
	else
		r->last = t->est;
	return 0;
}

/* gclock_open_opts maps the page at path (NULL: the default) read-only,
 * refusing an unsafe one (see the top of the file). opts may be NULL. */
static inline int gclock_open_opts(struct gclock_reader *r, const char *path, const struct gclock_options *opts)
{
	memset(r, 0, sizeof *r);
	r->last = INT64_MIN;
	r->fd = -1;
	if (!path)
		path = GCLOCK_DEFAULT_PATH;
	size_t n = strlen(path);
	if (n >= GCLOCK_PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(r->path, path, n + 1);
	if (opts) {
		r->owner = opts->owner;
		r->check_size = opts->check_size != 0;
	}
	int fd;
	int err = gclock__map(r->path, r->owner, &r->page, &fd, &r->dev, &r->ino);
	if (err != 0) {
		r->page = 0;
		return err;
	}
	if (r->check_size)
		r->fd = fd;
	else
		close(fd);
	return 0;
}

/* gclock_open maps the page at path (NULL: the default) read-only, with
 * default options. */
static inline int gclock_open(struct gclock_reader *r, const char *path)
{
	return gclock_open_opts(r, path, 0);
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
 * gclock_trace.h), following a restarted daemon's page as gclock_now does.
 * Returns 0 or -errno. */
static inline int gclock_mapping(struct gclock_reader *r, struct gclock_mapping *m)
{
	int err = gclock__current(r, gclock_raw_now(), 1);
	if (err != 0)
		return err;
	const uint64_t *w = r->cache;
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

/* gclock_scale_of stores the term of the page's reading and, on the term's
 * reference, the term's scale in *s (x0 = y0 = 0, skew = 0 and defined = 0
 * elsewhere). Returns 0 or -errno. */
static inline int gclock_scale_of(const struct gclock_reader *r, struct gclock_scale *s)
{
	uint64_t w[GCLOCK_W_END];
	int err = gclock_snapshot(r, w);
	if (err)
		return err;
	s->term = (uint32_t)w[GCLOCK_W_TERM];
	s->defined = (w[GCLOCK_W_TERM] >> 32 & 1) != 0;
	s->x0 = s->y0 = 0;
	s->skew = 0;
	if (s->defined) {
		s->x0 = (int64_t)w[GCLOCK_W_SCALE_X0];
		s->y0 = (int64_t)w[GCLOCK_W_SCALE_Y0];
		s->skew = gclock__f(w[GCLOCK_W_SCALE_SKEW]);
	}
	return 0;
}

/* gclock_scale_at is the scale's global time at the reference's local time
 * l (saturating, as gtime.Scale.At). */
static inline int64_t gclock_scale_at(const struct gclock_scale *s, int64_t l)
{
	int64_t dx = gclock__sat_sub(l, s->x0);
	return gclock__sat_add(gclock__sat_add(s->y0, dx), gclock__f2i(gclock__round(s->skew * (double)dx)));
}

/* gclock_close unmaps the page. */
static inline void gclock_close(struct gclock_reader *r)
{
	if (r->page)
		munmap((void *)r->page, GCLOCK_PAGE_SIZE);
	if (r->fd >= 0)
		close(r->fd);
	r->page = 0;
	r->fd = -1;
}

#ifdef __cplusplus
}
#endif
#endif /* GCLOCK_H */
