/*
 * gclock_trace.h: write gclock's per-process trace format from C (and MPI)
 * programs. The files are read by `gclock trace info` and `gclock merge`
 * exactly like those of the Go package github.com/gclock/gclock/trace.
 *
 * Single header. In exactly one C file:
 *
 *     #define GCLOCK_TRACE_IMPLEMENTATION
 *     #include "gclock_trace.h"
 *
 * Usage:
 *
 *     gct_writer *w = gct_open("rank3.gct", 3, host_id, "rank 3", 0);
 *     gct_name(w, 1, "compute");
 *     gct_enter(w, 0, 1);            // track 0, region 1, stamped now
 *     gct_send(w, 0, 4, msg_id, 64); // to process 4
 *     gct_leave(w, 0, 1);
 *     gct_session(w, GCT_SESSION_START, samples, n); // exchanges you made
 *     gct_poll_page(w, &reader);     // the daemon's mapping, if it changed
 *     gct_close(w);                  // returns 0 or -1 (errno set)
 *
 * Daemon mappings (`gclock merge -method daemon`, the best correction):
 * gct_poll_mapping records a local->global mapping when it is valid and
 * differs from the last one recorded, as the Go recorder's PollMapping.
 * Include gclock.h before this header to get gct_poll_page, which reads the
 * mapping from the daemon's page (gclock_mapping) and polls it; call it
 * whenever convenient (gclock_seq tells cheaply whether the page changed).
 *
 * Timestamps are CLOCK_MONOTONIC_RAW in int64 ns (gct_now). Events are
 * buffered and written as checksummed chunks of GCT_CHUNK_EVENTS; a crash
 * loses at most the unwritten buffer, every written chunk stays readable.
 * A writer's calls are serialised by a mutex: threads may share one.
 *
 * Format (all little endian): "GCLKTRC1", then chunks of a 24-byte header
 * {u32 "CHNK", u8 kind, u8 0, u16 0, u32 length, u32 count, u32 seq,
 * u32 crc32c(header[0:20] + payload)} and the payload. See package
 * github.com/gclock/gclock/trace/format.
 */
#ifndef GCLOCK_TRACE_H
#define GCLOCK_TRACE_H

#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef GCT_CHUNK_EVENTS
#define GCT_CHUNK_EVENTS 4096 /* events per chunk (32 bytes each) */
#endif

/* Event kinds (format.Kind). */
enum { GCT_ENTER = 1, GCT_LEAVE, GCT_INSTANT, GCT_COUNTER, GCT_SEND, GCT_RECV };
/* Meta flags (format.Flag*). */
enum { GCT_FLAG_REFERENCE = 1, GCT_FLAG_SYNCED_HOST = 2 };
/* Session kinds (format.Session*). */
enum { GCT_SESSION_START = 1, GCT_SESSION_END, GCT_SESSION_DEMAND };

/* One sync exchange in the writer's orientation (estimate.Sample):
 * loc_* on this process's clock, src_* on the reference's. */
typedef struct {
    int64_t src_send, loc_recv, loc_send, src_recv;
} gct_sample;

/* A daemon's local->global mapping (format.DaemonMapping): global
 * y0 + (x - x0) + skew*(x - x0) at local x, bound half-width
 * w0 + skew_err*|x - x0| + wander*(x - x0)^2/2, holding from local time
 * `from` on (until the next one's from). */
typedef struct {
    int64_t from, x0, y0;
    double skew;
    int64_t w0;
    double skew_err, wander;
    int valid;
} gct_mapping;

typedef struct gct_writer gct_writer;

/* gct_now returns CLOCK_MONOTONIC_RAW in ns. */
int64_t gct_now(void);
/* gct_set_clock makes the stamped helpers (gct_enter ... gct_recv) read
 * now(arg) instead of gct_now; NULL restores gct_now. Call it before the
 * first event. Tests use it to give processes emulated clocks. */
void gct_set_clock(gct_writer *w, int64_t (*now)(void *arg), void *arg);
/* gct_open creates path and writes the meta chunk; NULL on error (errno). */
gct_writer *gct_open(const char *path, uint32_t proc, uint32_t host, const char *name, uint32_t flags);
/* gct_event appends an event with an explicit local time; times must not
 * decrease. Returns 0, or -1 after a write error. */
int gct_event(gct_writer *w, int64_t t, uint8_t kind, uint64_t id, int64_t value, uint32_t peer, uint16_t track);
/* Stamped helpers. */
int gct_enter(gct_writer *w, uint16_t track, uint64_t region);
int gct_leave(gct_writer *w, uint16_t track, uint64_t region);
int gct_instant(gct_writer *w, uint16_t track, uint64_t id);
int gct_counter(gct_writer *w, uint16_t track, uint64_t id, int64_t value);
int gct_send(gct_writer *w, uint16_t track, uint32_t to, uint64_t msg, int64_t bytes);
int gct_recv(gct_writer *w, uint16_t track, uint32_t from, uint64_t msg, int64_t bytes);
/* gct_enter_data and gct_leave_data are gct_enter and gct_leave with the
 * event's value and peer fields set: free for the recorder's use on
 * regions (the MPI tracer puts a call's bytes, root or target and
 * communicator there: docs/mpi.md). */
int gct_enter_data(gct_writer *w, uint16_t track, uint64_t region, int64_t value, uint32_t peer);
int gct_leave_data(gct_writer *w, uint16_t track, uint64_t region, int64_t value, uint32_t peer);
/* gct_name records the string of a name id (region, instant, counter). */
int gct_name(gct_writer *w, uint64_t id, const char *name);
/* gct_session records a sync session with the reference process ref. */
int gct_session(gct_writer *w, uint32_t ref, uint8_t kind, const gct_sample *s, uint32_t n);
/* gct_mapping_record records one daemon mapping (a mappings chunk; buffered
 * events are written first). Returns 0 or -1. */
int gct_mapping_record(gct_writer *w, const gct_mapping *m);
/* gct_poll_mapping records m if it is valid and differs from the last
 * mapping recorded on w. Returns 1 (recorded), 0 (not), or -1 (error). */
int gct_poll_mapping(gct_writer *w, const gct_mapping *m);
/* gct_flush writes buffered events as a chunk and fflushes. */
int gct_flush(gct_writer *w);
/* gct_close flushes, closes and frees; 0 or -1. */
int gct_close(gct_writer *w);

#ifdef GCLOCK_H
/* gct_poll_page reads the daemon's current mapping from its page and
 * records it if it is valid and new (gct_poll_mapping): the C form of the Go
 * recorder's PollMapping(gtime.Reader). It follows a restarted daemon's
 * page (gclock_mapping). Returns 1, 0, or a negative errno from the page
 * (gclock_mapping), or -1 after a write error. */
static inline int gct_poll_page(gct_writer *w, struct gclock_reader *r)
{
    struct gclock_mapping g;
    int err = gclock_mapping(r, &g);
    if (err != 0) return err;
    gct_mapping m;
    m.from = g.from;
    m.x0 = g.x0;
    m.y0 = g.y0;
    m.skew = g.skew;
    m.w0 = g.w0;
    m.skew_err = g.skew_err;
    m.wander = g.wander;
    m.valid = g.valid;
    return gct_poll_mapping(w, &m);
}
#endif

#ifdef __cplusplus
}
#endif

#ifdef GCLOCK_TRACE_IMPLEMENTATION

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct gct_writer {
    FILE *f;
    pthread_mutex_t mu;
    uint32_t proc, seq, sessions;
    int err;
    uint32_t n;
    int64_t last;
    int have_map;       /* last_map holds the last mapping recorded */
    int64_t (*now)(void *);
    void *now_arg;
    gct_mapping last_map;
    uint8_t buf[24 + 32 * GCT_CHUNK_EVENTS];
};

static uint32_t gct__crc_table[256];
static pthread_once_t gct__crc_once = PTHREAD_ONCE_INIT;

/* CRC-32C (Castagnoli), reflected polynomial 0x82F63B78, as Go's crc32.Castagnoli. */
static void gct__crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        gct__crc_table[i] = c;
    }
}

static uint32_t gct__crc(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    while (n--) crc = gct__crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void gct__u16(uint8_t *b, uint16_t v) { b[0] = (uint8_t)v; b[1] = (uint8_t)(v >> 8); }
static void gct__u32(uint8_t *b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i)); }
static void gct__u64(uint8_t *b, uint64_t v) { for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i)); }

/* gct__chunk fills the header b[0:24] of the payload at b+24 and writes both. */
static int gct__chunk(gct_writer *w, uint8_t *b, uint8_t kind, uint32_t len, uint32_t count) {
    if (w->err) return -1;
    gct__u32(b, 0x4b4e4843u); /* "CHNK" */
    b[4] = kind;
    b[5] = 0;
    gct__u16(b + 6, 0);
    gct__u32(b + 8, len);
    gct__u32(b + 12, count);
    gct__u32(b + 16, w->seq);
    uint32_t crc = gct__crc(0, b, 20);
    crc = gct__crc(crc, b + 24, len);
    gct__u32(b + 20, crc);
    if (fwrite(b, 1, 24 + (size_t)len, w->f) != 24 + (size_t)len) {
        w->err = errno ? errno : EIO;
        return -1;
    }
    w->seq++;
    return 0;
}

static int gct__flush_locked(gct_writer *w) {
    if (w->n == 0) return w->err ? -1 : 0;
    int r = gct__chunk(w, w->buf, 2, 32 * w->n, w->n);
    w->n = 0;
    return r;
}

/* gct__small writes a chunk whose payload is copied into a heap buffer. */
static int gct__small(gct_writer *w, uint8_t kind, const uint8_t *payload, uint32_t len, uint32_t count) {
    uint8_t *b = (uint8_t *)malloc(24 + (size_t)len);
    if (!b) {
        w->err = ENOMEM;
        return -1;
    }
    memcpy(b + 24, payload, len);
    int r = gct__chunk(w, b, kind, len, count);
    free(b);
    return r;
}

int64_t gct_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

gct_writer *gct_open(const char *path, uint32_t proc, uint32_t host, const char *name, uint32_t flags) {
    pthread_once(&gct__crc_once, gct__crc_init);
    size_t nl = name ? strlen(name) : 0;
    if (nl > 0xffff) {
        errno = EINVAL;
        return NULL;
    }
    const char *clk = "CLOCK_MONOTONIC_RAW";
    size_t cl = strlen(clk);
    uint8_t *meta = (uint8_t *)malloc(16 + nl + cl);
    gct_writer *w = (gct_writer *)calloc(1, sizeof *w);
    if (!w || !meta) {
        free(w);
        free(meta);
        errno = ENOMEM;
        return NULL;
    }
    w->f = fopen(path, "wb");
    if (!w->f) {
        free(w);
        free(meta);
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    w->proc = proc;
    w->last = INT64_MIN;
    gct__u32(meta, proc);
    gct__u32(meta + 4, host);
    gct__u32(meta + 8, flags);
    gct__u16(meta + 12, (uint16_t)nl);
    if (nl) memcpy(meta + 14, name, nl);
    gct__u16(meta + 14 + nl, (uint16_t)cl);
    memcpy(meta + 16 + nl, clk, cl);
    int bad = fwrite("GCLKTRC1", 1, 8, w->f) != 8 || gct__small(w, 1, meta, (uint32_t)(16 + nl + cl), 1) != 0;
    free(meta);
    if (bad) {
        fclose(w->f);
        pthread_mutex_destroy(&w->mu);
        free(w);
        errno = EIO;
        return NULL;
    }
    return w;
}

static int gct__event_locked(gct_writer *w, int64_t t, uint8_t kind, uint64_t id, int64_t value, uint32_t peer, uint16_t track) {
    if (t < w->last) t = w->last; /* a file never goes backwards in time */
    w->last = t;
    uint8_t *b = w->buf + 24 + 32 * (size_t)w->n;
    gct__u64(b, (uint64_t)t);
    gct__u64(b + 8, id);
    gct__u64(b + 16, (uint64_t)value);
    gct__u32(b + 24, peer);
    gct__u16(b + 28, track);
    b[30] = kind;
    b[31] = 0;
    int r = 0;
    if (++w->n == GCT_CHUNK_EVENTS) r = gct__flush_locked(w);
    return w->err ? -1 : r;
}

int gct_event(gct_writer *w, int64_t t, uint8_t kind, uint64_t id, int64_t value, uint32_t peer, uint16_t track) {
    if (kind < GCT_ENTER || kind > GCT_RECV) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    int r = gct__event_locked(w, t, kind, id, value, peer, track);
    pthread_mutex_unlock(&w->mu);
    return r;
}

/* gct__stamped reads the clock under the lock so that the file stays in time order. */
static int gct__stamped(gct_writer *w, uint8_t kind, uint16_t track, uint64_t id, int64_t value, uint32_t peer) {
    pthread_mutex_lock(&w->mu);
    int r = gct__event_locked(w, w->now ? w->now(w->now_arg) : gct_now(), kind, id, value, peer, track);
    pthread_mutex_unlock(&w->mu);
    return r;
}

void gct_set_clock(gct_writer *w, int64_t (*now)(void *arg), void *arg) {
    pthread_mutex_lock(&w->mu);
    w->now = now;
    w->now_arg = arg;
    pthread_mutex_unlock(&w->mu);
}

int gct_enter(gct_writer *w, uint16_t track, uint64_t region) { return gct__stamped(w, GCT_ENTER, track, region, 0, 0); }
int gct_leave(gct_writer *w, uint16_t track, uint64_t region) { return gct__stamped(w, GCT_LEAVE, track, region, 0, 0); }
int gct_enter_data(gct_writer *w, uint16_t track, uint64_t region, int64_t value, uint32_t peer) { return gct__stamped(w, GCT_ENTER, track, region, value, peer); }
int gct_leave_data(gct_writer *w, uint16_t track, uint64_t region, int64_t value, uint32_t peer) { return gct__stamped(w, GCT_LEAVE, track, region, value, peer); }
int gct_instant(gct_writer *w, uint16_t track, uint64_t id) { return gct__stamped(w, GCT_INSTANT, track, id, 0, 0); }
int gct_counter(gct_writer *w, uint16_t track, uint64_t id, int64_t v) { return gct__stamped(w, GCT_COUNTER, track, id, v, 0); }
int gct_send(gct_writer *w, uint16_t track, uint32_t to, uint64_t msg, int64_t bytes) { return gct__stamped(w, GCT_SEND, track, msg, bytes, to); }
int gct_recv(gct_writer *w, uint16_t track, uint32_t from, uint64_t msg, int64_t bytes) { return gct__stamped(w, GCT_RECV, track, msg, bytes, from); }

int gct_name(gct_writer *w, uint64_t id, const char *name) {
    size_t nl = strlen(name);
    if (nl > 0xffff) {
        errno = EINVAL;
        return -1;
    }
    uint8_t *p = (uint8_t *)malloc(14 + nl);
    if (!p) return -1;
    gct__u32(p, w->proc);
    gct__u64(p + 4, id);
    gct__u16(p + 12, (uint16_t)nl);
    memcpy(p + 14, name, nl);
    pthread_mutex_lock(&w->mu);
    int r = gct__flush_locked(w);
    if (r == 0) r = gct__small(w, 5, p, (uint32_t)(14 + nl), 1);
    pthread_mutex_unlock(&w->mu);
    free(p);
    return r;
}

int gct_session(gct_writer *w, uint32_t ref, uint8_t kind, const gct_sample *s, uint32_t n) {
    if (n > ((16u << 20) - 16) / 32 || kind < GCT_SESSION_START || kind > GCT_SESSION_DEMAND) {
        errno = EINVAL;
        return -1;
    }
    uint8_t *p = (uint8_t *)calloc(1, 16 + 32 * (size_t)n);
    if (!p) return -1;
    gct__u32(p + 4, ref);
    p[8] = kind;
    for (uint32_t i = 0; i < n; i++) {
        uint8_t *b = p + 16 + 32 * (size_t)i;
        gct__u64(b, (uint64_t)s[i].src_send);
        gct__u64(b + 8, (uint64_t)s[i].loc_recv);
        gct__u64(b + 16, (uint64_t)s[i].loc_send);
        gct__u64(b + 24, (uint64_t)s[i].src_recv);
    }
    pthread_mutex_lock(&w->mu);
    gct__u32(p, w->sessions);
    int r = gct__flush_locked(w);
    if (r == 0) r = gct__small(w, 3, p, 16 + 32 * n, n);
    if (r == 0) w->sessions++;
    pthread_mutex_unlock(&w->mu);
    free(p);
    return r;
}

static void gct__f64(uint8_t *b, double f) {
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    gct__u64(b, u);
}

static int gct__mapping_locked(gct_writer *w, const gct_mapping *m) {
    uint8_t p[64];
    gct__u64(p, (uint64_t)m->from);
    gct__u64(p + 8, (uint64_t)m->x0);
    gct__u64(p + 16, (uint64_t)m->y0);
    gct__f64(p + 24, m->skew);
    gct__u64(p + 32, (uint64_t)m->w0);
    gct__f64(p + 40, m->skew_err);
    gct__f64(p + 48, m->wander);
    gct__u64(p + 56, m->valid ? 1 : 0);
    int r = gct__flush_locked(w);
    if (r == 0) r = gct__small(w, 4, p, 64, 1);
    if (r == 0) {
        w->last_map = *m;
        w->have_map = 1;
    }
    return r;
}

static int gct__mapping_ok(const gct_mapping *m) {
    /* The reader refuses non-finite coefficients and a skew <= -1. */
    double f[3] = {m->skew, m->skew_err, m->wander};
    for (int i = 0; i < 3; i++)
        if (!(f[i] == f[i] && f[i] - f[i] == 0)) return 0;
    return m->skew > -1;
}

int gct_mapping_record(gct_writer *w, const gct_mapping *m) {
    if (!gct__mapping_ok(m)) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    int r = gct__mapping_locked(w, m);
    pthread_mutex_unlock(&w->mu);
    return r;
}

int gct_poll_mapping(gct_writer *w, const gct_mapping *m) {
    if (!m->valid) return 0;
    if (!gct__mapping_ok(m)) {
        errno = EINVAL;
        return -1;
    }
    pthread_mutex_lock(&w->mu);
    const gct_mapping *l = &w->last_map;
    int r = 0;
    if (!(w->have_map && l->from == m->from && l->x0 == m->x0 && l->y0 == m->y0 && l->skew == m->skew &&
          l->w0 == m->w0 && l->skew_err == m->skew_err && l->wander == m->wander && l->valid == m->valid))
        r = gct__mapping_locked(w, m) == 0 ? 1 : -1;
    pthread_mutex_unlock(&w->mu);
    return r;
}

int gct_flush(gct_writer *w) {
    pthread_mutex_lock(&w->mu);
    int r = gct__flush_locked(w);
    if (r == 0 && fflush(w->f) != 0) {
        w->err = errno;
        r = -1;
    }
    pthread_mutex_unlock(&w->mu);
    return r;
}

int gct_close(gct_writer *w) {
    int r = gct_flush(w);
    if (fclose(w->f) != 0) r = -1;
    pthread_mutex_destroy(&w->mu);
    free(w);
    return r;
}

#endif /* GCLOCK_TRACE_IMPLEMENTATION */
#endif /* GCLOCK_TRACE_H */
