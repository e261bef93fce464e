package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/plot"
	"github.com/gclock/gclock/trace/timeline"
	"github.com/gclock/gclock/trace/tracegen"
)

func init() {
	register("trace", "describe trace files (info) or write a demo run with known truth (demo)", runTrace)
}

const traceUsage = `usage: gclock trace info [-keep-going] FILE...
       gclock trace demo [flags] -dir DIR

info describes each trace file: process, host, clock, chunks, events, sync
sessions, daemon mappings, and any corrupt or truncated chunk with its offset.

demo writes DIR/proc-NN.gct for N processes with emulated clocks exchanging
messages (and DIR/truth-NN.bin, the true global time of every event, for
'gclock merge -truth DIR'), merges them with each correction method (linear, spline, daemon),
and reports the error of every corrected timestamp against the truth and
the causality violations. Run 'gclock trace demo -h' for its flags.
`

func runTrace(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, traceUsage)
		return errors.New("missing subcommand (info or demo)")
	}
	switch args[0] {
	case "info":
		return traceInfo(args[1:], os.Stdout)
	case "demo":
		return traceDemo(args[1:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Fprint(os.Stderr, traceUsage)
		return flag.ErrHelp
	}
	fmt.Fprint(os.Stderr, traceUsage)
	return fmt.Errorf("unknown subcommand %q (want info or demo)", args[0])
}

func traceInfo(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("trace info", flag.ContinueOnError)
	keep := fs.Bool("keep-going", false, "list corrupt or truncated chunks and go on with the readable ones")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("trace info: no file given (usage: gclock trace info FILE...)")
	}
	var errs []error
	for _, path := range fs.Args() {
		if err := infoOne(path, *keep, out); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func infoOne(path string, keep bool, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	s, err := format.Summarize(f, path, keep)
	if err != nil {
		return fmt.Errorf("%w (hint: -keep-going reads what is readable)", err)
	}
	m := s.Meta
	var flags []string
	if m.Flags&format.FlagReference != 0 {
		flags = append(flags, "reference")
	}
	if m.Flags&format.FlagSyncedHost != 0 {
		flags = append(flags, "synced-host")
	}
	if m.Flags&format.FlagMerged != 0 {
		flags = append(flags, "merged")
	}
	fmt.Fprintf(out, "%s: process %d %q host %d clock %q flags [%s], %d bytes\n", path, m.Proc, m.Name, m.Host, m.Clock, strings.Join(flags, ","), s.Size)
	var kinds []string
	for k, n := range s.Chunks {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(out, "  chunks: %s\n", strings.Join(kinds, ", "))
	if s.Events > 0 {
		fmt.Fprintf(out, "  events: %d, local time %d .. %d ns (%v)\n", s.Events, s.First, s.Last, time.Duration(s.Last-s.First))
	}
	if s.Merged > 0 {
		fmt.Fprintf(out, "  merged records: %d\n", s.Merged)
	}
	for _, ss := range s.Sessions {
		var best int64 = -1
		for _, x := range ss.Samples {
			if r := x.RTT(); best < 0 || r < best {
				best = r
			}
		}
		at := int64(0)
		if len(ss.Samples) > 0 {
			at = ss.Samples[0].LocSend
		}
		fmt.Fprintf(out, "  sync session %d (%s) with process %d: %d exchanges at local %d, min rtt %d ns\n", ss.Index, sessionKind(ss.Kind), ss.Ref, len(ss.Samples), at, best)
	}
	if len(s.Mappings) > 0 {
		fmt.Fprintf(out, "  daemon mappings: %d, from local %d to %d\n", len(s.Mappings), s.Mappings[0].From, s.Mappings[len(s.Mappings)-1].From)
	}
	fmt.Fprintf(out, "  names: %d\n", len(s.Names))
	for _, p := range s.Problems {
		fmt.Fprintf(out, "  PROBLEM: %v\n", p)
	}
	if l := s.Lost; l != (format.Loss{}) {
		fmt.Fprintf(out, "  LOST: %d events in %d chunks, %d bytes skipped\n", l.Events, l.Chunks, l.Bytes)
	}
	return nil
}

func sessionKind(k format.SessionKind) string {
	switch k {
	case format.SessionStart:
		return "start"
	case format.SessionEnd:
		return "end"
	case format.SessionDemand:
		return "on demand"
	}
	return fmt.Sprint(k)
}

func traceDemo(args []string, out io.Writer) error {
	def := tracegen.DefaultConfig()
	fs := flag.NewFlagSet("trace demo", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory to write proc-NN.gct into (required)")
	procs := fs.Int("n", def.Procs, "processes, the reference included")
	dur := fs.Duration("duration", def.Duration, "run length (true time)")
	sessions := fs.Int("sessions", def.Sessions, "sync sessions per process (start, end, and on demand between)")
	msgs := fs.Int("sync-messages", def.SyncMessages, "exchanges per session (SYNC-MAX-MESSAGES)")
	drift := fs.Float64("drift-ppm", def.DriftPPM, "max |drift| of each clock, ppm")
	wander := fs.Float64("wander-ppm", def.WanderPPM, "random-walk frequency wander per 10 ms, ppm")
	lmin := fs.Duration("latency-min", def.LatencyMin, "minimum one-way message latency")
	daemonErr := fs.Int64("daemon-err-ns", def.DaemonErrNs, "max |offset error| of the synthetic daemon's mappings")
	seed := fs.Uint64("seed", def.Seed, "random seed")
	chromeOut := fs.Bool("chrome", true, "also write DIR/merged.json (spline or auto method, with CLC)")
	pftOut := fs.Bool("perfetto", false, "also write DIR/merged.pftrace (Perfetto protobuf, auto method, with CLC)")
	otf2Out := fs.Bool("otf2", false, "also write the OTF2 archive DIR/otf2/traces.otf2 (auto method, with CLC)")
	verbose := fs.Bool("v", false, "log progress")
	best := fs.Float64("best-rtt", 0, "merge keeping only this fraction of each session's lowest-RTT exchanges (0: all)")
	plots := fs.String("plots", "", "write trace_error_cdf.png and trace_error_time.png into this directory")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("trace demo: -dir is required (where the traces go)")
	}
	cfg := def
	cfg.Procs, cfg.Duration, cfg.Sessions, cfg.SyncMessages = *procs, *dur, *sessions, *msgs
	cfg.DriftPPM, cfg.WanderPPM, cfg.LatencyMin, cfg.DaemonErrNs, cfg.Seed = *drift, *wander, *lmin, *daemonErr, *seed
	log := slog.New(slog.DiscardHandler)
	if *verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	var paths []string
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	truth, err := tracegen.Generate(cfg, func(p int) (io.Writer, error) {
		path := filepath.Join(*dir, fmt.Sprintf("proc-%02d.gct", p))
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		paths = append(paths, path)
		files = append(files, f)
		return f, nil
	}, log)
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := f.Close(); err != nil {
			return err
		}
	}
	files = nil
	if err := tracegen.WriteTruthDir(*dir, truth); err != nil {
		return err
	}
	var events int
	for _, t := range truth {
		events += len(t)
	}
	fmt.Fprintf(out, "wrote %d traces (%d events) to %s: %d processes, %v, %d sessions x %d exchanges, drift <= %g ppm, wander %g ppm/10ms, min latency %v, seed %d\n\n",
		len(paths), events, *dir, cfg.Procs, cfg.Duration, cfg.Sessions, cfg.SyncMessages, cfg.DriftPPM, cfg.WanderPPM, cfg.LatencyMin, cfg.Seed)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "method\tevents\terr p50 ns\terr p99 ns\terr max ns\tmean ns\tviolations raw\tcorrected\tafter CLC\tCLC max move ns\t")
	var messages int64
	var names []string
	var samples [][]timeline.ErrorSample
	for _, m := range []correct.Method{correct.Linear, correct.Spline, correct.Daemon} {
		rep, err := timeline.Run(timeline.Files(paths), timeline.Options{Method: m, BestRTT: *best, Truth: truth, CLC: true, KeepErrors: *plots != "", Log: log})
		if err != nil {
			return fmt.Errorf("merge with %s: %w", m, err)
		}
		tot := sumPairs(rep)
		messages = tot.Messages
		var after int64
		for _, p := range rep.AfterCLC {
			after += p.Corrected
		}
		var maxMove int64
		for _, mv := range rep.Moved {
			maxMove = max(maxMove, mv.MaxShift)
		}
		e := rep.Error
		names, samples = append(names, string(m)), append(samples, rep.ErrorSamples)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%d\t%d\t%d\t%d\t\n", m, e.N, e.P50, e.P99, e.Max, e.Mean, tot.Raw, tot.Corrected, after, maxMove)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\n(errors are |corrected - truth| over every event; the reference process is exact by definition; violations count messages received before they were sent, out of %d)\n", messages)
	if *plots != "" {
		files, err := plot.CorrectionErrors(*plots, names, samples, 1)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %v\n", files)
	}
	if *chromeOut || *pftOut || *otf2Out {
		opt := timeline.Options{Method: correct.Auto, CLC: true, Log: log}
		if *otf2Out {
			opt.OTF2 = filepath.Join(*dir, "otf2")
		}
		var written []string
		var files []*os.File
		for _, o := range []struct {
			on   bool
			name string
			dst  *io.Writer
		}{{*chromeOut, "merged.json", &opt.Chrome}, {*pftOut, "merged.pftrace", &opt.Perfetto}} {
			if !o.on {
				continue
			}
			p := filepath.Join(*dir, o.name)
			f, err := os.Create(p)
			if err != nil {
				return err
			}
			files = append(files, f)
			*o.dst = f
			written = append(written, p)
		}
		if opt.OTF2 != "" {
			written = append(written, filepath.Join(opt.OTF2, "traces.otf2"))
		}
		_, err := timeline.Run(timeline.Files(paths), opt)
		for _, f := range files {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s (JSON and Perfetto open in https://ui.perfetto.dev, OTF2 in Vampir or otf2-print)\n", strings.Join(written, " and "))
	}
	return nil
}
