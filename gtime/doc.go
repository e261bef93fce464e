// Package gtime publishes global time to every program on a host through
// one shared-memory page, the way AWS ClockBound and facebook/time's fbclock
// do: the daemon writes, programs map the page read-only and compute global
// time themselves, so a read costs one CLOCK_MONOTONIC_RAW read plus some
// arithmetic, with no system call to the daemon (Intel's SYNCED-HOST: only
// hosts exchange packets; processes read their host's daemon).
//
// # Reading
//
//	r, err := gtime.Open(gtime.DefaultPath)
//	if err != nil { ... }          // no page, or not a gclock page
//	defer r.Close()
//	t, err := r.Now()
//	// t.Est in [t.Earliest, t.Latest]; t.Status says synced, stale, ...
//
// Now returns an error only when the page cannot be read; a missing or late
// daemon is reported in Time.Status, and the bounds keep widening at the
// worst-case drift the daemon declared, instead of pretending.
//
// # The page
//
// A 4096-byte file (by default /run/gclock/page) holding 64-bit words read
// and written with sync/atomic under a seqlock: the writer makes the
// sequence counter odd, stores, and makes it even again; a reader copies
// the words and retries if the counter was odd or changed. The payload is
// the local->global estimate.Mapping (local = CLOCK_MONOTONIC_RAW), the
// engine's status, the local time of the last update, the staleness limit,
// the worst-case drift used once stale, the slew state, the timescale and
// the writer's pid. include/gclock.h reads the same page from C.
//
// At local time x a reader computes (eval in page.go):
//
//	est(x)   = Y0 + (x-X0) + round(Skew*(x-X0))
//	w(x)     = W0 + SkewErr*|x-X0| + Wander*(x-X0)^2/2
//	         + MaxDrift*(age-StaleAfter)   once age = x-Updated > StaleAfter
//	bounds   = [est - ceil(w), est + ceil(w)]
//	corr(x)  = SlewC moved toward 0 by SlewRate*(x-SlewX)
//	Est      = clamp(est + corr, bounds)
//
// # Never backwards
//
// Within one Reader, Est never decreases: Now keeps the largest value it
// returned and never returns less (an atomic max, shared by goroutines).
//
// Across processes no state is shared, but the curve itself is monotone:
// for a fixed page, Est(x) is non-decreasing in x (est grows at 1+Skew, the
// correction decays at SlewRate < 1-|Skew|, and the bounds move with est),
// and each Publish picks SlewC so that the new curve starts where the old
// one was at the update's local time. CLOCK_MONOTONIC_RAW is one clock for
// every process of a host, so two processes reading in sequence see
// non-decreasing values, except in the window between the daemon's clock
// read and the moment its new page becomes visible (microseconds): there a
// process on the old page can be ahead of one on the new page by at most
// that window times |new skew - old skew| + SlewRate, a fraction of a
// nanosecond for realistic drifts. A correction that moves the bounds
// entirely below a value already returned is the one case where a Reader
// holds Est still, just above Latest, until the curve catches up.
//
// # Staleness and a missing daemon
//
// A reading is StatusStale when the page is older than its StaleAfter (the
// daemon publishes at least every StaleAfter/2 while alive) and
// StatusNoDaemon once the writer closed the page. A crashed daemon shows as
// stale by age; Reader.Info also checks the writer's pid. In both cases the
// bounds grow by MaxDrift per ns of age beyond StaleAfter on top of the
// mapping's own growth. StatusDegraded says the daemon's data contradicted
// its clock model. Only StatusSynced promises the truth is in the bounds.
//
// A restarted daemon writes a new page file, starting from the old page's
// mapping, renames it over the path and marks the old page replaced; a
// Reader then maps the new one, so readers keep a bounded reading across
// the restart.
//
// # Security
//
// A page is trusted only if nobody but its daemon can have written it:
// NewWriter creates it with O_EXCL|O_NOFOLLOW (mode 0644, or 0640 and
// WriterOptions.Group) in a directory only root or its user can replace
// files in, refuses an existing page or lock file that is not its own
// (ErrUnsafe), and locks a separate 0600 lock file, so no reader can hold a
// lock that blocks a restart. Readers (OpenWith) refuse symbolic links and
// pages writable by group or others, with several links, or owned by a uid
// they do not trust. A page file that shrinks under a mapping gives
// ErrTruncated instead of SIGBUS. docs/gtime.md has the details.
//
// # Cost
//
// Go has no vDSO entry for CLOCK_MONOTONIC_RAW, so RawNow is one real
// clock_gettime system call. While the page's counter has not moved, Now
// reuses the Reader's checked copy of the page (one atomic load). The
// benchmarks BenchmarkRead and BenchmarkClockGettimeRaw measure a read
// against the clock alone (docs/gtime.md has the figures).
package gtime
