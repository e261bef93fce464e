package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/foreign"
	"github.com/gclock/gclock/trace/format"
)

const traceCorrectUsage = `usage: gclock trace correct [flags] -o DIR ARCHIVE.otf2

Corrects an OTF2 archive another tool recorded (Score-P: every location's
timestamps on its own clock, CLOCK_OFFSET records at init and finalize that
OTF2 readers interpolate linearly between) and writes DIR/NAME.otf2 with
every event on global time, each CLOCK_OFFSET at its corrected time with
offset 0 and ClockProperties' span updated.

Without -mappings, each location's own offsets (a line through two, a
monotone spline through more) are refined by the archive's messages: per
window, a receive is after its send, and the fastest message into and out
of each location bounds its offset from both sides; that follows the drift
steps and wander a line between two offset records misses. With -mappings,
the daemon's recorded mappings (gclock trace files of the run, matched to
the OTF2 location groups or hosts by name) map the timestamps instead.
Receives before their sends are counted on the raw timestamps, on the
producer's interpolation, after correction and after -clc.

flags:
`

func traceCorrect(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("trace correct", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), traceCorrectUsage); fs.PrintDefaults() }
	outDir := fs.String("o", "", "write the corrected archive into this directory (required; not the input's)")
	name := fs.String("name", "traces", "the corrected archive's name: DIR/NAME.otf2")
	mappings := fs.String("mappings", "", "comma-separated gclock trace files holding the daemon's mappings, each named (gclock trace info) as an OTF2 location group (\"MPI Rank 3\") or host")
	messages := fs.String("messages", "auto", "refine with the messages: auto (without -mappings), on or off")
	window := fs.Duration("window", 0, "refinement window (0: one with about -per-window messages each way at the location with the fewest)")
	perWindow := fs.Int("per-window", 16, "messages each way per automatic window")
	clc := fs.Bool("clc", false, "apply the controlled logical clock after correction")
	lmin := fs.Duration("min-latency", 0, "CLC: minimum message latency")
	gamma := fs.Float64("gamma", causality.DefaultGamma, "CLC: interval scale after a move, in (0,1]")
	amortize := fs.Float64("amortize", 0, "CLC: spread each jump backwards over this many times its size")
	truthPath := fs.String("truth", "", "truth.json of the test generator (trace/foreign/testdata/scorep_like.py): report the error of every timestamp before and after, and the bound the messages allow")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usage.Errorf("want one OTF2 archive (usage: gclock trace correct -o DIR ARCHIVE.otf2)")
	}
	if *outDir == "" {
		return usage.Errorf("-o DIR is required (the corrected archive is written beside, never over, the input)")
	}
	opt := foreign.Options{Reference: -1, PerWindow: *perWindow, CLC: *clc, Gamma: *gamma, Amortize: *amortize}
	switch *messages {
	case "auto":
	case "on":
		opt.Messages = foreign.MessagesOn
	case "off":
		opt.Messages = foreign.MessagesOff
	default:
		return usage.Errorf("-messages %q: want auto, on or off", *messages)
	}
	in := fs.Arg(0)
	start := time.Now()
	ar, err := foreign.ReadArchive(in)
	if err != nil {
		return err
	}
	// ticks of the archive's timer
	tick := func(d time.Duration) int64 { return int64(float64(d.Nanoseconds()) * float64(ar.Resolution) / 1e9) }
	opt.Window, opt.MinLatency = tick(*window), tick(*lmin)
	if *mappings != "" {
		if ar.Resolution != 1e9 {
			return fmt.Errorf("%s: timer resolution %d ticks/s: the daemon's mappings are for a nanosecond clock (record with Score-P's clock_gettime timer)", in, ar.Resolution)
		}
		if opt.Mappers, err = daemonMappers(ar, strings.Split(*mappings, ",")); err != nil {
			return err
		}
	}
	res, err := foreign.Correct(ar.Trace, opt)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	rep, err := ar.Write(*outDir, *name, res)
	if err != nil {
		return err
	}
	ns := func(ticks int64) int64 { return int64(float64(ticks) * 1e9 / float64(ar.Resolution)) }
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "location\tname\tevents\toffsets\tmethod\tskew ppm\tknots\tshares\tmax refinement ns\tclamped\tCLC moved\tmax CLC ns")
	for i, l := range res.Locs {
		shares := "-"
		if l.Shared >= 0 {
			shares = fmt.Sprint(ar.LocIDs[l.Shared])
		}
		skew := fmt.Sprintf("%.3f", l.SkewPPM)
		if l.Method == "daemon" {
			skew = "-" // piecewise: the daemon's mappings have one each
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\n", ar.LocIDs[i], l.Name, len(ar.Trace.Locs[i].Times), len(ar.Trace.Locs[i].Offsets),
			l.Method, skew, l.Knots, shares, ns(l.MaxAdj), l.Clamped, l.Moved, ns(l.MaxCLC))
	}
	tw.Flush()
	if res.Window > 0 {
		fmt.Fprintf(out, "\nrefined by the messages in windows of %v (reference: location %d)\n", time.Duration(ns(res.Window)), ar.LocIDs[res.Reference])
	}
	c := res.Causality
	fmt.Fprintf(out, "\ncausality: %d messages, received before sent: %d on raw timestamps, %d on the producer's clock offsets (what OTF2 readers show), %d after correction",
		res.Messages, c.Raw, c.Linear, c.Corrected)
	if opt.CLC {
		fmt.Fprintf(out, ", %d after CLC", c.CLC)
	}
	fmt.Fprintf(out, "; %d message ends unmatched\n", ar.Unmatched)
	if *truthPath != "" {
		tr, err := foreign.ReadTruth(*truthPath)
		if err != nil {
			return err
		}
		if len(tr.Locations) != len(ar.Trace.Locs) {
			return fmt.Errorf("truth %s: %d locations, the archive %d", *truthPath, len(tr.Locations), len(ar.Trace.Locs))
		}
		for i, l := range tr.Locations {
			if len(l.Global) != len(ar.Trace.Locs[i].Times) {
				return fmt.Errorf("truth %s: location %d has %d events, the archive %d", *truthPath, i, len(l.Global), len(ar.Trace.Locs[i].Times))
			}
		}
		lin := foreign.Evaluate(tr, func(i, e int) int64 { return foreign.Linear(ar.Trace.Locs[i].Offsets, ar.Trace.Locs[i].Times[e]) })
		got := foreign.Evaluate(tr, func(i, e int) int64 { return res.Global[i][e] })
		fmt.Fprintf(out, "\nerror against the truth, |t - truth| (non-reference locations):\n  producer's clock offsets (linear): %v\n  gclock trace correct:              %v\n", lin, got)
		if res.Window > 0 {
			b, _ := foreign.Bound(tr, res.Window)
			fmt.Fprintf(out, "  bound the messages allow:          %v\n", b)
		}
	}
	fmt.Fprintf(out, "\nwrote %s: %d events, %d clock offsets (now 0), in %v\n", filepath.Join(*outDir, *name+".otf2"), rep.Events, rep.ClockOffsets, time.Since(start).Round(time.Millisecond))
	return nil
}

// daemonMappers reads the daemon's mappings from gclock trace files and
// assigns each OTF2 location the file named as its location group, else
// as its host (system tree node).
func daemonMappers(ar *foreign.Archive, files []string) ([]correct.Mapper, error) {
	byName := map[string][]format.DaemonMapping{}
	var names []string
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("-mappings: %w", err)
		}
		s, err := format.Summarize(f, path, false)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("-mappings: %w", err)
		}
		if len(s.Mappings) == 0 {
			return nil, fmt.Errorf("-mappings: %s (%q) holds no daemon mapping", path, s.Meta.Name)
		}
		if _, dup := byName[s.Meta.Name]; dup {
			return nil, fmt.Errorf("-mappings: two files named %q", s.Meta.Name)
		}
		byName[s.Meta.Name] = s.Mappings
		names = append(names, s.Meta.Name)
	}
	mps := make([]correct.Mapper, len(ar.LocIDs))
	for i := range ar.LocIDs {
		ms, ok := byName[ar.Groups[i]]
		if !ok {
			ms, ok = byName[ar.Nodes[i]]
		}
		if !ok {
			return nil, fmt.Errorf("-mappings: no file for location %s on host %q (files: %q)", ar.LocationName(i), ar.Nodes[i], names)
		}
		m, err := correct.NewDaemonMapper(ms)
		if err != nil {
			return nil, fmt.Errorf("-mappings: location %s: %w", ar.LocationName(i), err)
		}
		mps[i] = m
	}
	return mps, nil
}

var errNotGclock = errors.New("an OTF2 archive, not a gclock trace")
