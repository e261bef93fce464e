package mpi

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/timeline"
)

// testClock is the emulated clock libgclockmpi-test.so gives a rank
// (GCLOCK_MPI_TEST_CLOCK "off:ppb"): raw + off + trunc(raw*ppb/1e9).
type testClock struct{ off, ppb int64 }

// at is the rank's clock at the raw instant r (r >= 0), computed as the C
// code does but without its 128-bit product: trunc((q*1e9+m)*ppb/1e9) is
// q*ppb + trunc(m*ppb/1e9) when both parts have the sign of ppb.
func (c testClock) at(r int64) int64 {
	q, m := r/sec, r%sec
	return r + c.off + q*c.ppb + m*c.ppb/sec
}

// raw inverts at: the raw instant whose reading is f (to the ns; at is
// non-decreasing, so the first raw reading f or more).
func (c testClock) raw(f int64) int64 {
	r := f - c.off
	for range 8 {
		d := f - c.at(r)
		if d == 0 {
			break
		}
		r += d
	}
	for c.at(r) > f {
		r--
	}
	for c.at(r) < f {
		r++
	}
	return r
}

func testClockEnv(cs []testClock) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d", c.off, c.ppb)
	}
	return b.String()
}

// syncTruth returns, per process, the true global time of every event of
// the traces: global time is rank 0's clock (the reference of the sync
// sessions), so an event stamped f on rank i happened at raw instant
// clocks[i].raw(f), when rank 0's clock read clocks[0].at of it. It also
// returns the claimed error between the sessions: half the longest round
// trip of the exchanges recorded in any rank's sessions (each exchange's
// midpoint is within half its round trip of the truth, and between its
// first and last session a process's correction interpolates between
// session averages of such midpoints). Outside them the correction
// extrapolates, and only the bound it reports holds (checkSyncMerge).
//
// A spline through session points each within e of a straight truth
// (affine emulated clocks) strays further between them: Fritsch-Butland
// tangents lie between the neighbouring secants, each off by at most
// 2e/dx_min, and the Hermite basis functions of the tangents peak at 4/27
// of the interval, so the spline stays within e*(1 + 16/27*dx/dx_min). The
// third result is the largest dx/dx_min between a process's sessions, the
// fourth each process's span between its first and last session (the
// condensed points, local ns), where the corrections interpolate.
func syncTruth(t *testing.T, files []string, clocks []testClock) (map[uint32][]int64, int64, float64, map[uint32][2]int64) {
	t.Helper()
	tr := map[uint32][]int64{}
	spans := map[uint32][2]int64{}
	var claim int64
	sessions := 0
	spacing := 1.0
	for _, f := range files {
		s := summary(t, f)
		p := s.Meta.Proc
		if int(p) >= len(clocks) {
			t.Fatalf("%s: process %d, only %d clocks", f, p, len(clocks))
		}
		var at []int64
		span := [2]int64{math.MaxInt64, math.MinInt64}
		for _, ss := range s.Sessions {
			if len(ss.Samples) > 0 {
				at = append(at, ss.Samples[0].LocRecv)
				pt, err := estimate.Condense(ss.Samples)
				if err != nil {
					t.Fatalf("%s: session %d: %v", f, ss.Index, err)
				}
				span = [2]int64{min(span[0], pt.X), max(span[1], pt.X)}
			}
			if ss.Ref != 0 {
				t.Errorf("%s: session %d with reference %d, want 0", f, ss.Index, ss.Ref)
			}
			sessions++
			for _, x := range ss.Samples {
				if x.RTT() < 0 {
					t.Errorf("%s: session %d: exchange with round trip %d ns < 0", f, ss.Index, x.RTT())
				}
				claim = max(claim, (x.RTT()+1)/2)
			}
		}
		slices.Sort(at)
		lo, hi := int64(math.MaxInt64), int64(0)
		for i := 1; i < len(at); i++ {
			lo, hi = min(lo, at[i]-at[i-1]), max(hi, at[i]-at[i-1])
		}
		if len(at) > 2 && lo > 0 {
			spacing = max(spacing, float64(hi)/float64(lo))
		}
		spans[p] = span
		for _, e := range rawEvents(t, f) {
			tr[p] = append(tr[p], clocks[0].at(clocks[p].raw(e.Time)))
		}
	}
	return tr, claim + 2, spacing, spans // 2 ns: the rounding of the midpoints and of the mappers
}

// syncSessions counts the sessions of the traces.
func syncSessions(t *testing.T, files []string) int {
	t.Helper()
	n := 0
	for _, f := range files {
		n += len(summary(t, f).Sessions)
	}
	return n
}

// checkSyncMerge merges the traces of ranks on the emulated clocks with
// -method linear, spline and auto and checks every corrected stamp against
// the truth: within the bound its correction reports (correct.SessionMapper:
// every stamp of ranks 1-3 has one), between a process's first and last
// session also within the claimed error (syncTruth; outside them, as for
// MPI_Init's enter when the rank waited for the ranks served before it in
// the start session, the correction extrapolates), every message matched,
// some received before sent on the raw stamps (the clocks disagree), none
// after correction if zeroViolations (else none after the controlled
// logical clock), and the number of messages and collective dependencies
// of rounds rounds of `ring ROUNDS PAUSE SYNC_EVERY` on 4 ranks. say
// reports the figures.
func checkSyncMerge(t *testing.T, files []string, clocks []testClock, rounds int, zeroViolations bool, say func(string, ...any)) {
	t.Helper()
	truth, claim, spacing, spans := syncTruth(t, files, clocks)
	splineClaim := int64(math.Ceil(float64(claim) * (1 + 16.0/27*spacing)))
	say("no daemon, ranks on emulated clocks (off:ppb %v): claimed error (half the longest round trip of the recorded sync exchanges) %d ns; spline %d ns (sessions spaced up to %.2fx unevenly)\n", clocks, claim, splineClaim, spacing)
	for _, tc := range []struct {
		method correct.Method
		want   correct.Method // for ranks 1-3 (rank 0 is the reference: none)
	}{
		{correct.None, correct.None},
		{correct.Linear, correct.Linear},
		{correct.Spline, correct.Spline},
		{correct.Auto, correct.Spline},
	} {
		rep, err := timeline.Run(timeline.Files(files), timeline.Options{Method: tc.method, Truth: truth, CLC: true, KeepErrors: true})
		if err != nil {
			t.Fatalf("-method %s: %v", tc.method, err)
		}
		for _, c := range rep.Choices {
			want := tc.want
			if c.Proc == 0 {
				want = correct.None
			}
			if c.Method != want {
				t.Errorf("-method %s: proc %d corrected with %s (%s), want %s", tc.method, c.Proc, c.Method, c.Reason, want)
			}
		}
		tot := causality.Totals(rep.Pairs)
		clc := causality.Totals(rep.AfterCLC)
		say("ring traces without a daemon, -method %s: %d events, |corrected - truth| p50 %d ns, p99 %d ns, max %d ns (proc %d); %d messages, received before sent: %d raw, %d corrected, %d after CLC; %d unmatched\n",
			tc.method, rep.Events, rep.Error.P50, rep.Error.P99, rep.Error.Max, rep.Error.WorstProc, tot.Messages, tot.Raw, tot.Corrected, clc.Corrected, rep.Unmatched)
		if tc.method == correct.None {
			if rep.Error.Max <= claim {
				t.Errorf("uncorrected stamps within %d ns of the truth: the emulated clocks did not disagree", claim)
			}
			continue
		}
		want := claim
		if tc.want == correct.Spline {
			want = splineClaim
		}
		// Every stamp of ranks 1-3 within its correction's bound (2 ns: the
		// truth's own rounding to the ns); those between the sessions also
		// within the claim.
		var inside, outside, unbounded, beyond, widest int64
		var worstIn, worstOut, worstBeyond ErrorAt
		for _, e := range rep.ErrorSamples {
			if e.Proc == 0 {
				continue
			}
			d := abs64(e.Err)
			if e.Bound < 0 {
				unbounded++
			} else if widest = max(widest, e.Bound); d > e.Bound+2 {
				beyond++
				if d-e.Bound > worstBeyond.Excess {
					worstBeyond = ErrorAt{e.Proc, e.Raw, d, e.Bound, d - e.Bound}
				}
			}
			if sp := spans[e.Proc]; e.Raw >= sp[0] && e.Raw <= sp[1] {
				inside++
				if d > worstIn.Err {
					worstIn = ErrorAt{e.Proc, e.Raw, d, e.Bound, 0}
				}
			} else {
				outside++
				if d > worstOut.Err {
					worstOut = ErrorAt{e.Proc, e.Raw, d, e.Bound, 0}
				}
			}
		}
		say("-method %s: ranks 1-3: %d stamps between their first and last session, max |error| %d ns (proc %d); %d outside them, max %d ns (proc %d, bound %d ns); widest bound %d ns\n",
			tc.method, inside, worstIn.Err, worstIn.Proc, outside, worstOut.Err, worstOut.Proc, worstOut.Bound, widest)
		if unbounded > 0 {
			t.Errorf("-method %s: %d stamps of ranks 1-3 without a bound (%+v)", tc.method, unbounded, rep.Choices)
		}
		if beyond > 0 {
			t.Errorf("-method %s: %d stamps beyond their correction's bound, the worst (proc %d, local %d) %d ns from the truth against a bound of %d ns", tc.method, beyond, worstBeyond.Proc, worstBeyond.Raw, worstBeyond.Err, worstBeyond.Bound)
		}
		if worstIn.Err > want {
			t.Errorf("-method %s: a corrected stamp between the sessions is %d ns from the truth (proc %d, local %d), beyond the claimed %d ns", tc.method, worstIn.Err, worstIn.Proc, worstIn.Raw, want)
		}
		if zeroViolations && tot.Corrected != 0 {
			t.Errorf("-method %s: %d received before sent after correction, want 0", tc.method, tot.Corrected)
		}
		if clc.Corrected != 0 || rep.Unmatched != 0 {
			t.Errorf("-method %s: %d received before sent after CLC, %d ends unmatched; want 0 and 0", tc.method, clc.Corrected, rep.Unmatched)
		}
		// Per round: checkMerge's 58, and the extra collectives' dependencies:
		// gather 3 (to the root), scatter 3 (from it), allgather and
		// alltoall 12 each (offsets 1-3 on 4 ranks), ibarrier and
		// iallreduce 12 each, ibcast 3, ireduce on the two halves 1 each;
		// gatherv 3, scatterv 3, allgatherv, alltoallv and both
		// reduce_scatters 12 each.
		if want := int64(rounds * (58 + 3 + 3 + 12 + 12 + 12 + 12 + 3 + 2 + 3 + 3 + 12 + 12 + 12 + 12)); tot.Messages != want {
			t.Errorf("-method %s: %d messages matched, want %d", tc.method, tot.Messages, want)
		}
		if tot.Raw == 0 || tot.Messages == 0 {
			t.Errorf("-method %s: %d messages, %d received before sent on the raw stamps: want the emulated clocks to disagree", tc.method, tot.Messages, tot.Raw)
		}
	}
}

// ErrorAt is one corrected stamp's |error| and bound (ns), and how far the
// error exceeds the bound.
type ErrorAt struct {
	Proc                    uint32
	Raw, Err, Bound, Excess int64
}

func TestTestClockInverse(t *testing.T) {
	for _, c := range []testClock{{0, 0}, {5e9, 30000}, {-3e6, -30000}, {7, 1}, {0, -999}} {
		for _, r := range []int64{0, 1, sec - 1, sec, 123456789012345, 987654321098765} {
			if got := c.raw(c.at(r)); got != r && c.at(got) != c.at(r) {
				t.Errorf("%+v: raw(at(%d)) = %d", c, r, got)
			}
		}
	}
}

// TestTraceSyncNoDaemon traces the ring program with no daemon (no page)
// on ranks whose stamps run on emulated clocks that disagree by
// milliseconds and tens of ppm (libgclockmpi-test.so): the sync sessions
// the tracer runs with rank 0 at MPI_Init, at every gclock_timesync and at
// MPI_Finalize must let `gclock merge` correct them with -method linear,
// spline and auto to within the claimed error (half the longest recorded
// round trip), with every message matched and none received before sent;
// -method daemon must fail with the hint to use another method.
func TestTraceSyncNoDaemon(t *testing.T) {
	dir := built(t)
	clocks := []testClock{{1_000_000, 20_000}, {-3_000_000, -15_000}, {5_000_000_000, 30_000}, {7, -30_000}}
	tdir := filepath.Join(t.TempDir(), "trace")
	env := map[string]string{
		"LD_PRELOAD":            filepath.Join(dir, "libgclockmpi-test.so"),
		"GCLOCK_MPI_TRACE":      tdir,
		"GCLOCK_PAGE":           filepath.Join(t.TempDir(), "no-page"),
		"GCLOCK_MPI_QUIET":      "1",
		"GCLOCK_MPI_TEST_CLOCK": testClockEnv(clocks),
	}
	const rounds, syncEvery = 24, 8
	if _, stderr, err := mpirun(t, ranks, env, filepath.Join(dir, "ring"), fmt.Sprint(rounds), "5", fmt.Sprint(syncEvery)); err != nil {
		t.Fatalf("ring: %v\n%s", err, stderr)
	}
	files, _ := filepath.Glob(filepath.Join(tdir, "rank-*.gct"))
	sort.Strings(files)
	if len(files) != ranks {
		t.Fatalf("%d trace files, want %d", len(files), ranks)
	}
	// Per rank but 0: MPI_Init, gclock_timesync in rounds 8 and 16, MPI_Finalize.
	if n, want := syncSessions(t, files), (ranks-1)*(2+(rounds-1)/syncEvery); n != want {
		t.Errorf("%d sync sessions, want %d", n, want)
	}
	// One machine: messages take about a microsecond, as long as the sync
	// error of 4 oversubscribed ranks, so a few may still be received
	// before sent after correction; the controlled logical clock removes
	// those (the lab's 100-us links leave none, TestLab).
	checkSyncMerge(t, files, clocks, rounds, false, t.Logf)
	// Without mappings, -method daemon names the lack of sync data.
	_, err := timeline.Run(timeline.Files(files), timeline.Options{Method: correct.Daemon})
	if err == nil || !errors.Is(err, correct.ErrNoSyncData) {
		t.Errorf("-method daemon without mappings: %v, want an error wrapping correct.ErrNoSyncData", err)
	}
	// The sessions are in the format the Go recorder writes; the string
	// table names every message key's communicator and tag (1<<62 | id>>32)
	// and every communicator's members (1<<61 | key).
	s := summary(t, files[1])
	names := map[uint64]string{}
	for _, n := range s.Names {
		names[n.ID] = n.Name
	}
	for _, e := range rawEvents(t, files[1]) {
		if (e.Kind == format.Send || e.Kind == format.Recv) && e.ID>>63 == 0 {
			if n := names[1<<62|e.ID>>32]; !strings.HasPrefix(n, "MPI communicator ") || !strings.Contains(n, " tag ") {
				t.Fatalf("rank 1: message id %#x: name %q, want its communicator and tag", e.ID, n)
			}
		}
	}
	if n := names[1<<61|1]; n != "MPI communicator 00000001: 4 ranks, world ranks 0 1 2 3" {
		t.Errorf("rank 1: MPI_COMM_WORLD's name %q", n)
	}
	if len(s.Sessions) == 0 || s.Sessions[0].Kind != format.SessionStart || s.Sessions[len(s.Sessions)-1].Kind != format.SessionEnd {
		t.Errorf("rank 1's sessions: %+v, want a start session first and an end session last", s.Sessions)
	}
}

// TestSyncPeriod: with GCLOCK_MPI_SYNC_PERIOD=1 the ring (a world barrier
// every round, 100 ms apart, 2.5 s at least) gets on-demand sessions at
// barriers a quarter second, then half a second, then a second apart (the
// first periods are short so that the drift is fitted early), besides the
// start and end sessions.
func TestSyncPeriod(t *testing.T) {
	dir := built(t)
	tdir := filepath.Join(t.TempDir(), "trace")
	env := map[string]string{
		"LD_PRELOAD":             filepath.Join(dir, "libgclockmpi.so"),
		"GCLOCK_MPI_TRACE":       tdir,
		"GCLOCK_PAGE":            filepath.Join(t.TempDir(), "no-page"),
		"GCLOCK_MPI_QUIET":       "1",
		"GCLOCK_MPI_SYNC_PERIOD": "1",
	}
	if _, stderr, err := mpirun(t, ranks, env, filepath.Join(dir, "ring"), "25", "100"); err != nil {
		t.Fatalf("ring: %v\n%s", err, stderr)
	}
	// Rank 0 decides at each of its world barriers whether a period has
	// passed since the last session ended (sync_last, stamped as its
	// session loop ends) and, if so, starts one. Its own trace holds what
	// that needs, on the machine's one clock (no emulated clocks here): the
	// ends of its barriers, and where each session's loop ended at the
	// latest (the leave of MPI_Init for the start session, of
	// gclock_timesync for one on demand) and began at the earliest (the
	// enter of gclock_timesync). A session's own length (seconds of
	// ping-pongs when 4 ranks share 2 busy cores) does not count.
	path0 := filepath.Join(tdir, "rank-00000.gct")
	ids := map[string]uint64{}
	for _, n := range summary(t, path0).Names {
		ids[n.Name] = n.ID
	}
	for _, name := range []string{"MPI_Barrier", "MPI_Init", "gclock_timesync"} {
		if ids[name] == 0 {
			t.Fatalf("rank 0: no %s region in its trace", name)
		}
	}
	var barriers, enters, lastEnds []int64
	for _, e := range rawEvents(t, path0) {
		switch {
		case e.Kind == format.Leave && e.ID == ids["MPI_Barrier"]:
			barriers = append(barriers, e.Time)
		case e.Kind == format.Leave && (e.ID == ids["MPI_Init"] || e.ID == ids["gclock_timesync"]):
			lastEnds = append(lastEnds, e.Time)
		case e.Kind == format.Enter && e.ID == ids["gclock_timesync"]:
			enters = append(enters, e.Time)
		}
	}
	// The earliest a session's loop ended: its last exchange any rank
	// kept (each keeps its best; all came before rank 0 stamped the end).
	var firstEnds []int64
	for r := 1; r < ranks; r++ {
		s := summary(t, filepath.Join(tdir, fmt.Sprintf("rank-%05d.gct", r)))
		for i, ss := range s.Sessions {
			switch {
			case i == 0 && ss.Kind != format.SessionStart, i == len(s.Sessions)-1 && ss.Kind != format.SessionEnd,
				i > 0 && i < len(s.Sessions)-1 && ss.Kind != format.SessionDemand:
				t.Errorf("rank %d: session %d of %d is %d", r, i, len(s.Sessions), ss.Kind)
			}
			end := int64(math.MinInt64)
			for _, x := range ss.Samples {
				end = max(end, x.LocRecv)
			}
			switch {
			case r == 1:
				firstEnds = append(firstEnds, end)
			case i >= len(firstEnds):
				t.Fatalf("rank %d: %d sessions, rank 1 %d", r, len(s.Sessions), len(firstEnds))
			default:
				firstEnds[i] = max(firstEnds[i], end)
			}
		}
	}
	// rank 1's sessions: the start, those on demand, the end (run by
	// MPI_Finalize, not a gclock_timesync region).
	if len(lastEnds) != len(enters)+1 || len(firstEnds) != len(enters)+2 {
		t.Fatalf("rank 0: %d session starts and %d ends (MPI_Init's included), rank 1 %d sessions: want n, n+1, n+2", len(enters), len(lastEnds), len(firstEnds))
	}
	if len(enters) < 3 {
		t.Errorf("%d on-demand sessions in 2.5 s with a 1 s period, want 3 or more", len(enters))
	}
	// Each on-demand session comes a period (a quarter, a half, then a
	// whole one) after the one before ended, and at rank 0's first world
	// barrier after that: at most one barrier (the one that ran it) ends
	// between the period's end at the latest and the session's start. A
	// machine too busy for barriers within the short periods shows no
	// short start, but never a wrong one.
	want := []int64{250, 500, 1000}
	var gaps []int64
	for i, start := range enters {
		p := want[min(i, len(want)-1)] * int64(time.Millisecond)
		if d := start - firstEnds[i]; d < p {
			t.Errorf("on-demand session %d began %d ms after the one before ended, want %d at least", i+1, d/1e6, p/1e6)
		}
		due := lastEnds[i] + p
		var passed []int64
		for _, b := range barriers {
			if b > due && b < start {
				passed = append(passed, (b-lastEnds[i])/1e6)
			}
		}
		if len(passed) > 1 {
			t.Errorf("on-demand session %d (period %d ms) began %d ms after the one before ended, after world barriers at %v ms: late", i+1, p/1e6, (start-lastEnds[i])/1e6, passed)
		}
		gaps = append(gaps, (start-lastEnds[i])/1e6)
	}
	t.Logf("gaps between sessions: %v ms", gaps)
}
