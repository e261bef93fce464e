/*
 * gclock_mpi.c: libgclockmpi, gclock's global MPI_Wtime and MPI tracer.
 *
 * Defines MPI_Wtime and MPI_Wtick over MPI's profiling interface (PMPI), so
 * that an unmodified MPI program reads the gclock daemon's global time, and,
 * with GCLOCK_MPI_TRACE=DIR, records every rank's messages and collectives in
 * gclock's trace format with the daemon's mappings. The C API and the
 * environment variables are documented in include/gclock_mpi.h; the build,
 * the message ids and the limits in docs/mpi.md.
 *
 * Build (mpi/Makefile):
 *     mpicc -std=gnu11 -O2 -fPIC -shared -pthread -I../include \
 *           -o libgclockmpi.so gclock_mpi.c
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gclock.h"
#include "gclock_mpi.h"
#define GCLOCK_TRACE_IMPLEMENTATION
#include "gclock_trace.h"

/* ---------------------------------------------------------------- clock */

static pthread_once_t mode_once = PTHREAD_ONCE_INIT;
static int mode = GCLOCK_MPI_LOCAL;
static char why[4096 + 512];
static int64_t origin_ns;
static int origin_set;   /* GCLOCK_MPI_ORIGIN given: no job origin */
static int notice_later; /* inside MPI_Init: rank 0 says one notice for the job */
static char page_path[4096];

static __thread struct gclock_reader tls_reader;
static __thread int tls_state; /* 0: not opened, 1: open, -errno: failed */
static __thread double tls_last_wtime = -HUGE_VAL;
static __thread int64_t tls_last_est = INT64_MIN;
static int job_ranks, job_global; /* MPI_Init: ranks, ranks with a page */
static int64_t self_origin;       /* rank 0's clock at MPI_Init, whole seconds */

static int64_t trace_now(void);
static int env_flag(const char *name);

/* Synced mode (no page on any rank): MPI_Wtime is rank 0's clock (the trace
 * clock, CLOCK_MONOTONIC_RAW) through this rank's offset against it,
 * local - global = off + rate * (local - tref), fitted by least squares over
 * the midpoints of the best exchange of the last SELF_POINTS sync sessions
 * (self_point). A seqlock lets MPI_Wtime on any thread read a consistent
 * fit while a session refits it. */
#define SELF_POINTS 16 /* sessions in the fit: older ones would hold a wandering frequency against the newest */
#define SELF_RATE_PPB 100000 /* assumed bound on the fitted rate's error (100 ppm), for the bounds only */
static struct {
	unsigned seq;  /* odd while being written */
	int64_t tref;  /* local ns: the last session's midpoint */
	int64_t off;   /* local - global at tref, ns */
	int64_t rate;  /* d(local - global)/d(local), in 1e-18 */
	int64_t err;   /* bound at tref, ns */
} self;
static int64_t self_t[SELF_POINTS], self_off[SELF_POINTS], self_h[SELF_POINTS];
static int self_n;

static int verbose(void) { return env_flag("GCLOCK_MPI_VERBOSE") && !env_flag("GCLOCK_MPI_QUIET"); }

/* self_point adds a session's best exchange (midpoint tm on the local clock,
 * offset local - global at it, half round trip h) and refits: least squares
 * weighted by 1/h^2, since a midpoint is off by at most h (its delays'
 * asymmetry) and a session whose every exchange waited (a rank descheduled
 * on a busy machine) has a long one: it must not pull the line. h is taken
 * as at least SELF_H_MIN (the reference's own point has h 0). */
#define SELF_H_MIN 50 /* ns */
/* A session whose best half round trip is more than SELF_H_OUT times the
 * least of the last SELF_H_RECENT sessions' (kept or not) plus SELF_H_SLACK
 * is left out of the fit: with two or three points a line passes through
 * each, whatever its weight. A machine that stays busy raises that least
 * within SELF_H_RECENT sessions, so its sessions count again. */
#define SELF_H_OUT 8
#define SELF_H_SLACK 10000 /* ns */
#define SELF_H_RECENT 8
static int64_t self_recent[SELF_H_RECENT];
static int self_seen;
static void self_point(int64_t tm, int64_t off, int64_t h)
{
	int64_t least = h;
	for (int k = 0; k < self_seen && k < SELF_H_RECENT; k++)
		if (self_recent[k] < least)
			least = self_recent[k];
	self_recent[self_seen++ % SELF_H_RECENT] = h;
	if (self_n > 0 && h > SELF_H_OUT * least + SELF_H_SLACK) {
		if (verbose())
			fprintf(stderr, "libgclockmpi: sync session %d: best half round trip %lld ns, over %d x the least of the last %d (%lld ns): left out of the fit\n",
				self_seen, (long long)h, SELF_H_OUT, SELF_H_RECENT, (long long)least);
		return; /* the fit goes on from the sessions before */
	}
	int i = self_n % SELF_POINTS;
	self_t[i] = tm;
	self_off[i] = off;
	self_h[i] = h;
	self_n++;
	int n = self_n < SELF_POINTS ? self_n : SELF_POINTS;
	/* Relative to the newest point: doubles stay exact enough. */
	double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
	for (int k = 0; k < n; k++) {
		double x = (double)(self_t[k] - tm), y = (double)(self_off[k] - off);
		double hk = (double)(self_h[k] > SELF_H_MIN ? self_h[k] : SELF_H_MIN), w = 1 / (hk * hk);
		sw += w;
		sx += w * x;
		sy += w * y;
		sxx += w * x * x;
		sxy += w * x * y;
	}
	double vx = sxx - sx * sx / sw, b = 0;
	if (n >= 2 && vx > 0)
		b = (sxy - sx * sy / sw) / vx;
	double a = sy / sw - b * sx / sw; /* the fit at tm, relative to off */
	unsigned q = __atomic_load_n(&self.seq, __ATOMIC_RELAXED);
	__atomic_store_n(&self.seq, q + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&self.tref, tm, __ATOMIC_RELAXED);
	__atomic_store_n(&self.off, off + (int64_t)llround(a), __ATOMIC_RELAXED);
	__atomic_store_n(&self.rate, (int64_t)llround(b * 1e18), __ATOMIC_RELAXED);
	__atomic_store_n(&self.err, h + (int64_t)ceil(fabs(a)), __ATOMIC_RELAXED);
	__atomic_store_n(&self.seq, q + 2, __ATOMIC_RELEASE);
	if (verbose())
		fprintf(stderr, "libgclockmpi: sync session %d: best half round trip %lld ns; fit of %d sessions: offset %lld ns, rate %.3f ppm\n",
			self_seen, (long long)h, n, (long long)(off + (int64_t)llround(a)), b * 1e6);
}

/* self_now reads global time in synced mode: est and its half-width. */
static int64_t self_now(int64_t *halfw)
{
	int64_t tref, off, rate, err;
	unsigned q;
	do {
		q = __atomic_load_n(&self.seq, __ATOMIC_ACQUIRE);
		tref = __atomic_load_n(&self.tref, __ATOMIC_RELAXED);
		off = __atomic_load_n(&self.off, __ATOMIC_RELAXED);
		rate = __atomic_load_n(&self.rate, __ATOMIC_RELAXED);
		err = __atomic_load_n(&self.err, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while ((q & 1) || q != __atomic_load_n(&self.seq, __ATOMIC_RELAXED));
	int64_t local = trace_now(), d = local - tref;
	int64_t theta = off + (int64_t)(((__int128)rate * d) / 1000000000000000000LL);
	*halfw = err + (int64_t)(((__int128)(d < 0 ? -d : d) * SELF_RATE_PPB) / 1000000000);
	return local - theta;
}

static int env_flag(const char *name)
{
	const char *v = getenv(name);
	return v && *v && strcmp(v, "0") != 0;
}

static void say(const char *fmt, ...)
{
	if (env_flag("GCLOCK_MPI_QUIET"))
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "libgclockmpi: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

/* expand_page copies src to dst, replacing each %n with the node's index in
 * the Slurm job ($SLURM_NODEID), as deploy/slurm/gclock-run.sh documents
 * for GCLOCK_PAGE (it exports the pattern; each task expands it on its
 * node). Without SLURM_NODEID, %n stays and the open fails naming it. */
static void expand_page(char *dst, size_t size, const char *src)
{
	const char *id = getenv("SLURM_NODEID");
	size_t o = 0;
	for (; *src && o + 1 < size; src++) {
		if (src[0] == '%' && src[1] == 'n' && id && *id) {
			o += (size_t)snprintf(dst + o, size - o, "%s", id);
			if (o >= size)
				o = size - 1;
			src++;
			continue;
		}
		dst[o++] = *src;
	}
	dst[o] = 0;
}

static void choose_mode(void)
{
	const char *p = getenv("GCLOCK_PAGE");
	expand_page(page_path, sizeof page_path, p && *p ? p : GCLOCK_DEFAULT_PATH);
	const char *o = getenv("GCLOCK_MPI_ORIGIN");
	if (o && *o) {
		char *end;
		errno = 0;
		long long s = strtoll(o, &end, 10);
		if (errno != 0 || *end != 0 || s < 0 || s > INT64_MAX / 1000000000LL) {
			fprintf(stderr, "libgclockmpi: GCLOCK_MPI_ORIGIN=%s: want whole seconds in [0, %lld]\n", o,
				(long long)(INT64_MAX / 1000000000LL));
			exit(1);
		}
		origin_ns = (int64_t)s * 1000000000LL;
		origin_set = 1;
	}
	struct gclock_reader r;
	struct gclock_time t;
	int err = gclock_open(&r, page_path);
	if (err == 0) {
		err = gclock_now(&r, &t);
		gclock_close(&r);
	}
	if (err != 0) {
		snprintf(why, sizeof why, "local time: cannot read the gclock page %s: %s (is the daemon running? GCLOCK_PAGE names another page)",
			 page_path, err == -EPROTO ? "not a gclock page of this version" : strerror(-err));
	} else if (t.status == GCLOCK_UNSYNCED) {
		snprintf(why, sizeof why, "local time: the gclock page %s is unsynced (the daemon has no estimate yet)", page_path);
	} else {
		mode = GCLOCK_MPI_GLOBAL;
		snprintf(why, sizeof why, "global time from the gclock page %s (status %s at the first read)", page_path,
			 gclock_status_name(t.status));
		return;
	}
	if (env_flag("GCLOCK_MPI_REQUIRE")) {
		/* The daemon's page is required: the own sync sessions do not count. */
		fprintf(stderr, "libgclockmpi: GCLOCK_MPI_REQUIRE is set and MPI_Wtime would be %s\n", why);
		exit(1);
	}
	if (!notice_later)
		say("MPI_Wtime is %s", why);
}

/* job_origin runs in MPI_Init on every rank: rank 0 takes the job's origin
 * (global time at MPI_Init, rounded down to a whole second) and broadcasts
 * it, so that MPI_Wtime starts near 0 on every rank with ns steps, as
 * OpenMPI users expect, and every rank subtracts the same origin (global
 * time stays comparable across ranks). GCLOCK_MPI_ORIGIN overrides it (0:
 * absolute global time). Rank 0 then says one notice for the job, not one
 * per rank: how many ranks fell back to local time, and why on rank 0. */
static void job_origin(void)
{
	int rank = 0, size = 1;
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &size);
	notice_later = 1;
	int m = gclock_mpi_mode(NULL);
	notice_later = 0;
	long long o[2] = {0, 0}; /* global time's origin; rank 0's clock's, for synced mode */
	if (rank == 0 && !origin_set && m == GCLOCK_MPI_GLOBAL) {
		struct gclock_time t;
		if (gclock_mpi_now(&t) == 0 && t.est > 0)
			o[0] = (long long)(t.est - t.est % 1000000000LL);
	}
	if (rank == 0 && !origin_set) {
		int64_t r = trace_now();
		o[1] = (long long)(r - r % 1000000000LL);
	}
	PMPI_Bcast(o, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
	if (!origin_set)
		origin_ns = (int64_t)o[0];
	self_origin = origin_set ? origin_ns : (int64_t)o[1];
	int g = m == GCLOCK_MPI_GLOBAL;
	PMPI_Allreduce(&g, &job_global, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	job_ranks = size;
}

/* job_notice runs in MPI_Init once the mode is settled (after sync_init):
 * rank 0 says one notice for the job, not one per rank. */
static void job_notice(void)
{
	int rank = 0, size = job_ranks, total = job_global;
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (rank != 0)
		return;
	if (gclock_mpi_mode(NULL) == GCLOCK_MPI_SYNCED) {
		if (verbose())
			say("MPI_Wtime is %s", why);
		return;
	}
	if (total == 0)
		say("MPI_Wtime is %s (on all %d ranks)", why, size);
	else if (total < size)
		say("MPI_Wtime is global time on %d of %d ranks, local time on the others (GCLOCK_MPI_REQUIRE=1 stops them); "
		    "rank 0: %s",
		    total, size, why);
}

int gclock_mpi_mode(const char **w)
{
	pthread_once(&mode_once, choose_mode);
	if (w)
		*w = why;
	return __atomic_load_n(&mode, __ATOMIC_ACQUIRE);
}

int64_t gclock_mpi_origin_ns(void)
{
	if (gclock_mpi_mode(NULL) == GCLOCK_MPI_SYNCED)
		return self_origin;
	return origin_ns;
}

/* thread_reader opens this thread's reader on first use. */
static struct gclock_reader *thread_reader(int *err)
{
	if (tls_state == 0) {
		int e = gclock_open(&tls_reader, page_path);
		tls_state = e == 0 ? 1 : (e < 0 ? e : -EIO);
	}
	*err = tls_state < 0 ? tls_state : 0;
	return tls_state == 1 ? &tls_reader : NULL;
}

int gclock_mpi_now(struct gclock_time *t)
{
	int m = gclock_mpi_mode(NULL);
	if (m == GCLOCK_MPI_SYNCED) {
		int64_t h, est = self_now(&h);
		/* A refit may step the fit back: est never decreases per thread. */
		if (est < tls_last_est)
			est = tls_last_est;
		tls_last_est = est;
		t->est = est;
		t->earliest = est - h;
		t->latest = est + h;
		t->status = GCLOCK_SYNCED;
		t->timescale = GCLOCK_TS_REFERENCE;
		return 0;
	}
	if (m != GCLOCK_MPI_GLOBAL)
		return -ENODEV;
	int err;
	struct gclock_reader *r = thread_reader(&err);
	if (!r)
		return err;
	return gclock_now(r, t);
}

static double to_wtime(int64_t ns)
{
	/* The difference in int64 first: exact for |ns - origin| < 2^53 ns (104 days). */
	if (ns == INT64_MIN)
		return -HUGE_VAL;
	if (ns == INT64_MAX)
		return HUGE_VAL;
	int64_t d;
	if (__builtin_sub_overflow(ns, gclock_mpi_origin_ns(), &d))
		return ns < 0 ? -HUGE_VAL : HUGE_VAL;
	return (double)d / 1e9;
}

int gclock_mpi_wtime_bounds(double *wtime, double *earliest, double *latest)
{
	if (gclock_mpi_mode(NULL) == GCLOCK_MPI_LOCAL) {
		double w = PMPI_Wtime();
		if (wtime)
			*wtime = w;
		if (earliest)
			*earliest = -HUGE_VAL;
		if (latest)
			*latest = HUGE_VAL;
		return GCLOCK_MPI_NO_GLOBAL;
	}
	struct gclock_time t;
	int err = gclock_mpi_now(&t);
	if (err != 0) {
		if (wtime)
			*wtime = tls_last_wtime;
		if (earliest)
			*earliest = -HUGE_VAL;
		if (latest)
			*latest = HUGE_VAL;
		return err;
	}
	double w = to_wtime(t.est);
	/* est never decreases per reader; the double never decreases either. */
	if (w < tls_last_wtime)
		w = tls_last_wtime;
	tls_last_wtime = w;
	if (wtime)
		*wtime = w;
	if (earliest)
		*earliest = to_wtime(t.earliest);
	if (latest)
		*latest = to_wtime(t.latest);
	return t.status;
}

double MPI_Wtime(void)
{
	if (gclock_mpi_mode(NULL) == GCLOCK_MPI_LOCAL)
		return PMPI_Wtime();
	double w;
	int st = gclock_mpi_wtime_bounds(&w, NULL, NULL);
	if (st < 0 && st != GCLOCK_MPI_NO_GLOBAL) {
		static int told;
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
			say("cannot read the gclock page %s any more: %s; MPI_Wtime holds its last value", page_path,
			    strerror(-st));
	}
	return w;
}

double MPI_Wtick(void)
{
	if (gclock_mpi_mode(NULL) == GCLOCK_MPI_LOCAL)
		return PMPI_Wtick();
	/* 1 ns, or the double's step at the current MPI_Wtime when that is
	 * coarser (far from the origin: 238 ns at 1.7e9 s of UTC with
	 * GCLOCK_MPI_ORIGIN=0). */
	double w = fabs(MPI_Wtime());
	double step = nextafter(w, HUGE_VAL) - w;
	return step > 1e-9 ? step : 1e-9;
}

/* MPI_WTIME_IS_GLOBAL reads true in the global and synced modes. */
int MPI_Comm_get_attr(MPI_Comm comm, int keyval, void *value, int *flag)
{
	int rc = PMPI_Comm_get_attr(comm, keyval, value, flag);
	if (rc == MPI_SUCCESS && keyval == MPI_WTIME_IS_GLOBAL && gclock_mpi_mode(NULL) != GCLOCK_MPI_LOCAL) {
		static int one = 1;
		*(int **)value = &one;
		*flag = 1;
	}
	return rc;
}

/* ---------------------------------------------------------------- trace */

/* u64map: open addressing from a non-zero 64-bit key to a 64-bit value. */
struct u64map {
	uint64_t *keys, *vals; /* key 0: empty, key 1: deleted */
	size_t cap, used, live;
};

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static int map_put(struct u64map *m, uint64_t k, uint64_t v);

static int map_grow(struct u64map *m)
{
	struct u64map n = {0};
	n.cap = m->cap ? m->cap * 2 : 64;
	while (n.cap < 4 * (m->live + 1))
		n.cap *= 2;
	n.keys = calloc(n.cap, sizeof *n.keys);
	n.vals = calloc(n.cap, sizeof *n.vals);
	if (!n.keys || !n.vals) {
		free(n.keys);
		free(n.vals);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i] > 1)
			map_put(&n, m->keys[i], m->vals[i]);
	free(m->keys);
	free(m->vals);
	*m = n;
	return 0;
}

/* map_find returns the slot of k, or of where it would go. */
static size_t map_find(const struct u64map *m, uint64_t k, int *found)
{
	size_t i = mix64(k) & (m->cap - 1), first_del = (size_t)-1;
	for (;;) {
		uint64_t s = m->keys[i];
		if (s == k) {
			*found = 1;
			return i;
		}
		if (s == 0) {
			*found = 0;
			return first_del != (size_t)-1 ? first_del : i;
		}
		if (s == 1 && first_del == (size_t)-1)
			first_del = i;
		i = (i + 1) & (m->cap - 1);
	}
}

static uint64_t *map_get(struct u64map *m, uint64_t k)
{
	if (m->cap == 0)
		return NULL;
	int found;
	size_t i = map_find(m, k, &found);
	return found ? &m->vals[i] : NULL;
}

static int map_put(struct u64map *m, uint64_t k, uint64_t v)
{
	if ((m->used + 1) * 2 > m->cap && map_grow(m) != 0)
		return -1;
	int found;
	size_t i = map_find(m, k, &found);
	if (!found) {
		if (m->keys[i] == 0)
			m->used++;
		m->live++;
		m->keys[i] = k;
	}
	m->vals[i] = v;
	return 0;
}

static int map_del(struct u64map *m, uint64_t k, uint64_t *v)
{
	if (m->cap == 0)
		return 0;
	int found;
	size_t i = map_find(m, k, &found);
	if (!found)
		return 0;
	if (v)
		*v = m->vals[i];
	m->keys[i] = 1;
	m->live--;
	return 1;
}

/* A communicator as the tracer knows it: its key (the same on every member:
 * a hash of its members' world ranks; 1 for MPI_COMM_WORLD), its members'
 * world ranks and its collective counter. */
struct comm_info {
	MPI_Comm comm;
	uint32_t key;
	int size, rank;
	int *world; /* world rank of each member; NULL: identity (MPI_COMM_WORLD) */
	uint32_t coll_seq;
	uint32_t win_seq; /* windows created on it (every member creates them in the same order) */
	int intercomm;
	int freed; /* MPI_Comm_free was called: kept for requests still pending */
};

/* A window as the tracer knows it: its key (the same on every member: a hash
 * of its communicator's key and its number on it) and its communicator. */
struct win_info {
	MPI_Win win;
	uint32_t key;
	struct comm_info *c;
	int freed;
};

static struct {
	pthread_mutex_t mu;
	gct_writer *w;
	struct gclock_reader page;
	int have_page;
	uint64_t page_seq;
	uint64_t mappings; /* recorded */
	int world_rank, world_size;
	struct u64map seqs;   /* (dir, peer, comm key ^ tag) -> next message number */
	struct u64map recvs;  /* pending nonblocking request -> its struct preq */
	struct u64map named;  /* message keys (id >> 32) whose communicator and tag were named */
	struct u64map persist; /* persistent request -> its struct persist */
	struct comm_info **comms; /* never moved nor freed: pending requests point to them */
	size_t ncomms;
	struct win_info **wins; /* windows, as comms */
	size_t nwins;
	uint64_t reqs_dropped;
	uint64_t req_num; /* the last request number given */
} tr = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A pending nonblocking request: a receive (MPI_Irecv, or a started
 * persistent receive: num 0), a send (MPI_Isend and the other modes) or a
 * nonblocking collective (k). num numbers the requests of this rank (1,
 * 2, ...) in the REQ_NAME instants; 0: none written (persistent). */
enum { PREQ_RECV, PREQ_SEND, PREQ_COLL };
struct preq {
	int kind;
	uint64_t num;
	struct comm_info *c;
	struct coll *k;
	struct preq *next; /* pending requests of the same handle, oldest first (see req_add_locked) */
};

/* The regions the tracer records: gclock_timesync and the MPI calls below.
 * COLLECTIVES lists every collective with its nonblocking form and the
 * dependencies it implies (coll_enter); RMA_CALLS the one-sided calls. One
 * table gives the region ids, their names and the wrappers
 * (COLLECTIVE, RMA below), so that a call is added in one line. */
enum deps {
	D_NONE,      /* none */
	D_ALL,       /* no rank leaves before every rank entered */
	D_TO_ROOT,   /* the root does not leave before every rank entered */
	D_FROM_ROOT, /* no rank leaves before the root entered */
	D_PREFIX,    /* rank i does not leave before ranks 0..i-1 entered */
};
#define COLLECTIVES(X)                                                                                                 \
	X(Barrier, Ibarrier, D_ALL)                                                                                    \
	X(Bcast, Ibcast, D_FROM_ROOT)                                                                                  \
	X(Reduce, Ireduce, D_TO_ROOT)                                                                                  \
	X(Allreduce, Iallreduce, D_ALL)                                                                                \
	X(Gather, Igather, D_TO_ROOT)                                                                                  \
	X(Scatter, Iscatter, D_FROM_ROOT)                                                                              \
	X(Allgather, Iallgather, D_ALL)                                                                                \
	X(Alltoall, Ialltoall, D_ALL)                                                                                  \
	X(Gatherv, Igatherv, D_TO_ROOT)                                                                                \
	X(Scatterv, Iscatterv, D_FROM_ROOT)                                                                            \
	X(Allgatherv, Iallgatherv, D_ALL)                                                                              \
	X(Alltoallv, Ialltoallv, D_ALL)                                                                                \
	X(Alltoallw, Ialltoallw, D_ALL)                                                                                \
	X(Reduce_scatter_block, Ireduce_scatter_block, D_ALL)                                                          \
	X(Reduce_scatter, Ireduce_scatter, D_ALL)                                                                      \
	X(Scan, Iscan, D_PREFIX)                                                                                       \
	X(Exscan, Iexscan, D_PREFIX)
#define RMA_CALLS(X)                                                                                                   \
	X(Win_create) X(Win_allocate) X(Win_free) X(Put) X(Get) X(Accumulate) X(Win_fence) X(Win_lock) X(Win_unlock)  \
	X(Win_lock_all) X(Win_unlock_all)

/* P2P_CALLS: the point-to-point calls, the completion calls and the
 * environment calls, each a plain region (no data on its events). */
#define P2P_CALLS(X)                                                                                                   \
	X(Init) X(Init_thread) X(Finalize) X(Send) X(Ssend) X(Bsend) X(Rsend) X(Isend) X(Issend) X(Ibsend) X(Irsend)  \
	X(Recv) X(Irecv) X(Sendrecv) X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany)        \
	X(Testsome) X(Start) X(Startall)

#define REGION_ENUM(b, nb, d) R_##b, R_##nb,
#define RMA_ENUM(n) R_##n,
enum { R_NONE, R_SYNC, COLLECTIVES(REGION_ENUM) RMA_CALLS(RMA_ENUM) P2P_CALLS(RMA_ENUM) R_NAMES };
#define REGION_ROW(b, nb, d) [R_##b] = {"MPI_" #b, d}, [R_##nb] = {"MPI_" #nb, d},
#define RMA_ROW(n) [R_##n] = {"MPI_" #n, D_NONE},
static const struct {
	const char *name;
	enum deps deps;
} regions[R_NAMES] = {[R_NONE] = {"", D_NONE}, [R_SYNC] = {"gclock_timesync", D_NONE},
		      COLLECTIVES(REGION_ROW) RMA_CALLS(RMA_ROW) P2P_CALLS(RMA_ROW)};

/* NO_PEER in a region's enter event: no root or target. */
#define NO_PEER UINT32_MAX

#define COLL_BIT (1ULL << 63)
/* Name ids of the string table (below these: region names). */
#define COMM_NAME (1ULL << 61) /* | communicator key: its members */
#define TAG_NAME (1ULL << 62)  /* | message key (id >> 32): communicator and tag */
#define WIN_NAME (1ULL << 60)  /* | window key: its communicator */
/* Instants of nonblocking requests (value: the request's number, 1, 2, ...
 * per rank): REQ_NAME | REQ_*; see req_event. */
#define REQ_NAME (1ULL << 59)
enum { REQ_START = 1, REQ_DONE, REQ_TEST, REQ_CANCEL };
static const char *const req_names[] = {"", "MPI request started", "MPI request completed", "MPI request tested",
					"MPI request cancelled"};
#define USER_NAME (1ULL << 58) /* | communicator key: the name MPI_Comm_set_name gave it */
#define HOST_NAME (1ULL << 57) /* the host's name (gethostname) */
#define REALTIME_NAME ((1ULL << 57) | 1) /* "realtime R at local L": CLOCK_REALTIME and the trace clock, read together */
#define SELF_KEY 2             /* MPI_COMM_SELF's key (the same name on every rank) */

static uint64_t req_key(MPI_Request r)
{
	uint64_t k = 0;
	memcpy(&k, &r, sizeof r < sizeof k ? sizeof r : sizeof k);
	return k + 2; /* 0 and 1 are the map's empty and deleted slots */
}

/* poll_locked records the daemon's mapping if the page changed. */
static int poll_locked(void)
{
	if (!tr.have_page)
		return 0;
	uint64_t s = gclock_seq(&tr.page);
	if (s == tr.page_seq || (s & 1))
		return 0;
	int r = gct_poll_page(tr.w, &tr.page);
	if (r >= 0)
		tr.page_seq = s;
	if (r == 1)
		tr.mappings++;
	return r;
}

static uint32_t fnv32(const void *p, size_t n, uint32_t h)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

static int world_of(const struct comm_info *c, int r)
{
	return c->world ? c->world[r] : r;
}

/* comm_locked finds or adds comm; NULL for a communicator the tracer
 * cannot follow (an intercommunicator, or out of memory). */
static struct comm_info *comm_locked(MPI_Comm comm)
{
	for (size_t i = 0; i < tr.ncomms; i++)
		if (!tr.comms[i]->freed && tr.comms[i]->comm == comm)
			return tr.comms[i]->intercomm ? NULL : tr.comms[i];
	struct comm_info c = {.comm = comm};
	int inter = 0;
	PMPI_Comm_test_inter(comm, &inter);
	c.intercomm = inter;
	if (!inter) {
		PMPI_Comm_size(comm, &c.size);
		PMPI_Comm_rank(comm, &c.rank);
		if (comm == MPI_COMM_WORLD) {
			c.key = 1;
		} else if (comm == MPI_COMM_SELF) {
			c.key = SELF_KEY;
			c.world = malloc(sizeof(int));
			if (!c.world)
				return NULL;
			c.world[0] = tr.world_rank;
		} else {
			MPI_Group g, wg;
			int *in = malloc(sizeof(int) * (size_t)c.size);
			c.world = malloc(sizeof(int) * (size_t)c.size);
			if (!in || !c.world) {
				free(in);
				free(c.world);
				return NULL;
			}
			for (int i = 0; i < c.size; i++)
				in[i] = i;
			PMPI_Comm_group(comm, &g);
			PMPI_Comm_group(MPI_COMM_WORLD, &wg);
			PMPI_Group_translate_ranks(g, c.size, in, wg, c.world);
			PMPI_Group_free(&g);
			PMPI_Group_free(&wg);
			free(in);
			c.key = fnv32(c.world, sizeof(int) * (size_t)c.size, 2166136261u) | 2; /* never 1 */
			if (c.key == SELF_KEY)
				c.key = 6;
		}
	}
	struct comm_info **n = realloc(tr.comms, sizeof *n * (tr.ncomms + 1));
	struct comm_info *p = malloc(sizeof *p);
	if (n)
		tr.comms = n;
	if (!n || !p) {
		free(p);
		free(c.world);
		return NULL;
	}
	*p = c;
	tr.comms[tr.ncomms++] = p;
	if (!inter && tr.w) {
		/* Name record COMM_NAME | key: the communicator's members. */
		char b[512];
		int o = snprintf(b, sizeof b, "MPI communicator %08x: %d ranks, world ranks", (unsigned)c.key, c.size);
		for (int i = 0; i < c.size && o < (int)sizeof b - 16; i++)
			o += snprintf(b + o, sizeof b - (size_t)o, " %d", world_of(&c, i));
		if (o >= (int)sizeof b - 16)
			snprintf(b + sizeof b - 16, 16, " ...");
		gct_name(tr.w, COMM_NAME | c.key, b);
	}
	return inter ? NULL : p;
}

/* msg_id numbers the messages of one direction, peer, communicator and tag:
 * MPI delivers those in order (non-overtaking), so the n-th send from i to j
 * is the n-th receive at j from i and both ends compute the same id. */
static uint64_t msg_id_locked(int dir, int peer, uint32_t ckey, int tag)
{
	uint32_t tk = (uint32_t)mix64(((uint64_t)ckey << 32) | (uint32_t)tag) & 0x7fffffffu;
	uint64_t key = ((uint64_t)dir << 62) | ((uint64_t)(uint32_t)peer << 31) | tk;
	key += 2;
	uint64_t *v = map_get(&tr.seqs, key);
	uint64_t n = v ? *v : 0;
	if (v)
		*v = n + 1;
	else
		map_put(&tr.seqs, key, 1);
	if (tr.w && !map_get(&tr.named, (uint64_t)tk + 2)) {
		/* Name record TAG_NAME | (id >> 32): the communicator and tag of
		 * the messages whose ids carry this key. */
		char b[96];
		snprintf(b, sizeof b, "MPI communicator %08x tag %d", (unsigned)ckey, tag);
		if (map_put(&tr.named, (uint64_t)tk + 2, 1) == 0)
			gct_name(tr.w, TAG_NAME | tk, b);
	}
	return ((uint64_t)tk << 32) | (uint32_t)n;
}

static int64_t type_bytes(int count, MPI_Datatype t)
{
	int sz = 0;
	if (count <= 0 || t == MPI_DATATYPE_NULL || PMPI_Type_size(t, &sz) != MPI_SUCCESS)
		return 0;
	return (int64_t)count * sz;
}

static void trace_send(int dest, int tag, MPI_Comm comm, int count, MPI_Datatype t)
{
	if (!tr.w || dest == MPI_PROC_NULL || dest < 0)
		return;
	pthread_mutex_lock(&tr.mu);
	struct comm_info *c = comm_locked(comm);
	if (c && dest < c->size) {
		poll_locked();
		int peer = world_of(c, dest);
		uint64_t id = msg_id_locked(0, peer, c->key, tag);
		gct_send(tr.w, 0, (uint32_t)peer, id, type_bytes(count, t));
	}
	pthread_mutex_unlock(&tr.mu);
}

static void trace_recv_locked(const MPI_Status *st, struct comm_info *c)
{
	if (!c || st->MPI_SOURCE == MPI_PROC_NULL || st->MPI_SOURCE < 0 || st->MPI_SOURCE >= c->size)
		return;
	int cancelled = 0;
	PMPI_Test_cancelled(st, &cancelled);
	if (cancelled)
		return;
	int n = 0;
	if (PMPI_Get_count(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED)
		n = 0;
	poll_locked();
	int peer = world_of(c, st->MPI_SOURCE);
	uint64_t id = msg_id_locked(1, peer, c->key, st->MPI_TAG);
	gct_recv(tr.w, 0, (uint32_t)peer, id, n);
}

static void trace_recv(const MPI_Status *st, MPI_Comm comm)
{
	if (!tr.w)
		return;
	pthread_mutex_lock(&tr.mu);
	trace_recv_locked(st, comm_locked(comm));
	pthread_mutex_unlock(&tr.mu);
}

/* Collectives. Every rank records its collective as a region and, for
 * causality, the dependencies the operation implies (enum deps): no rank
 * leaves a barrier or an allreduce before every rank entered it, the root of
 * a reduce not before every rank entered, a bcast's receiver not before the
 * root entered, rank i of a scan not before ranks 0..i-1 entered. Each
 * dependency is a message from the entry of one rank to the exit of another
 * with id COLL_BIT | key << 32 | the communicator's collective number (every
 * member calls the collectives of a communicator in the same order). Only
 * offsets d < 16 or a power of two are recorded, so a call costs O(log size)
 * events on large communicators.
 *
 * The region's enter event carries the bytes this rank passes in its send
 * buffer (value) and the root's world rank (peer, NO_PEER without a root);
 * its leave event the bytes of its receive buffer (value) and the
 * communicator's key (peer). Arguments MPI says are significant only at the
 * root count only there, and an MPI_IN_PLACE buffer counts 0. */
static int dep_offset(int d) { return d > 0 && (d < 16 || (d & (d - 1)) == 0); }

struct coll {
	struct comm_info *c;
	uint64_t id;
	int region, root; /* root: rank in c, -1: none */
	int64_t recvd;
};

static uint64_t coll_id(const struct comm_info *c)
{
	return COLL_BIT | ((uint64_t)(c->key & 0x7fffffffu) << 32) | c->coll_seq;
}

/* coll_begin finds the communicator of a collective; 0 when it is not
 * traced (then coll_enter is not called and coll_leave does nothing). */
static int coll_begin(struct coll *k, MPI_Comm comm, int region)
{
	k->c = NULL;
	k->region = region;
	if (!tr.w)
		return 0;
	pthread_mutex_lock(&tr.mu);
	k->c = comm_locked(comm);
	pthread_mutex_unlock(&tr.mu);
	return k->c != NULL;
}

static int64_t type_bytes(int count, MPI_Datatype t);

/* vbytes and wbytes: the bytes of a v (one type) or w (a type each)
 * collective's counts over n ranks. */
static int64_t vbytes(const int counts[], MPI_Datatype t, int n)
{
	int64_t s = 0;
	for (int i = 0; i < n; i++)
		s += type_bytes(counts[i], t);
	return s;
}

static int64_t wbytes(const int counts[], const MPI_Datatype ts[], int n)
{
	int64_t s = 0;
	for (int i = 0; i < n; i++)
		s += type_bytes(counts[i], ts[i]);
	return s;
}

/* IP: 0 bytes for an MPI_IN_PLACE buffer (its count and type are ignored). */
#define IP(buf, bytes) ((buf) == MPI_IN_PLACE ? 0 : (bytes))

static void coll_enter(struct coll *k, int root, int64_t sent, int64_t recvd)
{
	struct comm_info *c = k->c;
	pthread_mutex_lock(&tr.mu);
	if (!tr.w) {
		k->c = NULL;
		pthread_mutex_unlock(&tr.mu);
		return;
	}
	poll_locked();
	k->id = coll_id(c);
	c->coll_seq++;
	int n = c->size, me = c->rank;
	k->root = root >= 0 && root < n ? root : -1;
	k->recvd = recvd;
	gct_enter_data(tr.w, 0, (uint64_t)k->region, sent, k->root >= 0 ? (uint32_t)world_of(c, k->root) : NO_PEER);
	switch (regions[k->region].deps) {
	case D_ALL:
		for (int d = 1; d < n; d++)
			if (dep_offset(d))
				gct_send(tr.w, 0, (uint32_t)world_of(c, (me + d) % n), k->id, 0);
		break;
	case D_FROM_ROOT:
		if (k->root >= 0 && me == k->root)
			for (int d = 1; d < n; d++)
				if (dep_offset(d))
					gct_send(tr.w, 0, (uint32_t)world_of(c, (k->root + d) % n), k->id, 0);
		break;
	case D_TO_ROOT:
		if (k->root >= 0 && me != k->root && dep_offset((me - k->root + n) % n))
			gct_send(tr.w, 0, (uint32_t)world_of(c, k->root), k->id, 0);
		break;
	case D_PREFIX:
		for (int d = 1; me + d < n; d++)
			if (dep_offset(d))
				gct_send(tr.w, 0, (uint32_t)world_of(c, me + d), k->id, 0);
		break;
	case D_NONE:
		break;
	}
	pthread_mutex_unlock(&tr.mu);
}

/* coll_deps_in_locked records the dependencies a completed collective
 * implies at this rank (receives from the ranks it waited for). */
static void coll_deps_in_locked(const struct coll *k)
{
	struct comm_info *c = k->c;
	int n = c->size, me = c->rank, root = k->root;
	switch (regions[k->region].deps) {
	case D_ALL:
		for (int d = 1; d < n; d++)
			if (dep_offset(d))
				gct_recv(tr.w, 0, (uint32_t)world_of(c, (me - d + n) % n), k->id, 0);
		break;
	case D_FROM_ROOT:
		if (root >= 0 && me != root && dep_offset((me - root + n) % n))
			gct_recv(tr.w, 0, (uint32_t)world_of(c, root), k->id, 0);
		break;
	case D_TO_ROOT:
		if (root >= 0 && me == root)
			for (int d = 1; d < n; d++)
				if (dep_offset(d))
					gct_recv(tr.w, 0, (uint32_t)world_of(c, (root + d) % n), k->id, 0);
		break;
	case D_PREFIX:
		for (int d = 1; me - d >= 0; d++)
			if (dep_offset(d))
				gct_recv(tr.w, 0, (uint32_t)world_of(c, me - d), k->id, 0);
		break;
	case D_NONE:
		break;
	}
}

static void coll_leave(struct coll *k, int rc)
{
	if (!k->c)
		return;
	pthread_mutex_lock(&tr.mu);
	if (rc == MPI_SUCCESS && tr.w)
		coll_deps_in_locked(k);
	if (tr.w)
		gct_leave_data(tr.w, 0, (uint64_t)k->region, k->recvd, k->c->key);
	pthread_mutex_unlock(&tr.mu);
}

/* Regions and requests. Every MPI call the tracer wraps is a region
 * (enter and leave of its name). A nonblocking request (MPI_Isend and the
 * other send modes, MPI_Irecv, MPI_I<collective>) gets a number, 1, 2, ...
 * per rank, and instants REQ_NAME | REQ_* with the number as value: started
 * in the call's region (after its send for a send), completed in the
 * region of the MPI_Wait or MPI_Test form that completed it (before its
 * receive for a receive), tested for each unsuccessful MPI_Test* of it,
 * cancelled when its status says so. trace/otf2 turns them into OTF2's
 * request records. */
static void region(int r, int leave)
{
	if (!tr.w)
		return;
	pthread_mutex_lock(&tr.mu);
	if (tr.w) {
		if (leave) {
			gct_leave(tr.w, 0, (uint64_t)r);
		} else {
			poll_locked();
			gct_enter(tr.w, 0, (uint64_t)r);
		}
	}
	pthread_mutex_unlock(&tr.mu);
}

static void req_event_locked(int what, uint64_t num)
{
	if (tr.w && num)
		gct__stamped(tr.w, GCT_INSTANT, 0, REQ_NAME | (uint64_t)what, (int64_t)num, 0);
}

/* req_add_locked makes request r pending (numbered: with a number and its
 * start instant); NULL when it cannot be followed. Several pending requests
 * may share a handle: OpenMPI returns one static completed request
 * (ompi_request_empty) for every send it could complete at once; they are
 * chained, and each completion of the handle takes the oldest. */
static struct preq *req_add_locked(MPI_Request r, int kind, struct comm_info *c, struct coll *k, int numbered)
{
	struct preq *p = malloc(sizeof *p);
	uint64_t *v = map_get(&tr.recvs, req_key(r));
	if (!p || (!v && map_put(&tr.recvs, req_key(r), (uint64_t)(uintptr_t)p) != 0)) {
		free(p);
		tr.reqs_dropped++;
		return NULL;
	}
	*p = (struct preq){.kind = kind, .c = c, .k = k, .num = numbered ? ++tr.req_num : 0};
	if (v) {
		struct preq *q = (struct preq *)(uintptr_t)*v;
		while (q->next)
			q = q->next;
		q->next = p;
	}
	req_event_locked(REQ_START, p->num);
	return p;
}

/* req_take_locked removes the oldest pending request of handle r. */
static struct preq *req_take_locked(MPI_Request r)
{
	uint64_t *v = map_get(&tr.recvs, req_key(r));
	if (!v)
		return NULL;
	struct preq *p = (struct preq *)(uintptr_t)*v;
	if (p->next)
		*v = (uint64_t)(uintptr_t)p->next;
	else
		map_del(&tr.recvs, req_key(r), NULL);
	return p;
}

/* Nonblocking collectives: the call is a region and sends its
 * dependencies at once (it has entered the collective); the receives are
 * recorded when MPI_Wait or MPI_Test (any form) completes the request (no rank can
 * complete before the ranks it depends on entered). The pending request
 * (struct preq) keeps its struct coll; the call's region holds the
 * request's start instant (before its leave), the completing call's
 * region its completion instant. */
static void icoll_started(struct coll *k, int rc, MPI_Request *req)
{
	if (!k->c)
		return;
	pthread_mutex_lock(&tr.mu);
	if (rc == MPI_SUCCESS && tr.w) {
		struct coll *p = malloc(sizeof *p);
		if (!p)
			tr.reqs_dropped++;
		else if (*p = *k, !req_add_locked(*req, PREQ_COLL, k->c, p, 1))
			free(p);
	}
	if (tr.w)
		gct_leave_data(tr.w, 0, (uint64_t)k->region, k->recvd, k->c->key);
	pthread_mutex_unlock(&tr.mu);
}

static void sync_due(MPI_Comm comm);

/* COLLECTIVE defines the wrappers of a collective B and its nonblocking
 * form NB from their parameters (PARAMS, named as below: comm, root, sbuf,
 * ...), the arguments passed on (ARGS), the root and the bytes of its send
 * and receive buffers at this rank (SENT, RECVD: expressions of the
 * parameters, me and np, this rank and the communicator's size). */
#define WITH_REQ(...) (__VA_ARGS__, MPI_Request *req)
#define WITH_REQ_ARG(...) (__VA_ARGS__, req)
#define COLL_ENTER(R, ROOT, SENT, RECVD)                                                                               \
	struct coll k;                                                                                                 \
	if (coll_begin(&k, comm, R)) {                                                                                 \
		int me = k.c->rank, np = k.c->size;                                                                    \
		(void)me;                                                                                              \
		(void)np;                                                                                              \
		coll_enter(&k, ROOT, SENT, RECVD);                                                                     \
	}
#define COLLECTIVE(B, NB, ROOT, SENT, RECVD, PARAMS, ARGS)                                                             \
	int MPI_##B PARAMS                                                                                             \
	{                                                                                                              \
		COLL_ENTER(R_##B, ROOT, SENT, RECVD)                                                                   \
		int rc = PMPI_##B ARGS;                                                                                \
		coll_leave(&k, rc);                                                                                    \
		if (R_##B == R_Barrier && rc == MPI_SUCCESS)                                                           \
			sync_due(comm);                                                                                \
		return rc;                                                                                             \
	}                                                                                                              \
	int MPI_##NB WITH_REQ PARAMS                                                                                   \
	{                                                                                                              \
		COLL_ENTER(R_##NB, ROOT, SENT, RECVD)                                                                  \
		int rc = PMPI_##NB WITH_REQ_ARG ARGS;                                                                  \
		icoll_started(&k, rc, req);                                                                            \
		return rc;                                                                                             \
	}

/* ------------------------------------------------------------ clock, sync */

/* The tracer's clock is CLOCK_MONOTONIC_RAW (gct_now). A test build
 * (-DGCLOCK_MPI_TESTING, mpi/Makefile's libgclockmpi-test.so, never the
 * installed library) reads GCLOCK_MPI_TEST_CLOCK="off:ppb,off:ppb,..." and
 * gives world rank i the emulated clock raw + off_i + raw*ppb_i/1e9, so that
 * the ranks of one machine disagree as the hosts of a cluster do and the
 * tests can check the correction against the raw clock (the truth). Its
 * daemon mappings, which map the raw clock, are then not recorded. */
static int64_t test_off, test_ppb;
static int test_clock;
/* GCLOCK_MPI_TEST_SLOW_SESSION="k:us" (test build): in its k-th sync
 * session (1: the one in MPI_Init) a rank other than 0 holds each reply us
 * microseconds after stamping it, as a rank descheduled on a busy machine
 * does: the session's exchanges are all slow one way. */
static int test_slow_session;
static long test_slow_us;

static int64_t trace_now(void)
{
	int64_t r = gct_now();
	if (test_clock)
		return r + test_off + (int64_t)(((__int128)r * test_ppb) / 1000000000);
	return r;
}

static int64_t trace_now_cb(void *arg)
{
	(void)arg;
	return trace_now();
}

static void test_clock_setup(int rank)
{
#ifdef GCLOCK_MPI_TESTING
	const char *v = getenv("GCLOCK_MPI_TEST_CLOCK");
	if (!v || !*v)
		return;
	for (int i = 0; i < rank && v; i++) {
		v = strchr(v, ',');
		if (v)
			v++;
	}
	long long off, ppb;
	if (!v || sscanf(v, "%lld:%lld", &off, &ppb) != 2) {
		fprintf(stderr, "libgclockmpi: GCLOCK_MPI_TEST_CLOCK=%s: no \"off:ppb\" for rank %d\n",
			getenv("GCLOCK_MPI_TEST_CLOCK"), rank);
		exit(1);
	}
	test_off = off;
	test_ppb = ppb;
	test_clock = 1;
	const char *slow = getenv("GCLOCK_MPI_TEST_SLOW_SESSION");
	if (slow && *slow && (sscanf(slow, "%d:%ld", &test_slow_session, &test_slow_us) != 2 || test_slow_session < 1 ||
			      test_slow_us < 0 || test_slow_us > 1000000)) {
		fprintf(stderr, "libgclockmpi: GCLOCK_MPI_TEST_SLOW_SESSION=%s: want k:us (k >= 1, us in [0, 1000000])\n", slow);
		exit(1);
	}
#else
	(void)rank;
#endif
}

/* Sync sessions. Without a daemon, `gclock merge -method linear|spline`
 * corrects a rank's stamps from exchanges with rank 0 recorded in its trace
 * (format.Session, as the Go recorder's Prober sessions; seed 001, ITAC's
 * and Score-P's sync at MPI_Init and MPI_Finalize). Rank 0 serves every other
 * rank in turn on a duplicate of MPI_COMM_WORLD (the program's messages are
 * never mixed with them): sync_rounds ping-pongs of empty messages, rank 0
 * stamping its send and its receive, the rank its receive and its send on
 * its own clock; rank 0 then sends its stamps and the rank keeps the
 * sync_keep exchanges with the shortest round trip (the most symmetric
 * delays) as one session with reference 0. Every rank takes part whenever
 * any rank traces (agreed in MPI_Init), so no rank waits forever. */
static MPI_Comm sync_comm = MPI_COMM_NULL;
static int sync_on, sync_rounds = 200, sync_keep = 2;
static int sync_trace; /* some rank traces: sessions at MPI_Finalize too */
static int self_on;    /* MPI_Wtime from the sessions (no page on any rank): every session refits */
static int64_t sync_period, sync_last; /* ns on rank 0's clock; 0: no period */
static uint64_t sync_sessions;
static int sync_done; /* rank 0: sessions run so far (sync_due shortens the first periods) */

static long env_long(const char *name, long def, long lo, long hi)
{
	const char *v = getenv(name);
	if (!v || !*v)
		return def;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (errno != 0 || *end != 0 || x < lo || x > hi) {
		fprintf(stderr, "libgclockmpi: %s=%s: want an integer in [%ld, %ld]\n", name, v, lo, hi);
		exit(1);
	}
	return x;
}

static int cmp_rtt(const void *a, const void *b)
{
	const gct_sample *x = a, *y = b;
	int64_t rx = (x->src_recv - x->src_send) - (x->loc_send - x->loc_recv);
	int64_t ry = (y->src_recv - y->src_send) - (y->loc_send - y->loc_recv);
	return rx < ry ? -1 : rx > ry;
}

static int sync_session(uint8_t kind)
{
	if (!sync_on)
		return 0;
	int n = sync_rounds, rank = tr.world_rank, size = tr.world_size;
	int64_t *t = calloc((size_t)(2 * n), sizeof *t);
	gct_sample *s = calloc((size_t)n, sizeof *s);
	int rc = MPI_SUCCESS;
	char b = 0;
	if (!t || !s) {
		/* Every rank must still take part: fail the job loudly instead. */
		fprintf(stderr, "libgclockmpi: rank %d: out of memory for a sync session\n", rank);
		PMPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0) {
		for (int p = 1; p < size && rc == MPI_SUCCESS; p++) {
			for (int k = 0; k < n && rc == MPI_SUCCESS; k++) {
				t[2 * k] = trace_now();
				rc = PMPI_Send(&b, 0, MPI_BYTE, p, k, sync_comm);
				if (rc == MPI_SUCCESS)
					rc = PMPI_Recv(&b, 0, MPI_BYTE, p, k, sync_comm, MPI_STATUS_IGNORE);
				t[2 * k + 1] = trace_now();
			}
			if (rc == MPI_SUCCESS)
				rc = PMPI_Send(t, 2 * n, MPI_INT64_T, p, n, sync_comm);
		}
		sync_last = trace_now();
		if (rc == MPI_SUCCESS)
			sync_done++;
	} else {
		static int sessions_here;
		long hold = ++sessions_here == test_slow_session ? test_slow_us : 0;
		for (int k = 0; k < n && rc == MPI_SUCCESS; k++) {
			rc = PMPI_Recv(&b, 0, MPI_BYTE, 0, k, sync_comm, MPI_STATUS_IGNORE);
			s[k].loc_recv = trace_now();
			s[k].loc_send = trace_now();
			if (hold > 0)
				usleep((useconds_t)hold);
			if (rc == MPI_SUCCESS)
				rc = PMPI_Send(&b, 0, MPI_BYTE, 0, k, sync_comm);
		}
		if (rc == MPI_SUCCESS)
			rc = PMPI_Recv(t, 2 * n, MPI_INT64_T, 0, n, sync_comm, MPI_STATUS_IGNORE);
		if (rc == MPI_SUCCESS) {
			for (int k = 0; k < n; k++) {
				s[k].src_send = t[2 * k];
				s[k].src_recv = t[2 * k + 1];
			}
			qsort(s, (size_t)n, sizeof *s, cmp_rtt);
			if (self_on) {
				/* The best exchange: its midpoint, offset and half round trip. */
				const gct_sample *x = &s[0];
				int64_t tm = x->loc_recv + (x->loc_send - x->loc_recv) / 2;
				int64_t off = ((x->loc_recv - x->src_send) + (x->loc_send - x->src_recv)) / 2;
				int64_t h = ((x->src_recv - x->src_send) - (x->loc_send - x->loc_recv) + 1) / 2;
				self_point(tm, off, h);
			}
			pthread_mutex_lock(&tr.mu);
			if (tr.w && gct_session(tr.w, 0, kind, s, (uint32_t)sync_keep) == 0)
				sync_sessions++;
			pthread_mutex_unlock(&tr.mu);
		}
	}
	if (rc != MPI_SUCCESS)
		say("rank %d: a sync session failed (MPI error %d): not recorded", rank, rc);
	free(t);
	free(s);
	return rc == MPI_SUCCESS ? 0 : -1;
}

/* sync_init agrees on syncing (any rank tracing, or no rank with a page
 * for MPI_Wtime) and runs the start session; with no page on any rank,
 * MPI_Wtime then serves rank 0's clock through the sessions' fit (synced
 * mode) if every rank got one. */
static void sync_init(void)
{
	const char *dir = getenv("GCLOCK_MPI_TRACE");
	int on = env_long("GCLOCK_MPI_SYNC", 1, 0, 1) != 0;
	int want[2] = {dir && *dir && on, job_global == 0 && on}, any[2] = {0, 0};
	PMPI_Allreduce(want, any, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (!any[0] && !any[1])
		return;
	sync_trace = any[0];
	/* Rank 0's rounds and period for all: the ping-pongs and the periodic
	 * broadcasts must match on every rank even if their environments differ. */
	int64_t agreed[2] = {env_long("GCLOCK_MPI_SYNC_ROUNDS", 200, 1, 100000),
			     (int64_t)env_long("GCLOCK_MPI_SYNC_PERIOD", 0, 0, 1000000) * 1000000000LL};
	PMPI_Bcast(agreed, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
	sync_rounds = (int)agreed[0];
	sync_period = agreed[1];
	sync_keep = (int)env_long("GCLOCK_MPI_SYNC_KEEP", sync_rounds < 2 ? sync_rounds : 2, 1, 100000);
	if (sync_keep > sync_rounds)
		sync_keep = sync_rounds;
	if (PMPI_Comm_dup(MPI_COMM_WORLD, &sync_comm) != MPI_SUCCESS)
		return;
	sync_on = 1;
	self_on = any[1];
	if (self_on && tr.world_rank == 0)
		self_point(trace_now(), 0, 0); /* the reference: global time is its clock */
	int ok = sync_session(GCT_SESSION_START) == 0, all = 0;
	if (!self_on)
		return;
	PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (!all) {
		self_on = 0;
		snprintf(why, sizeof why, "local time: no gclock page on any rank, and a sync session with rank 0 failed");
		return;
	}
	snprintf(why, sizeof why,
		 "rank 0's clock through this rank's own sync sessions with it (no gclock page on any rank; "
		 "%d ping-pongs at MPI_Init%s)",
		 sync_rounds, sync_period > 0 ? " and every GCLOCK_MPI_SYNC_PERIOD at a world barrier" : "");
	__atomic_store_n(&mode, GCLOCK_MPI_SYNCED, __ATOMIC_RELEASE);
}

static void sync_fini(void)
{
	if (!sync_on)
		return;
	if (sync_trace)
		sync_session(GCT_SESSION_END);
	self_on = 0; /* MPI_Wtime keeps the last fit */
	sync_on = 0;
	PMPI_Comm_free(&sync_comm);
}

/* gclock_timesync: see gclock_mpi.h. */
int gclock_timesync(void)
{
	if (!sync_on)
		return 0;
	pthread_mutex_lock(&tr.mu);
	if (tr.w)
		gct_enter(tr.w, 0, R_SYNC);
	pthread_mutex_unlock(&tr.mu);
	int r = sync_session(GCT_SESSION_DEMAND);
	pthread_mutex_lock(&tr.mu);
	if (tr.w)
		gct_leave(tr.w, 0, R_SYNC);
	pthread_mutex_unlock(&tr.mu);
	return r == 0 ? 1 : -1;
}

/* sync_due runs after every MPI_Barrier on MPI_COMM_WORLD when
 * GCLOCK_MPI_SYNC_PERIOD is set: rank 0 says whether a period has passed
 * since the last session (one broadcast), and if so all run one. The
 * first two periods are a quarter and a half of it: until a second session
 * the drift is not known (MPI_Wtime in synced mode drifts at the clocks'
 * rate difference, 60 us a second at 60 ppm), and from a quarter period
 * apart it is known to a few ppm; so the error before the drift is fitted
 * shrinks from a period's worth of drift to a quarter's, and a busy
 * machine that delays the barrier stretches it less. */
static void sync_due(MPI_Comm comm)
{
	if (!sync_on || sync_period <= 0 || comm != MPI_COMM_WORLD)
		return;
	int64_t period = sync_period;
	if (sync_done == 1)
		period = sync_period / 4;
	else if (sync_done == 2)
		period = sync_period / 2;
	int due = tr.world_rank == 0 && trace_now() - sync_last >= period;
	if (PMPI_Bcast(&due, 1, MPI_INT, 0, sync_comm) == MPI_SUCCESS && due)
		gclock_timesync();
}

static void trace_open(void)
{
	const char *dir = getenv("GCLOCK_MPI_TRACE");
	if (!dir || !*dir)
		return;
	PMPI_Comm_rank(MPI_COMM_WORLD, &tr.world_rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &tr.world_size);
	mkdir(dir, 0777); /* several ranks race: EEXIST is fine, fopen says the rest */
	char path[4096], host[256] = "", name[320];
	snprintf(path, sizeof path, "%s/rank-%05d.gct", dir, tr.world_rank);
	gethostname(host, sizeof host - 1);
	snprintf(name, sizeof name, "rank %d on %s", tr.world_rank, host);
	tr.w = gct_open(path, (uint32_t)tr.world_rank, fnv32(host, strlen(host), 2166136261u), name, GCT_FLAG_SYNCED_HOST);
	if (!tr.w) {
		fprintf(stderr, "libgclockmpi: GCLOCK_MPI_TRACE: cannot create %s: %s (rank %d not traced)\n", path,
			strerror(errno), tr.world_rank);
		return;
	}
	for (int i = 1; i < R_NAMES; i++)
		gct_name(tr.w, (uint64_t)i, regions[i].name);
	for (int i = REQ_START; i <= REQ_CANCEL; i++)
		gct_name(tr.w, REQ_NAME | (uint64_t)i, req_names[i]);
	gct_name(tr.w, HOST_NAME, host);
	pthread_once(&mode_once, choose_mode);
	{
		/* The realtime date: CLOCK_REALTIME read between two trace clock readings. */
		struct timespec rt;
		int64_t l0 = trace_now();
		clock_gettime(CLOCK_REALTIME, &rt);
		int64_t l1 = trace_now();
		snprintf(name, sizeof name, "realtime %lld at local %lld", (long long)rt.tv_sec * 1000000000LL + rt.tv_nsec,
			 (long long)(l0 + (l1 - l0) / 2));
		gct_name(tr.w, REALTIME_NAME, name);
	}
	if (test_clock) {
		gct_set_clock(tr.w, trace_now_cb, NULL);
		if (verbose())
			say("rank %d: GCLOCK_MPI_TEST_CLOCK (test build): stamps on an emulated clock, off %lld ns, %lld ppb; "
		    "daemon mappings not recorded",
		    tr.world_rank, (long long)test_off, (long long)test_ppb);
		return;
	}
	int err = gclock_open(&tr.page, page_path);
	int r = 0;
	if (err == 0) {
		tr.have_page = 1;
		tr.page_seq = 1; /* odd: never a stable counter, so the first poll reads */
		pthread_mutex_lock(&tr.mu);
		r = poll_locked();
		pthread_mutex_unlock(&tr.mu);
	}
	if (r != 1 && verbose())
		say("rank %d: GCLOCK_MPI_TRACE: no daemon mapping from %s yet (%s); one is recorded as soon as the page "
		    "has one (for -method daemon); the sync sessions with rank 0 serve -method linear and spline",
		    tr.world_rank, page_path, err ? strerror(-err) : r < 0 ? strerror(-r) : "page unsynced");
}

static void trace_close(void)
{
	if (!tr.w)
		return;
	pthread_mutex_lock(&tr.mu);
	poll_locked();
	if (gct_close(tr.w) != 0)
		fprintf(stderr, "libgclockmpi: rank %d: writing the trace failed: %s\n", tr.world_rank, strerror(errno));
	tr.w = NULL;
	if (tr.have_page)
		gclock_close(&tr.page);
	tr.have_page = 0;
	if (tr.mappings == 0 && !test_clock && verbose())
		say("rank %d: GCLOCK_MPI_TRACE: no daemon mapping recorded in the whole run: `gclock merge` corrects "
		    "this trace with its %llu sync sessions (-method auto, linear or spline)",
		    tr.world_rank, (unsigned long long)sync_sessions);
	if (tr.recvs.live > 0 || tr.reqs_dropped > 0)
		say("rank %d: %zu nonblocking requests never completed through MPI_Wait*/MPI_Test*, %llu not followed: not traced",
		    tr.world_rank, tr.recvs.live, (unsigned long long)tr.reqs_dropped);
	pthread_mutex_unlock(&tr.mu);
}

/* ------------------------------------------------------------ wrappers */

/* after_init runs once MPI is initialised, from the C and the Fortran
 * MPI_Init and MPI_Init_thread. */
/* after_init's region r (MPI_Init or MPI_Init_thread) starts when the trace
 * opens, after PMPI_Init returned, not before PMPI_Init: the first sync
 * session runs here, and an event seconds before it (OpenMPI's PMPI_Init
 * takes that long on a loaded node) would have a time extrapolated from
 * the sessions, beyond the error they bound (TestTraceSyncNoDaemon). */
static void after_init(int r)
{
	int rank = 0;
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	test_clock_setup(rank); /* before job_origin: rank 0's origin is on its trace clock */
	job_origin();
	PMPI_Comm_rank(MPI_COMM_WORLD, &tr.world_rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &tr.world_size);
	trace_open();
	region(r, 0);
	sync_init();
	job_notice();
	region(r, 1);
}

int MPI_Init(int *argc, char ***argv)
{
	int rc = PMPI_Init(argc, argv);
	if (rc == MPI_SUCCESS)
		after_init(R_Init);
	return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	int rc = PMPI_Init_thread(argc, argv, required, provided);
	if (rc == MPI_SUCCESS)
		after_init(R_Init_thread);
	return rc;
}

/* MPI_Finalize's region ends when the trace closes, before PMPI_Finalize. */
int MPI_Finalize(void)
{
	region(R_Finalize, 0);
	sync_fini();
	region(R_Finalize, 1);
	trace_close();
	return PMPI_Finalize();
}

/* MPI_Comm_set_name: the name, for the OTF2 communicator definitions. */
int MPI_Comm_set_name(MPI_Comm comm, const char *name)
{
	int rc = PMPI_Comm_set_name(comm, name);
	if (rc == MPI_SUCCESS && tr.w && name) {
		pthread_mutex_lock(&tr.mu);
		struct comm_info *c = comm_locked(comm);
		if (c && tr.w)
			gct_name(tr.w, USER_NAME | c->key, name);
		pthread_mutex_unlock(&tr.mu);
	}
	return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
	MPI_Comm c = *comm;
	int rc = PMPI_Comm_free(comm);
	pthread_mutex_lock(&tr.mu);
	for (size_t i = 0; i < tr.ncomms; i++)
		if (!tr.comms[i]->freed && tr.comms[i]->comm == c)
			tr.comms[i]->freed = 1;
	pthread_mutex_unlock(&tr.mu);
	return rc;
}

/* send_started makes a nonblocking send's request pending. */
static void send_started(int rc, MPI_Request r, int dest, MPI_Comm comm)
{
	if (rc != MPI_SUCCESS || !tr.w || dest == MPI_PROC_NULL || dest < 0)
		return;
	pthread_mutex_lock(&tr.mu);
	struct comm_info *c = comm_locked(comm);
	if (c && dest < c->size && tr.w)
		req_add_locked(r, PREQ_SEND, c, NULL, 1);
	pthread_mutex_unlock(&tr.mu);
}

/* Sends, every mode: a region; the send recorded at the call (before the
 * message can arrive); a nonblocking send's request then started. */
#define SEND_WRAP(NAME, PARAMS, ARGS, STARTED)                                                                         \
	int MPI_##NAME PARAMS                                                                                          \
	{                                                                                                              \
		if (!tr.w)                                                                                             \
			return PMPI_##NAME ARGS;                                                                       \
		region(R_##NAME, 0);                                                                                   \
		trace_send(dest, tag, comm, count, t);                                                                 \
		int rc = PMPI_##NAME ARGS;                                                                             \
		STARTED;                                                                                               \
		region(R_##NAME, 1);                                                                                   \
		return rc;                                                                                             \
	}
#define SEND_PARAMS const void *buf, int count, MPI_Datatype t, int dest, int tag, MPI_Comm comm
#define BLOCKING (void)0
#define NONBLOCKING send_started(rc, *req, dest, comm)
SEND_WRAP(Send, (SEND_PARAMS), (buf, count, t, dest, tag, comm), BLOCKING)
SEND_WRAP(Ssend, (SEND_PARAMS), (buf, count, t, dest, tag, comm), BLOCKING)
SEND_WRAP(Isend, (SEND_PARAMS, MPI_Request *req), (buf, count, t, dest, tag, comm, req), NONBLOCKING)
SEND_WRAP(Bsend, (SEND_PARAMS), (buf, count, t, dest, tag, comm), BLOCKING)
SEND_WRAP(Rsend, (SEND_PARAMS), (buf, count, t, dest, tag, comm), BLOCKING)
SEND_WRAP(Issend, (SEND_PARAMS, MPI_Request *req), (buf, count, t, dest, tag, comm, req), NONBLOCKING)
SEND_WRAP(Ibsend, (SEND_PARAMS, MPI_Request *req), (buf, count, t, dest, tag, comm, req), NONBLOCKING)
SEND_WRAP(Irsend, (SEND_PARAMS, MPI_Request *req), (buf, count, t, dest, tag, comm, req), NONBLOCKING)

int MPI_Recv(void *buf, int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
	if (!tr.w)
		return PMPI_Recv(buf, count, t, source, tag, comm, status);
	MPI_Status local;
	MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
	region(R_Recv, 0);
	int rc = PMPI_Recv(buf, count, t, source, tag, comm, st);
	if (rc == MPI_SUCCESS)
		trace_recv(st, comm);
	region(R_Recv, 1);
	return rc;
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag, void *rbuf, int rcount,
		 MPI_Datatype rtype, int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
	MPI_Status local;
	MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
	region(R_Sendrecv, 0);
	trace_send(dest, stag, comm, scount, stype);
	int rc = PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, st);
	if (rc == MPI_SUCCESS)
		trace_recv(st, comm);
	region(R_Sendrecv, 1);
	return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
	if (!tr.w)
		return PMPI_Irecv(buf, count, t, source, tag, comm, req);
	region(R_Irecv, 0);
	int rc = PMPI_Irecv(buf, count, t, source, tag, comm, req);
	if (rc == MPI_SUCCESS && source != MPI_PROC_NULL) {
		pthread_mutex_lock(&tr.mu);
		struct comm_info *c = comm_locked(comm);
		if (!c)
			tr.reqs_dropped++;
		else if (tr.w)
			req_add_locked(*req, PREQ_RECV, c, NULL, 1);
		pthread_mutex_unlock(&tr.mu);
	}
	region(R_Irecv, 1);
	return rc;
}

/* Persistent requests. MPI_Send_init and MPI_Recv_init (and the other
 * send modes) keep the call's arguments by request; every MPI_Start or
 * MPI_Startall then records a send as MPI_Send does (before the start: the
 * message may arrive before the call returns), or makes the receive
 * pending as MPI_Irecv does, recorded when MPI_Wait* or MPI_Test*
 * completes it (a persistent request keeps its handle across completions).
 * MPI_Request_free forgets it. */
struct persist {
	int send, peer, tag, count;
	MPI_Comm comm;
	MPI_Datatype t;
};

static void persist_add(int rc, MPI_Request *req, int send, int peer, int tag, MPI_Comm comm, int count, MPI_Datatype t)
{
	if (rc != MPI_SUCCESS || !tr.w || peer == MPI_PROC_NULL)
		return;
	struct persist *p = malloc(sizeof *p);
	if (p)
		*p = (struct persist){.send = send, .peer = peer, .tag = tag, .count = count, .comm = comm, .t = t};
	pthread_mutex_lock(&tr.mu);
	if (!p || map_put(&tr.persist, req_key(*req), (uint64_t)(uintptr_t)p) != 0) {
		free(p);
		tr.reqs_dropped++;
	}
	pthread_mutex_unlock(&tr.mu);
}

static struct persist *persist_of(MPI_Request r)
{
	pthread_mutex_lock(&tr.mu);
	uint64_t *v = map_get(&tr.persist, req_key(r));
	struct persist *p = v ? (struct persist *)(uintptr_t)*v : NULL;
	pthread_mutex_unlock(&tr.mu);
	return p;
}

#define PERSIST_WRAP(NAME, SEND)                                                                                       \
	int MPI_##NAME(SEND_PARAMS, MPI_Request *req)                                                                  \
	{                                                                                                              \
		int rc = PMPI_##NAME(buf, count, t, dest, tag, comm, req);                                             \
		persist_add(rc, req, SEND, dest, tag, comm, count, t);                                                 \
		return rc;                                                                                             \
	}
PERSIST_WRAP(Send_init, 1)
PERSIST_WRAP(Ssend_init, 1)
PERSIST_WRAP(Bsend_init, 1)
PERSIST_WRAP(Rsend_init, 1)

int MPI_Recv_init(void *buf, int count, MPI_Datatype t, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
	int rc = PMPI_Recv_init(buf, count, t, source, tag, comm, req);
	persist_add(rc, req, 0, source, tag, comm, count, t);
	return rc;
}

/* starting records the sends of the persistent requests reqs (before the
 * start) or makes their receives pending (after it: recvs). */
static void starting(int n, MPI_Request reqs[], int recvs)
{
	if (!tr.w)
		return;
	for (int i = 0; i < n; i++) {
		struct persist *p = persist_of(reqs[i]);
		if (!p || p->send != !recvs)
			continue;
		if (p->send) {
			trace_send(p->peer, p->tag, p->comm, p->count, p->t);
			continue;
		}
		pthread_mutex_lock(&tr.mu);
		struct comm_info *c = comm_locked(p->comm);
		if (!c)
			tr.reqs_dropped++;
		else if (tr.w)
			req_add_locked(reqs[i], PREQ_RECV, c, NULL, 0);
		pthread_mutex_unlock(&tr.mu);
	}
}

int MPI_Start(MPI_Request *req)
{
	region(R_Start, 0);
	starting(1, req, 0);
	int rc = PMPI_Start(req);
	if (rc == MPI_SUCCESS)
		starting(1, req, 1);
	region(R_Start, 1);
	return rc;
}

int MPI_Startall(int n, MPI_Request reqs[])
{
	region(R_Startall, 0);
	starting(n, reqs, 0);
	int rc = PMPI_Startall(n, reqs);
	if (rc == MPI_SUCCESS)
		starting(n, reqs, 1);
	region(R_Startall, 1);
	return rc;
}

int MPI_Request_free(MPI_Request *req)
{
	if (tr.w && *req != MPI_REQUEST_NULL) {
		uint64_t p;
		pthread_mutex_lock(&tr.mu);
		if (map_del(&tr.persist, req_key(*req), &p))
			free((void *)(uintptr_t)p);
		struct preq *q = req_take_locked(*req); /* an active request freed: never completed here */
		if (q) {
			free(q->k);
			free(q);
		}
		pthread_mutex_unlock(&tr.mu);
	}
	return PMPI_Request_free(req);
}

/* One-sided communication. Every call is a region: its enter event carries
 * the target's world rank (peer; NO_PEER for calls on the whole window) and
 * the bytes the origin sends (value: MPI_Put, MPI_Accumulate; the window's
 * size for MPI_Win_create and MPI_Win_allocate; the lock type for
 * MPI_Win_lock, 1 exclusive, 2 shared), its leave event the window's key
 * (peer) and the bytes the origin receives (value: MPI_Get). No
 * dependencies: MPI does not promise that a fence or a lock waits for
 * another rank. */
static struct win_info *win_locked(MPI_Win win)
{
	for (size_t i = 0; i < tr.nwins; i++)
		if (!tr.wins[i]->freed && tr.wins[i]->win == win)
			return tr.wins[i];
	return NULL;
}

/* win_add_locked records a window just created on c. */
static struct win_info *win_add_locked(MPI_Win win, struct comm_info *c)
{
	struct win_info **n = realloc(tr.wins, sizeof *n * (tr.nwins + 1));
	struct win_info *p = malloc(sizeof *p);
	if (n)
		tr.wins = n;
	if (!n || !p) {
		free(p);
		return NULL;
	}
	uint32_t seq = c->win_seq++;
	*p = (struct win_info){.win = win, .c = c, .key = fnv32(&seq, sizeof seq, c->key) | 2};
	tr.wins[tr.nwins++] = p;
	char b[96];
	snprintf(b, sizeof b, "MPI window %08x on communicator %08x", (unsigned)p->key, (unsigned)c->key);
	gct_name(tr.w, WIN_NAME | p->key, b);
	return p;
}

struct rma {
	struct win_info *w;
	int region;
	int64_t recvd;
};

static void rma_enter_locked(struct rma *r, struct comm_info *c, int target, int64_t value)
{
	poll_locked();
	gct_enter_data(tr.w, 0, (uint64_t)r->region, value,
		       c && target >= 0 && target < c->size ? (uint32_t)world_of(c, target) : NO_PEER);
}

/* rma_begin records the enter of a call on the window win; 0 when it is
 * not traced. */
static int rma_begin(struct rma *r, MPI_Win win, int region, int target, int64_t sent, int64_t recvd)
{
	r->w = NULL;
	r->region = region;
	r->recvd = recvd;
	if (!tr.w)
		return 0;
	pthread_mutex_lock(&tr.mu);
	r->w = win_locked(win);
	if (r->w && tr.w)
		rma_enter_locked(r, r->w->c, target, sent);
	pthread_mutex_unlock(&tr.mu);
	return r->w != NULL;
}

static void rma_end(struct rma *r)
{
	if (!r->w)
		return;
	pthread_mutex_lock(&tr.mu);
	if (tr.w)
		gct_leave_data(tr.w, 0, (uint64_t)r->region, r->recvd, r->w->key);
	pthread_mutex_unlock(&tr.mu);
}

/* RMA defines the wrapper of a one-sided call on the window win. */
#define RMA(NAME, TARGET, SENT, RECVD, PARAMS, ARGS)                                                                   \
	int MPI_##NAME PARAMS                                                                                          \
	{                                                                                                              \
		struct rma r;                                                                                          \
		if (tr.w)                                                                                              \
			rma_begin(&r, win, R_##NAME, TARGET, SENT, RECVD);                                             \
		else                                                                                                   \
			r.w = NULL;                                                                                    \
		int rc = PMPI_##NAME ARGS;                                                                             \
		rma_end(&r);                                                                                           \
		return rc;                                                                                             \
	}
#define ORIGIN const void *obuf, int ocount, MPI_Datatype otype
#define TARGET_ARGS int target, MPI_Aint tdisp, int tcount, MPI_Datatype ttype
RMA(Put, target, type_bytes(ocount, otype), 0, (ORIGIN, TARGET_ARGS, MPI_Win win),
    (obuf, ocount, otype, target, tdisp, tcount, ttype, win))
RMA(Get, target, 0, type_bytes(ocount, otype), (void *obuf, int ocount, MPI_Datatype otype, TARGET_ARGS, MPI_Win win),
    (obuf, ocount, otype, target, tdisp, tcount, ttype, win))
RMA(Accumulate, target, type_bytes(ocount, otype), 0, (ORIGIN, TARGET_ARGS, MPI_Op op, MPI_Win win),
    (obuf, ocount, otype, target, tdisp, tcount, ttype, op, win))
RMA(Win_fence, -1, 0, 0, (int assert, MPI_Win win), (assert, win))
RMA(Win_lock, target, lock_type == MPI_LOCK_EXCLUSIVE ? 1 : 2, 0, (int lock_type, int target, int assert, MPI_Win win),
    (lock_type, target, assert, win))
RMA(Win_unlock, target, 0, 0, (int target, MPI_Win win), (target, win))
RMA(Win_lock_all, -1, 0, 0, (int assert, MPI_Win win), (assert, win))
RMA(Win_unlock_all, -1, 0, 0, (MPI_Win win), (win))

/* win_created records MPI_Win_create's or MPI_Win_allocate's region around
 * PMPI's call (made by the caller between the halves). */
static struct comm_info *win_create_begin(int region, MPI_Comm comm, MPI_Aint size)
{
	if (!tr.w)
		return NULL;
	pthread_mutex_lock(&tr.mu);
	struct comm_info *c = comm_locked(comm);
	if (c && tr.w) {
		struct rma r = {.region = region};
		rma_enter_locked(&r, NULL, -1, (int64_t)size);
	}
	pthread_mutex_unlock(&tr.mu);
	return c;
}

static void win_create_end(int region, struct comm_info *c, int rc, MPI_Win win)
{
	if (!c)
		return;
	pthread_mutex_lock(&tr.mu);
	if (tr.w) {
		struct win_info *w = rc == MPI_SUCCESS ? win_add_locked(win, c) : NULL;
		gct_leave_data(tr.w, 0, (uint64_t)region, 0, w ? w->key : NO_PEER);
	}
	pthread_mutex_unlock(&tr.mu);
}

int MPI_Win_create(void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win)
{
	struct comm_info *c = win_create_begin(R_Win_create, comm, size);
	int rc = PMPI_Win_create(base, size, disp_unit, info, comm, win);
	win_create_end(R_Win_create, c, rc, *win);
	return rc;
}

int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win)
{
	struct comm_info *c = win_create_begin(R_Win_allocate, comm, size);
	int rc = PMPI_Win_allocate(size, disp_unit, info, comm, baseptr, win);
	win_create_end(R_Win_allocate, c, rc, *win);
	return rc;
}

int MPI_Win_free(MPI_Win *win)
{
	struct rma r;
	r.w = NULL;
	if (tr.w)
		rma_begin(&r, *win, R_Win_free, -1, 0, 0);
	int rc = PMPI_Win_free(win);
	rma_end(&r);
	if (r.w && rc == MPI_SUCCESS) {
		pthread_mutex_lock(&tr.mu);
		r.w->freed = 1;
		pthread_mutex_unlock(&tr.mu);
	}
	return rc;
}

/* completed records the completion of a pending request with status st:
 * its completion instant (or cancellation), and a receive's message or a
 * nonblocking collective's dependencies. */
static void completed(MPI_Request was, const MPI_Status *st)
{
	pthread_mutex_lock(&tr.mu);
	struct preq *p = req_take_locked(was);
	if (p) {
		int cancelled = 0;
		if (p->kind != PREQ_COLL)
			PMPI_Test_cancelled(st, &cancelled);
		if (tr.w && cancelled) {
			req_event_locked(REQ_CANCEL, p->num);
		} else if (tr.w && p->kind == PREQ_COLL) {
			req_event_locked(REQ_DONE, p->num);
			coll_deps_in_locked(p->k);
		} else if (tr.w && p->kind == PREQ_SEND) {
			req_event_locked(REQ_DONE, p->num);
		} else if (tr.w && st->MPI_SOURCE != MPI_PROC_NULL && st->MPI_SOURCE >= 0 && st->MPI_SOURCE < p->c->size) {
			req_event_locked(REQ_DONE, p->num); /* just before its receive */
			trace_recv_locked(st, p->c);
		}
		free(p->k);
		free(p);
	}
	pthread_mutex_unlock(&tr.mu);
}

/* tested records an unsuccessful test of the pending request was. */
static void tested(MPI_Request was)
{
	pthread_mutex_lock(&tr.mu);
	uint64_t *v = map_get(&tr.recvs, req_key(was));
	if (v)
		req_event_locked(REQ_TEST, ((struct preq *)(uintptr_t)*v)->num);
	pthread_mutex_unlock(&tr.mu);
}

/* tracking says whether a receive request is pending (a racy read under
 * MPI_THREAD_MULTIPLE is harmless: requests are added by the thread that
 * later completes them, or the completion is seen on the next call). */
static int tracking(void) { return __atomic_load_n(&tr.recvs.live, __ATOMIC_RELAXED) > 0; }

static int traced_Wait(MPI_Request *req, MPI_Status *status)
{
	if (!tracking())
		return PMPI_Wait(req, status);
	MPI_Request was = *req;
	MPI_Status local;
	MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
	int rc = PMPI_Wait(req, st);
	if (rc == MPI_SUCCESS)
		completed(was, st);
	return rc;
}

static int traced_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
	if (!tracking())
		return PMPI_Test(req, flag, status);
	MPI_Request was = *req;
	MPI_Status local;
	MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
	int rc = PMPI_Test(req, flag, st);
	if (rc == MPI_SUCCESS && *flag)
		completed(was, st);
	else if (rc == MPI_SUCCESS)
		tested(was);
	return rc;
}

/* many wraps the completion calls on arrays: it copies the requests, gives
 * the call a status array if it had none, and records what completed. */
static int many(int n, MPI_Request *reqs, MPI_Status *statuses, MPI_Request **was, MPI_Status **st)
{
	*was = malloc(sizeof **was * (size_t)(n > 0 ? n : 1));
	*st = statuses;
	if (!*was)
		return -1;
	memcpy(*was, reqs, sizeof **was * (size_t)n);
	if (statuses == MPI_STATUSES_IGNORE) {
		*st = malloc(sizeof **st * (size_t)(n > 0 ? n : 1));
		if (!*st) {
			free(*was);
			return -1;
		}
	}
	return 0;
}

static void many_done(MPI_Status *statuses, MPI_Request *was, MPI_Status *st)
{
	free(was);
	if (st != statuses)
		free(st);
}

static int traced_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
	MPI_Request *was;
	MPI_Status *st;
	if (!tracking() || many(n, reqs, statuses, &was, &st) != 0)
		return PMPI_Waitall(n, reqs, statuses);
	int rc = PMPI_Waitall(n, reqs, st);
	if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)
		for (int i = 0; i < n; i++)
			if (rc == MPI_SUCCESS || st[i].MPI_ERROR == MPI_SUCCESS)
				completed(was[i], &st[i]);
	many_done(statuses, was, st);
	return rc;
}

static int traced_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
	MPI_Request *was;
	MPI_Status *st;
	if (!tracking() || many(n, reqs, statuses, &was, &st) != 0)
		return PMPI_Testall(n, reqs, flag, statuses);
	int rc = PMPI_Testall(n, reqs, flag, st);
	if (rc == MPI_SUCCESS) {
		for (int i = 0; i < n; i++) {
			if (*flag)
				completed(was[i], &st[i]);
			else
				tested(was[i]);
		}
	}
	many_done(statuses, was, st);
	return rc;
}

static int traced_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
	MPI_Request *was;
	MPI_Status *st;
	if (!tracking() || many(n, reqs, MPI_STATUSES_IGNORE, &was, &st) != 0)
		return PMPI_Waitany(n, reqs, index, status);
	MPI_Status *one = status == MPI_STATUS_IGNORE ? &st[0] : status;
	int rc = PMPI_Waitany(n, reqs, index, one);
	if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED)
		completed(was[*index], one);
	many_done(MPI_STATUSES_IGNORE, was, st);
	return rc;
}

/* completed_some records the requests a Waitsome/Testsome completed (their
 * indices), skipping those whose status says they failed. */
static void completed_some(int rc, int outcount, const int indices[], MPI_Request *was, MPI_Status *st)
{
	if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || outcount == MPI_UNDEFINED)
		return;
	for (int i = 0; i < outcount; i++)
		if (rc == MPI_SUCCESS || st[i].MPI_ERROR == MPI_SUCCESS)
			completed(was[indices[i]], &st[i]);
}

static int traced_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
	MPI_Request *was;
	MPI_Status *st;
	if (!tracking() || many(n, reqs, statuses, &was, &st) != 0)
		return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
	int rc = PMPI_Waitsome(n, reqs, outcount, indices, st);
	completed_some(rc, *outcount, indices, was, st);
	many_done(statuses, was, st);
	return rc;
}

static int traced_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
	MPI_Request *was;
	MPI_Status *st;
	if (!tracking() || many(n, reqs, MPI_STATUSES_IGNORE, &was, &st) != 0)
		return PMPI_Testany(n, reqs, index, flag, status);
	MPI_Status *one = status == MPI_STATUS_IGNORE ? &st[0] : status;
	int rc = PMPI_Testany(n, reqs, index, flag, one);
	if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED)
		completed(was[*index], one);
	else if (rc == MPI_SUCCESS && !*flag)
		for (int i = 0; i < n; i++)
			tested(was[i]);
	many_done(MPI_STATUSES_IGNORE, was, st);
	return rc;
}

static int traced_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
	MPI_Request *was;
	MPI_Status *st;
	if (!tracking() || many(n, reqs, statuses, &was, &st) != 0)
		return PMPI_Testsome(n, reqs, outcount, indices, statuses);
	int rc = PMPI_Testsome(n, reqs, outcount, indices, st);
	completed_some(rc, *outcount, indices, was, st);
	if (rc == MPI_SUCCESS && *outcount == 0)
		for (int i = 0; i < n; i++)
			tested(was[i]);
	many_done(statuses, was, st);
	return rc;
}

/* The completion calls' regions, around their traced forms above. */
#define COMPLETION(NAME, PARAMS, ARGS)                                                                                 \
	int MPI_##NAME PARAMS                                                                                          \
	{                                                                                                              \
		if (!tr.w)                                                                                             \
			return traced_##NAME ARGS;                                                                     \
		region(R_##NAME, 0);                                                                                   \
		int rc = traced_##NAME ARGS;                                                                           \
		region(R_##NAME, 1);                                                                                   \
		return rc;                                                                                             \
	}
COMPLETION(Wait, (MPI_Request * req, MPI_Status *status), (req, status))
COMPLETION(Test, (MPI_Request * req, int *flag, MPI_Status *status), (req, flag, status))
COMPLETION(Waitall, (int n, MPI_Request reqs[], MPI_Status statuses[]), (n, reqs, statuses))
COMPLETION(Testall, (int n, MPI_Request reqs[], int *flag, MPI_Status statuses[]), (n, reqs, flag, statuses))
COMPLETION(Waitany, (int n, MPI_Request reqs[], int *index, MPI_Status *status), (n, reqs, index, status))
COMPLETION(Testany, (int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status),
	   (n, reqs, index, flag, status))
COMPLETION(Waitsome, (int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]),
	   (n, reqs, outcount, indices, statuses))
COMPLETION(Testsome, (int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]),
	   (n, reqs, outcount, indices, statuses))

/* The collectives (COLLECTIVE above): one line each, both forms. */
#define S_ARGS const void *sbuf, int scount, MPI_Datatype stype
#define R_ARGS void *rbuf, int rcount, MPI_Datatype rtype
#define RED_ARGS const void *sbuf, void *rbuf, int count, MPI_Datatype t, MPI_Op op
COLLECTIVE(Barrier, Ibarrier, -1, 0, 0, (MPI_Comm comm), (comm))
COLLECTIVE(Bcast, Ibcast, root, me == root ? type_bytes(count, t) : 0, me != root ? type_bytes(count, t) : 0,
	   (void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm), (buf, count, t, root, comm))
COLLECTIVE(Reduce, Ireduce, root, IP(sbuf, type_bytes(count, t)), me == root ? type_bytes(count, t) : 0,
	   (RED_ARGS, int root, MPI_Comm comm), (sbuf, rbuf, count, t, op, root, comm))
COLLECTIVE(Allreduce, Iallreduce, -1, IP(sbuf, type_bytes(count, t)), type_bytes(count, t), (RED_ARGS, MPI_Comm comm),
	   (sbuf, rbuf, count, t, op, comm))
COLLECTIVE(Gather, Igather, root, IP(sbuf, type_bytes(scount, stype)), me == root ? np * type_bytes(rcount, rtype) : 0,
	   (S_ARGS, R_ARGS, int root, MPI_Comm comm), (sbuf, scount, stype, rbuf, rcount, rtype, root, comm))
COLLECTIVE(Scatter, Iscatter, root, me == root ? np * type_bytes(scount, stype) : 0, IP(rbuf, type_bytes(rcount, rtype)),
	   (S_ARGS, R_ARGS, int root, MPI_Comm comm), (sbuf, scount, stype, rbuf, rcount, rtype, root, comm))
COLLECTIVE(Allgather, Iallgather, -1, IP(sbuf, type_bytes(scount, stype)), np * type_bytes(rcount, rtype),
	   (S_ARGS, R_ARGS, MPI_Comm comm), (sbuf, scount, stype, rbuf, rcount, rtype, comm))
COLLECTIVE(Alltoall, Ialltoall, -1, IP(sbuf, np * type_bytes(scount, stype)), np * type_bytes(rcount, rtype),
	   (S_ARGS, R_ARGS, MPI_Comm comm), (sbuf, scount, stype, rbuf, rcount, rtype, comm))
COLLECTIVE(Gatherv, Igatherv, root, IP(sbuf, type_bytes(scount, stype)), me == root ? vbytes(rcounts, rtype, np) : 0,
	   (S_ARGS, void *rbuf, const int rcounts[], const int displs[], MPI_Datatype rtype, int root, MPI_Comm comm),
	   (sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm))
COLLECTIVE(Scatterv, Iscatterv, root, me == root ? vbytes(scounts, stype, np) : 0, IP(rbuf, type_bytes(rcount, rtype)),
	   (const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype, R_ARGS, int root, MPI_Comm comm),
	   (sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm))
COLLECTIVE(Allgatherv, Iallgatherv, -1, IP(sbuf, type_bytes(scount, stype)), vbytes(rcounts, rtype, np),
	   (S_ARGS, void *rbuf, const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm),
	   (sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm))
COLLECTIVE(Alltoallv, Ialltoallv, -1, IP(sbuf, vbytes(scounts, stype, np)), vbytes(rcounts, rtype, np),
	   (const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype, void *rbuf, const int rcounts[],
	    const int rdispls[], MPI_Datatype rtype, MPI_Comm comm),
	   (sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm))
COLLECTIVE(Alltoallw, Ialltoallw, -1, IP(sbuf, wbytes(scounts, stypes, np)), wbytes(rcounts, rtypes, np),
	   (const void *sbuf, const int scounts[], const int sdispls[], const MPI_Datatype stypes[], void *rbuf,
	    const int rcounts[], const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm),
	   (sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm))
COLLECTIVE(Reduce_scatter_block, Ireduce_scatter_block, -1, IP(sbuf, np * type_bytes(rcount, t)), type_bytes(rcount, t),
	   (const void *sbuf, void *rbuf, int rcount, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
	   (sbuf, rbuf, rcount, t, op, comm))
COLLECTIVE(Reduce_scatter, Ireduce_scatter, -1, IP(sbuf, vbytes(rcounts, t, np)), type_bytes(rcounts[me], t),
	   (const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype t, MPI_Op op, MPI_Comm comm),
	   (sbuf, rbuf, rcounts, t, op, comm))
COLLECTIVE(Scan, Iscan, -1, IP(sbuf, type_bytes(count, t)), type_bytes(count, t), (RED_ARGS, MPI_Comm comm),
	   (sbuf, rbuf, count, t, op, comm))
COLLECTIVE(Exscan, Iexscan, -1, IP(sbuf, type_bytes(count, t)), me > 0 ? type_bytes(count, t) : 0,
	   (RED_ARGS, MPI_Comm comm), (sbuf, rbuf, count, t, op, comm))

/* ------------------------------------------------------------ Fortran */

/* OpenMPI's Fortran bindings (mpif.h, use mpi, use mpi_f08) compute
 * MPI_WTIME and MPI_WTICK with PMPI_Wtime and PMPI_Wtick, past the C
 * MPI_Wtime above. These definitions take their symbols (every name
 * mangling gfortran and OpenMPI use, preloaded or linked before the MPI
 * libraries), so Fortran programs read the same global time. A Fortran
 * function of no arguments returning DOUBLE PRECISION is called as a C
 * function returning double. */
#define GCLOCK_FORTRAN(name, impl)                                                                                     \
	double name(void);                                                                                             \
	double name(void) { return impl(); }
GCLOCK_FORTRAN(mpi_wtime, MPI_Wtime)
GCLOCK_FORTRAN(mpi_wtime_, MPI_Wtime)
GCLOCK_FORTRAN(mpi_wtime__, MPI_Wtime)
GCLOCK_FORTRAN(MPI_WTIME, MPI_Wtime)
GCLOCK_FORTRAN(MPI_Wtime_f, MPI_Wtime)
GCLOCK_FORTRAN(MPI_Wtime_f08, MPI_Wtime)
GCLOCK_FORTRAN(ompi_wtime_f, MPI_Wtime)
GCLOCK_FORTRAN(mpi_wtick, MPI_Wtick)
GCLOCK_FORTRAN(mpi_wtick_, MPI_Wtick)
GCLOCK_FORTRAN(mpi_wtick__, MPI_Wtick)
GCLOCK_FORTRAN(MPI_WTICK, MPI_Wtick)
GCLOCK_FORTRAN(MPI_Wtick_f, MPI_Wtick)
GCLOCK_FORTRAN(MPI_Wtick_f08, MPI_Wtick)
GCLOCK_FORTRAN(ompi_wtick_f, MPI_Wtick)

/* Fortran calls. OpenMPI's Fortran bindings (mpif.h and `use mpi`: the
 * symbols mpi_send_, mpi_send, mpi_send__ and MPI_SEND for gfortran and the
 * other manglings) convert their handles and call the C PMPI_ functions,
 * past this tracer. The definitions below take those symbols (preloaded or
 * linked before the MPI libraries), convert the handles as the bindings do
 * (MPI_Comm_f2c, ...; Fortran's MPI_IN_PLACE and MPI_BOTTOM, MPI_F_STATUS_IGNORE)
 * and call the C wrappers above, so a Fortran program's MPI_INIT opens the
 * trace and its messages and collectives are recorded as C's are. `use
 * mpi_f08` (other symbols) is not traced. */
typedef MPI_Fint F;
#ifdef MPI_F_STATUS_SIZE
#define F_STATUS_SIZE MPI_F_STATUS_SIZE
#else
#define F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint))) /* OpenMPI: 6 */
#endif

/* Fortran's MPI_IN_PLACE and MPI_BOTTOM are the addresses of common blocks
 * (OpenMPI: mpi_fortran_in_place_, mpi_fortran_bottom_); weak: absent
 * when no Fortran binding is loaded. */
extern int mpi_fortran_in_place_ __attribute__((weak));
extern int mpi_fortran_bottom_ __attribute__((weak));

static void *fbuf(void *b)
{
	if (&mpi_fortran_in_place_ && b == (void *)&mpi_fortran_in_place_)
		return MPI_IN_PLACE;
	if (&mpi_fortran_bottom_ && b == (void *)&mpi_fortran_bottom_)
		return MPI_BOTTOM;
	return b;
}

static void fstatus(const MPI_Status *st, F *f)
{
	if (f != MPI_F_STATUS_IGNORE)
		PMPI_Status_c2f(st, f);
}

#define FT(x) PMPI_Type_f2c(*(x))
#define FC(x) PMPI_Comm_f2c(*(x))
#define FO(x) PMPI_Op_f2c(*(x))
/* FORTRAN defines l_ (gfortran's mangling) and the other names of the
 * Fortran binding, l, l__ and U, as aliases. */
#define FORTRAN(l, U, PARAMS, ...)                                                                                     \
	void l##_ PARAMS;                                                                                              \
	void l##_ PARAMS { __VA_ARGS__ }                                                                               \
	__typeof__(l##_) l __attribute__((alias(#l "_")));                                                             \
	__typeof__(l##_) l##__ __attribute__((alias(#l "_")));                                                         \
	__typeof__(l##_) U __attribute__((alias(#l "_")));

FORTRAN(mpi_init, MPI_INIT, (F * ierr), *ierr = MPI_Init(NULL, NULL);)
FORTRAN(mpi_init_thread, MPI_INIT_THREAD, (F * required, F *provided, F *ierr), int p = 0;
	*ierr = MPI_Init_thread(NULL, NULL, *required, &p); *provided = p;)
FORTRAN(mpi_finalize, MPI_FINALIZE, (F * ierr), *ierr = MPI_Finalize();)

#define F_SEND_PARAMS void *buf, F *count, F *t, F *dest, F *tag, F *comm
#define F_SEND_ARGS fbuf(buf), *count, FT(t), *dest, *tag, FC(comm)
FORTRAN(mpi_send, MPI_SEND, (F_SEND_PARAMS, F *ierr), *ierr = MPI_Send(F_SEND_ARGS);)
FORTRAN(mpi_ssend, MPI_SSEND, (F_SEND_PARAMS, F *ierr), *ierr = MPI_Ssend(F_SEND_ARGS);)
FORTRAN(mpi_isend, MPI_ISEND, (F_SEND_PARAMS, F *req, F *ierr), MPI_Request r;
	if ((*ierr = MPI_Isend(F_SEND_ARGS, &r)) == MPI_SUCCESS) *req = PMPI_Request_c2f(r);)
FORTRAN(mpi_recv, MPI_RECV, (F_SEND_PARAMS, F *status, F *ierr), MPI_Status st;
	if ((*ierr = MPI_Recv(F_SEND_ARGS, &st)) == MPI_SUCCESS) fstatus(&st, status);)
FORTRAN(mpi_irecv, MPI_IRECV, (F_SEND_PARAMS, F *req, F *ierr), MPI_Request r;
	if ((*ierr = MPI_Irecv(F_SEND_ARGS, &r)) == MPI_SUCCESS) *req = PMPI_Request_c2f(r);)
FORTRAN(mpi_sendrecv, MPI_SENDRECV,
	(void *sbuf, F *scount, F *stype, F *dest, F *stag, void *rbuf, F *rcount, F *rtype, F *source, F *rtag,
	 F *comm, F *status, F *ierr),
	MPI_Status st;
	if ((*ierr = MPI_Sendrecv(fbuf(sbuf), *scount, FT(stype), *dest, *stag, fbuf(rbuf), *rcount, FT(rtype), *source,
				  *rtag, FC(comm), &st)) == MPI_SUCCESS) fstatus(&st, status);)
FORTRAN(mpi_wait, MPI_WAIT, (F * req, F *status, F *ierr), MPI_Request r = PMPI_Request_f2c(*req); MPI_Status st;
	if ((*ierr = MPI_Wait(&r, &st)) == MPI_SUCCESS) {
		*req = PMPI_Request_c2f(r);
		fstatus(&st, status);
	})
FORTRAN(mpi_test, MPI_TEST, (F * req, F *flag, F *status, F *ierr), MPI_Request r = PMPI_Request_f2c(*req);
	MPI_Status st; int f = 0; if ((*ierr = MPI_Test(&r, &f, &st)) == MPI_SUCCESS) {
		*flag = f;
		*req = PMPI_Request_c2f(r);
		if (f)
			fstatus(&st, status);
	})
FORTRAN(mpi_waitall, MPI_WAITALL, (F * count, F *reqs, F *statuses, F *ierr), int n = *count;
	MPI_Request *r = malloc(sizeof *r * (size_t)(n > 0 ? n : 1));
	MPI_Status *st = malloc(sizeof *st * (size_t)(n > 0 ? n : 1)); if (!r || !st) {
		free(r);
		free(st);
		*ierr = MPI_ERR_NO_MEM;
		return;
	} for (int i = 0; i < n; i++) r[i] = PMPI_Request_f2c(reqs[i]);
	*ierr = MPI_Waitall(n, r, st); if (*ierr == MPI_SUCCESS || *ierr == MPI_ERR_IN_STATUS) {
		for (int i = 0; i < n; i++) {
			reqs[i] = PMPI_Request_c2f(r[i]);
			if (statuses != MPI_F_STATUSES_IGNORE)
				PMPI_Status_c2f(&st[i], statuses + (size_t)i * F_STATUS_SIZE);
		}
	} free(r);
	free(st);)

FORTRAN(mpi_barrier, MPI_BARRIER, (F * comm, F *ierr), *ierr = MPI_Barrier(FC(comm));)
FORTRAN(mpi_bcast, MPI_BCAST, (void *buf, F *count, F *t, F *root, F *comm, F *ierr),
	*ierr = MPI_Bcast(fbuf(buf), *count, FT(t), *root, FC(comm));)
#define F_RED_PARAMS void *sbuf, void *rbuf, F *count, F *t, F *op
#define F_RED_ARGS fbuf(sbuf), fbuf(rbuf), *count, FT(t), FO(op)
FORTRAN(mpi_reduce, MPI_REDUCE, (F_RED_PARAMS, F *root, F *comm, F *ierr),
	*ierr = MPI_Reduce(F_RED_ARGS, *root, FC(comm));)
FORTRAN(mpi_allreduce, MPI_ALLREDUCE, (F_RED_PARAMS, F *comm, F *ierr), *ierr = MPI_Allreduce(F_RED_ARGS, FC(comm));)
FORTRAN(mpi_scan, MPI_SCAN, (F_RED_PARAMS, F *comm, F *ierr), *ierr = MPI_Scan(F_RED_ARGS, FC(comm));)
FORTRAN(mpi_exscan, MPI_EXSCAN, (F_RED_PARAMS, F *comm, F *ierr), *ierr = MPI_Exscan(F_RED_ARGS, FC(comm));)
#define F_SR_PARAMS void *sbuf, F *scount, F *stype, void *rbuf, F *rcount, F *rtype
#define F_SR_ARGS fbuf(sbuf), *scount, FT(stype), fbuf(rbuf), *rcount, FT(rtype)
FORTRAN(mpi_gather, MPI_GATHER, (F_SR_PARAMS, F *root, F *comm, F *ierr),
	*ierr = MPI_Gather(F_SR_ARGS, *root, FC(comm));)
FORTRAN(mpi_scatter, MPI_SCATTER, (F_SR_PARAMS, F *root, F *comm, F *ierr),
	*ierr = MPI_Scatter(F_SR_ARGS, *root, FC(comm));)
FORTRAN(mpi_allgather, MPI_ALLGATHER, (F_SR_PARAMS, F *comm, F *ierr), *ierr = MPI_Allgather(F_SR_ARGS, FC(comm));)
FORTRAN(mpi_alltoall, MPI_ALLTOALL, (F_SR_PARAMS, F *comm, F *ierr), *ierr = MPI_Alltoall(F_SR_ARGS, FC(comm));)
