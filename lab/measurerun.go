package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/measure"
	"github.com/gclock/gclock/netmodel"
)

// MeasureSpec is one whole lab measurement (gclock lab measure): a lab,
// gclock daemons on its hosts, then `gclock measure` on every host (an
// operation) or between hosts 0 and 1 (the one-way latency per size).
type MeasureSpec struct {
	// Lab is the lab to build; Measure sets its Link from Link and, for
	// the latency test or a direct link, its Hosts to 2.
	Lab netlab.Config
	// Link is the link model between any two hosts, in ParseLink's syntax.
	Link string
	// Gclock runs the daemons (its Command is required).
	Gclock GclockConfig
	// Command runs `gclock measure` (the gclock binary and "measure"),
	// with Env added to its environment.
	Command []string
	Env     []string
	// Load is the number of CPU-bound processes beside the daemons and
	// nodes (0..64).
	Load int
	// LoadOutside, Flood and Cross are the load beside the lab, as
	// RunSpec has them (`gclock lab bench --profile busy` is Load 4 and
	// LoadOutside 2): busy loops outside the lab's namespaces, softirq
	// frames a second, the cross traffic's share of Lab.PortRate. Flood
	// and Cross need LoadCommand (the gclock binary), run with Env.
	LoadOutside int
	Flood       int
	Cross       float64
	LoadCommand []string
	// Latency runs the latency test instead of an operation.
	Latency bool
	// The operation (measure.Op*), its executions per iteration
	// (measure.Start*), iterations, their period, the int64s per node
	// (pages per client for the page operation) and the operations per
	// timed execution.
	Op, Start           string
	Runs, Count, Repeat int
	Period              time.Duration
	// SpinWindow is the nodes' -spin-window: 0 busy-waits for every
	// scheduled start (measure.Config.SpinWindow).
	SpinWindow time.Duration
	// NodeSchedFIFO is the nodes' -sched-fifo: SCHED_FIFO at this priority
	// while they wait for a start and run the operation (0: none;
	// measure.Config.SchedFIFO; needs a SpinWindow).
	NodeSchedFIFO int
	// The latency test: message sizes (measure.ParseSizes), messages per
	// size and direction, time between two messages.
	Sizes         string
	LatencyCount  int
	LatencyPeriod time.Duration
	// Interleave sends the sizes in turn (measure.Config.Interleave).
	Interleave bool
	// Progress, if set, gets a line when the lab is about to run.
	Progress io.Writer
}

// DefaultMeasureSpec is gclock lab measure's defaults, without the
// commands (the gclock binary's path).
func DefaultMeasureSpec() MeasureSpec {
	return MeasureSpec{
		Lab: netlab.DefaultConfig(), Link: "pareto:100us:50us", Gclock: DefaultGclockConfig(),
		Op: measure.OpAllreduce, Start: measure.StartBoth, Runs: 300, Count: 1, Repeat: 1,
		Period: 20 * time.Millisecond, Sizes: "64-65536", LatencyCount: 50, LatencyPeriod: 2 * time.Millisecond,
	}
}

// MeasureReport is what Measure found.
type MeasureReport struct {
	Spec   MeasureSpec       // what ran
	Result *measure.Result   // the analysis against the truth
	Run    MeasureResult     // the stamps, the truth and the daemons' evaluation
	Switch []netlab.DirStats // what the switch did during the run (nil on a direct link)
	// KeptLate is the same stamps analysed with the late scheduled
	// executions kept (measure.Options.LateLimitNs -1): the global-time
	// stamps' error over every execution, whether or not ReproMPI's rule
	// leaves it out of Result (nil for the latency test).
	KeptLate *measure.Result
	// LoadAvgStart and LoadAvgEnd are the machine's load average (1, 5,
	// 15 min) when the lab and its load were up and when the nodes were
	// done.
	LoadAvgStart, LoadAvgEnd [3]float64
}

// Measure builds a lab (root), runs the daemons and their warm-up, runs
// the measurement (runMeasure), tears the lab down and analyses the stamps
// against the truth.
func Measure(ctx context.Context, spec MeasureSpec) (MeasureReport, error) {
	out := MeasureReport{Spec: spec}
	lk, err := netmodel.ParseLink(spec.Link)
	if err != nil {
		return out, fmt.Errorf("lab: measure: link: %w", err)
	}
	cfg := spec.Lab
	cfg.Link = lk
	if spec.Latency || lk.Direct {
		cfg.Hosts = 2
	}
	if err := cfg.Validate(); err != nil {
		return out, err
	}
	loads := RunSpec{Load: spec.Load, LoadOutside: spec.LoadOutside, Flood: spec.Flood, Cross: spec.Cross,
		LoadCommand: spec.LoadCommand, LoadEnv: spec.Env}
	if err := checkLoads(loads, cfg.PortRate); err != nil {
		return out, fmt.Errorf("lab: measure: %w", err)
	}
	if spec.NodeSchedFIFO != 0 && (spec.NodeSchedFIFO < 0 || spec.NodeSchedFIFO > 99 || spec.SpinWindow <= 0 || spec.SpinWindow > time.Millisecond) {
		return out, fmt.Errorf("lab: measure: node sched-fifo %d, spin window %v: want a priority 1..99 and a spin window of 1ns..1ms", spec.NodeSchedFIFO, spec.SpinWindow)
	}
	if len(spec.Gclock.Command) == 0 {
		return out, errors.New("lab: measure: gclock command: empty (want the gclock binary and \"daemon\")")
	}
	mc := measureConfig{Gclock: spec.Gclock, Command: spec.Command, Env: spec.Env, Latency: spec.Latency, Margin: 5 * time.Second}
	lead := 200 * time.Millisecond
	if spec.Latency {
		sz, err := measure.ParseSizes(spec.Sizes)
		if err != nil {
			return out, fmt.Errorf("lab: measure: %w", err)
		}
		mc.Args = []string{"-sizes", spec.Sizes, "-count", strconv.Itoa(spec.LatencyCount), "-period", spec.LatencyPeriod.String()}
		if spec.Interleave {
			mc.Args = append(mc.Args, "-interleave")
		}
		mc.Expect = lead + time.Duration(2*spec.LatencyCount*len(sz))*spec.LatencyPeriod + time.Second
	} else {
		if spec.Op == measure.OpCmd {
			return out, errors.New("lab: measure: op cmd: the lab runs the built-in operations (run gclock measure -op cmd on your nodes)")
		}
		mc.Args = []string{"-op", spec.Op, "-runs", strconv.Itoa(spec.Runs), "-start", spec.Start, "-period", spec.Period.String(),
			"-count", strconv.Itoa(spec.Count), "-repeat", strconv.Itoa(spec.Repeat), "-spin-window", spec.SpinWindow.String()}
		if spec.NodeSchedFIFO > 0 {
			mc.Args = append(mc.Args, "-sched-fifo", strconv.Itoa(spec.NodeSchedFIFO))
		}
		mc.Expect = lead + time.Duration(spec.Runs)*spec.Period + time.Second
	}
	if spec.Progress != nil {
		fmt.Fprintf(spec.Progress, "gclock lab measure: %d hosts, link %s: %v warm-up, then about %v of measurement\n", cfg.Hosts, spec.Link, spec.Gclock.Warmup, mc.Expect)
	}
	l, err := Up(ctx, cfg)
	if err != nil {
		return out, err
	}
	defer l.Down()
	// The loads run until the lab goes down (Down stops them), at most as
	// long as the daemons may run, plus a margin.
	if err := startLoads(ctx, l, loads, spec.Gclock.Warmup+measureCap(mc)+loadMargin); err != nil {
		return out, err
	}
	if sw := l.Switch(); sw != nil {
		sw.ResetStats()
	}
	out.LoadAvgStart = loadAvg()
	r, err := l.runMeasure(ctx, mc)
	out.LoadAvgEnd = loadAvg()
	if err != nil {
		return out, err
	}
	if sw := l.Switch(); sw != nil {
		out.Switch = sw.Stats()
	}
	res, err := measure.Analyze(r.Stamps, r.Truth)
	if err != nil {
		return out, err
	}
	out.Result, out.Run = res, r
	if !spec.Latency {
		if out.KeptLate, err = measure.AnalyzeWith(r.Stamps, r.Truth, measure.Options{LateLimitNs: -1}); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Checks are the report's verdicts: the latency check, or the operation's
// against measure.DefaultTargets.
func (r MeasureReport) Checks() []measure.Check {
	if r.Spec.Latency {
		return []measure.Check{r.Result.LatencyCheck()}
	}
	return r.Result.Check(measure.DefaultTargets())
}

// WriteMarkdown writes the run's conditions, the daemons' and the switch's
// figures over it, and the measurement's report (measure.WriteMarkdown).
func (r MeasureReport) WriteMarkdown(w io.Writer) error {
	s, g := r.Spec, r.Run.Gclock.Summary
	what := fmt.Sprintf("%s x%d on %d hosts, %d iterations %v apart", s.Op, s.Repeat, s.Lab.Hosts, s.Runs, s.Period)
	if s.Latency {
		what = fmt.Sprintf("one-way messages between hosts 0 and 1, sizes %s, %d per size and direction, %v apart", s.Sizes, s.LatencyCount, s.LatencyPeriod)
	}
	clocks := "emulated"
	if !s.Gclock.Emulate {
		clocks = "raw"
	}
	fmt.Fprintf(w, "Lab: link %s, %s clocks (drifts up to +-%g ppm), %s, %v warm-up; %s.\n", s.Link, clocks, s.Gclock.MaxDriftPPM,
		describeLoad(RunSpec{Load: s.Load, LoadOutside: s.LoadOutside, Flood: s.Flood, Cross: s.Cross}, s.Lab.PortRate), s.Gclock.Warmup, what)
	fmt.Fprintf(w, "Load average (1, 5, 15 min): %.2f %.2f %.2f when the nodes started, %.2f %.2f %.2f when they were done.\n",
		r.LoadAvgStart[0], r.LoadAvgStart[1], r.LoadAvgStart[2], r.LoadAvgEnd[0], r.LoadAvgEnd[1], r.LoadAvgEnd[2])
	fmt.Fprintf(w, "The daemons over the same run (hosts 1.., |global time - truth|): median %s, p99 %s, truth inside the bounds %.2f%%.\n",
		nsStr(float64(g.ErrorP50Ns)), nsStr(float64(g.ErrorP99Ns)), 100*g.BoundCoverage)
	if b := r.Run.Gclock.PageBusyReads; b > 0 {
		fmt.Fprintf(w, "The evaluator found a page in the middle of an update for 100 ms %d times and read it again.\n", b)
	}
	if len(r.Switch) == 0 {
		fmt.Fprintln(w)
	}
	if len(r.Switch) > 0 {
		var frames, drops, errs int64
		var late int64
		for _, d := range r.Switch {
			frames, drops, errs = frames+d.Frames, drops+d.Dropped, errs+d.SendErrors
			late = max(late, d.LatenessP99Ns)
		}
		fmt.Fprintf(w, "The switch over the run: %d frames, %d dropped by the link model, %d send errors, release lateness p99 %s (worst direction).\n\n",
			frames, drops, errs, nsStr(float64(late)))
	}
	if k := r.KeptLate; k != nil {
		if g := k.Method(measure.MethodGlobal); g != nil && g.Err != nil {
			fmt.Fprintf(w, "The global-time method (b) over all %d scheduled executions, the %d late ones kept: |error| median %s, p99 %s, truth inside the bounds %.2f%% of %d.\n\n",
				k.Scheduled, k.LateExecs, nsStr(g.Err.P50AbsNs), nsStr(g.Err.P99AbsNs), 100*g.Err.Coverage, g.Err.BoundsN)
		}
	}
	tg := measure.DefaultTargets()
	var tp *measure.Targets
	if !s.Latency {
		tp = &tg
	}
	return measure.WriteMarkdown(w, r.Result, tp)
}

func nsStr(v float64) string {
	if v >= 1e3 {
		return fmt.Sprintf("%.2f us", v/1e3)
	}
	return fmt.Sprintf("%.0f ns", v)
}

// MeasureHeadline runs the three headline measurements (gclock lab
// measure report): spec's operation, then the latency on spec's link and
// on the same link with asym more forward than reverse delay. It writes
// report.md, deviations.png, errors.png and the two latency figures into
// dir and returns the report's text.
func MeasureHeadline(ctx context.Context, spec MeasureSpec, asym time.Duration, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# gclock lab measure report\n\n%s, `gclock lab measure report -dir %s` (seed %d).\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), dir, spec.Lab.Seed)
	op := spec
	op.Latency = false
	ops, err := Measure(ctx, op)
	if err != nil {
		return "", err
	}
	b.WriteString("## Execution time of a distributed operation (seed 003)\n\n")
	if err := ops.WriteMarkdown(&b); err != nil {
		return "", err
	}
	if err := measure.PlotDeviations(ops.Result, filepath.Join(dir, "deviations.png")); err != nil {
		return "", err
	}
	if err := measure.PlotErrors(ops.Result, filepath.Join(dir, "errors.png")); err != nil {
		return "", err
	}
	b.WriteString("\n![deviations](deviations.png)\n\n![errors](errors.png)\n")
	asymLink := fmt.Sprintf("%s,asym=%dus", spec.Link, asym.Microseconds())
	for i, link := range []string{spec.Link, asymLink} {
		lat := spec
		lat.Latency, lat.Link = true, link
		r, err := Measure(ctx, lat)
		if err != nil {
			return "", err
		}
		name := []string{"latency-symmetric.png", "latency-asymmetric.png"}[i]
		fmt.Fprintf(&b, "\n## One-way latency, %s link (seed 000, figure 2)\n\n", []string{"symmetric", "asymmetric"}[i])
		if err := r.WriteMarkdown(&b); err != nil {
			return "", err
		}
		if err := measure.PlotLatency(r.Result, filepath.Join(dir, name)); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n![latency](%s)\n", name)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return b.String(), nil
}
