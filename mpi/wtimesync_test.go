package mpi

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// syncedClocks are the emulated clocks of the synced-mode tests: offsets up
// to 5 s and drifts of -30 to +30 ppm, as TestTraceSyncNoDaemon's.
var syncedClocks = []testClock{{1_000_000, 20_000}, {-3_000_000, -15_000}, {5_000_000_000, 30_000}, {7, -30_000}}

// wtimeErrors returns, for every MPI_Wtime line of ranks 1.., how far (ns)
// the value is from the truth: rank 0's emulated clock at a raw instant
// between the stamps around the call, minus the job's origin. The origin is
// a whole second, the same on every rank, read off rank 0's lines (its
// MPI_Wtime is its own clock: the reference). The second result is the
// distance from the middle of the stamps instead (the read's own duration
// included), both sorted.
func wtimeErrors(t *testing.T, ws []wtimeLine, clocks []testClock) ([]int64, []int64) {
	t.Helper()
	origin := int64(-1)
	for _, w := range ws {
		if w.rank != 0 {
			continue
		}
		// The origin lies between the clock at the stamps around the
		// call less the value read (a rank descheduled between its stamp
		// and its read, as on a loaded 2-core machine in CI, 1.1 ms).
		wt := int64(math.Round(w.wtime * 1e9))
		o, oAfter := clocks[0].at(w.before)-wt, clocks[0].at(w.after)-wt
		r := (o + sec/2) / sec * sec
		if r < o-1e6 || r > oAfter+1e6 {
			t.Fatalf("rank 0: MPI_Wtime %.9f is its clock %d..%d minus %d..%d, no whole second within 1 ms", w.wtime, clocks[0].at(w.before), clocks[0].at(w.after), o, oAfter)
		}
		if origin >= 0 && r != origin {
			t.Fatalf("rank 0: origins %d and %d", origin, r)
		}
		origin = r
	}
	if origin < 0 {
		t.Fatal("no MPI_Wtime line of rank 0")
	}
	var errs, mids []int64
	for _, w := range ws {
		got := int64(math.Round(w.wtime*1e9)) + origin
		lo, hi := clocks[0].at(w.before), clocks[0].at(w.after)
		var e int64
		switch {
		case got < lo:
			e = lo - got
		case got > hi:
			e = got - hi
		}
		if w.rank != 0 {
			errs = append(errs, e)
			m := got - lo/2 - hi/2
			mids = append(mids, max(m, -m))
		} else if e > tolNs(w.wtime) {
			t.Errorf("rank 0: MPI_Wtime %.9f is %d ns off its own clock", w.wtime, e)
		}
	}
	slices.Sort(errs)
	slices.Sort(mids)
	return errs, mids
}

// TestWtimeSyncedNoPage: with no page on any rank, MPI_Wtime is global all
// the same: every rank serves rank 0's clock through its own sync sessions
// (at MPI_Init, then every GCLOCK_MPI_SYNC_PERIOD at a world barrier, each
// refitting the offset and the drift), and MPI_WTIME_IS_GLOBAL is true.
// Each rank stamps on an emulated clock (libgclockmpi-test.so), so the 4
// ranks of this machine disagree by up to 5 s and 60 ppm, and the truth is
// rank 0's emulated clock at the raw instant. (Before, MPI_Wtime was each
// rank's local PMPI_Wtime and MPI_WTIME_IS_GLOBAL false; issue 30 item 4.)
func TestWtimeSyncedNoPage(t *testing.T) {
	dir := built(t)
	same := make([]testClock, ranks) // one host's clock on every rank: the truth is offset 0
	// The median is held tight, the maximum loosely: the maximum is the
	// MPI_Init session's error on a busy machine (its best exchange's
	// half round trip, which the bounds report: TestAPISynced), 63-68 us
	// in runs beside two busy loops, where the median stayed 0; an
	// accuracy target under load is the benchmark's (collbench), not a
	// unit test's. So where the library says (GCLOCK_MPI_VERBOSE) that a
	// session it fitted had a best half round trip beyond what maxErr
	// allows for (sessionHalfRTT), the maximum is held to that half round
	// trip plus maxErr's own allowance for the drift instead: an error
	// beyond what the exchanges bound is a bug, one within it on a
	// loaded machine is not. A drift left unfitted shows in the median
	// (init only: 25-50 us).
	for _, tc := range []struct {
		name   string
		period string
		clocks []testClock
		p50Err int64  // ns
		maxErr int64  // ns
		slow   string // GCLOCK_MPI_TEST_SLOW_SESSION
		quiet  bool   // run without GCLOCK_MPI_VERBOSE: no notice may appear
	}{
		// A line through 3-4 sessions a second apart: the drift is fitted
		// (idle: max 1.1 us).
		{"period 1 s", "1", syncedClocks, 5_000, 150_000, "", false},
		// One session: the offset only; 60 ppm of drift in 3 s is 180 us.
		{"init only", "0", syncedClocks, 400_000, 400_000, "", false},
		// The installed library on the real clocks of one host.
		{"one clock", "1", nil, 5_000, 150_000, "", true},
		// The second session's replies each held 1 ms, as a rank
		// descheduled on a busy machine holds them: its midpoints are 500
		// us off. The session is left out of the fit (its half round
		// trip is 100x the first's), so the drift waits for the third
		// session, half a second on: up to 50 ppm of it unfitted for about
		// a second (64 us measured). A line through the slow session (no
		// outlier rule, unweighted) was off by 27 us in the median and
		// 1.8-1.9 ms at most.
		{"one slow session", "1", syncedClocks, 5_000, 150_000, "2:1000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{
				"LD_PRELOAD":             filepath.Join(dir, "libgclockmpi.so"),
				"GCLOCK_PAGE":            filepath.Join(t.TempDir(), "no-page"),
				"GCLOCK_MPI_SYNC_PERIOD": tc.period,
			}
			if !tc.quiet {
				env["GCLOCK_MPI_VERBOSE"] = "1"
			}
			clocks := same
			if tc.clocks != nil {
				clocks = tc.clocks
				env["LD_PRELOAD"] = filepath.Join(dir, "libgclockmpi-test.so")
				env["GCLOCK_MPI_TEST_CLOCK"] = testClockEnv(clocks)
				env["GCLOCK_MPI_TEST_SLOW_SESSION"] = tc.slow
			}
			out, errout, err := mpirun(t, ranks, env, filepath.Join(dir, "ring"), "40", "75")
			if err != nil {
				t.Fatalf("ring: %v\n%s\n%s", err, out, errout)
			}
			for r := 0; r < ranks; r++ {
				if !strings.Contains(out, fmt.Sprintf("attr %d 1 1\n", r)) {
					t.Errorf("rank %d: MPI_WTIME_IS_GLOBAL not true:\n%s", r, out)
				}
			}
			if tc.quiet && strings.Contains(errout, "libgclockmpi") {
				t.Errorf("notices without GCLOCK_MPI_VERBOSE:\n%s", errout)
			}
			maxErr := tc.maxErr
			if !tc.quiet {
				h, n := fittedHalfRTT(errout)
				if n == 0 {
					t.Fatalf("GCLOCK_MPI_VERBOSE: no fitted sync session reported:\n%s", errout)
				}
				t.Logf("%d fitted sync sessions reported, the largest best half round trip %d ns", n, h)
				if h > sessionHalfRTT {
					maxErr = tc.maxErr - sessionHalfRTT + h
					t.Logf("a fitted session's best half round trip was %d ns (more than %d): the maximum allowed is %d ns", h, sessionHalfRTT, maxErr)
				}
			}
			ws := parseWtimes(t, out)
			errs, mids := wtimeErrors(t, ws, clocks)
			if os.Getenv("GCLOCK_MPI_DEBUG_READS") != "" {
				first := map[int]int64{}
				for _, w := range ws {
					if _, ok := first[w.rank]; !ok {
						first[w.rank] = w.before
					}
					e1, _ := wtimeErrors(t, []wtimeLine{ws[0], w}, clocks)
					t.Logf("rank %d at %.3f s: %v", w.rank, float64(w.before-first[w.rank])/1e9, e1)
				}
			}
			if len(errs) < (ranks-1)*5 {
				t.Fatalf("%d MPI_Wtime readings of ranks 1-%d, want %d or more", len(errs), ranks-1, (ranks-1)*5)
			}
			p50, mx := errs[len(errs)/2], errs[len(errs)-1]
			t.Logf("MPI_Wtime of ranks 1-3 against rank 0's clock (the truth), %d readings over 3 s: beyond the read's duration p50 %d ns, max %d ns; from its middle p50 %d ns, max %d ns",
				len(errs), p50, mx, mids[len(mids)/2], mids[len(mids)-1])
			if p50 > tc.p50Err {
				t.Errorf("MPI_Wtime's median error %d ns, want at most %d", p50, tc.p50Err)
			}
			if mx > maxErr {
				t.Errorf("MPI_Wtime up to %d ns from the truth, want at most %d", mx, maxErr)
			}
		})
	}
}

// sessionHalfRTT is the largest best half round trip of a fitted sync
// session that TestWtimeSyncedNoPage's maxErr allows for (the MPI_Init
// session's on a busy machine, 63-68 us measured); the rest of maxErr is
// the drift's.
const sessionHalfRTT = 70_000

// fittedHalfRTT is the largest best half round trip (ns) of the sync
// sessions the library says it fitted (GCLOCK_MPI_VERBOSE's "sync session
// N: best half round trip H ns; fit ..." notices; those left out of the
// fit do not count), and how many such notices there were.
func fittedHalfRTT(stderr string) (h int64, n int) {
	for _, l := range strings.Split(stderr, "\n") {
		_, rest, ok := strings.Cut(l, "best half round trip ")
		if !ok {
			continue
		}
		num, tail, ok := strings.Cut(rest, " ns")
		if !ok || !strings.HasPrefix(tail, "; fit") {
			continue
		}
		if v, err := strconv.ParseInt(num, 10, 64); err == nil {
			h, n = max(h, v), n+1
		}
	}
	return h, n
}

// TestAPISynced: gclock_mpi.h's API in synced mode: the mode, one origin
// on every rank, and bounds that hold the truth (rank 0's emulated clock).
func TestAPISynced(t *testing.T) {
	dir := built(t)
	out, errout, err := mpirun(t, 2, map[string]string{
		"LD_PRELOAD":            filepath.Join(dir, "libgclockmpi-test.so"),
		"GCLOCK_PAGE":           filepath.Join(t.TempDir(), "no-page"),
		"GCLOCK_MPI_TEST_CLOCK": testClockEnv(syncedClocks[1:3]),
	}, filepath.Join(dir, "api"), "20")
	if err != nil {
		t.Fatalf("api: %v\n%s\n%s", err, out, errout)
	}
	origins := rankOrigins(out)
	if len(origins) != 2 || origins["0"] != origins["1"] || origins["0"]%sec != 0 {
		t.Fatalf("origins %v: want one whole second on both ranks", origins)
	}
	origin := origins["0"]
	ref := syncedClocks[1]
	var n int
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[0] == "mode" && f[2] != "2":
			t.Errorf("%q: want mode 2 (synced)", l)
		case len(f) == 8 && f[0] == "bounds":
			n++
			a, _ := strconv.ParseInt(f[3], 10, 64)
			b, _ := strconv.ParseInt(f[7], 10, 64)
			ns := func(s string) int64 { return int64(math.Round(parseF(t, s)*1e9)) + origin }
			w, lo, hi := ns(f[4]), ns(f[5]), ns(f[6])
			tlo, thi := ref.at(a), ref.at(b)
			if f[2] != "1" || lo > w || w > hi || hi < tlo-1 || lo > thi+1 {
				t.Errorf("%q: want status 1 and bounds [%d, %d] around %d that meet the truth [%d, %d]", l, lo, hi, w, tlo, thi)
			}
		case len(f) == 9 && f[0] == "now" && (f[2] != "0" || f[7] != "1"):
			t.Errorf("%q: want rc 0, status 1", l)
		}
	}
	if n != 40 {
		t.Errorf("%d bounds lines, want 40", n)
	}
}
