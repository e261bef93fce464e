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
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/bench"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/measure"
	"github.com/gclock/gclock/netmodel"
)

const labMeasureUsage = `usage:
  gclock lab measure [flags]           an operation on every lab host, the methods side by side against the truth
  gclock lab measure latency [flags]   one-way latency per size between hosts 0 and 1, against the truth
  gclock lab measure report [-dir D]   the headline figures: the default operation on the default lab, the
                                       latency on a symmetric and on an asymmetric link; report.md and PNGs in D
  gclock lab measure liao-fig2 [-fig3] Liao's figures 2 and 3: latency on host 1, idle/loaded x adaptive or not

Builds a lab (root), runs gclock daemons on emulated clocks, waits for their
warm-up, then runs 'gclock measure' in every host namespace: the operation's
messages cross the lab's switch, every stamp is read from the host's
emulated clock and its daemon's page. The evaluator alone knows the clocks,
so each method's measured time is compared with the true time.
(docs/measure.md)

flags:
`

type labMeasureFlags struct {
	hosts  int
	link   string
	seed   uint64
	warmup time.Duration
	load   int
	// the load beside the lab, as gclock lab has it
	profile     string
	loadOutside int
	cross       string
	portRate    string
	clocks      string
	maxDrift    float64
	daemonCfg   string
	syncProfile string
	schedFIFO   bool
	busy        time.Duration
	verbose     bool
	// the operation
	op       string
	runs     int
	start    string
	period   time.Duration
	spin     time.Duration
	nodeFIFO int
	count    int
	repeat   int
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
	// evidence
	runDir       string
	series       string
	measurements bool
}

func (f *labMeasureFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.hosts, "hosts", 4, "number of host namespaces (the latency test uses hosts 0 and 1)")
	fs.StringVar(&f.link, "link", "pareto:100us:50us", "link model between any two hosts (gclock lab -h has the syntax; asym=40us for an asymmetric link)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the link models and the clocks")
	fs.DurationVar(&f.warmup, "warmup", 10*time.Second, "the daemons' convergence before the nodes start")
	fs.IntVar(&f.load, "load", 0, "CPU-bound processes (busy loops) beside the daemons and nodes")
	fs.StringVar(&f.profile, "profile", "", "the load of a gclock lab bench profile, over the flags: quiet (as given), busy (--load 4 --load-outside 2) or crossNN (--cross NN%)")
	fs.IntVar(&f.loadOutside, "load-outside", 0, "busy loops outside the lab's namespaces")
	fs.StringVar(&f.cross, "cross", "", "cross traffic: every host sends a bulk TCP flow to the next at this share of the port rate, e.g. 30%")
	fs.StringVar(&f.portRate, "port-rate", "", "model every switch port as a FIFO queue on a line of this rate, e.g. 1G (default: none; 1G with --cross)")
	fs.StringVar(&f.clocks, "clocks", "emulated", "the daemons' and nodes' clocks: emulated (offsets, drifts) or raw")
	fs.Float64Var(&f.maxDrift, "max-drift", 30, "emulated clocks: drift uniform in +-this many ppm")
	fs.StringVar(&f.daemonCfg, "daemon-config", "", "YAML daemon config the hosts' configs start from (default: lab.LabDaemonConfig)")
	fs.StringVar(&f.syncProfile, "sync-profile", "", syncProfileHelp)
	fs.BoolVar(&f.schedFIFO, "sched-fifo", true, "run the switch thread under SCHED_FIFO")
	usage.Alias(fs, "realtime", "sched-fifo")
	fs.DurationVar(&f.busy, "busy-poll", netlab.DefaultBusyPoll, "the switch polls instead of sleeping this long after its last frame (0: always sleep)")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	fs.StringVar(&f.op, "op", measure.OpAllreduce, "operation: barrier, reduce, allreduce, page")
	fs.IntVar(&f.runs, "runs", 300, "iterations (each: a scheduled and a barrier-started execution)")
	fs.StringVar(&f.start, "start", measure.StartBoth, "executions per iteration: both, scheduled or barrier")
	fs.DurationVar(&f.period, "period", 20*time.Millisecond, "time between two iterations (both executions and their barrier must fit)")
	fs.DurationVar(&f.spin, "spin-window", 0, "the nodes poll for a scheduled start only this long before it, sleeping until then (0: busy-wait all the way, as ReproMPI)")
	fs.IntVar(&f.nodeFIFO, "node-sched-fifo", 0, "the nodes wait for a scheduled start and run the operation under SCHED_FIFO at this priority (needs -spin-window; 0: none)")
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
	fs.StringVar(&f.runDir, "run-dir", netlab.DefaultRunDir, "the lab's run directory: the daemons' configs, pages and logs (gclock/), the nodes' stamps and logs (measure/), kept after the run")
	fs.StringVar(&f.series, "series", "", "write the daemons' evaluation against the truth (t_s, host, err_ns, lo_ns, hi_ns, synced) to this CSV file")
	fs.BoolVar(&f.measurements, "measurements", false, "every daemon logs the exchanges it receives to measurements-h<i>.csv in the run directory's gclock/")
}

func runLabMeasure(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "liao-fig2" {
		return runLabLiaoFig(args[1:], stdout, stderr)
	}
	mode := ""
	if len(args) > 0 && (args[0] == "latency" || args[0] == "report") {
		mode, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("gclock lab measure", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labMeasureUsage); fs.PrintDefaults() }
	var f labMeasureFlags
	f.register(fs)
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (subcommands: latency, report)", fs.Arg(0))
	}
	if err := netlab.Check(); err != nil {
		return err
	}
	spec, err := f.spec(stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if mode == "report" {
		text, err := lab.MeasureHeadline(ctx, spec, f.asym, f.dir)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, text)
		return err
	}
	spec.Latency = mode == "latency"
	r, err := lab.Measure(ctx, spec)
	if err != nil {
		return err
	}
	return labMeasureOutput(&f, r, stdout)
}

// spec checks the flags and turns them into a lab.MeasureSpec.
func (f *labMeasureFlags) spec(stderr io.Writer) (lab.MeasureSpec, error) {
	spec := lab.DefaultMeasureSpec()
	if _, err := netmodel.ParseLink(f.link); err != nil {
		return spec, fmt.Errorf("--link: %w", err)
	}
	// The load, as gclock lab and its bench take it (a profile applied
	// over the flags, as the bench applies it).
	lf := labFlags{cross: f.cross, portRate: f.portRate}
	cross, err := lf.crossShare()
	if err != nil {
		return spec, err
	}
	portRate, err := lf.portRateBps()
	if err != nil {
		return spec, err
	}
	ld := lab.RunSpec{Load: f.load, LoadOutside: f.loadOutside, Cross: cross}
	ld.Lab.PortRate = portRate
	if f.profile != "" {
		profs, err := bench.ParseProfiles(f.profile)
		if err != nil {
			return spec, err
		}
		if len(profs) != 1 {
			return spec, fmt.Errorf("--profile %q: want one profile (gclock lab bench runs several)", f.profile)
		}
		ld = profs[0].Apply(ld)
	}
	if ld.Load < 0 || ld.Load > 64 {
		return spec, fmt.Errorf("--load %d: want 0..64", ld.Load)
	}
	if ld.LoadOutside < 0 || ld.LoadOutside > 64 {
		return spec, fmt.Errorf("--load-outside %d: want 0..64", ld.LoadOutside)
	}
	if f.op == measure.OpCmd {
		return spec, fmt.Errorf("--op cmd: run gclock measure -op cmd on your nodes; the lab runs the built-in operations")
	}
	exe, err := os.Executable()
	if err != nil {
		return spec, fmt.Errorf("cannot find the gclock binary to run the daemons and nodes: %w", err)
	}
	spec.Link, spec.Command = f.link, []string{exe, "measure"}
	spec.Load, spec.LoadOutside, spec.Cross, spec.LoadCommand = ld.Load, ld.LoadOutside, ld.Cross, []string{exe}
	cfg := &spec.Lab
	cfg.PortRate, cfg.RunDir = ld.Lab.PortRate, f.runDir
	cfg.Hosts, cfg.Seed, cfg.SchedFIFO, cfg.BusyPoll = f.hosts, f.seed, f.schedFIFO, f.busy
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
		spec.Progress = stderr
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	gc := &spec.Gclock
	gc.Command = []string{exe, "daemon"}
	gc.Warmup, gc.Seed, gc.MaxDriftPPM = f.warmup, f.seed, f.maxDrift
	gc.Trace, gc.Measurements = f.series != "", f.measurements
	switch f.clocks {
	case "emulated":
	case "raw":
		gc.Emulate = false
	default:
		return spec, fmt.Errorf("--clocks %q: want emulated or raw", f.clocks)
	}
	if f.daemonCfg != "" || f.syncProfile != "" {
		dc, err := labDaemonBase(f.daemonCfg, f.syncProfile)
		if err != nil {
			return spec, err
		}
		gc.Base = &dc
	}
	spec.Op, spec.Runs, spec.Start, spec.Period, spec.SpinWindow = f.op, f.runs, f.start, f.period, f.spin
	spec.Count, spec.Repeat, spec.NodeSchedFIFO = f.count, f.repeat, f.nodeFIFO
	spec.Sizes, spec.LatencyCount, spec.LatencyPeriod = f.sizes, f.lcount, f.lperiod
	return spec, nil
}

func labMeasureOutput(f *labMeasureFlags, r lab.MeasureReport, stdout io.Writer) error {
	latency := r.Spec.Latency
	if f.series != "" {
		if err := lab.WriteSeries(f.series, r.Run.Gclock.Series); err != nil {
			return fmt.Errorf("--series: %w", err)
		}
	}
	if f.plot != "" {
		plot := measure.PlotDeviations
		if latency {
			plot = measure.PlotLatency
		}
		if err := plot(r.Result, f.plot); err != nil {
			return err
		}
	}
	if f.plotErr != "" && !latency {
		if err := measure.PlotErrors(r.Result, f.plotErr); err != nil {
			return err
		}
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Link        string              `json:"link"`
			Seed        uint64              `json:"seed"`
			Load        int                 `json:"load"`
			LoadOutside int                 `json:"load_outside"`
			Cross       float64             `json:"cross,omitempty"`
			PortRate    int64               `json:"port_rate_bps,omitempty"`
			LoadAvg     [2][3]float64       `json:"loadavg"` // at the nodes' start and end
			Result      *measure.Result     `json:"result"`
			KeptLate    *measure.Result     `json:"kept_late,omitempty"` // the same stamps, late executions kept
			Gclock      lab.GclockSummary   `json:"gclock"`
			Nodes       []lab.GclockSummary `json:"gclock_nodes"`
			PageBusy    uint64              `json:"page_busy_reads"` // the evaluator's page reads that found a daemon mid-update
			Switch      []netlab.DirStats   `json:"switch,omitempty"`
			Checks      []measure.Check     `json:"checks"`
		}{r.Spec.Link, r.Spec.Lab.Seed, r.Spec.Load, r.Spec.LoadOutside, r.Spec.Cross, r.Spec.Lab.PortRate,
			[2][3]float64{r.LoadAvgStart, r.LoadAvgEnd}, r.Result, r.KeptLate, r.Run.Gclock.Summary, r.Run.Gclock.Nodes, r.Run.Gclock.PageBusyReads, r.Switch, r.Checks()})
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
	return r.WriteMarkdown(w)
}
