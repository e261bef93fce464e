package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/netlab"
)

const labLiaoUsage = `usage: gclock lab measure liao-fig2 [-fig3] [-dir D] [flags]

Liao, Martonosi and Clark's figures 2 and 3 (seed 000) in the lab: the one-way
latency per message size collected on host 1 in global time, four curves:
idle or loaded (gclock lab bench --profile busy: 4 busy loops in the hosts'
namespaces, 2 outside) x adaptive periods (1-8 s) or a fixed 8-s period.
Each curve is its own lab run (a 20-s warm-up, then 24 s of messages, the
sizes interleaved), its error against the lab's truth beside it. -fig3 adds
1/2^18 (3.81 ppm) to host 1's drift 2 s into the measurement. About 4 minutes
for the four curves when no other lab runs. Writes D/liao-fig2.md (or
liao-fig3.md), the figure D/liao-fig2.png (liao-fig3.png) and every curve's
stamps and truth in D/liao-fig2-runs (-fig3: liao-fig3-runs); -from RUNS
draws the figure and the tables again from such a directory, without a lab.
(docs/measure.md)

flags (and gclock lab measure's):
`

// liaoArgs is `gclock lab measure liao-fig2`'s command line.
type liaoArgs struct {
	f    labMeasureFlags
	spec lab.LiaoFigSpec // without Keep (set from f.dir and the figure)
	from string
	fig3 bool
}

// parseLiaoArgs reads the flags: gclock lab measure's, with this figure's
// defaults (DefaultLiaoFigSpec's sizes, messages and warm-up; the loaded
// curves' load from -load and -load-outside, 4 and 2), and its own.
func parseLiaoArgs(args []string, stderr io.Writer) (liaoArgs, error) {
	var a liaoArgs
	fs := flag.NewFlagSet("gclock lab measure liao-fig2", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labLiaoUsage); fs.PrintDefaults() }
	a.f.register(fs)
	fs.BoolVar(&a.fig3, "fig3", false, "figure 3: host 1's drift changes by 1/2^18 during the measurement")
	stepIn := fs.Duration("step-in", 2*time.Second, "figure 3: the drift step this long after the warm-up")
	fs.StringVar(&a.from, "from", "", "draw the figure and the tables from the runs kept in this directory (no lab)")
	for name, v := range map[string]string{"sizes": "64,256,1024,4096,16384,65536", "latency-count": "80",
		"latency-period": "25ms", "warmup": "20s", "load": "4", "load-outside": "2", "dir": "."} {
		if err := fs.Set(name, v); err != nil {
			return a, err
		}
		fs.Lookup(name).DefValue = v
	}
	fs.Lookup("load").Usage = "the loaded curves' busy loops in the hosts' namespaces (the idle curves have none)"
	fs.Lookup("load-outside").Usage = "the loaded curves' busy loops outside the lab's namespaces (the idle curves have none)"
	if err := usage.Parse(fs, args); err != nil {
		return a, err
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("liao-fig2: unexpected argument %q", fs.Arg(0))
	}
	if *stepIn <= 0 {
		return a, fmt.Errorf("--step-in %v: want a positive time", *stepIn)
	}
	if a.from != "" {
		return a, nil
	}
	base, err := a.f.spec(stderr)
	if err != nil {
		return a, err
	}
	a.spec = lab.DefaultLiaoFigSpec(base)
	// The flags as given (their defaults above are DefaultLiaoFigSpec's).
	a.spec.Base.Sizes, a.spec.Base.LatencyCount, a.spec.Base.LatencyPeriod, a.spec.Base.Gclock.Warmup = a.f.sizes, a.f.lcount, a.f.lperiod, a.f.warmup
	a.spec.Fig3, a.spec.StepAfter = a.fig3, a.f.warmup+*stepIn
	a.spec.BusyLoad, a.spec.BusyOutside = base.Load, base.LoadOutside
	return a, nil
}

// runLabLiaoFig is `gclock lab measure liao-fig2`.
func runLabLiaoFig(args []string, stdout, stderr io.Writer) error {
	a, err := parseLiaoArgs(args, stderr)
	if err != nil {
		return err
	}
	f, from := a.f, &a.from
	var fig lab.LiaoFig
	name := "liao-fig2"
	if *from != "" {
		if fig, err = lab.LoadLiaoFig(*from); err != nil {
			return err
		}
		if fig.Spec.Fig3 {
			name = "liao-fig3"
		}
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			return err
		}
	} else {
		if err := netlab.Check(); err != nil {
			return err
		}
		spec := a.spec
		if a.fig3 {
			name = "liao-fig3"
		}
		spec.Keep = filepath.Join(f.dir, name+"-runs")
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if fig, err = lab.MeasureLiaoFig(ctx, spec); err != nil {
			return err
		}
	}
	plotFile := f.plot
	if plotFile == "" {
		plotFile = filepath.Join(f.dir, name+".png")
	}
	if err := fig.Plot(plotFile); err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(fig)
	}
	mdFile := f.out
	if mdFile == "" {
		mdFile = filepath.Join(f.dir, name+".md")
	}
	fo, err := os.Create(mdFile)
	if err != nil {
		return err
	}
	defer fo.Close()
	fmt.Fprintf(fo, "# %s\n\n%s, `gclock lab measure liao-fig2 %s`.\n\n", fig.Title(), time.Now().UTC().Format("2006-01-02 15:04 MST"), joinArgs(args))
	if err := fig.WriteMarkdown(io.MultiWriter(fo, stdout)); err != nil {
		return err
	}
	fmt.Fprintf(fo, "\n![%s](%s)\n", name, filepath.Base(plotFile))
	return fo.Close()
}

func joinArgs(a []string) string {
	s := ""
	for i, x := range a {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}
