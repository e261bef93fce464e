package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/bench"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/netmodel"
	"golang.org/x/sys/unix"
)

// parseSeeds reads "1-6", "1,3,5" or a mix ("1-3,7").
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %q is not a seed", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("--seeds %q: %q is not a range A-B with A <= B", s, part)
			}
		}
		if b-a >= 100 || len(out)+int(b-a) >= 100 {
			return nil, fmt.Errorf("--seeds %q: more than 100 runs", s)
		}
		for v := a; v <= b; v++ {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--seeds %q: no seed", s)
	}
	return out, nil
}

func machineLine() string {
	var u unix.Utsname
	kernel := "?"
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	return fmt.Sprintf("%d cores, Linux %s, %s", runtime.NumCPU(), kernel, runtime.Version())
}

// runLabBench runs the lab comparison once per seed and reports every run
// against its profile's targets (package lab/bench).
func runLabBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gclock lab bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: gclock lab bench [flags]

Runs the lab comparison (gclock lab --compare chrony,ptp4l) once per profile and
seed, each on a lab built anew, and writes a report: one row per run with the
machine's load average and, per profile and accuracy target (docs/lab.md),
PASS or FAIL for every run. --seeds 1-6 takes about 9 minutes a profile.

Profiles (--profile, comma-separated, run seed by seed in turn):
  quiet     the flags as given (today's default lab), held to the default targets
  busy      --load 4 and --load-outside 2, held to the busy targets (issue 21)
  crossNN   --cross NN% (bulk TCP flows host to host at NN% of the port rate,
            1 Gbit/s FIFO ports unless --port-rate), held to the busy targets
  link-C    --link set to the link matrix's class C (issue 28), held to that
            class's targets: `+strings.Join(netmodel.MatrixNames(), ", ")+`
  links     every class of the link matrix in turn

--profile is the load beside the daemons. The daemons' own settings are a sync
profile, --sync-profile (deploy/profiles: precise by default, the lab's; frugal
for few packets), the same for every row.

Every run's evidence is kept in a directory of its own (--keep; default beside
the -o report: bench.md -> bench.d/PROFILE-seedN/): run.json, series.csv (every
evaluation), peers.csv (the peers' readings), gclock/ (the daemons' configs,
logs and, unless --measurements=false, every exchange), the peers' configs and
logs, and frames.csv with --frame-log. The report links each run to it.

flags (and every flag of gclock lab):
`)
		fs.PrintDefaults()
	}
	var f labFlags
	f.register(fs, 4)
	seeds := fs.String("seeds", "1-6", "the runs' seeds: 1-6, 1,3,5 or 1-3,7")
	out := fs.String("o", "", "also write the Markdown report to this file")
	profiles := fs.String("profile", "quiet", "the rows' settings: quiet, busy, crossNN (e.g. quiet,busy,cross30,cross70)")
	strict := fs.Bool("strict", false, "exit with an error when a run missed a target")
	keep := fs.String("keep", "", "keep every run's evidence (run.json, series, measurements, the daemons' and peers' configs and logs) in DIR/PROFILE-seedN/ (default: beside -o's report, bench.md -> bench.d; without -o, lab-bench-TIME.d; none: keep nothing)")
	// A run that misses is taken apart from its exchanges (gclock lab
	// replay, docs/lab_breakdown.py): the bench logs them unless told not to.
	f.measurements = true
	fs.Lookup("measurements").DefValue = "true"
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q", fs.Arg(0))
	}
	compareSet := false
	fs.Visit(func(fl *flag.Flag) { compareSet = compareSet || fl.Name == "compare" })
	if !compareSet {
		f.compare = lab.PeerChrony + "," + lab.PeerPTP4L
	}
	ss, err := parseSeeds(*seeds)
	if err != nil {
		return err
	}
	profs, err := bench.ParseProfiles(*profiles)
	if err != nil {
		return err
	}
	peers, err := f.peers()
	if err != nil {
		return err
	}
	run, err := f.runSpec(peers)
	if err != nil {
		return err
	}
	kd := keepDir(*keep, *out, time.Now())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, bench.Spec{Run: run, Profiles: profs, Seeds: ss, Keep: kd, RunRoot: benchRunRoot,
		Command: "gclock lab bench " + strings.Join(args, " "), Machine: machineLine(), Progress: stderr,
		Measure: func(ctx context.Context, s lab.RunSpec) (lab.RunReport, error) {
			return labBenchMeasure(ctx, &f, s, kd != "")
		}})
	if err != nil {
		return err
	}
	if f.json {
		if err := labWriteJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		writeLabBench(stdout, rep, "")
	}
	if *out != "" {
		file, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("bench: -o: %w", err)
		}
		writeLabBench(file, rep, *out)
		if err := file.Close(); err != nil {
			return fmt.Errorf("bench: -o %s: %w", *out, err)
		}
	}
	if n := rep.Missed(); *strict && n > 0 {
		return fmt.Errorf("bench: --strict: %d target checks missed (see the report)", n)
	}
	return nil
}

// keepNone is the --keep value that keeps nothing.
const keepNone = "none"

// keepDir is where a bench keeps its runs' evidence: keep as given, or
// (keep "") beside the report file out (bench.md -> bench.d), or, without
// -o, lab-bench-<UTC time>.d in the current directory; "" for --keep none.
func keepDir(keep, out string, now time.Time) string {
	switch {
	case keep == keepNone:
		return ""
	case keep != "":
		return keep
	case out != "":
		return strings.TrimSuffix(out, filepath.Ext(out)) + ".d"
	}
	return "lab-bench-" + now.UTC().Format("20060102T150405Z") + ".d"
}

// evidenceLink is how the report at reportFile links a run's evidence
// directory: relative to the report's directory when it can be, else as
// given; "" without evidence.
func evidenceLink(reportFile, evDir string) string {
	if evDir == "" {
		return ""
	}
	if reportFile == "" {
		return filepath.ToSlash(evDir) + "/"
	}
	base, err1 := filepath.Abs(filepath.Dir(reportFile))
	target, err2 := filepath.Abs(evDir)
	if err1 != nil || err2 != nil {
		return filepath.ToSlash(evDir) + "/"
	}
	rel, err := filepath.Rel(base, target)
	if err != nil {
		return filepath.ToSlash(target) + "/"
	}
	return filepath.ToSlash(rel) + "/"
}

// describeProfile says what a profile's runs had beside the daemons.
func describeProfile(rep lab.RunReport) string {
	s := fmt.Sprintf("--load %d", rep.Load)
	if rep.LoadOutside > 0 {
		s += fmt.Sprintf(", %d busy loops outside", rep.LoadOutside)
	}
	if rep.Flood > 0 {
		s += fmt.Sprintf(", flood %d frames/s", rep.Flood)
	}
	if rep.Cross > 0 {
		s += fmt.Sprintf(", cross traffic %.0f%%", 100*rep.Cross)
	}
	if rep.PortRate > 0 {
		s += fmt.Sprintf(", %sbit/s FIFO ports", netmodel.FormatRate(rep.PortRate))
	}
	return s
}

// peerClocks says which clocks the peers ran on, beside gclock's clocks
// (lab.PeerConfig.Clocks: chronyd on the emulated clocks through the
// clock shim, ptp4l on the real clock).
func peerClocks(clocks string) string {
	if clocks == "emulated" {
		return "chronyd on the same emulated clocks as gclock's daemons (lab/clockshim; judged against them), ptp4l on the real clock (true offset 0)"
	}
	return "the peers on the same real clock (true offset 0)"
}

// writeLabBench writes the report as Markdown, to the file reportFile ("":
// stdout), which each run's evidence directory is linked from.
func writeLabBench(w io.Writer, r bench.Report, reportFile string) {
	fmt.Fprintf(w, "# gclock lab bench\n\n`%s`, %s, on %s.\n\n", r.Command, r.Date, r.Machine)
	if len(r.Runs) > 0 {
		p := r.Runs[0].Report
		fmt.Fprintf(w, "%d hosts (h0 the reference, a star), link %s each way, %v per run with the first %v left out, gclock on %s clocks; %s: chrony a client on every host but h0 (its readings pooled, as gclock's hosts are), ptp4l on h0->h1. |error| in us over the hosts other than the reference; load: the machine's 1-min load average when the daemons started and stopped.\n\n",
			p.Hosts, p.Link, time.Duration(p.DurationNs), time.Duration(p.WarmupNs), p.Clocks, peerClocks(p.Clocks))
		if p.Wander != nil {
			fmt.Fprintf(w, "Emulated clocks' wander: %v.\n\n", p.Wander)
		}
	}
	if !r.Complete {
		fmt.Fprintf(w, "Interrupted: %d runs finished.\n\n", len(r.Runs))
	}
	if r.Keep != "" {
		fmt.Fprintf(w, "Every run's evidence is in [%s](%s), one directory per run (the seed links to it): run.json (the run's report and checks), series.csv (every evaluation), peers.csv (the peers' readings), gclock/ (the daemons' configs, logs and measurements), the peers' configs and logs (docs/lab.md, \"What a bench keeps\").\n\n",
			r.Keep, evidenceLink(reportFile, r.Keep))
	}
	fmt.Fprintln(w, "| profile | seed | gclock median / p99 / max | worst host median | in bounds | mean bound width | chrony median / p99 | ptp4l median / p99 | chrony / gclock median | limit / hosts' luckiest / oracle (gclock / limit) | resyncs/s converging (after) | load | port utilisation | targets met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	us := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e3) }
	peer := func(c map[string]lab.Summary, name string) string {
		s, ok := c[name]
		if !ok || s.Evaluations == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f / %.2f", float64(s.ErrorP50Ns)/1e3, float64(s.ErrorP99Ns)/1e3)
	}
	medians := map[string][]int64{}
	for _, run := range r.Runs {
		s := run.Report.Summary
		medians[run.Profile] = append(medians[run.Profile], s.ErrorP50Ns)
		ratio := "-"
		if c, ok := run.Report.Compare[lab.PeerChrony]; ok && s.ErrorP50Ns > 0 {
			ratio = fmt.Sprintf("%.1fx", float64(c.ErrorP50Ns)/float64(s.ErrorP50Ns))
		}
		met := 0
		for _, c := range run.Checks {
			if c.Met {
				met++
			}
		}
		worst := "-"
		if ns, h := bench.WorstHostMedian(run.Report.Nodes); h > 0 {
			worst = fmt.Sprintf("%s (h%d)", us(ns), h)
		}
		util := "-"
		if ps := run.Report.Ports; len(ps) > 0 {
			lo, hi := ps[0].Util, ps[0].Util
			for _, p := range ps {
				lo, hi = min(lo, p.Util), max(hi, p.Util)
			}
			util = fmt.Sprintf("%.0f-%.0f%%", 100*lo, 100*hi)
		}
		limit := "-"
		if l := s.Limit; l != nil && l.LimitNs > 0 {
			limit = fmt.Sprintf("%.3f / %.3f / %.3f (%.2fx)", l.LimitNs/1e3, l.LuckiestNs/1e3, l.OracleNs/1e3, float64(s.ErrorP50Ns)/l.LimitNs)
		}
		seed := fmt.Sprint(run.Seed)
		if l := evidenceLink(reportFile, run.Evidence); l != "" {
			seed = fmt.Sprintf("[%d](%s)", run.Seed, l)
		}
		fmt.Fprintf(w, "| %s | %s | %s / %s / %s | %s | %.1f%% | %.1f | %s | %s | %s | %s | %.2f (%.3f) | %.1f-%.1f | %s | %d of %d |\n", run.Profile, seed,
			us(s.ErrorP50Ns), us(s.ErrorP99Ns), us(s.ErrorMaxNs), worst, 100*s.BoundCoverage, s.BoundWidthMeanNs/1e3,
			peer(run.Report.Compare, lab.PeerChrony), peer(run.Report.Compare, lab.PeerPTP4L), ratio, limit,
			s.ConvergenceRoundsPerNodePerS, s.RoundsPerNodePerS, run.Report.LoadAvgStart[0], run.Report.LoadAvgEnd[0], util, met, len(run.Checks))
	}
	for _, prof := range r.Profiles {
		var runs []bench.Row
		for _, run := range r.Runs {
			if run.Profile == prof {
				runs = append(runs, run)
			}
		}
		if len(runs) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n## %s: %s\n\n| target |", prof, describeProfile(runs[0].Report))
		for _, run := range runs {
			fmt.Fprintf(w, " seed %d |", run.Seed)
		}
		fmt.Fprint(w, " runs that met it |\n|---|")
		for range runs {
			fmt.Fprint(w, "---|")
		}
		fmt.Fprintln(w, "---|")
		for _, t := range r.Tally {
			if t.Profile != prof {
				continue
			}
			fmt.Fprintf(w, "| %s |", strings.ReplaceAll(t.Name, "|", "\\|"))
			for _, run := range runs {
				cell := "-"
				for _, c := range run.Checks {
					if c.Name == t.Name {
						cell = "FAIL " + c.Got
						if c.Met {
							cell = "PASS " + c.Got
						}
					}
				}
				fmt.Fprintf(w, " %s |", strings.ReplaceAll(cell, "|", "\\|"))
			}
			fmt.Fprintf(w, " %d of %d |\n", t.Met, t.Runs)
		}
		if m := medians[prof]; len(m) > 0 {
			sort.Slice(m, func(i, j int) bool { return m[i] < m[j] })
			fmt.Fprintf(w, "\ngclock's median |error| over the runs: %s us (lowest) to %s us (highest), %s us in the middle run.\n",
				us(m[0]), us(m[len(m)-1]), us(m[len(m)/2]))
		}
	}
	fmt.Fprintln(w, "\nA resync is one of Liao's global resynchronisations: a round of probe/reply exchanges with the reference, then the time difference. Profiles: quiet is the flags as given; busy adds --load 4 and 2 busy loops outside the lab's namespaces; crossNN sends a bulk TCP flow from every host to the next through the switch at NN% of the port rate, the switch's ports FIFO queues (docs/lab.md, Load).")
}

// labBenchMeasure runs one bench run, its --plot file and, without
// evidence (keep: series.csv has it), its --series file (tests replace
// it with a fake lab).
var labBenchMeasure = func(ctx context.Context, f *labFlags, spec lab.RunSpec, keep bool) (lab.RunReport, error) {
	return f.run(ctx, spec, keep)
}

// benchRunRoot is where the bench makes its lab's run directory (tests
// replace it).
var benchRunRoot = netlab.DefaultRunDir
