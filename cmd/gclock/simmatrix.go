package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/bench/linkmatrix"
	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/netmodel"
)

const simMatrixUsage = `usage: gclock sim matrix [flags]

Runs the link matrix (issue 28) in the simulator: every class of the matrix
(the lab bench's --profile links), every seed, three ways on the shipped
link-matrix scenario (gclock lab's setting): gclock, gclock with its centre
line on the fastest exchanges alone, and a chrony stand-in; and every host's
limit, the best textbook estimator on the exchanges it received, chosen with
hindsight. Prints one row per class: medians over the runs, and how many runs
met each target (median at most chrony's / 3, p99 below chrony's, median
within 1.5x of the limit, coverage 1). 100 seeds take about 10 minutes on 2
cores. --duration runs longer than the lab bench's 70 s: the clocks' wander
then counts for more (20m, seeds 1-5, three classes: about 6 minutes).

--base runs the matrix on another scenario (a file, or a shipped one): each
class replaces its links.model and keeps the rest (loss, reordering,
duplicates, phases, drift steps; not faults: the chrony stand-in runs none).
Shipped conditions: link-matrix-lossy (10%% loss, 5%% reordered, 1%%
duplicates), link-matrix-drift-step (two hosts' frequencies step),
link-matrix-drift-lab (every host's but the reference's +10 ppm, as gclock
lab --step 35s:10) and link-matrix-bursts (every 10 s, 2 s of 4x jitter
and scheduling noise);
link-matrix-pause (a host stopped 10 s) runs with gclock sim alone.

Classes: ` + "%s" + `

flags:
`

func runSimMatrix(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gclock sim matrix", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), simMatrixUsage, strings.Join(netmodel.MatrixNames(), ", "))
		fs.PrintDefaults()
	}
	seeds := fs.String("seeds", "1-10", "seeds of each class (e.g. 1-100, at most 100)")
	classes := fs.String("classes", "", "comma-separated classes (default: all)")
	jsonOut := fs.Bool("json", false, "print every run as JSON")
	out := fs.String("o", "", "also write the markdown report to `FILE`")
	workers := fs.Int("workers", 0, "simulations run at once (0: one per core)")
	baseName := fs.String("base", "", "the `SCENARIO` (file or shipped name) every class runs on (default: link-matrix)")
	duration := fs.Duration("duration", 0, "simulated duration of each run (0: the scenario's 70s, as the lab bench's run and warm-up), e.g. 20m")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usage.Errorf("gclock sim matrix takes no arguments (got %s)", fs.Arg(0))
	}
	ss, err := parseSeeds(*seeds)
	if err != nil {
		return usage.Errorf("%v", err)
	}
	if *duration < 0 {
		return usage.Errorf("--duration %v: want a positive duration (or 0: the scenario's)", *duration)
	}
	spec := linkmatrix.Spec{Seeds: ss, Workers: *workers, Duration: *duration}
	if *baseName != "" {
		sc, err := loadScenario(*baseName)
		if err != nil {
			return usage.Errorf("--base %s: %v", *baseName, err)
		}
		spec.Base = &sc
	}
	if *classes != "" {
		for _, n := range strings.Split(*classes, ",") {
			c, ok := netmodel.MatrixClass(strings.TrimSpace(n))
			if !ok {
				return usage.Errorf("--classes: %q: unknown (want %s)", n, strings.Join(netmodel.MatrixNames(), ", "))
			}
			spec.Classes = append(spec.Classes, c)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	rep, err := linkmatrix.Run(ctx, spec)
	if err != nil {
		return err
	}
	write := func(w io.Writer) {
		fmt.Fprintf(w, "gclock sim matrix %s (%s)\n\n", strings.Join(args, " "), time.Since(start).Round(time.Second))
		rep.WriteMarkdown(w)
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		write(stdout)
	}
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		write(f)
		return f.Close()
	}
	return nil
}
