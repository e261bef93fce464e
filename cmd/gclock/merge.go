package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/timeline"
	"github.com/gclock/gclock/trace/tracegen"
)

func init() {
	register("merge", "correct per-process traces onto global time and merge them (Chrome JSON, binary)", runMerge)
}

const mergeUsage = `usage: gclock merge [flags] FILE...

Maps every process's local timestamps onto global time (linear regression
with two sync sessions, monotone spline with more, or the daemon's recorded
mappings; -method auto picks per process and says which), merges all
processes into one time-ordered stream, counts messages received before they
were sent per pair of processes before and after correction, and optionally
applies the controlled logical clock (-clc), reporting how far it moved each
process. Writes Chrome trace-event JSON (-chrome), a Perfetto protobuf trace
(-perfetto; both open in ui.perfetto.dev), an OTF2 archive (-otf2; Vampir,
Scalasca, otf2-print) and/or a
compact binary merged trace (-o).

flags:
`

func runMerge(args []string) error { return mergeCmd(args, os.Stdout) }

func mergeCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("merge", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), mergeUsage); fs.PrintDefaults() }
	method := fs.String("method", "auto", "correction: auto, linear, spline, daemon, offset or none")
	chromePath := fs.String("chrome", "", "write Chrome trace-event JSON to this file")
	binPath := fs.String("o", "", "write the binary merged trace to this file")
	otf2Dir := fs.String("otf2", "", "write an OTF2 archive (DIR/traces.otf2, for Vampir, Scalasca, otf2-print) into this directory")
	pftPath := fs.String("perfetto", "", "write a Perfetto protobuf trace to this file (about a quarter of the JSON's size)")
	keep := fs.Bool("keep-going", false, "skip corrupt chunks and stop at truncations instead of failing (and list them)")
	clc := fs.Bool("clc", false, "apply the controlled logical clock after correction (holds the trace in memory)")
	lmin := fs.Duration("min-latency", 0, "CLC: minimum message latency")
	gamma := fs.Float64("gamma", causality.DefaultGamma, "CLC: interval scale after a move, in (0,1]; 1 keeps local intervals and every shift, below 1 the shift decays")
	best := fs.Float64("best-rtt", 0, "keep only this fraction of each sync session's exchanges, those with the lowest round trip (0: all)")
	truthDir := fs.String("truth", "", "directory of truth-NN.bin files (gclock trace demo): report the error of every corrected timestamp")
	amortize := fs.Float64("amortize", 0, "CLC: spread each jump backwards over this many times its size (0: forward pass only)")
	verbose := fs.Bool("v", false, "log progress")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("no trace files given (usage: gclock merge [flags] FILE...)")
	}
	for _, f := range fs.Args() {
		if strings.HasSuffix(f, ".otf2") {
			return fmt.Errorf("%s: %w: gclock merge reads gclock traces (.gct); correct an OTF2 archive another tool recorded with `gclock trace correct -o DIR %s`", f, errNotGclock, f)
		}
	}
	m, err := correct.ParseMethod(*method)
	if err != nil {
		return err
	}
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	opt := timeline.Options{OTF2: *otf2Dir, Method: m, BestRTT: *best, KeepGoing: *keep, CLC: *clc, MinLatency: lmin.Nanoseconds(), Gamma: *gamma, Amortize: *amortize, Log: log}
	if *truthDir != "" {
		if opt.Truth, err = tracegen.ReadTruthDir(*truthDir); err != nil {
			return err
		}
	}
	var closers []func() error
	create := func(path string) (io.Writer, error) {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		closers = append(closers, func() error {
			if err := bw.Flush(); err != nil {
				f.Close()
				return fmt.Errorf("write %s: %w", path, err)
			}
			return f.Close()
		})
		return bw, nil
	}
	if *chromePath != "" {
		if opt.Chrome, err = create(*chromePath); err != nil {
			return err
		}
	}
	if *binPath != "" {
		if opt.Binary, err = create(*binPath); err != nil {
			return err
		}
	}
	if *pftPath != "" {
		if opt.Perfetto, err = create(*pftPath); err != nil {
			return err
		}
	}
	rep, err := timeline.Run(timeline.Files(fs.Args()), opt)
	for _, c := range closers {
		if cerr := c(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, correct.ErrNoSyncData):
			return fmt.Errorf("%w (hint: -method auto picks per process what its trace holds; daemon needs a daemon's mappings, "+
				"linear and spline the sync sessions of a recorder with a Prober or of libgclockmpi; `gclock trace info` lists them)", err)
		case !*keep && (errors.Is(err, format.ErrCorrupt) || errors.Is(err, format.ErrTruncated)):
			return fmt.Errorf("%w (hint: -keep-going merges what is readable)", err)
		}
		return err
	}
	printReport(out, rep)
	return nil
}

func sumPairs(rep *timeline.Report) causality.Counts {
	if rep == nil {
		return causality.Counts{}
	}
	return causality.Totals(rep.Pairs)
}

func printReport(out io.Writer, rep *timeline.Report) {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "proc\tname\tevents\tmethod\tsessions\texchanges\tmappings\tskew ppm\tclamped\treason")
	for i, c := range rep.Choices {
		reason := c.Reason
		if c.SharedOf >= 0 {
			reason += fmt.Sprintf(" (sessions of process %d, same host)", c.SharedOf)
		}
		if c.NoBound != "" {
			reason += "; no bound: " + c.NoBound
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%d\t%d\t%.3f\t%d\t%s\n", c.Proc, c.Name, rep.Merge[i].Events, c.Method, c.Sessions, c.Samples, c.Mappings, c.SkewPPM, rep.Merge[i].Clamped, reason)
	}
	tw.Flush()
	for i, f := range rep.Files {
		seen := map[string]bool{}
		for _, p := range append(append([]error{}, f.Problems...), rep.Merge[i].Problems...) {
			if s := p.Error(); !seen[s] {
				seen[s] = true
				fmt.Fprintf(out, "PROBLEM (skipped, -keep-going): %s\n", s)
			}
		}
		if l := rep.Merge[i].Lost; l != (format.Loss{}) {
			fmt.Fprintf(out, "LOST (-keep-going): %s: %d events in %d chunks, %d bytes skipped\n", f.Name, l.Events, l.Chunks, l.Bytes)
		}
	}
	rate := float64(rep.Events) / rep.MergeTime.Seconds() / 1e6
	fmt.Fprintf(out, "\nmerged %d events in %v (%.1f M events/s, causality check and outputs included)\n", rep.Events, rep.MergeTime.Round(1e6), rate)
	if e := rep.Error; e != nil {
		fmt.Fprintf(out, "\nerror against the truth, |corrected - truth| over %d events: p50 %d ns, p99 %d ns, max %d ns (process %d), mean %.1f ns\n", e.N, e.P50, e.P99, e.Max, e.WorstProc, e.Mean)
		if e.Bounded > 0 {
			fmt.Fprintf(out, "bounds of the corrections: %d of %d events bounded (widest +-%d ns), %d beyond their bound", e.Bounded, e.N, e.MaxBound, e.Beyond)
			if e.Beyond > 0 {
				fmt.Fprintf(out, " (worst by %d ns, process %d)", e.Excess, e.ExcessProc)
			}
			fmt.Fprintln(out)
		}
	}
	if e := rep.ErrorCLC; e != nil {
		fmt.Fprintf(out, "after CLC: p50 %d ns, p99 %d ns, max %d ns (process %d), mean %.1f ns\n", e.P50, e.P99, e.Max, e.WorstProc, e.Mean)
	}
	tot := causality.Totals(rep.Pairs)
	fmt.Fprintf(out, "\ncausality: %d messages, received before sent: %d on raw timestamps, %d after correction", tot.Messages, tot.Raw, tot.Corrected)
	if rep.AfterCLC != nil {
		fmt.Fprintf(out, ", %d after CLC", causality.Totals(rep.AfterCLC).Corrected)
	}
	fmt.Fprintf(out, "; %d message ends unmatched\n", rep.Unmatched)
	tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "from\tto\tmessages\traw violations\tcorrected violations")
	for _, p := range rep.Pairs {
		if p.Raw > 0 || p.Corrected > 0 {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\n", p.From, p.To, p.Messages, p.Raw, p.Corrected)
		}
	}
	tw.Flush()
	if rep.Moved != nil {
		fmt.Fprintln(out, "\ncontrolled logical clock (raw timestamps kept in the binary trace and in args.local_ns):")
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "proc\tevents\tmoved\treceives moved\tmax move ns\tmean move ns")
		for _, m := range rep.Moved {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.1f\n", m.Proc, m.Events, m.Moved, m.Jumps, m.MaxShift, m.MeanShift)
		}
		tw.Flush()
	}
	if o := rep.OTF2; o != nil {
		fmt.Fprintf(out, "\nOTF2: %d event records from %d events", o.Events, o.Input)
		if o.Dependencies > 0 {
			fmt.Fprintf(out, "; %d collective dependencies left out (implied by the collective records)", o.Dependencies)
		}
		if o.Unknown > 0 {
			fmt.Fprintf(out, "; %d messages to or from processes not in the trace left out", o.Unknown)
		}
		if o.Clamped > 0 {
			fmt.Fprintf(out, "; %d events moved forward to keep their location in time order", o.Clamped)
		}
		if o.Unnamed > 0 {
			fmt.Fprintf(out, "; %d MPI records whose communicator or window the traces do not name (written on MPI_COMM_WORLD, or as regions only)", o.Unnamed)
		}
		if o.Requests > 0 {
			fmt.Fprintf(out, "; %d MPI request events of requests their rank never started (left out)", o.Requests)
		}
		fmt.Fprintln(out)
	}
	if rep.UnboundFlows > 0 {
		fmt.Fprintf(out, "\n%d receives drawn without an arrow: their send was not seen before them\n", rep.UnboundFlows)
	}
}
