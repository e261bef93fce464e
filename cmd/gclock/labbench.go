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
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/netmodel"
	"golang.org/x/sys/unix"
)

// labBenchRun is one run (a profile, a seed) of `gclock lab bench`.
type labBenchRun struct {
	Profile string            `json:"profile"`
	Seed    uint64            `json:"seed"`
	Report  lab.RunReport     `json:"report"`
	Checks  []lab.TargetCheck `json:"checks"`
	// Evidence is the run's directory under --keep ("" with --keep none).
	Evidence string `json:"evidence,omitempty"`
}

// labBenchReport is `gclock lab bench --json`.
type labBenchReport struct {
	Command  string                 `json:"command"`
	Date     string                 `json:"date"`
	Machine  string                 `json:"machine"`
	Profiles []string               `json:"profiles"`
	Targets  map[string]lab.Targets `json:"targets"` // per profile
	Runs     []labBenchRun          `json:"runs"`
	Tally    []labTally             `json:"tally"`          // per profile and target: runs that met it
	Complete bool                   `json:"complete"`       // false: interrupted, Runs holds what finished
	Keep     string                 `json:"keep,omitempty"` // the runs' evidence (--keep)
}

type labTally struct {
	Profile string `json:"profile"`
	Name    string `json:"name"`
	Met     int    `json:"met"`
	Runs    int    `json:"runs"`
}

// benchProfile is one row setting of `gclock lab bench --profile`: what it
// changes in the flags and the targets its runs are held to.
type benchProfile struct {
	Name    string
	Targets lab.Targets
	apply   func(*labFlags)
}

// parseProfiles reads --profile: quiet (the flags as given), busy (--load
// 4 and --load-outside 2) and crossNN (--cross NN%, on --port-rate or
// 1 Gbit/s ports).
func parseProfiles(s string) ([]benchProfile, error) {
	var out []benchProfile
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if seen[name] {
			return nil, fmt.Errorf("--profile %q: %s twice", s, name)
		}
		seen[name] = true
		if name == "links" {
			for _, c := range netmodel.Matrix() {
				if !seen["link-"+c.Name] {
					seen["link-"+c.Name] = true
					out = append(out, linkProfile(c))
				}
			}
			continue
		}
		if c, ok := strings.CutPrefix(name, "link-"); ok {
			lc, found := netmodel.MatrixClass(c)
			if !found {
				return nil, fmt.Errorf("--profile %q: %q: unknown link class (want one of %s)", s, name, strings.Join(netmodel.MatrixNames(), ", "))
			}
			out = append(out, linkProfile(lc))
			continue
		}
		switch {
		case name == "quiet":
			out = append(out, benchProfile{name, lab.DefaultTargets(), func(*labFlags) {}})
		case name == "busy":
			out = append(out, benchProfile{name, lab.BusyTargets(), func(f *labFlags) { f.load, f.loadOutside = 4, 2 }})
		case strings.HasPrefix(name, "cross"):
			pct, err := strconv.Atoi(strings.TrimPrefix(name, "cross"))
			if err != nil || pct < 1 || pct > 100 {
				return nil, fmt.Errorf("--profile %q: %q: want crossNN with NN a percentage of the port rate, 1..100", s, name)
			}
			out = append(out, benchProfile{name, lab.BusyTargets(), func(f *labFlags) { f.cross = strconv.Itoa(pct) + "%" }})
		default:
			return nil, fmt.Errorf("--profile %q: %q: unknown (want quiet, busy, crossNN (e.g. cross30), link-CLASS or links)", s, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--profile %q: no profile", s)
	}
	return out, nil
}

// linkProfile is a row of the link matrix (issue 28): the flags as given
// on the class's link. Every class is held to the relative
// targets (a median at most a third of chrony's, a p99 below every
// peer's, every evaluation inside the bounds); floor-type classes also to
// the quiet lab's absolute ones (median 0.3 us, p99 2 us), the others to
// a median of 1 us and a p99 of 10 us.
func linkProfile(c netmodel.LinkClass) benchProfile {
	t := lab.DefaultTargets()
	t.ChronyRatio = 3
	if !c.Floor {
		t.MedianNs, t.P99Ns = 1000, 10000
	}
	return benchProfile{"link-" + c.Name, t, func(f *labFlags) { f.link = c.Link }}
}

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
// against lab.DefaultTargets.
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
	profs, err := parseProfiles(*profiles)
	if err != nil {
		return err
	}
	peers, err := f.peers()
	if err != nil {
		return err
	}
	for _, p := range profs {
		g := f
		p.apply(&g)
		if _, err := g.config(); err != nil {
			return fmt.Errorf("profile %s: %w", p.Name, err)
		}
		if _, err := g.crossShare(); err != nil {
			return fmt.Errorf("profile %s: %w", p.Name, err)
		}
	}
	now := time.Now()
	kd := keepDir(*keep, *out, now)
	if kd != "" {
		if err := os.MkdirAll(kd, 0o755); err != nil {
			return fmt.Errorf("bench: --keep: %w", err)
		}
		// The runs' files go to a run directory of this bench's own (the
		// daemons' sockets and pages need a short path on tmpfs), copied
		// to the evidence after each run, before another lab can reuse it.
		f.runDir = filepath.Join(benchRunRoot, fmt.Sprintf("bench-%d", os.Getpid()))
		defer os.RemoveAll(f.runDir)
		fmt.Fprintf(stderr, "gclock lab bench: keeping every run's evidence in %s\n", kd)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := labBenchReport{Command: "gclock lab bench " + strings.Join(args, " "), Date: now.UTC().Format(time.RFC3339),
		Machine: machineLine(), Targets: map[string]lab.Targets{}, Keep: kd}
	for _, p := range profs {
		rep.Profiles = append(rep.Profiles, p.Name)
		rep.Targets[p.Name] = p.Targets
	}
	total, n := len(ss)*len(profs), 0
run:
	for _, s := range ss {
		for _, p := range profs {
			n++
			g := f
			p.apply(&g)
			g.seed = s
			fmt.Fprintf(stderr, "gclock lab bench: run %d of %d (profile %s, seed %d)\n", n, total, p.Name, s)
			br := labBenchRun{Profile: p.Name, Seed: s}
			if kd != "" {
				br.Evidence = filepath.Join(kd, runEvidenceName(p.Name, s))
				if err := os.RemoveAll(br.Evidence); err != nil {
					return fmt.Errorf("bench: --keep: %w", err)
				}
				if err := os.MkdirAll(br.Evidence, 0o755); err != nil {
					return fmt.Errorf("bench: --keep: %w", err)
				}
				g.series = filepath.Join(br.Evidence, evidenceSeries)
				if f.frameLog != "" {
					g.frameLog = filepath.Join(br.Evidence, evidenceFrames)
				}
			}
			m, err := labBenchMeasure(ctx, &g, peers)
			if err == nil {
				br.Report, br.Checks = m.rep, p.Targets.CheckRun(m.rep)
			}
			if kd != "" {
				ev := labBenchEvidence{Command: rep.Command, Machine: rep.Machine, labBenchRun: br}
				if err != nil {
					ev.Error = err.Error()
				}
				kerr := keepRunEvidence(br.Evidence, ev, m, g.runDir)
				if cerr := clearDir(g.runDir); cerr != nil && kerr == nil {
					kerr = fmt.Errorf("bench: clearing %s: %w", g.runDir, cerr)
				}
				if kerr != nil {
					fmt.Fprintf(stderr, "gclock lab bench: %v\n", kerr)
				}
				if err != nil {
					fmt.Fprintf(stderr, "gclock lab bench: what the failed run left is in %s\n", br.Evidence)
				}
			}
			if err != nil {
				if ctx.Err() != nil && len(rep.Runs) > 0 {
					fmt.Fprintf(stderr, "gclock lab bench: interrupted; reporting the %d runs that finished\n", len(rep.Runs))
					break run
				}
				return fmt.Errorf("bench: profile %s, seed %d: %w", p.Name, s, err)
			}
			rep.Runs = append(rep.Runs, br)
		}
	}
	rep.Complete = len(rep.Runs) == total
	rep.Tally = tally(rep.Runs)
	if f.json {
		if err := labWriteJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		writeLabBench(stdout, rep, "")
	}
	if kd != "" {
		if err := writeJSONFile(filepath.Join(kd, evidenceBench), rep); err != nil {
			return err
		}
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
	if *strict {
		missed := 0
		for _, t := range rep.Tally {
			missed += t.Runs - t.Met
		}
		if missed > 0 {
			return fmt.Errorf("bench: --strict: %d target checks missed (see the report)", missed)
		}
	}
	return nil
}

func tally(runs []labBenchRun) []labTally {
	var out []labTally
	idx := map[[2]string]int{}
	for _, r := range runs {
		for _, c := range r.Checks {
			k := [2]string{r.Profile, c.Name}
			i, ok := idx[k]
			if !ok {
				i = len(out)
				idx[k] = i
				out = append(out, labTally{Profile: r.Profile, Name: c.Name})
			}
			out[i].Runs++
			if c.Met {
				out[i].Met++
			}
		}
	}
	return out
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

// writeLabBench writes the report as Markdown, to the file reportFile ("":
// stdout), which each run's evidence directory is linked from.
func writeLabBench(w io.Writer, r labBenchReport, reportFile string) {
	fmt.Fprintf(w, "# gclock lab bench\n\n`%s`, %s, on %s.\n\n", r.Command, r.Date, r.Machine)
	if len(r.Runs) > 0 {
		p := r.Runs[0].Report
		fmt.Fprintf(w, "%d hosts (h0 the reference, a star), link %s each way, %v per run with the first %v left out, gclock on %s clocks; the peers on h0->h1 on the real clock (true offset 0). |error| in us over the hosts other than the reference; load: the machine's 1-min load average when the daemons started and stopped.\n\n",
			p.Hosts, p.Link, time.Duration(p.DurationNs), time.Duration(p.WarmupNs), p.Clocks)
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
	fmt.Fprintln(w, "| profile | seed | gclock median / p99 / max | worst host median | in bounds | mean bound width | chrony median / p99 | ptp4l median / p99 | chrony / gclock median | resyncs/s converging (after) | load | port utilisation | targets met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
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
		if ns, h := lab.WorstHostMedian(run.Report.Nodes); h > 0 {
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
		seed := fmt.Sprint(run.Seed)
		if l := evidenceLink(reportFile, run.Evidence); l != "" {
			seed = fmt.Sprintf("[%d](%s)", run.Seed, l)
		}
		fmt.Fprintf(w, "| %s | %s | %s / %s / %s | %s | %.1f%% | %.1f | %s | %s | %s | %.2f (%.3f) | %.1f-%.1f | %s | %d of %d |\n", run.Profile, seed,
			us(s.ErrorP50Ns), us(s.ErrorP99Ns), us(s.ErrorMaxNs), worst, 100*s.BoundCoverage, s.BoundWidthMeanNs/1e3,
			peer(run.Report.Compare, lab.PeerChrony), peer(run.Report.Compare, lab.PeerPTP4L), ratio,
			s.ConvergenceRoundsPerNodePerS, s.RoundsPerNodePerS, run.Report.LoadAvgStart[0], run.Report.LoadAvgEnd[0], util, met, len(run.Checks))
	}
	for _, prof := range r.Profiles {
		var runs []labBenchRun
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

// labBenchMeasure runs one bench run (tests replace it with a fake lab).
var labBenchMeasure = labMeasure

// benchRunRoot is where the bench makes its lab's run directory (tests
// replace it).
var benchRunRoot = netlab.DefaultRunDir
