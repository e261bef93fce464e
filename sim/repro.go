package sim

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
)

// A report reproduces one paper result and prints our numbers beside the
// paper's.
type report struct {
	summary string
	run     func(ctx context.Context, w io.Writer, opt Options) error
}

var reports = map[string]report{
	"liao-table1":        {"Liao Table 1: adaptive vs non-adaptive, idle vs loaded", writeLiaoTable1},
	"liao-fig3":          {"Liao Fig. 3: drift 1/2^18 added to every node but node 1", writeLiaoFig3},
	"jezequel-fps-t40":   {"Jezequel sec. 6: FPS-T40 drift bound and linear growth after 300 s", writeJezequel},
	"intel-drift-change": {"Intel: start/end linear correction vs spline through sessions", writeIntel},
	"trust":              {"Synced is a promise: coverage of synced reads on clocks that step, wander and break their stated model", writeTrust},
}

// ReportNames lists the paper reproductions Report knows.
func ReportNames() []string {
	var out []string
	for n := range reports {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Report runs the paper reproduction called name ("all": every one) and
// writes our numbers beside the paper's to w.
func Report(ctx context.Context, name string, w io.Writer, opt Options) error {
	if name == "all" {
		for i, n := range ReportNames() {
			if i > 0 {
				fmt.Fprintf(w, "\n%s\n\n", strings.Repeat("-", 100))
			}
			if err := Report(ctx, n, w, opt); err != nil {
				return err
			}
		}
		return nil
	}
	r, ok := reports[name]
	if !ok {
		return fmt.Errorf("no report %q (have %v)", name, ReportNames())
	}
	fmt.Fprintf(w, "%s\n\n", r.summary)
	return r.run(ctx, w, opt)
}

func shippedOrFail(name string) (Scenario, error) {
	s, err := Shipped(name)
	if err != nil {
		return s, fmt.Errorf("report: %w", err)
	}
	return s, nil
}

// Table1 is our Liao Table 1: [idle, loaded] x [non-adaptive, adaptive].
type Table1 struct {
	Idle, Loaded [2]Summary
}

// liaoTable1Paper is Liao et al.'s Table 1 in us: err, std for idle then
// loaded; rows non-adaptive, adaptive.
var liaoTable1Paper = [2][4]float64{{0.80, 1.00, 2.54, 2.83}, {0.65, 0.95, 1.26, 1.45}}

// LiaoTable1 runs the two shipped Table 1 scenarios with and without
// adaptive periods. shorten, if positive, replaces their duration (tests).
func LiaoTable1(ctx context.Context, opt Options, shorten time.Duration) (Table1, error) {
	var t Table1
	for i, name := range []string{"liao-table1-idle", "liao-table1-loaded"} {
		sc, err := shippedOrFail(name)
		if err != nil {
			return t, err
		}
		if shorten > 0 {
			sc.Duration = Duration(shorten)
			sc.Eval.Warmup = min(sc.Eval.Warmup, sc.Duration/4)
		}
		for j, ad := range []bool{false, true} {
			s := sc
			s.Engine.Adaptive = ad
			res, err := Run(ctx, s, opt)
			if err != nil {
				return t, fmt.Errorf("%s adaptive=%v: %w", name, ad, err)
			}
			if i == 0 {
				t.Idle[j] = res.Others
			} else {
				t.Loaded[j] = res.Others
			}
		}
	}
	return t, nil
}

func writeLiaoTable1(ctx context.Context, w io.Writer, opt Options) error {
	t, err := LiaoTable1(ctx, opt, 0)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tidle err\tidle std\tloaded err\tloaded std\tidle cov\tloaded cov\tidle msg/s\tloaded msg/s\t")
	for j, name := range []string{"non-adaptive", "adaptive"} {
		p := liaoTable1Paper[j]
		fmt.Fprintf(tw, "paper %s (us)\t%.2f\t%.2f\t%.2f\t%.2f\t\t\t\t\t\n", name, p[0], p[1], p[2], p[3])
		i, l := t.Idle[j], t.Loaded[j]
		fmt.Fprintf(tw, "gclock %s (us)\t%.3f\t%.3f\t%.3f\t%.3f\t%.4f\t%.4f\t%.2f\t%.2f\t\n", name,
			i.ErrorMeanNs/1e3, i.ErrorStdNs/1e3, l.ErrorMeanNs/1e3, l.ErrorStdNs/1e3,
			i.BoundCoverage, l.BoundCoverage, i.MessagesPerNodePerS, l.MessagesPerNodePerS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nloaded error, non-adaptive / adaptive: paper %.2f, gclock %.2f\n",
		liaoTable1Paper[0][2]/liaoTable1Paper[1][2], t.Loaded[0].ErrorMeanNs/t.Loaded[1].ErrorMeanNs)
	fmt.Fprintf(w, "idle error, non-adaptive / adaptive:   paper %.2f, gclock %.2f\n",
		liaoTable1Paper[0][0]/liaoTable1Paper[1][0], t.Idle[0].ErrorMeanNs/t.Idle[1].ErrorMeanNs)
	fmt.Fprintln(w, "err = mean |Est - truth| over all non-reference nodes, std of the signed error (scenarios liao-table1-idle, liao-table1-loaded)")
	return nil
}

// Fig3 is node 1's error in the Liao Fig. 3 scenario, before and after the
// drift step, for [non-adaptive, adaptive].
type Fig3 struct {
	Scenario                    string
	StepAt                      time.Duration
	Before, After               [2]SeriesStats
	Transient                   [2]SeriesStats // the first fig3Transient after the step
	ResyncsBefore, ResyncsAfter [2]int
}

// SeriesStats summarises one stretch of a traced node's error.
type SeriesStats struct {
	N       int
	MeanAbs float64 // ns
	MaxAbs  int64   // ns
	Covered float64 // share of points inside the bounds
}

func stretch(pts []TracePoint, from, to float64) SeriesStats {
	var s SeriesStats
	var cov int
	for _, p := range pts {
		if p.T < from || p.T >= to || p.Status == engine.StatusUnsynced {
			continue
		}
		a := satmath.Abs(p.Err)
		s.N++
		s.MeanAbs += float64(a)
		s.MaxAbs = max(s.MaxAbs, a)
		if p.Lo <= 0 && p.Hi >= 0 {
			cov++
		}
	}
	if s.N > 0 {
		s.MeanAbs /= float64(s.N)
		s.Covered = float64(cov) / float64(s.N)
	}
	return s
}

// fig3Transient is the stretch after the drift step in which the
// non-adaptive engine, still extrapolating with the old drift, deviates.
const fig3Transient = 30 * time.Second

// LiaoFig3 runs a shipped Fig. 3 scenario (liao-fig3 or liao-fig3-loaded)
// with and without adaptive periods and measures node 1 before and after
// the drift step.
func LiaoFig3(ctx context.Context, opt Options, name string) (Fig3, error) {
	f := Fig3{Scenario: name}
	sc, err := shippedOrFail(name)
	if err != nil {
		return f, err
	}
	if len(sc.Clocks.DriftSteps) == 0 {
		return f, fmt.Errorf("%s has no drift step", name)
	}
	f.StepAt = time.Duration(sc.Clocks.DriftSteps[0].At)
	step := f.StepAt.Seconds()
	opt.Trace = true
	sc.Eval.PlotNodes = []int{1}
	for j, ad := range []bool{false, true} {
		s := sc
		s.Engine.Adaptive = ad
		res, err := Run(ctx, s, opt)
		if err != nil {
			return f, fmt.Errorf("%s adaptive=%v: %w", name, ad, err)
		}
		pts := res.Trace.Points[0]
		warm := time.Duration(s.Eval.Warmup).Seconds()
		f.Before[j] = stretch(pts, warm, step)
		f.After[j] = stretch(pts, step, math.Inf(1))
		f.Transient[j] = stretch(pts, step, step+fig3Transient.Seconds())
		for _, e := range res.Trace.Events[0] {
			if e.Kind != engine.EvGlobalResync || e.T < warm {
				continue
			}
			if e.T < step {
				f.ResyncsBefore[j]++
			} else {
				f.ResyncsAfter[j]++
			}
		}
	}
	return f, nil
}

func writeLiaoFig3(ctx context.Context, w io.Writer, opt Options) error {
	fmt.Fprintf(w, "paper (Fig. 3, qualitative): adaptive keeps its accuracy, non-adaptive deviates sharply, most under load.\n")
	for _, name := range []string{"liao-fig3", "liao-fig3-loaded"} {
		f, err := LiaoFig3(ctx, opt, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%s: node 1, drift step at %v\n", name, f.StepAt)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tmean |err| before\tmax before\tmean |err| %v after\tmax %v after\tmean |err| after\tmax after\tcoverage after\tresyncs before\tresyncs after\t\n", fig3Transient, fig3Transient)
		for j, mode := range []string{"non-adaptive", "adaptive"} {
			b, tr, a := f.Before[j], f.Transient[j], f.After[j]
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%d\t%d\t\n", mode, FormatNs(b.MeanAbs), FormatNs(float64(b.MaxAbs)),
				FormatNs(tr.MeanAbs), FormatNs(float64(tr.MaxAbs)), FormatNs(a.MeanAbs), FormatNs(float64(a.MaxAbs)), a.Covered,
				f.ResyncsBefore[j], f.ResyncsAfter[j])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nplot it: gclock sim --plot fig3.png liao-fig3-loaded (and --adaptive=false)")
	return nil
}

// Jezequel is our Jezequel section 6 FPS-T40 row: bound widths at the end
// of the acquisition and after one hour, the drift bound they imply, and
// how linear the growth is.
type Jezequel struct {
	Acquisition time.Duration
	Nodes       []int
	WidthAtAcq  []int64   // full bound width (Latest - Earliest) at the end of acquisition, per node
	WidthAt1h   []int64   // ... at the end of the run
	ErrAt1h     []int64   // |Est - truth| at the end
	DriftBound  []float64 // (W(end) - W(acq)) / 2 / (end - acq): the bound on |beta error|
	Linearity   []float64 // growth of W in the last half / in the first half of the free run
	Coverage    []float64 // share of free-run points inside the bounds
	// ErrR2 is the R^2 of a straight line fitted to the signed error
	// Est - truth over the free run: the error of a constant drift estimate
	// grows linearly (up to the clock's granularity).
	ErrR2 []float64
	// ErrResid is the largest |Est - truth - line| over the free run, ns:
	// how far the error strays from that straight line. When the learned
	// drift is good the error hardly grows (tens of us in an hour against
	// the reads' 64-us granularity), ErrR2 is then small whatever the
	// estimator did, and this is the statement that still holds.
	ErrResid []int64
	// ErrGrowth is |the line's slope| x the free run's length, ns: how much
	// the error grew.
	ErrGrowth     []int64
	TheoryDriftLB float64 // 2 g / acquisition (Jezequel 4.3, isotropic)
	Mu            time.Duration
}

// JezequelFPS runs the shipped jezequel-fps-t40 scenario; dur, if positive,
// replaces its duration (tests); noMu runs it with causality only (no known
// minimum delay, engine.hull_min_delay 0).
func JezequelFPS(ctx context.Context, opt Options, dur time.Duration, noMu bool) (Jezequel, error) {
	var j Jezequel
	sc, err := shippedOrFail("jezequel-fps-t40")
	if err != nil {
		return j, err
	}
	if dur > 0 {
		sc.Duration = Duration(dur)
	}
	if noMu {
		sc.Engine.HullMinDelay = 0
	}
	j.Mu = time.Duration(sc.Engine.HullMinDelay)
	if len(sc.Phases) < 2 {
		return j, fmt.Errorf("jezequel-fps-t40 needs an acquisition and a free phase")
	}
	j.Acquisition = time.Duration(sc.Phases[1].Start)
	j.TheoryDriftLB = 2 * float64(sc.Clocks.Granularity) / float64(j.Acquisition)
	opt.Trace = true
	res, err := Run(ctx, sc, opt)
	if err != nil {
		return j, fmt.Errorf("jezequel-fps-t40: %w", err)
	}
	acq := j.Acquisition.Seconds()
	end := time.Duration(sc.Duration).Seconds()
	mid := (acq + end) / 2
	for i, n := range res.Trace.Nodes {
		pts := res.Trace.Points[i]
		at := func(t float64) (TracePoint, bool) {
			k := sort.Search(len(pts), func(k int) bool { return pts[k].T >= t })
			if k == len(pts) {
				k--
			}
			if k < 0 || pts[k].Status == engine.StatusUnsynced {
				return TracePoint{}, false
			}
			return pts[k], true
		}
		pa, ok1 := at(acq)
		pm, ok2 := at(mid)
		pe, ok3 := at(end)
		if !ok1 || !ok2 || !ok3 {
			return j, fmt.Errorf("jezequel-fps-t40: node %d has no estimate at the end of the acquisition", n)
		}
		wa, wm, we := satmath.Sub(pa.Hi, pa.Lo), satmath.Sub(pm.Hi, pm.Lo), satmath.Sub(pe.Hi, pe.Lo)
		j.Nodes = append(j.Nodes, n)
		j.WidthAtAcq = append(j.WidthAtAcq, wa)
		j.WidthAt1h = append(j.WidthAt1h, we)
		j.ErrAt1h = append(j.ErrAt1h, satmath.Abs(pe.Err))
		j.DriftBound = append(j.DriftBound, float64(we-wa)/2/((pe.T-pa.T)*1e9))
		j.Linearity = append(j.Linearity, float64(we-wm)/math.Max(float64(wm-wa), 1))
		j.Coverage = append(j.Coverage, stretch(pts, acq, math.Inf(1)).Covered)
		var xs, ys []float64
		for _, p := range pts {
			if p.T >= acq && p.Status != engine.StatusUnsynced {
				xs = append(xs, p.T-acq)
				ys = append(ys, float64(p.Err))
			}
		}
		alpha, beta := stat.LinearRegression(xs, ys, nil, false)
		j.ErrR2 = append(j.ErrR2, stat.RSquared(xs, ys, nil, alpha, beta))
		resid := 0.0
		for k := range xs {
			resid = math.Max(resid, math.Abs(ys[k]-alpha-beta*xs[k]))
		}
		j.ErrResid = append(j.ErrResid, int64(math.Ceil(resid)))
		j.ErrGrowth = append(j.ErrGrowth, int64(math.Abs(beta)*(end-acq)))
	}
	return j, nil
}

func writeJezequel(ctx context.Context, w io.Writer, opt Options) error {
	fmt.Fprintf(w, "paper FPS-T40 (g = 64us, T_min = 3 ms, acquisition 300 s): precision on beta 5e-7,\n")
	fmt.Fprintf(w, "initial precision of LC 0.2 ms, after one hour 2 ms; G = 2g + 2 dbeta t grows linearly.\n")
	for _, noMu := range []bool{false, true} {
		j, err := JezequelFPS(ctx, opt, 0, noMu)
		if err != nil {
			return err
		}
		if noMu {
			fmt.Fprintf(w, "\ngclock, causality only (no known minimum delay, the engine's default):\n")
		} else {
			fmt.Fprintf(w, "\ngclock with Jezequel's mu = %v (paper theory: drift bound >= 2g/dT = %.2g):\n", j.Mu, j.TheoryDriftLB)
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "node\thops\twidth at 300 s\twidth at 1 h\t|err| at 1 h\tdrift bound\twidth linearity\terror R^2\tcoverage\t")
		for i, n := range j.Nodes {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%.2g\t%.3f\t%.3f\t%.4f\t\n", n, popcount(n), FormatNs(float64(j.WidthAtAcq[i])),
				FormatNs(float64(j.WidthAt1h[i])), FormatNs(float64(j.ErrAt1h[i])), j.DriftBound[i], j.Linearity[i], j.ErrR2[i], j.Coverage[i])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nwidth = Latest - Earliest (the paper's precision G); drift bound = half the width's growth rate")
	fmt.Fprintln(w, "after the acquisition; width linearity = its growth in the second half of the free run / in the")
	fmt.Fprintln(w, "first half (1 = linear); error R^2 = of a straight line fitted to Est - truth over the free run.")
	return nil
}

func popcount(n int) int {
	c := 0
	for ; n > 0; n &= n - 1 {
		c++
	}
	return c
}

// Intel is our reproduction of Intel's post-mortem clock correction: the
// error of node 1's corrected timestamps against the truth, with a line
// through the first and last sync sessions only, and with a spline through
// one condensed point per session.
type Intel struct {
	Sessions           int
	StepAt             time.Duration
	Line, Spline       SeriesStats // over every reading between the first and last session
	LineMid, SplineMid SeriesStats // readings around the drift change (middle third)
}

// IntelCorrection runs the shipped intel-drift-change scenario, which
// records node 1's sync sessions and readings, and corrects the readings
// with estimate.FitLine (two sessions) and estimate.NewSpline (all).
func IntelCorrection(ctx context.Context, opt Options) (Intel, error) {
	var in Intel
	sc, err := shippedOrFail("intel-drift-change")
	if err != nil {
		return in, err
	}
	if len(sc.Clocks.DriftSteps) > 0 {
		in.StepAt = time.Duration(sc.Clocks.DriftSteps[0].At)
	}
	res, err := Run(ctx, sc, opt)
	if err != nil {
		return in, fmt.Errorf("intel-drift-change: %w", err)
	}
	rec := res.Recording
	if rec == nil || len(rec.Rounds) < 3 {
		return in, fmt.Errorf("intel-drift-change: node %d recorded too few sync sessions to correct (%d)", sc.Eval.RecordNode, len(rec.Rounds))
	}
	in.Sessions = len(rec.Rounds)
	first, last := rec.Rounds[0], rec.Rounds[len(rec.Rounds)-1]
	line, err := estimate.FitLine(append(append([]estimate.Sample(nil), first...), last...), estimate.DefaultDropFrac)
	if err != nil {
		return in, fmt.Errorf("intel-drift-change: linear fit through the first and last sessions: %w", err)
	}
	var pts []estimate.Point
	for i, r := range rec.Rounds {
		p, err := estimate.Condense(r)
		if err != nil {
			return in, fmt.Errorf("intel-drift-change: condensing session %d: %w", i, err)
		}
		if n := len(pts); n > 0 && (p.X <= pts[n-1].X || p.Y <= pts[n-1].Y) {
			continue // a repeated round of the same session
		}
		pts = append(pts, p)
	}
	spl, err := estimate.NewSpline(pts)
	if err != nil {
		return in, fmt.Errorf("intel-drift-change: spline through %d sessions: %w", len(pts), err)
	}
	x0, x1 := pts[0].X, pts[len(pts)-1].X
	var lineErr, splErr, lineMid, splMid []TracePoint
	span := x1 - x0
	for _, r := range rec.Readings {
		if r.Local < x0 || r.Local > x1 {
			continue
		}
		le, _, _ := line.At(r.Local)
		se := spl.Map(r.Local)
		t := float64(r.T) / 1e9
		lp := TracePoint{T: t, Err: satmath.Sub(le, r.Truth), Status: engine.StatusSynced, Lo: 1, Hi: -1}
		sp := TracePoint{T: t, Err: satmath.Sub(se, r.Truth), Status: engine.StatusSynced, Lo: 1, Hi: -1}
		lineErr, splErr = append(lineErr, lp), append(splErr, sp)
		if r.Local-x0 >= span/3 && r.Local-x0 <= 2*span/3 {
			lineMid, splMid = append(lineMid, lp), append(splMid, sp)
		}
	}
	all := math.Inf(1)
	in.Line, in.Spline = stretch(lineErr, 0, all), stretch(splErr, 0, all)
	in.LineMid, in.SplineMid = stretch(lineMid, 0, all), stretch(splMid, 0, all)
	if in.Line.N == 0 {
		return in, fmt.Errorf("intel-drift-change: no reading between the first and last sessions")
	}
	return in, nil
}

func writeIntel(ctx context.Context, w io.Writer, opt Options) error {
	in, err := IntelCorrection(ctx, opt)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "paper (qualitative): with sync at start and end only, a linear transformation; with VT_timesync\n")
	fmt.Fprintf(w, "sessions during the run, a constrained spline through one condensed point per session.\n\n")
	fmt.Fprintf(w, "node 1 changes drift by 5 ppm at %v; %d sessions recorded\n", in.StepAt, in.Sessions)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "correction\tmean |err|\tmax |err|\tmean |err| mid-run\tmax mid-run\treadings\t")
	for _, r := range []struct {
		name   string
		a, mid SeriesStats
	}{{"line, first+last session (FitLine)", in.Line, in.LineMid}, {"spline, every session (NewSpline)", in.Spline, in.SplineMid}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t\n", r.name, FormatNs(r.a.MeanAbs), FormatNs(float64(r.a.MaxAbs)),
			FormatNs(r.mid.MeanAbs), FormatNs(float64(r.mid.MaxAbs)), r.a.N)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nline / spline mean |err| = %.1f\n", in.Line.MeanAbs/math.Max(in.Spline.MeanAbs, 1))
	return nil
}
