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

// runLabLiaoFig is `gclock lab measure liao-fig2`.
func runLabLiaoFig(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gclock lab measure liao-fig2", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labLiaoUsage); fs.PrintDefaults() }
	var f labMeasureFlags
	f.register(fs)
	fig3 := fs.Bool("fig3", false, "figure 3: host 1's drift changes by 1/2^18 during the measurement")
	stepIn := fs.Duration("step-in", 2*time.Second, "figure 3: the drift step this long after the warm-up")
	busyOut := fs.Int("load-outside-busy", 2, "the loaded curves' busy loops outside the lab's namespaces")
	from := fs.String("from", "", "draw the figure and the tables from the runs kept in this directory (no lab)")
	// This figure's defaults (DefaultLiaoFigSpec), before the flags.
	for name, v := range map[string]string{"sizes": "64,256,1024,4096,16384,65536", "latency-count": "80",
		"latency-period": "25ms", "warmup": "20s", "load": "4", "dir": "."} {
		if err := fs.Set(name, v); err != nil {
			return err
		}
		fs.Lookup(name).DefValue = v
	}
	fs.Lookup("load").Usage = "the loaded curves' busy loops in the hosts' namespaces"
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("liao-fig2: unexpected argument %q", fs.Arg(0))
	}
	if *stepIn <= 0 {
		return fmt.Errorf("--step-in %v: want a positive time", *stepIn)
	}
	if *busyOut < 0 || *busyOut > 64 {
		return fmt.Errorf("--load-outside-busy %d: want 0..64", *busyOut)
	}
	var fig lab.LiaoFig
	name := "liao-fig2"
	if *from != "" {
		var err error
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
		if err := lab.Check(); err != nil {
			return err
		}
		base, err := f.spec(stderr)
		if err != nil {
			return err
		}
		spec := lab.DefaultLiaoFigSpec(base)
		// The flags as given (the defaults above are DefaultLiaoFigSpec's).
		spec.Base.Sizes, spec.Base.LatencyCount, spec.Base.LatencyPeriod, spec.Base.Gclock.Warmup = f.sizes, f.lcount, f.lperiod, f.warmup
		spec.Fig3, spec.StepAfter = *fig3, f.warmup+*stepIn
		spec.BusyLoad, spec.BusyOutside = f.load, *busyOut
		if *fig3 {
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
