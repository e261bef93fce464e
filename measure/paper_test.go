package measure

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gclock/gclock/gtime"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestPaperCommonEnd checks seed 003's presentation on one hand-made
// execution of each kind, four nodes, truth = raw.
//
// Scheduled: every node starts at true 100 us (the instant), its global
// clock off by 0, +40, -20, +10 ns; node j ends at 1.1 ms + j*50 us (the
// workload). Each node's time runs to the common end, the last node's
// 1.25 ms: T_i = (1,250,000 + 10) - (100,000 + c_i).
//
// Barrier-started: node i leaves the start barrier d_i = 0, 30, 10, 20 us
// after 2 ms and the end barrier f_i = 25, 0, 5, 15 us after 3 ms; its
// own clock is off by a constant. (a): T_i = 1 ms + f_i - d_i.
func TestPaperCommonEnd(t *testing.T) {
	c := []int64{0, 40, -20, 10}
	d := []int64{0, 30_000, 10_000, 20_000}
	f := []int64{25_000, 0, 5_000, 15_000}
	var ss []Stamp
	for r := range 4 {
		s := st(0, ModeScheduled, r, EventStart, 100_000, 0, 100_000+c[r], 500)
		s.Target = 100_000
		end := int64(1_100_000 + r*50_000)
		ss = append(ss, s, st(0, ModeScheduled, r, EventEnd, end, 0, end+c[r], 500))
		off := int64(r) * 7_000_000
		ss = append(ss, st(1, ModeBarrier, r, EventStart, 2_000_000+d[r], 2_000_000+d[r]+off, 2_000_000+d[r]+c[r], 500),
			st(1, ModeBarrier, r, EventEnd, 3_000_000+f[r], 3_000_000+f[r]+off, 3_000_000+f[r]+c[r], 500))
	}
	res, err := Analyze(ss, func(r int64) int64 { return r })
	if err != nil {
		t.Fatal(err)
	}
	g := res.PaperMethod(MethodGlobal)
	if g == nil || g.N != 4 {
		t.Fatalf("global paper view: %+v", g)
	}
	var mean float64
	for _, ci := range c {
		mean += float64(1_150_010 - ci)
	}
	mean /= 4
	for r, ci := range c {
		want := (float64(1_150_010-ci) - mean) / mean * 100
		if !near(g.Devs[r], want, 1e-9) {
			t.Errorf("global: node %d deviation %.6f%%, want %.6f%%", r, g.Devs[r], want)
		}
		// True time 1.15 ms for every node: error (10 - c_i) / 1.15 ms.
		if wantErr := float64(10-ci) / 1_150_000 * 100; !near(g.ErrPcts[r], wantErr, 1e-9) {
			t.Errorf("global: node %d error %.6f%%, want %.6f%%", r, g.ErrPcts[r], wantErr)
		}
	}
	if g.Within != [3]float64{1, 1, 1} || g.TrueWithin != [3]float64{1, 1, 1} || g.Coverage != 1 {
		t.Errorf("global: within %v, true within %v, coverage %v; want all 1", g.Within, g.TrueWithin, g.Coverage)
	}
	// Bounds: end latest 1,250,510 - start earliest; width 2000 ns.
	if g.BoundsN != 4 || !near(g.WidthMeanNs, 2000, 1e-9) {
		t.Errorf("global bounds: %d, mean width %.1f ns, want 4 and 2000", g.BoundsN, g.WidthMeanNs)
	}
	// The old view (each node to its own end) spreads with the workload.
	if old := res.Method(MethodGlobal); old.DevMaxAbsPct < 5 {
		t.Errorf("own-end deviation max %.3f%%, want the workload's several %%", old.DevMaxAbsPct)
	}
	a := res.PaperMethod(MethodBarrier)
	wantA := []float64{1_025_000, 970_000, 995_000, 995_000}
	meanA := (1_025_000 + 970_000 + 995_000 + 995_000) / 4.0
	for r, w := range wantA {
		if want := (w - meanA) / meanA * 100; !near(a.Devs[r], want, 1e-9) {
			t.Errorf("barrier: node %d deviation %.4f%%, want %.4f%%", r, a.Devs[r], want)
		}
	}
	// +2.886%, -2.635%, -0.125%, -0.125%.
	if a.Within != [3]float64{0.5, 0.5, 0} || a.BoundsN != 0 || a.Coverage != -1 {
		t.Errorf("barrier: within %v bounds %d coverage %v, want [0.5 0.5 0], 0, -1", a.Within, a.BoundsN, a.Coverage)
	}
	// Its own interval is measured exactly (perfect rate), but the
	// operation ran from the first start-barrier exit (2 ms) to the last
	// end-barrier exit (3.025 ms): node 1 is 55 us short, 5.366%.
	if !near(a.ErrMaxPct, 55_000.0/1_025_000*100, 1e-9) || !near(a.ErrPcts[0], 0, 1e-12) {
		t.Errorf("barrier: error max %.4f%%, node 0 %.4f%%; want 5.3659%% and 0", a.ErrMaxPct, a.ErrPcts[0])
	}
	// (b') on the same executions: to the last end-barrier exit.
	if b := res.PaperMethod(MethodGlobalAtBarrier); b == nil || b.N != 4 {
		t.Errorf("global@barrier paper view: %+v", b)
	}
}

// TestPaperClockErrorApartFromStartSkew: four nodes with exact clocks
// (global = raw = truth) run a scheduled execution; node 2 really starts
// 30 us after the others (under ReproMPI's limit), every node ends at
// 1.1 ms. The stamps are exact, so the clock-only error must read 0; the
// start skew is node 2's 30 us of the 1 ms operation, 3%, which the old
// "error in % of the op" counted as the clock's.
func TestPaperClockErrorApartFromStartSkew(t *testing.T) {
	late := []int64{0, 0, 30_000, 0}
	var ss []Stamp
	for r := range 4 {
		start := 100_000 + late[r]
		s := st(0, ModeScheduled, r, EventStart, start, 0, start, 500)
		s.Target = 100_000
		ss = append(ss, s, st(0, ModeScheduled, r, EventEnd, 1_100_000, 0, 1_100_000, 500))
	}
	res, err := Analyze(ss, func(r int64) int64 { return r })
	if err != nil {
		t.Fatal(err)
	}
	g := res.PaperMethod(MethodGlobal)
	if g == nil || g.N != 4 || !g.HasTruth {
		t.Fatalf("global paper view: %+v", g)
	}
	if g.ClockErrMaxPct > 1e-9 || g.ClockErrWithin != [3]float64{1, 1, 1} {
		t.Errorf("clock-only error max %.6f%%, within %v; want 0 (the clocks are exact)", g.ClockErrMaxPct, g.ClockErrWithin)
	}
	if !near(g.SkewMaxPct, 3, 1e-9) || !near(g.SkewPcts[2], 3, 1e-9) || g.SkewPcts[0] != 0 {
		t.Errorf("start skew max %.6f%%, per node %v; want 3%% for node 2, 0 for the others", g.SkewMaxPct, g.SkewPcts)
	}
	// The whole error is the skew (with its sign: node 2's time is short).
	if !near(g.ErrPcts[2], -3, 1e-9) || !near(g.ErrMaxPct, 3, 1e-9) {
		t.Errorf("error against the whole op: node 2 %.6f%%, max %.6f%%; want -3%% and 3%%", g.ErrPcts[2], g.ErrMaxPct)
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, res, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"clock-only error in % of the op", "start skew in % of the op",
		"0.0000% / 0.0000% / 0.0000% | 100% / 100% / 100% | 0.0000% / 3.0000% / 3.0000% |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
}

// TestReproMPIInvalidates: an execution with a node later than the limit
// is left out of the scheduled methods and counted, as ReproMPI does.
func TestReproMPIInvalidates(t *testing.T) {
	var ss []Stamp
	for e := range 3 {
		for r := range 2 {
			base := int64(e) * 10_000_000
			late := int64(0)
			if e == 1 && r == 1 {
				late = 150_000
			}
			s := st(e, ModeScheduled, r, EventStart, base+late, 0, base+late, 100)
			s.Target = base
			ss = append(ss, s, st(e, ModeScheduled, r, EventEnd, base+1_000_000, 0, base+1_000_000, 100))
		}
	}
	for _, tc := range []struct {
		limit            int64
		kept, late, left int
	}{
		{LateLimitNs, 2, 1, 1},
		{200_000, 3, 0, 0},
		{-1, 3, 1, 0},
	} {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			res, err := AnalyzeWith(ss, nil, Options{LateLimitNs: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			w := res.Method(MethodWindow)
			if w.N != tc.kept || res.LateExecs != tc.late || res.Scheduled != 3 {
				t.Errorf("window %d, late %d, scheduled %d; want %d, %d, 3", w.N, res.LateExecs, res.Scheduled, tc.kept, tc.late)
			}
			if p := res.PaperMethod(MethodGlobal); p.N != 2*tc.kept {
				t.Errorf("paper view of (b): %d node times, want %d", p.N, 2*tc.kept)
			}
			var md bytes.Buffer
			if err := WriteMarkdown(&md, res, nil); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%d of 3 scheduled executions", tc.late); !strings.Contains(md.String(), want) {
				t.Errorf("report lacks %q:\n%s", want, md.String())
			}
			if strings.Contains(md.String(), "left out as ReproMPI") != (tc.limit >= 0) || res.KeptLate != (tc.limit < 0) {
				t.Errorf("report says nothing (or the wrong thing) about leaving them out:\n%s", md.String())
			}
		})
	}
}

// synthStamps writes a measurement with known truth: n nodes, execs
// iterations of a 1-ms operation. Global time errs by up to +-errNs per
// node (constant plus jitter), the scheduled starts are at most 50 ns late;
// barrier exits are skewed by up to skewNs; the nodes' own clocks run 20
// ppm apart. Bounds are +-halfNs.
func synthStamps(seed uint64, n, execs int, errNs, skewNs, halfNs int64) []Stamp {
	rng := rand.New(rand.NewPCG(seed, 1))
	off := make([]int64, n)
	for r := range off {
		off[r] = rng.Int64N(errNs) - errNs/2
	}
	rate := make([]float64, n)
	for r := range rate {
		rate[r] = 1 + float64(r)*20e-6
	}
	glob := func(r int, raw int64) gtime.Time {
		est := raw + off[r] + rng.Int64N(errNs/2+1) - errNs/4
		return gtime.Time{Est: est, Earliest: est - halfNs, Latest: est + halfNs, Status: gtime.StatusSynced}
	}
	local := func(r int, raw int64) int64 { return int64(float64(raw) * rate[r]) }
	var ss []Stamp
	for e := range execs {
		base := int64(1e9) + int64(e)*20_000_000
		for r := range n {
			start := base + rng.Int64N(50)
			end := base + 600_000 + rng.Int64N(400_000) // the workload: each node's part ends elsewhere
			s := Stamp{Exec: e, Mode: ModeScheduled, Rank: r, Event: EventStart, Peer: -1, Raw: start, Local: local(r, start), Target: base}
			s.Global = glob(r, start)
			s.Global.Est = max(s.Global.Est, base) // a node never starts before its instant
			s.Retro = s.Global
			x := Stamp{Exec: e, Mode: ModeScheduled, Rank: r, Event: EventEnd, Peer: -1, Raw: end, Local: local(r, end), Global: glob(r, end)}
			x.Retro = x.Global
			bs, be := base+10_000_000+rng.Int64N(skewNs), base+11_000_000+rng.Int64N(skewNs)
			y := Stamp{Exec: e, Mode: ModeBarrier, Rank: r, Event: EventStart, Peer: -1, Raw: bs, Local: local(r, bs), Global: glob(r, bs)}
			z := Stamp{Exec: e, Mode: ModeBarrier, Rank: r, Event: EventEnd, Peer: -1, Raw: be, Local: local(r, be), Global: glob(r, be)}
			ss = append(ss, s, x, y, z)
		}
	}
	return ss
}

// TestPaperSyntheticFiles: stamp files of a synthetic measurement, written
// and read back as gclock measure report reads them. With global time
// within +-200 ns the global-time method's node times agree within the
// paper's +-0.04% of a 1-ms operation, as PGCCS's did; barrier exits skewed
// by up to 30 us keep the barrier-aligned method far from it; the
// report says both, with the bounds, without a truth.
func TestPaperSyntheticFiles(t *testing.T) {
	ss := synthStamps(3, 4, 200, 400, 30_000, 600)
	var all []Stamp
	for r := range 4 {
		var mine []Stamp
		for _, s := range ss {
			if s.Rank == r {
				mine = append(mine, s)
			}
		}
		var f bytes.Buffer
		if err := WriteStamps(&f, mine); err != nil {
			t.Fatal(err)
		}
		back, err := ReadStamps(&f, fmt.Sprintf("stamps-r%d.csv", r))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, back...)
	}
	truth := func(raw int64) int64 { return raw }
	for _, tr := range []Truth{nil, truth} {
		res, err := Analyze(all, tr)
		if err != nil {
			t.Fatal(err)
		}
		g, a := res.PaperMethod(MethodGlobal), res.PaperMethod(MethodBarrier)
		if g == nil || a == nil || g.N != 800 || a.N != 800 || res.LateExecs != 0 {
			t.Fatalf("paper views %+v %+v, late %d", g, a, res.LateExecs)
		}
		// Start stamps differ by at most 400 + 200 + 50 ns: 0.08% of a
		// 0.6-1 ms operation at worst; most within 0.04%.
		if g.DevMaxAbsPct > 0.1 || g.Within[1] != 1 || g.Within[2] < 0.7 {
			t.Errorf("global: max %.4f%%, within %v; want <= 0.1%%, all within 0.24%%, >= 70%% within 0.04%%", g.DevMaxAbsPct, g.Within)
		}
		if a.Within[2] > 0.1 || a.Within[1] > 0.5 || a.DevMaxAbsPct < 1.8 {
			t.Errorf("barrier: within %v, max %.3f%%; want under 10%% within 0.04%%, most beyond 0.24%%, some beyond 1.8%%", a.Within, a.DevMaxAbsPct)
		}
		if g.BoundsN != 800 || !near(g.WidthMeanNs, 2400, 1e-6) {
			t.Errorf("global bounds %d, width %.1f; want 800, 2400 ns", g.BoundsN, g.WidthMeanNs)
		}
		var md bytes.Buffer
		if err := WriteMarkdown(&md, res, nil); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"As seed 003 presents it", "+-0.04% (PGCCS)", "+-1.8% (MPI_Barrier)", "2.40 us ("} {
			if !strings.Contains(md.String(), want) {
				t.Errorf("report (truth %v) lacks %q", tr != nil, want)
			}
		}
		if tr == nil {
			if g.HasTruth || strings.Contains(md.String(), "error in % of the op") {
				t.Error("errors reported without a truth")
			}
			continue
		}
		// The truth: every node's true time to the common end, and the
		// error each method makes in % of the operation.
		if g.ErrP99Pct > 0.1 || g.Coverage != 1 {
			t.Errorf("global error p99 %.4f%%, coverage %.3f; want <= 0.1%% and 1", g.ErrP99Pct, g.Coverage)
		}
		// The true times agree as closely as the starts (<= 50 ns).
		if g.TrueWithin[2] != 1 {
			t.Errorf("true times within %v, want all within 0.04%%", g.TrueWithin)
		}
		if !strings.Contains(md.String(), "error in % of the op") {
			t.Error("report with a truth lacks the error in % of the op")
		}
		// Starts at most 50 ns apart: the clock-only error carries the
		// rest, up to the 400 + 200 ns of the global clocks.
		if g.SkewMaxPct > 50.0/600_000*100 || g.ClockErrP99Pct > 0.1 {
			t.Errorf("start skew max %.4f%%, clock-only error p99 %.4f%%; want <= 50 ns of the op and <= 0.1%%", g.SkewMaxPct, g.ClockErrP99Pct)
		}
	}
}

// TestLateAgainstCommonWindow: a scheduled execution's window opens at
// the earliest target of its nodes, so a node that fell behind and aimed
// at a later slot of the grid (20 ms on) is late for the execution
// however punctual it was for its own slot (lab, load 17: 100 of 300
// executions had nodes aiming at different slots).
func TestLateAgainstCommonWindow(t *testing.T) {
	const slot = 20_000_000
	tests := []struct {
		name    string
		targets [2]int64 // each node's target
		starts  [2]int64 // each node's start (global = raw)
		late    bool
		maxLate float64 // the largest lateness Analyze saw (LateP99Ns of two values)
	}{
		{"on time", [2]int64{slot, slot}, [2]int64{slot, slot + 50_000}, false, 50_000},
		{"one late", [2]int64{slot, slot}, [2]int64{slot, slot + 150_000}, true, 150_000},
		{"later slot, punctual for it", [2]int64{slot, 2 * slot}, [2]int64{slot, 2*slot + 10}, true, slot + 10},
		{"earlier slot taken by the other", [2]int64{2 * slot, slot}, [2]int64{2*slot + 30_000, slot}, true, slot + 30_000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ss []Stamp
			for r := range 2 {
				s := st(0, ModeScheduled, r, EventStart, tc.starts[r], 0, tc.starts[r], 100)
				s.Target = tc.targets[r]
				end := tc.starts[r] + 1_000_000
				ss = append(ss, s, st(0, ModeScheduled, r, EventEnd, end, 0, end, 100))
			}
			res, err := Analyze(ss, func(raw int64) int64 { return raw })
			if err != nil {
				t.Fatal(err)
			}
			if got := res.LateExecs == 1; got != tc.late || res.Scheduled != 1 {
				t.Errorf("late executions %d of %d, want late %v", res.LateExecs, res.Scheduled, tc.late)
			}
			if res.LateP99Ns != tc.maxLate {
				t.Errorf("lateness p99 %v ns, want %v", res.LateP99Ns, tc.maxLate)
			}
			if g := res.Method(MethodGlobal); (g != nil) == tc.late {
				t.Errorf("global-time method present %v, want %v (a late execution is left out)", g != nil, !tc.late)
			}
		})
	}
}
