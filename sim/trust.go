package sim

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/gclock/gclock/internal/conf"
)

// trustCase is a clock or link condition users meet, written as a scenario
// the engine has never seen: its stated clock model (engine.max_*) comes
// from the scenario's clocks unless the case states a wrong one.
type trustCase struct {
	name string
	yaml string
	// beyond: the clocks break the stated model for good; the engine must
	// notice (reads degraded) rather than stay synced.
	beyond bool
}

const trustBase = `
nodes: 5
duration: 150s
topology: {kind: star}
clocks: {max_offset: 5ms, max_drift_ppm: 30, wander_ppm_per_sqrt_s: 0.001, granularity: 1ns, jitter: 20ns, sched_noise: 500ns}
links: {min_delay: 20us, asymmetry: 1us, tail: {dist: exponential, mean: 5us}, loss: 0.01, duplicate: 0.01, reorder: 0.01, reorder_delay: 200us}
eval: {interval: 50ms, warmup: 20s}
`

var trustCases = []trustCase{
	{name: "step-2^-18", yaml: "clocks: {drift_steps: [{at: 75s, delta_ppm: 3.814697265625, except: [0]}]}"},
	{name: "step-2ppm", yaml: "clocks: {drift_steps: [{at: 75s, delta_ppm: 2, except: [0]}]}"},
	{name: "step-10ppm", yaml: "clocks: {drift_steps: [{at: 75s, delta_ppm: -10, except: [0]}]}"},
	{name: "step-100ppm", yaml: "clocks: {drift_steps: [{at: 75s, delta_ppm: 100, except: [0]}]}"},
	{name: "random-walk", yaml: "clocks: {wander_ppm_per_sqrt_s: 0.2}"},
	{name: "sine", yaml: "clocks: {sine_ppm: 3, sine_period: 60s}"},
	{name: "loaded-reorder", yaml: `phases:
  - {name: idle, start: 0s}
  - {name: loaded, start: 60s, tail_scale: 20, sched_scale: 10, duplicate: 0.2, reorder: 0.2}`},
	{name: "drift-beyond-max", yaml: "clocks: {max_drift_ppm: 400}\nengine: {max_drift_ppm: 101}", beyond: true},
}

// trustScenario is case c's scenario for one estimator and seed: the
// base, then the case, then the estimator settings, each overriding the
// fields it names.
func trustScenario(c trustCase, est string, adaptive bool, seed int) (Scenario, error) {
	sc, err := Parse([]byte(trustBase), "trust-base")
	if err != nil {
		return sc, err
	}
	if err := sc.overlay([]byte(c.yaml), c.name); err != nil {
		return sc, err
	}
	extra := fmt.Sprintf("seed: %d\nengine: {estimator: %s, adaptive: %v}", seed, est, adaptive)
	if err := sc.overlay([]byte(extra), "estimator"); err != nil {
		return sc, err
	}
	sc.Name = c.name
	return sc, sc.Validate()
}

// overlay applies a YAML fragment over s (fields it names replace s's).
func (s *Scenario) overlay(data []byte, name string) error {
	if _, err := conf.Unmarshal(data, s); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// trustEstimators are the estimators the trust report and test run.
var trustEstimators = []string{"minrtt", "regression", "hull", "center"}

// trustReportSeeds is the seeds per cell of the trust report.
const trustReportSeeds = 5

// writeTrust runs every trust case with every estimator, adaptive and
// fixed, on trustReportSeeds seeds, and writes per cell the worst coverage
// of synced reads, the mean share of synced reads, the median and worst of
// the runs' p50 and p99 |error| and the mean traffic.
func writeTrust(ctx context.Context, w io.Writer, opt Options) error {
	fmt.Fprintf(w, "%d nodes on a star, %v per run (first 20 s left out), %d seeds per row; the engine's stated clock model comes from the scenario's clocks except in drift-beyond-max (stated 101 ppm, clocks up to 400 ppm).\n", 5, "150s", trustReportSeeds)
	fmt.Fprintf(w, "coverage: worst over the seeds of the share of synced reads holding the truth; synced: mean share of reads that said synced.\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\testimator\tadaptive\tcoverage\tsynced\tdegraded\tp50 (median)\tp99 (worst)\tmsgs/node/s\t")
	for _, c := range trustCases {
		for _, adaptive := range []bool{false, true} {
			for _, est := range trustEstimators {
				cov, syn, deg, msgs := 1.0, 0.0, 0.0, 0.0
				var p50s []int64
				var p99 int64
				for seed := 1; seed <= trustReportSeeds; seed++ {
					sc, err := trustScenario(c, est, adaptive, seed)
					if err != nil {
						return err
					}
					res, err := Run(ctx, sc, opt)
					if err != nil {
						return fmt.Errorf("trust %s/%s seed %d: %w", c.name, est, seed, err)
					}
					s := res.Summary
					cov = math.Min(cov, s.BoundCoverage)
					syn += s.StatusShare["synced"] / trustReportSeeds
					deg += s.StatusShare["degraded"] / trustReportSeeds
					msgs += s.MessagesPerNodePerS / trustReportSeeds
					p50s = append(p50s, s.ErrorP50Ns)
					p99 = max(p99, s.ErrorP99Ns)
				}
				slices.Sort(p50s)
				fmt.Fprintf(tw, "%s\t%s\t%v\t%.5f\t%.3f\t%.3f\t%s\t%s\t%.1f\t\n", c.name, est, adaptive, cov, syn, deg,
					FormatNs(float64(p50s[len(p50s)/2])), FormatNs(float64(p99)), msgs)
			}
		}
	}
	return tw.Flush()
}
