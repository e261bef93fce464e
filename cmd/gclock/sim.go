package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/internal/conf"
	"github.com/gclock/gclock/sim"
)

func init() {
	register("sim", "simulate a cluster of synchronizing nodes and measure their global time", runSim)
}

const simUsage = `usage: gclock sim [flags] [scenario.yaml | NAME]

Simulates a cluster: emulated clocks, links with delay tails, loss and load
phases, an engine per node; then reports every node's global-time error
against the reference's clock. Without a scenario, the embedded default
(16 nodes, star, +-50 ppm, idle then loaded) runs. NAME is a shipped
scenario (see --list).

  gclock sim                         the default scenario, as a table
  gclock sim --json liao-fig3-adaptive
  gclock sim --nodes 10000 --topology tree --duration 1h
  gclock sim --plot errors.png       error and bounds over time
  gclock sim --report liao-table1    our numbers beside the paper's
  gclock sim matrix --seeds 1-100    the link matrix: gclock, chrony, the limit

flags:
`

func runSim(args []string) error {
	if len(args) > 0 && args[0] == "matrix" {
		return runSimMatrix(args[1:], os.Stdout, os.Stderr)
	}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), simUsage)
		fs.PrintDefaults()
	}
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	nodes := fs.Int("nodes", 0, "override the number of nodes")
	topo := fs.String("topology", "", "override the topology: star, tree, ring, hypercube, mesh")
	fanout := fs.Int("fanout", 0, "override the tree fanout")
	dur := fs.Duration("duration", 0, "override the simulated duration (e.g. 10m)")
	seed := fs.Uint64("seed", 0, "override the seed")
	est := fs.String("estimator", "", "override the estimator: minrtt, regression, hull, center")
	adaptive := fs.Bool("adaptive", true, "adaptive resync periods (--adaptive=false: the paper's fixed periods)")
	plotFile := fs.String("plot", "", "draw error and bounds over time into `FILE`.png or .svg")
	report := fs.String("report", "", "run a paper reproduction and print ours beside the paper's: "+strings.Join(sim.ReportNames(), ", ")+", or all")
	list := fs.Bool("list", false, "list the shipped scenarios")
	verbose := fs.Bool("v", false, "log the engines' debug messages to stderr")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	// Flags may come before or after the scenario.
	var pos []string
	for rest := args; ; {
		if err := usage.Parse(fs, rest); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(pos) > 1 {
		return fmt.Errorf("one scenario at most, got %d (%s)", len(pos), strings.Join(pos, " "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opt := sim.Options{Logger: logger}
	if !*quiet && !*jsonOut {
		// On a terminal one line, redrawn; in a log, a line every few seconds.
		p := newProgress(os.Stderr)
		defer p.done()
		opt.Progress = p
	}

	if *list {
		for _, n := range sim.Names() {
			s, err := sim.Shipped(n)
			if err != nil {
				return err
			}
			fmt.Println(sim.Describe(s))
		}
		fmt.Println("\nreports (--report):", strings.Join(sim.ReportNames(), ", "))
		return nil
	}
	if *report != "" {
		if len(pos) > 0 {
			return fmt.Errorf("--report takes no scenario (got %s)", pos[0])
		}
		return sim.Report(ctx, *report, os.Stdout, opt)
	}

	sc := sim.DefaultScenario()
	if len(pos) == 1 {
		var err error
		if sc, err = loadScenario(pos[0]); err != nil {
			return err
		}
	}
	if set["nodes"] {
		sc.Nodes = *nodes
	}
	if set["topology"] {
		sc.Topology.Kind = *topo
	}
	if set["fanout"] {
		sc.Topology.Fanout = *fanout
	}
	if set["duration"] {
		sc.Duration = sim.Duration(*dur)
		if sc.Eval.Warmup >= sc.Duration {
			sc.Eval.Warmup = sc.Duration / 10
		}
	}
	if set["seed"] {
		sc.Seed = *seed
	}
	if set["estimator"] {
		sc.Engine.Estimator = *est
	}
	if set["adaptive"] {
		sc.Engine.Adaptive = *adaptive
	}
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("scenario %s after flags: %w", sc.Name, err)
	}
	if *plotFile != "" {
		if ext := strings.ToLower(filepath.Ext(*plotFile)); ext != ".png" && ext != ".svg" {
			return fmt.Errorf("--plot %s: want a .png or .svg file name", *plotFile)
		}
	}
	opt.Trace = *plotFile != ""
	res, err := sim.Run(ctx, sc, opt)
	if err != nil {
		return fmt.Errorf("run of scenario %s: %w", sc.Name, err)
	}
	if *plotFile != "" {
		if err := sim.PlotFile(res, *plotFile); err != nil {
			return err
		}
	}
	var out io.Writer = os.Stdout
	if *jsonOut {
		return sim.WriteJSON(out, res)
	}
	if err := sim.WriteTable(out, res); err != nil {
		return err
	}
	if *plotFile != "" {
		fmt.Fprintf(out, "plot written to %s\n", *plotFile)
	}
	return nil
}

// loadScenario reads a scenario file, or a shipped scenario by name.
func loadScenario(arg string) (sim.Scenario, error) {
	b, err := conf.ReadFile(arg)
	if err == nil {
		return sim.Parse(b, arg)
	}
	if !errors.Is(err, os.ErrNotExist) || strings.ContainsAny(arg, "/.") {
		return sim.Scenario{}, fmt.Errorf("reading scenario: %w", err)
	}
	s, serr := sim.Shipped(arg)
	if serr != nil {
		return sim.Scenario{}, fmt.Errorf("%s is neither a file nor a shipped scenario: %w", arg, serr)
	}
	return s, nil
}
