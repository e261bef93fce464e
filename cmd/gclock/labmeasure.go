package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/measure"
	"github.com/gclock/gclock/netmodel"
)

const labMeasureUsage = `usage:
  gclock lab measure [flags]           an operation on every lab host, the methods side by side against the truth
  gclock lab measure latency [flags]   one-way latency per size between hosts 0 and 1, against the truth
  gclock lab measure report [-dir D]   the headline figures: the default operation on the default lab, the
                                       latency on a symmetric and on an asymmetric link; report.md and PNGs in D

Builds a lab (root), runs gclock daemons on emulated clocks, waits for their
warm-up, then runs 'gclock measure' in every host namespace: the operation's
messages cross the lab's switch, every stamp is read from the host's
emulated clock and its daemon's page. The evaluator alone knows the clocks,
so each method's measured time is compared with the true time.
(docs/measure.md)

flags:
`

type labMeasureFlags struct {
	hosts     int
	link      string
	seed      uint64
	warmup    time.Duration
	load      int
	clocks    string
	maxDrift  float64
	daemonCfg string
	realtime  bool
	busy      time.Duration
	verbose   bool
	// the operation
	op     string
	runs   int
	start  string
	period time.Duration
	count  int
	repeat int
	// latency
	sizes   string
	lcount  int
	lperiod time.Duration
	asym    time.Duration
	// output
	out     string
	plot    string
	plotErr string
	dir     string
	json    bool
}

func (f *labMeasureFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.hosts, "hosts", 4, "number of host namespaces (the latency test uses hosts 0 and 1)")
	fs.StringVar(&f.link, "link", "pareto:100us:50us", "link model between any two hosts (gclock lab -h has the syntax; asym=40us for an asymmetric link)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the link models and the clocks")
	fs.DurationVar(&f.warmup, "warmup", 10*time.Second, "the daemons' convergence before the nodes start")
	fs.IntVar(&f.load, "load", 0, "CPU-bound processes (busy loops) beside the daemons and nodes")
	fs.StringVar(&f.clocks, "clocks", "emulated", "the daemons' and nodes' clocks: emulated (offsets, drifts) or raw")
	fs.Float64Var(&f.maxDrift, "max-drift", 30, "emulated clocks: drift uniform in +-this many ppm")
	fs.StringVar(&f.daemonCfg, "daemon-config", "", "YAML daemon config the hosts' configs start from (default: lab.LabDaemonConfig)")
	fs.BoolVar(&f.realtime, "realtime", true, "run the switch thread under SCHED_FIFO")
	fs.DurationVar(&f.busy, "busy-poll", lab.DefaultBusyPoll, "the switch polls instead of sleeping this long after its last frame (0: always sleep)")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	fs.StringVar(&f.op, "op", measure.OpAllreduce, "operation: barrier, reduce, allreduce, page")
	fs.IntVar(&f.runs, "runs", 300, "iterations (each: a scheduled and a barrier-started execution)")
	fs.StringVar(&f.start, "start", measure.StartBoth, "executions per iteration: both, scheduled or barrier")
	fs.DurationVar(&f.period, "period", 20*time.Millisecond, "time between two iterations (both executions and their barrier must fit)")
	fs.IntVar(&f.count, "count", 1, "reduce/allreduce: int64s per node; page: pages per client")
	fs.IntVar(&f.repeat, "repeat", 1, "operations per timed execution (one allreduce of one int64 takes about 1 ms on the default link)")
	fs.StringVar(&f.sizes, "sizes", "64-65536", "latency: message sizes (list, or a range of powers of two)")
	fs.IntVar(&f.lcount, "latency-count", 50, "latency: messages per size and direction")
	fs.DurationVar(&f.lperiod, "latency-period", 2*time.Millisecond, "latency: time between two messages")
	fs.DurationVar(&f.asym, "asym", 40*time.Microsecond, "report: the asymmetry of the asymmetric link (forward minus reverse)")
	fs.StringVar(&f.out, "o", "", "write the Markdown report to FILE instead of stdout")
	fs.StringVar(&f.plot, "plot", "", "draw the deviation histograms (or, for latency, the latency per size) into FILE.png or FILE.svg")
	fs.StringVar(&f.plotErr, "plot-errors", "", "draw each method's |error| distribution into FILE.png or FILE.svg")
	fs.StringVar(&f.dir, "dir", "measure-report", "report: the directory of report.md and the figures")
	fs.BoolVar(&f.json, "json", false, "print the result as JSON")
}

// labMeasureRun is one lab run of the measurement.
type labMeasureRun struct {
	link    string
	latency bool
	res     *measure.Result
	run     lab.MeasureResult
	sw      []lab.DirStats // what the switch did during the run
}

func runLabMeasure(args []string, stdout, stderr io.Writer) error {
	mode := ""
	if len(args) > 0 && (args[0] == "latency" || args[0] == "report") {
		mode, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("gclock lab measure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labMeasureUsage); fs.PrintDefaults() }
	var f labMeasureFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (subcommands: latency, report)", fs.Arg(0))
	}
	if err := lab.Check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch mode {
	case "report":
		return labMeasureReport(ctx, &f, stdout, stderr)
	case "latency":
		r, err := labMeasureOnce(ctx, &f, true, f.link, stderr)
		if err != nil {
			return err
		}
		return labMeasureOutput(&f, r, stdout)
	}
	r, err := labMeasureOnce(ctx, &f, false, f.link, stderr)
	if err != nil {
		return err
	}
	return labMeasureOutput(&f, r, stdout)
}

func labMeasureOutput(f *labMeasureFlags, r labMeasureRun, stdout io.Writer) error {
	if f.plot != "" {
		plot := measure.PlotDeviations
		if r.latency {
			plot = measure.PlotLatency
		}
		if err := plot(r.res, f.plot); err != nil {
			return err
		}
	}
	if f.plotErr != "" && !r.latency {
		if err := measure.PlotErrors(r.res, f.plotErr); err != nil {
			return err
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Link   string            `json:"link"`
			Result *measure.Result   `json:"result"`
			Gclock lab.GclockSummary `json:"gclock"`
			Checks []measure.Check   `json:"checks"`
		}{r.link, r.res, r.run.Gclock.Summary, labMeasureChecks(r)})
	}
	w := stdout
	if f.out != "" {
		fo, err := os.Create(f.out)
		if err != nil {
			return err
		}
		defer fo.Close()
		w = fo
	}
	return labMeasureMarkdown(w, f, r)
}

func labMeasureChecks(r labMeasureRun) []measure.Check {
	if r.latency {
		return []measure.Check{r.res.LatencyCheck()}
	}
	return r.res.Check(measure.DefaultTargets())
}

func labMeasureMarkdown(w io.Writer, f *labMeasureFlags, r labMeasureRun) error {
	g := r.run.Gclock.Summary
	what := fmt.Sprintf("%s x%d on %d hosts, %d iterations %v apart", f.op, f.repeat, f.hosts, f.runs, f.period)
	if r.latency {
		what = fmt.Sprintf("one-way messages between hosts 0 and 1, sizes %s, %d per size and direction, %v apart", f.sizes, f.lcount, f.lperiod)
	}
	fmt.Fprintf(w, "Lab: link %s, %s clocks (drifts up to +-%g ppm), %d busy loops, %v warm-up; %s.\n", r.link, f.clocks, f.maxDrift, f.load, f.warmup, what)
	fmt.Fprintf(w, "The daemons over the same run (hosts 1.., |global time - truth|): median %s, p99 %s, truth inside the bounds %.2f%%.\n",
		nsStr(float64(g.ErrorP50Ns)), nsStr(float64(g.ErrorP99Ns)), 100*g.BoundCoverage)
	if len(r.sw) == 0 {
		fmt.Fprintln(w)
	}
	if len(r.sw) > 0 {
		var frames, drops, errs int64
		var late int64
		for _, d := range r.sw {
			frames, drops, errs = frames+d.Frames, drops+d.Dropped, errs+d.SendErrors
			late = max(late, d.LatenessP99Ns)
		}
		fmt.Fprintf(w, "The switch over the run: %d frames, %d dropped by the link model, %d send errors, release lateness p99 %s (worst direction).\n\n",
			frames, drops, errs, nsStr(float64(late)))
	}
	tg := measure.DefaultTargets()
	var tp *measure.Targets
	if !r.latency {
		tp = &tg
	}
	return measure.WriteMarkdown(w, r.res, tp)
}

func nsStr(v float64) string {
	if v >= 1e3 {
		return fmt.Sprintf("%.2f us", v/1e3)
	}
	return fmt.Sprintf("%.0f ns", v)
}

// labMeasureOnce builds a lab, runs the measurement and analyses it.
func labMeasureOnce(ctx context.Context, f *labMeasureFlags, latency bool, link string, stderr io.Writer) (labMeasureRun, error) {
	out := labMeasureRun{link: link, latency: latency}
	lk, err := netmodel.ParseLink(link)
	if err != nil {
		return out, fmt.Errorf("--link: %w", err)
	}
	cfg := lab.DefaultConfig()
	cfg.Hosts, cfg.Link, cfg.Seed, cfg.Realtime, cfg.BusyPoll = f.hosts, lk, f.seed, f.realtime, f.busy
	if latency || lk.Direct {
		cfg.Hosts = 2
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := cfg.Validate(); err != nil {
		return out, err
	}
	if f.load < 0 || f.load > 64 {
		return out, fmt.Errorf("--load %d: want 0..64", f.load)
	}
	exe, err := os.Executable()
	if err != nil {
		return out, fmt.Errorf("cannot find the gclock binary to run the daemons and nodes: %w", err)
	}
	gc := lab.DefaultGclockConfig()
	gc.Command = []string{exe, "daemon"}
	gc.Warmup, gc.Seed, gc.MaxDriftPPM = f.warmup, f.seed, f.maxDrift
	switch f.clocks {
	case "emulated":
	case "raw":
		gc.Emulate = false
	default:
		return out, fmt.Errorf("--clocks %q: want emulated or raw", f.clocks)
	}
	if f.daemonCfg != "" {
		dc, err := daemon.Load(f.daemonCfg)
		if err != nil {
			return out, fmt.Errorf("--daemon-config: %w", err)
		}
		gc.Base = &dc
	}
	mc := lab.MeasureConfig{Gclock: gc, Command: []string{exe, "measure"}, Latency: latency, Margin: 5 * time.Second}
	lead := 200 * time.Millisecond
	if latency {
		sz, err := measure.ParseSizes(f.sizes)
		if err != nil {
			return out, err
		}
		mc.Args = []string{"-sizes", f.sizes, "-count", strconv.Itoa(f.lcount), "-period", f.lperiod.String()}
		mc.Expect = lead + time.Duration(2*f.lcount*len(sz))*f.lperiod + time.Second
	} else {
		if f.op == measure.OpCmd {
			return out, fmt.Errorf("--op cmd: run gclock measure -op cmd on your nodes; the lab runs the built-in operations")
		}
		mc.Args = []string{"-op", f.op, "-runs", strconv.Itoa(f.runs), "-start", f.start, "-period", f.period.String(),
			"-count", strconv.Itoa(f.count), "-repeat", strconv.Itoa(f.repeat)}
		mc.Expect = lead + time.Duration(f.runs)*f.period + time.Second
	}
	if f.verbose {
		fmt.Fprintf(stderr, "gclock lab measure: %d hosts, link %s: %v warm-up, then about %v of measurement\n", cfg.Hosts, link, f.warmup, mc.Expect)
	}
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return out, err
	}
	defer l.Down()
	if f.load > 0 {
		stopLoad, err := l.StartLoad(f.load)
		if err != nil {
			return out, err
		}
		defer stopLoad()
	}
	if sw := l.Switch(); sw != nil {
		sw.ResetStats()
	}
	r, err := l.RunMeasure(ctx, mc)
	if err != nil {
		return out, err
	}
	if sw := l.Switch(); sw != nil {
		out.sw = sw.Stats()
	}
	res, err := measure.Analyze(r.Stamps, r.Truth)
	if err != nil {
		return out, err
	}
	out.res, out.run = res, r
	return out, nil
}

// labMeasureReport runs the three headline measurements and writes
// report.md and the figures into f.dir.
func labMeasureReport(ctx context.Context, f *labMeasureFlags, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# gclock lab measure report\n\n%s, `gclock lab measure report -dir %s` (seed %d).\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), f.dir, f.seed)
	ops, err := labMeasureOnce(ctx, f, false, f.link, stderr)
	if err != nil {
		return err
	}
	b.WriteString("## Execution time of a distributed operation (seed 003)\n\n")
	if err := labMeasureMarkdown(&b, f, ops); err != nil {
		return err
	}
	if err := measure.PlotDeviations(ops.res, filepath.Join(f.dir, "deviations.png")); err != nil {
		return err
	}
	if err := measure.PlotErrors(ops.res, filepath.Join(f.dir, "errors.png")); err != nil {
		return err
	}
	b.WriteString("\n![deviations](deviations.png)\n\n![errors](errors.png)\n")
	asymLink := fmt.Sprintf("%s,asym=%dus", f.link, f.asym.Microseconds())
	for i, link := range []string{f.link, asymLink} {
		r, err := labMeasureOnce(ctx, f, true, link, stderr)
		if err != nil {
			return err
		}
		name := []string{"latency-symmetric.png", "latency-asymmetric.png"}[i]
		fmt.Fprintf(&b, "\n## One-way latency, %s link (seed 000, figure 2)\n\n", []string{"symmetric", "asymmetric"}[i])
		if err := labMeasureMarkdown(&b, f, r); err != nil {
			return err
		}
		if err := measure.PlotLatency(r.res, filepath.Join(f.dir, name)); err != nil {
			return err
		}
		fmt.Fprintf(&b, "\n![latency](%s)\n", name)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "report.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	_, err = io.WriteString(stdout, b.String())
	return err
}
