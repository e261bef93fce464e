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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/engineconf"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/netmodel"
	"github.com/gclock/gclock/sim"
)

func init() {
	register("lab", "run an N-host cluster in network namespaces on this machine (root)", runLab)
}

const labUsage = `usage:
  gclock lab [flags]            build the lab, validate its switch, run the comparison, clean up
  gclock lab validate [flags]   build a lab, measure what its switch delivers, clean up
  gclock lab up [flags]         build the lab and keep it until interrupted (for manual work)
  gclock lab down [-force]      remove what ended labs left (gclab-* namespaces, the processes inside them)
  gclock lab bench-transport [flags]  page transfer between two lab hosts, ACK omission vs an ACK per message (docs/transport.md)
  gclock lab bench [--seeds 1-6] [-o F.md] [flags]  the comparison once per seed, a report against gclock's accuracy targets
  gclock lab measure [latency|report] [flags]  distributed operations and one-way latency timed in global time, against the truth (docs/measure.md)
  gclock lab replay [flags] FILE...   replay exchanges logged by --clocks raw --measurements through the estimator (no root)
  gclock lab spoof [flags]      daemons under a spoofer's forged and replayed datagrams, with and without a cluster key (docs/daemon.md)
  gclock lab chain [flags]      the chain to programs' clocks: chronyd -x fed by the refclock, its error against gclock's (docs/daemon.md)

The lab: hosts gclab-RUN-h0.. (10.77.0.(i+1)/24 on eth0; RUN is the pid of
the lab's process and a count), one switch namespace gclab-RUN-sw running
gclock's userspace switch. Runs as root. Link syntax:
  direct | fixed:100us | uniform|normal|pareto|exponential|bimodal:DELAY:JITTER [/REVERSE] [,loss=1%][,dup=..][,reorder=..][,asym=20us]

flags:
`

type labFlags struct {
	hosts     int
	duration  time.Duration
	warmup    time.Duration
	link      string
	compare   string
	json      bool
	seed      uint64
	schedFIFO bool
	spin      time.Duration
	busy      time.Duration
	warm      time.Duration
	probes    int
	verbose   bool
	ptpSync   int
	// gclock run
	load         int
	loadOutside  int
	flood        int
	portRate     string
	cross        string
	clocks       string
	maxDrift     float64
	wander       float64
	sine         string
	steps        string
	plot         string
	daemonCfg    string
	syncProfile  string
	noValidate   bool
	evalEvery    time.Duration
	series       string
	measurements bool
	state        bool
	faults       []lab.Fault
	randFaults   string
	failover     time.Duration
	// validate
	pair     string
	stagger  bool
	interval time.Duration
	pingpong bool
	frameLog string
	// runDir is the lab's Config.RunDir ("": netlab.DefaultRunDir); set by
	// gclock lab bench, not a flag.
	runDir string
}

func (f *labFlags) register(fs *flag.FlagSet, hosts int) {
	fs.IntVar(&f.hosts, "hosts", hosts, "number of host namespaces")
	fs.DurationVar(&f.duration, "duration", 60*time.Second, "length of the measurement run (gclock lab)")
	fs.DurationVar(&f.warmup, "warmup", 10*time.Second, "convergence time excluded from the summaries")
	fs.StringVar(&f.link, "link", "pareto:100us:50us", "link model between any two hosts, each way (see above)")
	fs.StringVar(&f.compare, "compare", "", "peers to measure on the same link: chrony,ptp4l")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of tables")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the link models")
	fs.BoolVar(&f.schedFIFO, "sched-fifo", true, "run the switch thread under SCHED_FIFO")
	usage.Alias(fs, "realtime", "sched-fifo")
	fs.DurationVar(&f.spin, "spin", netlab.DefaultSpinWindow, "the switch spins this long before each release instead of sleeping")
	fs.DurationVar(&f.busy, "busy-poll", netlab.DefaultBusyPoll, "the switch polls instead of sleeping this long after its last frame (0: always sleep)")
	fs.DurationVar(&f.warm, "warm-after", netlab.DefaultWarmAfter, "the switch makes a warm-up write before a release after this long without one (0: never)")
	fs.IntVar(&f.probes, "probes", 2000, "validation probes per direction (one every -interval)")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	fs.IntVar(&f.ptpSync, "ptp-sync", -4, "ptp4l logSyncInterval (log2 s; -4 = 16 Hz like chrony's polls)")
	fs.IntVar(&f.load, "load", 2, "CPU-bound processes (busy loops) run beside the daemons during the measurement")
	fs.IntVar(&f.loadOutside, "load-outside", 0, "busy loops run outside the lab's namespaces during the measurement")
	fs.IntVar(&f.flood, "flood", 0, "softirq load: small frames per second through a veth pair of their own (e.g. 20000)")
	fs.StringVar(&f.portRate, "port-rate", "", "model every switch port as a FIFO queue on a line of this rate, e.g. 1G (default: none; 1G with --cross)")
	fs.StringVar(&f.cross, "cross", "", "cross traffic: every host sends a bulk TCP flow to the next at this share of the port rate, e.g. 30%")
	fs.StringVar(&f.clocks, "clocks", "emulated", "gclock daemons' clocks: emulated (offsets, drifts, wander; chronyd runs on the same ones) or raw (true offset 0)")
	fs.Float64Var(&f.maxDrift, "max-drift", 30, "emulated clocks: drift uniform in +-this many ppm")
	dw := lab.DefaultWander()
	fs.Float64Var(&f.wander, "wander", dw.RandomWalkPPM, "emulated clocks: random walk of the frequency, ppm per sqrt(s) (default: a commodity crystal)")
	fs.StringVar(&f.sine, "sine", fmt.Sprintf("%g:%v", dw.SinePPM, dw.SinePeriod), "emulated clocks: temperature cycle PPM:PERIOD (0:0 for none)")
	fs.StringVar(&f.steps, "step", "", "emulated clocks: frequency steps of every host but the reference, AFTER:DELTA_PPM[,AFTER:DELTA_PPM...] (e.g. 30s:2)")
	fs.StringVar(&f.plot, "plot", "", "draw gclock's error and bounds per host over time into FILE.png or FILE.svg")
	fs.StringVar(&f.daemonCfg, "daemon-config", "", "YAML daemon config the hosts' configs start from (default: lab.LabDaemonConfig)")
	fs.StringVar(&f.syncProfile, "sync-profile", "", syncProfileHelp)
	fs.BoolVar(&f.noValidate, "no-validate", false, "skip the switch validation before the run")
	fs.DurationVar(&f.evalEvery, "eval-every", 10*time.Millisecond, "evaluate every host's page this often")
	fs.StringVar(&f.series, "series", "", "write every evaluation (t_s, host, err_ns, lo_ns, hi_ns, synced) to this CSV file")
	fs.BoolVar(&f.measurements, "measurements", false, "every daemon logs the exchanges it receives to measurements-h<i>.csv in /run/gclab/gclock")
	fs.BoolVar(&f.state, "state", false, "every daemon keeps a state file (state-h<i>.json in /run/gclab/gclock; see docs/daemon.md)")
	fs.StringVar(&f.randFaults, "faults", "", "random:SEED: a Jepsen-style schedule of faults, one at a time after the warm-up (kinds, hosts and lengths drawn with SEED); with --failover-after")
	fs.DurationVar(&f.failover, "failover-after", 0, "run reference failover: hosts 0, 1, 2 are reference.order with this failover_after (default with --faults: 2s; 0: no failover)")
	fs.Func("fault", "KIND:HOST:AT:FOR, repeatable: kill (SIGKILL, restart after FOR), stop (SIGSTOP, SIGCONT after FOR), partition (the switch drops the host's frames for FOR), partition-out (only the frames it sends), partition-in (only those it receives), e.g. kill:1:20s:3s", func(v string) error {
		ft, err := lab.ParseFault(v)
		if err == nil {
			f.faults = append(f.faults, ft)
		}
		return err
	})
	fs.StringVar(&f.pair, "pair", "0,1", "validation: the two hosts A,B probed both ways")
	fs.DurationVar(&f.interval, "interval", 2*time.Millisecond, "validation: time between the probes of one direction")
	fs.BoolVar(&f.pingpong, "pingpong", false, "validation: only A probes and B answers each probe at once (the daemons' pattern); B>A is measured on the answers")
	fs.StringVar(&f.frameLog, "frame-log", "", "the switch writes every released frame (arrival stamp, release, write, gclock header) to this CSV file at the end")
	fs.BoolVar(&f.stagger, "stagger", true, "validation: B's probes half an interval after A's (false: both directions at once)")
}

// wanderModel is the emulated clocks' wander the flags ask for.
func (f *labFlags) wanderModel() (lab.Wander, error) {
	w := lab.Wander{RandomWalkPPM: f.wander}
	if f.sine != "" && f.sine != "0" && f.sine != "0:0" {
		ppm, per, ok := strings.Cut(f.sine, ":")
		var err error
		if ok {
			w.SinePeriod, err = time.ParseDuration(per)
		}
		if err == nil && ok {
			w.SinePPM, err = strconv.ParseFloat(ppm, 64)
		}
		if !ok || err != nil {
			return w, fmt.Errorf("--sine %q: want PPM:PERIOD, e.g. 0.5:15m", f.sine)
		}
	}
	if f.steps != "" {
		for _, st := range strings.Split(f.steps, ",") {
			after, delta, ok := strings.Cut(st, ":")
			var s lab.WanderStep
			var err error
			if ok {
				s.After, err = time.ParseDuration(after)
			}
			if err == nil && ok {
				s.DeltaPPM, err = strconv.ParseFloat(delta, 64)
			}
			if !ok || err != nil {
				return w, fmt.Errorf("--step %q: want AFTER:DELTA_PPM, e.g. 30s:2", st)
			}
			w.Steps = append(w.Steps, s)
		}
	}
	return w, nil
}

// validateConfig is the validation the flags ask for.
func (f *labFlags) validateConfig() (netlab.ValidateConfig, error) {
	vc := netlab.DefaultValidateConfig()
	vc.Probes = f.probes
	vc.Stagger = f.stagger
	vc.Interval = f.interval
	vc.PingPong = f.pingpong
	if _, err := fmt.Sscanf(f.pair, "%d,%d", &vc.A, &vc.B); err != nil {
		return vc, fmt.Errorf("--pair %q: want two host numbers A,B: %w", f.pair, err)
	}
	if vc.A == vc.B || vc.A < 0 || vc.B < 0 || vc.A >= f.hosts || vc.B >= f.hosts {
		return vc, fmt.Errorf("--pair %q: want two different hosts in 0..%d", f.pair, f.hosts-1)
	}
	return vc, nil
}

func (f *labFlags) config() (netlab.Config, error) {
	link, err := netmodel.ParseLink(f.link)
	if err != nil {
		return netlab.Config{}, fmt.Errorf("--link: %w", err)
	}
	cfg := netlab.DefaultConfig()
	cfg.Hosts = f.hosts
	cfg.Link = link
	if link.Direct && f.hosts != 2 {
		cfg.Hosts = 2
	}
	cfg.Seed = f.seed
	cfg.SchedFIFO = f.schedFIFO
	cfg.SpinWindow = f.spin
	cfg.BusyPoll = f.busy
	cfg.WarmAfter = f.warm
	if cfg.PortRate, err = f.portRateBps(); err != nil {
		return netlab.Config{}, err
	}
	cfg.FrameLog = f.frameLog
	cfg.RunDir = f.runDir
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return cfg, cfg.Validate()
}

// defaultCrossRate is the port rate --cross assumes without --port-rate.
const defaultCrossRate = 1e9

// crossShare is --cross as a share in [0, 1] ("30%" or "0.3").
func (f *labFlags) crossShare() (float64, error) {
	c := strings.TrimSpace(f.cross)
	if c == "" || c == "0" {
		return 0, nil
	}
	scale := 1.0
	if v, ok := strings.CutSuffix(c, "%"); ok {
		c, scale = v, 0.01
	}
	v, err := strconv.ParseFloat(c, 64)
	v *= scale
	if err != nil || !(v >= 0 && v <= 1) {
		return 0, fmt.Errorf("--cross %q: want a share of the port rate, e.g. 30%% or 0.3", f.cross)
	}
	return v, nil
}

// portRateBps is --port-rate, defaultCrossRate when --cross asks for cross
// traffic without it.
func (f *labFlags) portRateBps() (int64, error) {
	if f.portRate == "" {
		if c, err := f.crossShare(); err != nil || c == 0 {
			return 0, err
		}
		return defaultCrossRate, nil
	}
	r, err := netmodel.ParseRate(f.portRate)
	if err != nil {
		return 0, fmt.Errorf("--port-rate: %w", err)
	}
	return r, nil
}

func runLab(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "down":
			force := false
			switch {
			case len(args) == 2 && (args[1] == "-force" || args[1] == "--force"):
				force = true
			case len(args) > 1:
				return usage.Errorf("lab down takes only -force (got %q)", args[1:])
			}
			if err := netlab.Check(); err != nil {
				return err
			}
			return netlab.Down(slog.New(slog.NewTextHandler(os.Stderr, nil)), force)
		case "validate":
			return runLabValidate(args[1:])
		case "up":
			return runLabUp(args[1:])
		case "bench-transport":
			return runLabBenchTransport(args[1:], os.Stdout, os.Stderr)
		case "replay":
			return runLabReplay(args[1:], os.Stdout, os.Stderr)
		case "bench":
			return runLabBench(args[1:], os.Stdout, os.Stderr)
		case "spoof": // labspoof.go
			return runLabSpoof(args[1:], os.Stdout, os.Stderr)
		case "chain": // labchain.go
			return runLabChain(args[1:], os.Stdout, os.Stderr)
		case "spoof-send":
			return runLabSpoofSend(args[1:])
		case "measure": // labmeasure.go
			return runLabMeasure(args[1:], os.Stdout, os.Stderr)
		case "loadgen": // run by the lab in its namespaces (--cross, --flood)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return netlab.LoadGenMain(ctx, args[1:], os.Stderr)
		}
	}
	fs := flag.NewFlagSet("gclock lab", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labUsage); fs.PrintDefaults() }
	var f labFlags
	f.register(fs, 4)
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usage.Errorf("unexpected argument %q (subcommands: validate, up, down, bench, bench-transport, replay, measure, spoof, chain)", fs.Arg(0))
	}
	peers, err := f.peers()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	spec, err := f.runSpec(peers)
	if err != nil {
		return err
	}
	rep, err := f.run(ctx, spec, false)
	if err != nil {
		return err
	}
	gres, results, pc := rep.Gclock, rep.Peers, spec.Peer
	if f.json {
		return labWriteJSON(os.Stdout, rep)
	}
	fmt.Printf("lab: %d hosts, link %s, switch sched-fifo=%v, %d busy loops beside the daemons\n",
		rep.Hosts, rep.Link, rep.SchedFIFO, rep.Load)
	labPrintLoad(os.Stdout, rep)
	if vc := spec.Validate; vc != nil && len(rep.Validation) > 0 {
		fmt.Printf("\nswitch validation (h%d<->h%d, kernel timestamps):\n", vc.A, vc.B)
		netlab.PrintValidation(os.Stdout, rep.Validation)
	}
	fmt.Printf("\ngclock (%s clocks; host 0 is the reference), %v run, first %v excluded; daemon logs in %s\n",
		f.clocks, f.duration, f.warmup, gres.Logs)
	if rep.Wander != nil {
		fmt.Printf("emulated clocks wander: %v\n", rep.Wander)
	}
	labPrintGclock(os.Stdout, gres)
	if len(results) > 0 {
		fmt.Printf("\npeers (%s; chrony: a client on every host but h%d, pooled; ptp4l: h%d->h%d), same run (|error|, us):\n", peerClocks(rep.Clocks), pc.Server, pc.Server, pc.Client)
		labPrintPeers(os.Stdout, results)
		s := gres.Summary
		for _, r := range results {
			if r.Summary.ErrorP50Ns > 0 && s.ErrorP50Ns > 0 {
				fmt.Printf("  gclock vs %s: median %.1fx lower, p99 %.1fx lower\n", r.Peer,
					float64(r.Summary.ErrorP50Ns)/float64(s.ErrorP50Ns), float64(r.Summary.ErrorP99Ns)/float64(max(1, s.ErrorP99Ns)))
			}
		}
	}
	return nil
}

// peers is --compare as a list, checked.
func (f *labFlags) peers() ([]string, error) {
	var peers []string
	for _, p := range strings.Split(f.compare, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if p != lab.PeerChrony && p != lab.PeerPTP4L {
			return nil, fmt.Errorf("--compare %q: unknown peer (want chrony, ptp4l or both)", p)
		}
		peers = append(peers, p)
	}
	return peers, nil
}

// runSpec turns the flags into a lab.RunSpec (f.seed seeds the links and
// clocks), checked.
func (f *labFlags) runSpec(peers []string) (lab.RunSpec, error) {
	var spec lab.RunSpec
	cfg, err := f.config()
	if err != nil {
		return spec, err
	}
	pc := lab.DefaultPeerConfig()
	pc.Duration, pc.Warmup, pc.PTPLogSyncInterval = f.duration, f.warmup, f.ptpSync
	if err := pc.Validate(cfg.Hosts); err != nil {
		return spec, err
	}
	gc := lab.DefaultGclockConfig()
	gc.Duration, gc.Warmup, gc.Seed, gc.MaxDriftPPM, gc.EvalEvery = f.duration, f.warmup, f.seed, f.maxDrift, f.evalEvery
	if gc.Wander, err = f.wanderModel(); err != nil {
		return spec, err
	}
	gc.Trace = f.plot != "" || f.series != ""
	gc.Measurements = f.measurements
	gc.StateFiles, gc.Faults = f.state, f.faults
	gc.FailoverAfter = f.failover
	if f.randFaults != "" {
		rf, err := lab.ParseFaults(f.randFaults, cfg.Hosts, f.warmup, f.duration)
		if err != nil {
			return spec, fmt.Errorf("--faults: %w", err)
		}
		gc.Faults = append(gc.Faults, rf...)
		if gc.FailoverAfter == 0 {
			gc.FailoverAfter = 2 * time.Second
		}
	}
	switch f.clocks {
	case "emulated":
	case "raw":
		gc.Emulate = false
	default:
		return spec, fmt.Errorf("--clocks %q: want emulated or raw", f.clocks)
	}
	if f.load < 0 || f.load > 64 {
		return spec, fmt.Errorf("--load %d: want 0..64", f.load)
	}
	if f.loadOutside < 0 || f.loadOutside > 64 {
		return spec, fmt.Errorf("--load-outside %d: want 0..64", f.loadOutside)
	}
	if f.flood < 0 || f.flood > 1e6 {
		return spec, fmt.Errorf("--flood %d: want 0..1000000 frames/s", f.flood)
	}
	cross, err := f.crossShare()
	if err != nil {
		return spec, err
	}
	if f.daemonCfg != "" || f.syncProfile != "" {
		dc, err := labDaemonBase(f.daemonCfg, f.syncProfile)
		if err != nil {
			return spec, err
		}
		gc.Base = &dc
	}
	exe, err := os.Executable()
	if err != nil {
		return spec, fmt.Errorf("cannot find the gclock binary to run the daemons: %w", err)
	}
	gc.Command = []string{exe, "daemon"}
	if err := gc.Validate(); err != nil {
		return spec, err
	}
	vc, err := f.validateConfig()
	if err != nil {
		return spec, err
	}
	spec = lab.RunSpec{Lab: cfg, Gclock: gc, Peers: peers, Peer: pc, Load: f.load,
		LoadOutside: f.loadOutside, Flood: f.flood, Cross: cross, LoadCommand: []string{exe}}
	if !f.noValidate {
		spec.Validate = &vc
	}
	if f.verbose {
		spec.Progress = os.Stderr
	}
	return spec, nil
}

// run runs spec (lab.Run) and writes the --series (unless noSeries) and
// --plot files.
func (f *labFlags) run(ctx context.Context, spec lab.RunSpec, noSeries bool) (lab.RunReport, error) {
	rep, err := lab.Run(ctx, spec)
	if err != nil {
		return rep, err
	}
	if f.series != "" && !noSeries {
		if err := lab.WriteSeries(f.series, rep.Gclock.Series); err != nil {
			return rep, fmt.Errorf("--series: %w", err)
		}
	}
	if f.plot != "" {
		if err := labPlot(rep.Gclock, f.plot); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// labPrintLoad prints the load beside the daemons other than --load: busy
// loops outside, the flood, the cross traffic and what the ports carried.
func labPrintLoad(w io.Writer, rep lab.RunReport) {
	if rep.LoadOutside > 0 || rep.Flood > 0 || rep.Cross > 0 {
		fmt.Fprintf(w, "load: %d busy loops outside the lab, flood %d frames/s, cross traffic %.0f%% of the port rate\n",
			rep.LoadOutside, rep.Flood, 100*rep.Cross)
	}
	if len(rep.Ports) > 0 {
		fmt.Fprintf(w, "switch ports: %sbit/s, FIFO; utilisation", netmodel.FormatRate(rep.PortRate))
		for _, p := range rep.Ports {
			fmt.Fprintf(w, " p%d %.1f%%", p.Port, 100*p.Util)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "small frames' queue wait (probes, replies, ACKs), us:")
		for _, d := range rep.Switch {
			if d.SmallQueueSamples > 0 {
				fmt.Fprintf(w, "  h%d>h%d p50 %.2f p99 %.2f max %.2f (%d frames)\n", d.In, d.Out,
					float64(d.SmallQueueP50Ns)/1e3, float64(d.SmallQueueP99Ns)/1e3, float64(d.SmallQueueMaxNs)/1e3, d.SmallQueueSamples)
			}
		}
	}
	fmt.Fprintf(w, "machine load average (1 min): %.2f at the start, %.2f at the end\n", rep.LoadAvgStart[0], rep.LoadAvgEnd[0])
}

func labPrintGclock(w io.Writer, r lab.GclockResult) {
	us := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e3) }
	fmt.Fprintf(w, "%-5s %-34s %7s %9s %9s %9s %9s %9s %8s %9s %9s %9s\n", "host", "clock (evaluator only)", "evals",
		"p50 us", "p95 us", "p99 us", "max us", "coverage", "synced", "gap s", "width us", "exch/s")
	row := func(name, clk string, s lab.GclockSummary) {
		fmt.Fprintf(w, "%-5s %-34s %7d %9s %9s %9s %9s %9.4f %8.4f %9.1f %9.3f %9.3f\n", name, clk, s.Evaluations, us(s.ErrorP50Ns),
			us(s.ErrorP95Ns), us(s.ErrorP99Ns), us(s.ErrorMaxNs), s.BoundCoverage, s.StatusShare["synced"], s.LongestNotSyncedS,
			s.BoundWidthMeanNs/1e3, s.ExchangesPerNodePerS)
	}
	for i, s := range r.Nodes {
		clk := ""
		if i < len(r.Clocks) {
			clk = r.Clocks[i].String()
		}
		name := fmt.Sprintf("h%d", i)
		if i == 0 {
			name += "*"
		}
		row(name, clk, s)
	}
	row("all", "(hosts 1.., the reference excluded)", r.Summary)
	fmt.Fprintf(w, "coverage: of the reads that said synced; synced: share of reads that did; gap: the longest stretch not synced after the warm-up\n")
	s := r.Summary
	fmt.Fprintf(w, "traffic per synchronised host: convergence %.2f exchanges/s (%.2f rounds/s), after %.2f exchanges/s (%.3f rounds/s); %.2f engine messages/node/s\n",
		s.ConvergenceExchangesPerNodePerS, s.ConvergenceRoundsPerNodePerS, s.ExchangesPerNodePerS, s.RoundsPerNodePerS, s.MessagesPerNodePerS)
	if len(r.Faults) > 0 {
		fmt.Fprintf(w, "faults (from the start to %v after the end; back: from the end to the first synced read after the last one that was not):\n", lab.FaultWindow)
		fmt.Fprintf(w, "%-32s %-4s %6s %6s %8s %8s %10s %12s %8s\n", "fault", "host", "reads", "synced", "outside", "no bnds", "max err us", "max half us", "back s")
		for _, fr := range r.Faults {
			fmt.Fprintf(w, "%-32s %-4d %6d %6d %8d %8d %10s %12s %8.2f\n", fr.Fault.String(), fr.Host, fr.Reads, fr.Synced,
				fr.Reads-fr.Inside, fr.Unsynced, us(fr.MaxErrNs), us(fr.MaxHalfWidthNs), fr.BackToSyncedS)
		}
	}
	a := r.Agreement
	fmt.Fprintf(w, "one time (no truth needed): %d of %d instants with synced reads sharing no point (gap up to %s us); %d synced reads with the truth outside\n",
		a.Violations, a.Instants, us(a.MaxGap), r.SyncedOutside)
	if r.SyncedUnjudged > 0 || r.ScaleRedefinitions > 0 {
		fmt.Fprintf(w, "the truth is the scale of the term each read claims: %d synced reads of a term whose scale no reference page showed (not judged); %d reads of a reference page that redefined its term's scale\n",
			r.SyncedUnjudged, r.ScaleRedefinitions)
	}
	if fo := r.Failover; fo != nil {
		fmt.Fprintf(w, "failover (after %gs, limit %gs = after + one query timeout): last term %d, at most %d reference(s) per term %v\n",
			fo.AfterS, fo.LimitS, fo.Terms, fo.MaxReferencesPerTerm, fo.ReferencesPerTerm)
		for _, t := range fo.Takeovers {
			fmt.Fprintf(w, "  %-32s reference h%d -> h%d after %.2f s\n", t.Fault.String(), t.From, t.To, t.Seconds)
		}
	}
}

func labPrintPeers(w io.Writer, rs []lab.PeerResult) {
	fmt.Fprintf(w, "%-8s %8s %9s %9s %9s %9s %9s %9s\n", "peer", "samples", "bias", "mean", "p50", "p95", "p99", "max")
	us := func(ns int64) string { return fmt.Sprintf("%.2f", float64(ns)/1e3) }
	for _, r := range rs {
		s := r.Summary
		fmt.Fprintf(w, "%-8s %8d %9.2f %9.2f %9s %9s %9s %9s\n", r.Peer, s.Evaluations, s.ErrorBiasNs/1e3, s.ErrorMeanNs/1e3,
			us(s.ErrorP50Ns), us(s.ErrorP95Ns), us(s.ErrorP99Ns), us(s.ErrorMaxNs))
	}
	for _, r := range rs {
		if len(r.Notes) > 0 {
			fmt.Fprintf(w, "  %s: %s\n", r.Peer, strings.Join(r.Notes, "; "))
		}
	}
}

func runLabValidate(args []string) error {
	fs := flag.NewFlagSet("gclock lab validate", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labUsage); fs.PrintDefaults() }
	var f labFlags
	f.register(fs, 2)
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("validate: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	defer l.Down()
	vc, err := f.validateConfig()
	if err != nil {
		return err
	}
	rs, err := l.Validate(ctx, vc)
	if err != nil {
		return err
	}
	if f.json {
		return labWriteJSON(os.Stdout, rs)
	}
	fmt.Printf("link %s, switch sched-fifo=%v spin=%v; one-way delays from kernel TX/RX timestamps (us):\n",
		cfg.Link, cfg.SchedFIFO, cfg.SpinWindow)
	netlab.PrintValidation(os.Stdout, rs)
	return nil
}

func runLabUp(args []string) error {
	fs := flag.NewFlagSet("gclock lab up", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labUsage); fs.PrintDefaults() }
	var f labFlags
	f.register(fs, 4)
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	defer l.Down()
	fmt.Fprintf(os.Stderr, "gclock lab: %d hosts up as namespaces %s..h%d (ip netns exec %s ...), link %s; Ctrl-C removes them\n",
		cfg.Hosts, l.HostNS(0), cfg.Hosts-1, l.HostNS(0), cfg.Link)
	<-ctx.Done()
	return nil
}

func labWriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	return nil
}

// labPlot draws gclock's lab run like `gclock sim --plot`: the error and the
// bounds of up to four hosts over time.
func labPlot(r lab.GclockResult, file string) error {
	tr := &sim.Trace{}
	idx := map[int]int{}
	for i := 1; i < len(r.Nodes) && len(tr.Nodes) < 4; i++ {
		idx[i] = len(tr.Nodes)
		tr.Nodes = append(tr.Nodes, i)
		tr.Points = append(tr.Points, nil)
		tr.Events = append(tr.Events, nil)
	}
	for _, p := range r.Series {
		k, ok := idx[p.Host]
		if !ok {
			continue
		}
		st := engine.StatusUnsynced
		if p.Synced {
			st = engine.StatusSynced
		}
		tr.Points[k] = append(tr.Points[k], sim.TracePoint{T: float64(p.AtNs) / 1e9, Err: p.ErrNs, Lo: p.LoNs, Hi: p.HiNs, Mono: p.ErrNs, Status: st})
	}
	res := &sim.Result{Trace: tr}
	res.Scenario.Name = "gclock lab"
	res.Scenario.Engine.Estimator = "lab daemons"
	res.Scenario.Engine.Adaptive = true
	return sim.PlotFile(res, file)
}

// syncProfileHelp is --sync-profile's help: the daemons' sync profile, not
// the load profile that gclock lab bench and lab measure call --profile.
var syncProfileHelp = "the daemons' sync profile (deploy/profiles: " + strings.Join(engineconf.ProfileNames(), ", ") +
	"; default " + lab.LabProfile + "): the sync: section of every host's config; over --daemon-config, its keys override the file's. Not --profile, the load profile of lab bench and lab measure"

// labDaemonBase is the daemon config the lab's hosts start from: the file
// (--daemon-config) or the lab's default, with the sync profile's keys
// (--sync-profile) over it; with no file, the profile alone
// (lab.LabDaemonConfigFor), nothing of the default profile left.
func labDaemonBase(file, profile string) (daemon.Config, error) {
	if file == "" {
		c, err := lab.LabDaemonConfigFor(profile)
		if err != nil {
			return c, fmt.Errorf("--sync-profile: %w", err)
		}
		return c, nil
	}
	c, err := daemon.Load(file)
	if err != nil {
		return c, fmt.Errorf("--daemon-config: %w", err)
	}
	if profile != "" {
		if err := c.Sync.ApplyProfile(profile); err != nil {
			return c, fmt.Errorf("--sync-profile: %w", err)
		}
	}
	return c, nil
}
