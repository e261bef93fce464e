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
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/lab"
)

func init() {
	register("lab", "run an N-host cluster in network namespaces on this machine (root)", runLab)
}

const labUsage = `usage:
  gclock lab [flags]            build the lab, validate its switch, run the comparison, clean up
  gclock lab validate [flags]   build a lab, measure what its switch delivers, clean up
  gclock lab up [flags]         build the lab and keep it until interrupted (for manual work)
  gclock lab down               remove every gclab-* namespace and the processes inside them

The lab: hosts gclab-h0.. (10.77.0.(i+1)/24 on eth0), one switch namespace
gclab-sw running gclock's userspace switch. Runs as root. Link syntax:
  direct | fixed:100us | uniform|normal|pareto:DELAY:JITTER [/REVERSE] [,loss=1%][,dup=..][,reorder=..][,asym=20us]

flags:
`

type labFlags struct {
	hosts    int
	duration time.Duration
	warmup   time.Duration
	link     string
	compare  string
	json     bool
	seed     uint64
	realtime bool
	spin     time.Duration
	probes   int
	verbose  bool
	ptpSync  int
}

func (f *labFlags) register(fs *flag.FlagSet, hosts int) {
	fs.IntVar(&f.hosts, "hosts", hosts, "number of host namespaces")
	fs.DurationVar(&f.duration, "duration", 60*time.Second, "length of the measurement run (gclock lab)")
	fs.DurationVar(&f.warmup, "warmup", 10*time.Second, "convergence time excluded from the summaries")
	fs.StringVar(&f.link, "link", "pareto:100us:50us", "link model between any two hosts, each way (see above)")
	fs.StringVar(&f.compare, "compare", "", "peers to measure on the same link: chrony,ptp4l")
	fs.BoolVar(&f.json, "json", false, "print JSON instead of tables")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the link models")
	fs.BoolVar(&f.realtime, "realtime", true, "run the switch thread under SCHED_FIFO")
	fs.DurationVar(&f.spin, "spin", lab.DefaultSpinWindow, "the switch spins this long before each release instead of sleeping")
	fs.IntVar(&f.probes, "probes", 2000, "validation probes per direction (one every 2ms)")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	fs.IntVar(&f.ptpSync, "ptp-sync", -4, "ptp4l logSyncInterval (log2 s; -4 = 16 Hz like chrony's polls)")
}

func (f *labFlags) config() (lab.Config, error) {
	link, err := lab.ParseLink(f.link)
	if err != nil {
		return lab.Config{}, fmt.Errorf("--link: %w", err)
	}
	cfg := lab.DefaultConfig()
	cfg.Hosts = f.hosts
	cfg.Link = link
	if link.Direct && f.hosts != 2 {
		cfg.Hosts = 2
	}
	cfg.Seed = f.seed
	cfg.Realtime = f.realtime
	cfg.SpinWindow = f.spin
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	return cfg, cfg.Validate()
}

// labReport is `gclock lab --json`.
type labReport struct {
	Hosts      int                    `json:"hosts"`
	Link       string                 `json:"link"`
	DurationNs int64                  `json:"duration_ns"`
	WarmupNs   int64                  `json:"warmup_ns"`
	Realtime   bool                   `json:"switch_realtime"`
	Validation []lab.DirResult        `json:"validation"`
	Gclock     *lab.Summary           `json:"gclock"` // null until the daemons are plugged in
	Compare    map[string]lab.Summary `json:"compare,omitempty"`
	Notes      map[string][]string    `json:"notes,omitempty"`
}

func runLab(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "down":
			if len(args) > 1 {
				return fmt.Errorf("lab down takes no arguments (got %q)", args[1:])
			}
			if err := lab.Check(); err != nil {
				return err
			}
			return lab.Cleanup(slog.New(slog.NewTextHandler(os.Stderr, nil)))
		case "validate":
			return runLabValidate(args[1:])
		case "up":
			return runLabUp(args[1:])
		}
	}
	fs := flag.NewFlagSet("gclock lab", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labUsage); fs.PrintDefaults() }
	var f labFlags
	f.register(fs, 4)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (subcommands: validate, up, down)", fs.Arg(0))
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	var peers []string
	for _, p := range strings.Split(f.compare, ",") {
		if p = strings.TrimSpace(p); p != "" {
			peers = append(peers, p)
		}
	}
	pc := lab.DefaultPeerConfig()
	pc.Duration, pc.Warmup, pc.PTPLogSyncInterval = f.duration, f.warmup, f.ptpSync
	if err := pc.Validate(cfg.Hosts); err != nil {
		return err
	}
	for _, p := range peers {
		if p != lab.PeerChrony && p != lab.PeerPTP4L {
			return fmt.Errorf("--compare %q: unknown peer (want chrony, ptp4l or both)", p)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	defer l.Down()

	rep := labReport{Hosts: cfg.Hosts, Link: cfg.Link.String(), DurationNs: pc.Duration.Nanoseconds(),
		WarmupNs: pc.Warmup.Nanoseconds(), Realtime: cfg.Realtime}
	vc := lab.DefaultValidateConfig()
	vc.Probes = f.probes
	if rep.Validation, err = l.Validate(ctx, vc); err != nil {
		return err
	}

	// TODO(daemon): the gclock daemons plug in here. Once `gclock daemon`
	// exists (engine + transport), start one per host with an emulated
	// clock: for i := range cfg.Hosts { l.Exec(i, []string{gclockBinary,
	// "daemon", "--config", ...}, ...) }, run the evaluator against the
	// shared kernel clock for pc.Duration concurrently with l.RunPeers, and
	// set rep.Gclock to its lab.Summary (same fields as `gclock sim --json`).

	var results []lab.PeerResult
	if len(peers) > 0 {
		if results, err = l.RunPeers(ctx, peers, pc); err != nil {
			return err
		}
		rep.Compare = map[string]lab.Summary{}
		rep.Notes = map[string][]string{}
		for _, r := range results {
			rep.Compare[r.Peer] = r.Summary
			rep.Notes[r.Peer] = r.Notes
		}
	}
	if f.json {
		return labWriteJSON(os.Stdout, rep)
	}
	fmt.Printf("lab: %d hosts, link %s, switch realtime=%v\n\nswitch validation (h%d<->h%d, kernel timestamps):\n",
		rep.Hosts, rep.Link, rep.Realtime, vc.A, vc.B)
	lab.PrintValidation(os.Stdout, rep.Validation)
	fmt.Println("\ngclock daemons: not plugged in yet (waiting for the daemon; see the TODO in cmd/gclock/lab.go)")
	if len(results) > 0 {
		fmt.Printf("\npeers, true offset 0, %v run, first %v excluded (|error|, us):\n", pc.Duration, pc.Warmup)
		labPrintPeers(os.Stdout, results)
	}
	return nil
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
	if err := fs.Parse(args); err != nil {
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
	vc := lab.DefaultValidateConfig()
	vc.Probes = f.probes
	rs, err := l.Validate(ctx, vc)
	if err != nil {
		return err
	}
	if f.json {
		return labWriteJSON(os.Stdout, rs)
	}
	fmt.Printf("link %s, switch realtime=%v spin=%v; one-way delays from kernel TX/RX timestamps (us):\n",
		cfg.Link, cfg.Realtime, cfg.SpinWindow)
	lab.PrintValidation(os.Stdout, rs)
	return nil
}

func runLabUp(args []string) error {
	fs := flag.NewFlagSet("gclock lab up", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labUsage); fs.PrintDefaults() }
	var f labFlags
	f.register(fs, 4)
	if err := fs.Parse(args); err != nil {
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
	fmt.Fprintf(os.Stderr, "gclock lab: %d hosts up (ip netns exec %s ...), link %s; Ctrl-C removes them\n",
		cfg.Hosts, lab.HostNS(0), cfg.Link)
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
