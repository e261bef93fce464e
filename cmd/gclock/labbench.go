package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/lab"
	"golang.org/x/sys/unix"
)

// labBenchRun is one seed of `gclock lab bench`.
type labBenchRun struct {
	Seed   uint64            `json:"seed"`
	Report lab.RunReport     `json:"report"`
	Checks []lab.TargetCheck `json:"checks"`
}

// labBenchReport is `gclock lab bench --json`.
type labBenchReport struct {
	Command  string        `json:"command"`
	Date     string        `json:"date"`
	Machine  string        `json:"machine"`
	Targets  lab.Targets   `json:"targets"`
	Runs     []labBenchRun `json:"runs"`
	Tally    []labTally    `json:"tally"`    // per target: runs that met it
	Complete bool          `json:"complete"` // false: interrupted, Runs holds what finished
}

type labTally struct {
	Name string `json:"name"`
	Met  int    `json:"met"`
	Runs int    `json:"runs"`
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

Runs the lab comparison (gclock lab --compare chrony,ptp4l) once per seed, each
on a lab built anew, and writes a report: one row per run and, per accuracy
target (docs/lab.md), how many runs met it. --seeds 1-6 takes about 9 minutes.

flags (and every flag of gclock lab):
`)
		fs.PrintDefaults()
	}
	var f labFlags
	f.register(fs, 4)
	seeds := fs.String("seeds", "1-6", "the runs' seeds: 1-6, 1,3,5 or 1-3,7")
	out := fs.String("o", "", "also write the Markdown report to this file")
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
	peers, err := f.peers()
	if err != nil {
		return err
	}
	if _, err := f.config(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep := labBenchReport{Command: "gclock lab bench " + strings.Join(args, " "), Date: time.Now().UTC().Format(time.RFC3339),
		Machine: machineLine(), Targets: lab.DefaultTargets()}
	for i, s := range ss {
		f.seed = s
		fmt.Fprintf(stderr, "gclock lab bench: run %d of %d (seed %d)\n", i+1, len(ss), s)
		m, err := labMeasure(ctx, &f, peers)
		if err != nil {
			if ctx.Err() != nil && len(rep.Runs) > 0 {
				fmt.Fprintf(stderr, "gclock lab bench: interrupted; reporting the %d runs that finished\n", len(rep.Runs))
				break
			}
			return fmt.Errorf("bench: seed %d: %w", s, err)
		}
		rep.Runs = append(rep.Runs, labBenchRun{Seed: s, Report: m.rep, Checks: rep.Targets.Check(m.rep.Summary, m.rep.Compare)})
	}
	rep.Complete = len(rep.Runs) == len(ss)
	rep.Tally = tally(rep.Runs)
	if f.json {
		if err := labWriteJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		writeLabBench(stdout, rep)
	}
	if *out != "" {
		file, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("bench: -o: %w", err)
		}
		writeLabBench(file, rep)
		if err := file.Close(); err != nil {
			return fmt.Errorf("bench: -o %s: %w", *out, err)
		}
	}
	return nil
}

func tally(runs []labBenchRun) []labTally {
	var out []labTally
	idx := map[string]int{}
	for _, r := range runs {
		for _, c := range r.Checks {
			i, ok := idx[c.Name]
			if !ok {
				i = len(out)
				idx[c.Name] = i
				out = append(out, labTally{Name: c.Name})
			}
			out[i].Runs++
			if c.Met {
				out[i].Met++
			}
		}
	}
	return out
}

// writeLabBench writes the report as Markdown.
func writeLabBench(w io.Writer, r labBenchReport) {
	fmt.Fprintf(w, "# gclock lab bench\n\n`%s`, %s, on %s.\n\n", r.Command, r.Date, r.Machine)
	if len(r.Runs) > 0 {
		p := r.Runs[0].Report
		fmt.Fprintf(w, "%d hosts (h0 the reference, a star), link %s each way, %v per run with the first %v left out, %d busy loops beside the daemons, gclock on %s clocks; the peers on h0->h1 on the real clock (true offset 0). |error| in us over the hosts other than the reference.\n\n",
			p.Hosts, p.Link, time.Duration(p.DurationNs), time.Duration(p.WarmupNs), p.Load, p.Clocks)
		if p.Wander != nil {
			fmt.Fprintf(w, "Emulated clocks' wander: %v.\n\n", p.Wander)
		}
	}
	if !r.Complete {
		fmt.Fprintf(w, "Interrupted: %d runs finished.\n\n", len(r.Runs))
	}
	fmt.Fprintln(w, "| seed | gclock median / p99 / max | in bounds | converging: resyncs/s (exchanges/s) | after: resyncs/s (exchanges/s) | chrony median / p99 | ptp4l median / p99 | chrony / gclock median | targets met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
	us := func(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/1e3) }
	peer := func(c map[string]lab.Summary, name string) string {
		s, ok := c[name]
		if !ok || s.Evaluations == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f / %.2f", float64(s.ErrorP50Ns)/1e3, float64(s.ErrorP99Ns)/1e3)
	}
	var medians []int64
	for _, run := range r.Runs {
		s := run.Report.Summary
		medians = append(medians, s.ErrorP50Ns)
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
		fmt.Fprintf(w, "| %d | %s / %s / %s | %.1f%% | %.2f (%.1f) | %.3f (%.2f) | %s | %s | %s | %d of %d |\n", run.Seed,
			us(s.ErrorP50Ns), us(s.ErrorP99Ns), us(s.ErrorMaxNs), 100*s.BoundCoverage,
			s.ConvergenceRoundsPerNodePerS, s.ConvergenceExchangesPerNodePerS, s.RoundsPerNodePerS, s.ExchangesPerNodePerS,
			peer(run.Report.Compare, lab.PeerChrony), peer(run.Report.Compare, lab.PeerPTP4L), ratio, met, len(run.Checks))
	}
	fmt.Fprintln(w, "\n| target | runs that met it |\n|---|---|")
	for _, t := range r.Tally {
		fmt.Fprintf(w, "| %s | %d of %d |\n", strings.ReplaceAll(t.Name, "|", "\\|"), t.Met, t.Runs)
	}
	if len(medians) > 0 {
		sort.Slice(medians, func(i, j int) bool { return medians[i] < medians[j] })
		fmt.Fprintf(w, "\ngclock's median |error| over the runs: %s us (lowest) to %s us (highest), %s us in the middle run.\n",
			us(medians[0]), us(medians[len(medians)-1]), us(medians[len(medians)/2]))
	}
	fmt.Fprintln(w, "\nA resync is one of Liao's global resynchronisations: a round of probe/reply exchanges with the reference, then the time difference; the exchanges are counted in brackets.")
}
