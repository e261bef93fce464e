/* Writes a trace with gclock_trace.h; the Go test TestCHeader reads it. */
#define GCLOCK_TRACE_IMPLEMENTATION
#include "gclock_trace.h"

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: ctrace FILE\n");
        return 2;
    }
    gct_writer *w = gct_open(argv[1], 7, 3, "c rank \"7\"", GCT_FLAG_SYNCED_HOST);
    if (!w) {
        perror("gct_open");
        return 1;
    }
    int bad = 0;
    bad |= gct_name(w, 1, "compute");
    gct_sample s[3] = {{1000, 1500, 100, 1200}, {2000, 2600, 1100, 2100}, {3000, 3500, 2100, 3300}};
    bad |= gct_session(w, 0, GCT_SESSION_START, s, 3);
    /* 10000 explicit events: more than two chunks. */
    for (int i = 0; i < 10000; i++) {
        bad |= gct_event(w, 5000 + (int64_t)i * 10, (uint8_t)(GCT_ENTER + i % 6), (uint64_t)i, -(int64_t)i, (uint32_t)(i % 5), (uint16_t)(i % 3));
    }
    /* A few stamped ones (CLOCK_MONOTONIC_RAW, later than 5000 + 99990). */
    bad |= gct_enter(w, 1, 1);
    bad |= gct_send(w, 1, 4, 99, 64);
    bad |= gct_leave(w, 1, 1);
    bad |= gct_session(w, 0, GCT_SESSION_END, s, 2);
    bad |= gct_close(w);
    if (bad) {
        fprintf(stderr, "a gct call failed\n");
        return 1;
    }
    return 0;
}
