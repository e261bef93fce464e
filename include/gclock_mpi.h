/*
 * gclock_mpi.h: the C API of libgclockmpi, gclock's global MPI_Wtime.
 *
 * libgclockmpi.so (built from mpi/src/gclock_mpi.c, see docs/mpi.md) defines
 * MPI_Wtime and MPI_Wtick over MPI's profiling interface (PMPI), so an
 * unmodified MPI program reads the gclock daemon's global time: either
 * preloaded (mpirun -x LD_PRELOAD=/path/libgclockmpi.so ./prog) or linked
 * before the MPI library (mpicc prog.c -lgclockmpi). All ranks then share one
 * timescale (MPI_WTIME_IS_GLOBAL in effect), whatever host they run on.
 *
 * MPI_Wtime() = (global time in ns - origin) / 1e9, where origin is
 * GCLOCK_MPI_ORIGIN (integer seconds, the same on every rank; default 0).
 * Global time is read from the page of the host's daemon (GCLOCK_PAGE, by
 * default /run/gclock/page) with include/gclock.h: never backwards per thread.
 *
 * The mode is chosen once, at the first call that needs the clock, and kept
 * for the whole run (MPI_Wtime never switches scale mid-run):
 *   global: the page is readable and its status is synced, stale,
 *           no-daemon or degraded (the bounds widen, the status says so);
 *   synced: no rank has a usable page: in MPI_Init every rank measures its
 *           clock against rank 0's over MPI (a sync session: ping-pongs with
 *           rank 0, as the tracer's), and MPI_Wtime is rank 0's
 *           CLOCK_MONOTONIC_RAW through an offset and a drift fitted over
 *           the sessions so far (again every GCLOCK_MPI_SYNC_PERIOD seconds
 *           at a world barrier, and at every gclock_timesync);
 *   local:  the page is missing, unreadable or unsynced on some ranks, or
 *           on all with GCLOCK_MPI_SYNC=0: MPI_Wtime is
 *           PMPI_Wtime (the MPI library's own local clock), said once on
 *           stderr (GCLOCK_MPI_QUIET=1 silences it; GCLOCK_MPI_REQUIRE=1
 *           makes a missing page fatal instead: the process exits with
 *           status 1).
 * MPI_WTIME_IS_GLOBAL reads true in the global and synced modes.
 *
 * With GCLOCK_MPI_TRACE=DIR the library also records every rank's
 * point-to-point messages (every send mode, blocking, nonblocking and
 * persistent; receives at completion), its collectives (blocking and
 * nonblocking, with their root, bytes and communicator, and the
 * dependencies they imply as messages) and its one-sided calls (windows,
 * puts, gets, accumulates, fences, locks) in DIR/rank-NNNNN.gct
 * (include/gclock_trace.h), C and Fortran (mpif.h, use mpi) alike,
 * with the daemon's mappings read from the page whenever it changed, so that
 * `gclock merge -method daemon` on the files of DIR puts them on global time,
 * and with sync sessions with rank 0 (at MPI_Init, MPI_Finalize and
 * gclock_timesync), so that `gclock merge -method linear|spline|auto` does
 * it without a daemon. Fortran's MPI_WTIME and MPI_WTICK read the same
 * clock. docs/mpi.md lists the traced calls and the variables.
 */
#ifndef GCLOCK_MPI_H
#define GCLOCK_MPI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Modes (gclock_mpi_mode). */
enum gclock_mpi_mode {
	GCLOCK_MPI_LOCAL = 0, /* fallback: MPI_Wtime is PMPI_Wtime */
	GCLOCK_MPI_GLOBAL = 1, /* MPI_Wtime is global time from the page */
	GCLOCK_MPI_SYNCED = 2  /* no page on any rank: MPI_Wtime is rank 0's clock from the library's own sync sessions */
};

/* Returned instead of a page status in local mode. */
#define GCLOCK_MPI_NO_GLOBAL (-1)

/* gclock_mpi_wtime_bounds reads the clock once and stores the value
 * MPI_Wtime would return in *wtime (any pointer may be NULL) and its
 * guaranteed bounds in *earliest and *latest, in MPI_Wtime's seconds. It
 * returns the page's status (enum gclock_status of gclock.h: 1 synced,
 * 2 stale, 3 no-daemon, 4 degraded) in global mode; 1 (synced) in synced
 * mode, where the bounds are half the round trip of the last session's
 * best exchange, plus the fit's distance from it, plus an assumed 100 ppm
 * of rate error since then; in local mode GCLOCK_MPI_NO_GLOBAL,
 * with the bounds -HUGE_VAL and +HUGE_VAL (nothing is known about other
 * hosts); a negative errno when the page became unreadable (the value is
 * then the last one returned). */
int gclock_mpi_wtime_bounds(double *wtime, double *earliest, double *latest);

/* gclock_mpi_now reads global time in ns (the origin not subtracted, the
 * full precision of the page): est, earliest, latest, status, timescale as
 * gclock_now. Returns 0, -ENODEV in local mode, or a negative errno. */
struct gclock_time;
int gclock_mpi_now(struct gclock_time *t);

/* gclock_mpi_mode returns the mode (chosen on the first call if needed) and,
 * if why is not NULL, a sentence saying why (static storage). */
int gclock_mpi_mode(const char **why);

/* gclock_mpi_origin_ns returns the origin subtracted from global time
 * (GCLOCK_MPI_ORIGIN seconds, in ns). */
int64_t gclock_mpi_origin_ns(void);

/* gclock_timesync runs a sync session now (as ITAC's VT_timesync): every
 * rank of MPI_COMM_WORLD must call it (it is collective). Each rank
 * exchanges GCLOCK_MPI_SYNC_ROUNDS ping-pongs with rank 0 and records the
 * best in its trace, so that `gclock merge -method spline` follows the
 * clocks' drift between MPI_Init and MPI_Finalize (which always sync).
 * In synced mode it also refits MPI_Wtime's offset and drift.
 * Returns 1 (session run), 0 (neither tracing nor synced: nothing done), -1 (an MPI error;
 * said on stderr). GCLOCK_MPI_SYNC_PERIOD=S runs one at the first
 * MPI_Barrier on MPI_COMM_WORLD after S seconds since the last. */
int gclock_timesync(void);

#ifdef __cplusplus
}
#endif
#endif /* GCLOCK_MPI_H */
