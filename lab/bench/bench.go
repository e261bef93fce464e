// Package bench is `gclock lab bench`: the lab comparison (lab.Run) once per
// profile and seed, each on a lab built anew, every run held to its
// profile's accuracy targets, its evidence kept in a directory of its own.
// It is the bench's own room: its profiles (the loads of issue 21, the link
// matrix of issue 28) and targets live here, not in package lab.
//
//	profs, _ := bench.ParseProfiles("quiet,busy")
//	rep, err := bench.Run(ctx, bench.Spec{Run: spec, Profiles: profs, Seeds: []uint64{1, 2}, Keep: "bench.d"})
//
// A Spec builds labs, so it gives a Report (package lab's naming rule).
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/netmodel"
)

// Spec is one bench: every profile on every seed.
type Spec struct {
	// Run is every run's spec before its profile and seed (Lab.Seed and
	// Gclock.Seed are the run's seed).
	Run      lab.RunSpec
	Profiles []Profile
	Seeds    []uint64
	// Keep is the directory of every run's evidence, Keep/PROFILE-seedN/
	// ("": keep nothing). The runs' lab files go to a run directory of the
	// bench's own under RunRoot (default netlab.DefaultRunDir), copied
	// after each run.
	Keep, RunRoot string
	// Command and Machine say what ran where, in the report and every
	// run.json.
	Command, Machine string
	// Measure runs one run (nil: lab.Run).
	Measure func(context.Context, lab.RunSpec) (lab.RunReport, error)
	// Progress, if set, gets a line per run and the notes on evidence.
	Progress io.Writer
}

// Row is one run (a profile, a seed) of the bench.
type Row struct {
	Profile string        `json:"profile"`
	Seed    uint64        `json:"seed"`
	Report  lab.RunReport `json:"report"`
	Checks  []TargetCheck `json:"checks"`
	// Evidence is the run's directory under Spec.Keep ("" without).
	Evidence string `json:"evidence,omitempty"`
}

// Report is what Run found (`gclock lab bench --json`).
type Report struct {
	Command  string             `json:"command"`
	Date     string             `json:"date"`
	Machine  string             `json:"machine"`
	Profiles []string           `json:"profiles"`
	Targets  map[string]Targets `json:"targets"` // per profile
	Runs     []Row              `json:"runs"`
	Tally    []Tally            `json:"tally"`          // per profile and target: runs that met it
	Complete bool               `json:"complete"`       // false: interrupted, Runs holds what finished
	Keep     string             `json:"keep,omitempty"` // the runs' evidence (Spec.Keep)
}

// Tally is how many runs of a profile met one target.
type Tally struct {
	Profile string `json:"profile"`
	Name    string `json:"name"`
	Met     int    `json:"met"`
	Runs    int    `json:"runs"`
}

// Profile is one row setting of the bench: what it changes in the run
// and the targets its runs are held to.
type Profile struct {
	Name    string
	Targets Targets
	apply   func(*lab.RunSpec)
}

// Apply is spec with p's changes.
func (p Profile) Apply(spec lab.RunSpec) lab.RunSpec {
	p.apply(&spec)
	return spec
}

// crossRate is the port rate a cross profile assumes without one.
const crossRate = 1e9

// ParseProfiles reads a list of profiles: quiet (the run as given), busy
// (Load 4 and LoadOutside 2), crossNN (cross traffic NN% of the port rate,
// 1 Gbit/s ports without one), link-CLASS (a class of netmodel.Matrix)
// and links (every class in turn).
func ParseProfiles(s string) ([]Profile, error) {
	var out []Profile
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
			out = append(out, Profile{name, defaultTargets(), func(*lab.RunSpec) {}})
		case name == "busy":
			out = append(out, Profile{name, busyTargets(), func(r *lab.RunSpec) { r.Load, r.LoadOutside = 4, 2 }})
		case strings.HasPrefix(name, "cross"):
			pct, err := strconv.Atoi(strings.TrimPrefix(name, "cross"))
			if err != nil || pct < 1 || pct > 100 {
				return nil, fmt.Errorf("--profile %q: %q: want crossNN with NN a percentage of the port rate, 1..100", s, name)
			}
			out = append(out, Profile{name, busyTargets(), func(r *lab.RunSpec) {
				r.Cross = float64(pct) / 100
				if r.Lab.PortRate == 0 {
					r.Lab.PortRate = crossRate
				}
			}})
		default:
			return nil, fmt.Errorf("--profile %q: %q: unknown (want quiet, busy, crossNN (e.g. cross30), link-CLASS or links)", s, name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--profile %q: no profile", s)
	}
	return out, nil
}

// linkProfile is a row of the link matrix (issue 28): the run as given on
// the class's link. Every class is held to the relative targets
// (a median at most a third of chrony's and 1.5 times the limit, what the
// hosts' exchanges allowed, a p99 below every peer's, every evaluation
// inside the bounds); floor-type classes also to the quiet
// lab's absolute ones (median 0.3 us, p99 2 us), the others to a median of
// 1 us and a p99 of 10 us. Every class's link parses (netmodel's tests).
func linkProfile(c netmodel.LinkClass) Profile {
	t := defaultTargets()
	t.ChronyRatio, t.LimitRatio = 3, 1.5
	if !c.Floor {
		t.MedianNs, t.P99Ns = 1000, 10000
	}
	link, _ := netmodel.ParseLink(c.Link)
	return Profile{"link-" + c.Name, t, func(r *lab.RunSpec) {
		r.Lab.Link = link
		if link.Direct {
			r.Lab.Hosts = 2
		}
	}}
}

// Run checks every profile's run, then runs the lab comparison once per
// seed and profile, seed by seed, and reports every run against its
// profile's targets. Interrupted (ctx), it reports the runs that finished.
func Run(ctx context.Context, spec Spec) (Report, error) {
	rep := Report{Command: spec.Command, Date: time.Now().UTC().Format(time.RFC3339), Machine: spec.Machine,
		Targets: map[string]Targets{}, Keep: spec.Keep}
	for _, p := range spec.Profiles {
		if err := p.Apply(spec.Run).Check(); err != nil {
			return rep, fmt.Errorf("profile %s: %w", p.Name, err)
		}
		rep.Profiles = append(rep.Profiles, p.Name)
		rep.Targets[p.Name] = p.Targets
	}
	measure, progress := spec.Measure, spec.Progress
	if measure == nil {
		measure = lab.Run
	}
	if progress == nil {
		progress = io.Discard
	}
	base := spec.Run
	if spec.Keep != "" {
		if err := os.MkdirAll(spec.Keep, 0o755); err != nil {
			return rep, fmt.Errorf("bench: --keep: %w", err)
		}
		// The daemons' sockets and pages need a short path on tmpfs: a run
		// directory of this bench's own, copied to the evidence after each
		// run, before another lab can reuse it.
		root := spec.RunRoot
		if root == "" {
			root = netlab.DefaultRunDir
		}
		base.Lab.RunDir = filepath.Join(root, fmt.Sprintf("bench-%d", os.Getpid()))
		defer os.RemoveAll(base.Lab.RunDir)
		base.Gclock.Trace = true // series.csv
		fmt.Fprintf(progress, "gclock lab bench: keeping every run's evidence in %s\n", spec.Keep)
	}
	total := len(spec.Seeds) * len(spec.Profiles)
	for _, s := range spec.Seeds {
		for _, p := range spec.Profiles {
			fmt.Fprintf(progress, "gclock lab bench: run %d of %d (profile %s, seed %d)\n", len(rep.Runs)+1, total, p.Name, s)
			row, err := runOne(ctx, spec, p.Apply(base), p, s, measure, progress)
			if err != nil {
				if ctx.Err() != nil && len(rep.Runs) > 0 {
					fmt.Fprintf(progress, "gclock lab bench: interrupted; reporting the %d runs that finished\n", len(rep.Runs))
					return rep.finish(total)
				}
				return rep, fmt.Errorf("bench: profile %s, seed %d: %w", p.Name, s, err)
			}
			rep.Runs = append(rep.Runs, row)
		}
	}
	return rep.finish(total)
}

// runOne runs profile p's run on seed s and keeps its evidence.
func runOne(ctx context.Context, spec Spec, run lab.RunSpec, p Profile, s uint64,
	measure func(context.Context, lab.RunSpec) (lab.RunReport, error), progress io.Writer) (Row, error) {
	row := Row{Profile: p.Name, Seed: s}
	run.Lab.Seed, run.Gclock.Seed = s, s
	if spec.Keep != "" {
		row.Evidence = filepath.Join(spec.Keep, runEvidenceName(p.Name, s))
		if err := os.RemoveAll(row.Evidence); err != nil {
			return row, fmt.Errorf("bench: --keep: %w", err)
		}
		if err := os.MkdirAll(row.Evidence, 0o755); err != nil {
			return row, fmt.Errorf("bench: --keep: %w", err)
		}
		if run.Lab.FrameLog != "" {
			run.Lab.FrameLog = filepath.Join(row.Evidence, evidenceFrames)
		}
	}
	r, err := measure(ctx, run)
	if err == nil {
		row.Report, row.Checks = r, p.Targets.checkRun(r)
	}
	if spec.Keep == "" {
		return row, err
	}
	if err == nil {
		err = lab.WriteSeries(filepath.Join(row.Evidence, evidenceSeries), r.Gclock.Series)
	}
	ev := evidence{Command: spec.Command, Machine: spec.Machine, Row: row}
	if err != nil {
		ev.Error = err.Error()
	}
	kerr := keepRunEvidence(row.Evidence, ev, r, run.Lab.RunDir)
	if cerr := clearDir(run.Lab.RunDir); cerr != nil && kerr == nil {
		kerr = fmt.Errorf("bench: clearing %s: %w", run.Lab.RunDir, cerr)
	}
	if kerr != nil {
		fmt.Fprintf(progress, "gclock lab bench: %v\n", kerr)
	}
	if err != nil {
		fmt.Fprintf(progress, "gclock lab bench: what the failed run left is in %s\n", row.Evidence)
	}
	return row, err
}

// finish tallies the runs and writes bench.json into Keep.
func (rep Report) finish(total int) (Report, error) {
	rep.Complete = len(rep.Runs) == total
	idx := map[[2]string]int{}
	for _, r := range rep.Runs {
		for _, c := range r.Checks {
			k := [2]string{r.Profile, c.Name}
			i, ok := idx[k]
			if !ok {
				i = len(rep.Tally)
				idx[k] = i
				rep.Tally = append(rep.Tally, Tally{Profile: r.Profile, Name: c.Name})
			}
			rep.Tally[i].Runs++
			if c.Met {
				rep.Tally[i].Met++
			}
		}
	}
	if rep.Keep != "" {
		if err := writeJSONFile(filepath.Join(rep.Keep, evidenceBench), rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Missed is how many target checks the runs missed.
func (rep Report) Missed() int {
	n := 0
	for _, t := range rep.Tally {
		n += t.Runs - t.Met
	}
	return n
}
