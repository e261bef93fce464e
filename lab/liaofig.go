package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/measure"
)

// liaoDriftPPM is the artificial drift of Liao's figure 3 (seed 000):
// 1/2^18, 3.81 ppm.
const liaoDriftPPM = 1e6 / (1 << 18)

// LiaoSetting is one curve of Liao's figures 2 and 3: the system idle or
// heavily loaded, the resynchronisation periods adaptive or fixed.
type LiaoSetting struct {
	Loaded   bool `json:"loaded"`
	Adaptive bool `json:"adaptive"`
}

// String is the curve's name, as the paper's legend has it.
func (s LiaoSetting) String() string {
	load, mode := "idle", "non-adaptive"
	if s.Loaded {
		load = "loaded"
	}
	if s.Adaptive {
		mode = "adaptive"
	}
	return load + ", " + mode
}

// liaoSettings are the paper's four curves.
func liaoSettings() []LiaoSetting {
	return []LiaoSetting{{false, false}, {false, true}, {true, false}, {true, true}}
}

// Liao's periods in the lab. The adaptive engine starts at
// liaoMinPeriod, doubles its period after every SuccessThresh quiet
// rounds up to liaoMaxPeriod and halves it (not below liaoMinPeriod)
// when its children's error reports add up; the non-adaptive one keeps
// liaoMaxPeriod throughout: the adaptive engine's longest period, as the
// simulator's Table 1 and Fig. 3 baselines (the paper gives no value).
const (
	liaoMinPeriod = time.Second
	liaoMaxPeriod = 8 * time.Second
)

// liaoDaemonConfig is the lab's daemon configuration (LabDaemonConfig:
// the centre line, 240 exchanges a round) with Liao's adaptive periods, or
// with a fixed period, for the comparison of the paper's figures 2 and 3.
// LabDaemonConfig itself holds the period at 6 s once converged, so
// adaptive or not would make no difference there.
func liaoDaemonConfig(adaptive bool) daemon.Config {
	c := LabDaemonConfig()
	s := &c.Sync
	s.Adaptive = adaptive
	if adaptive {
		s.InitialGlobalPeriod = daemon.Duration(liaoMinPeriod)
		s.MinGlobalPeriod = daemon.Duration(liaoMinPeriod)
		s.MaxGlobalPeriod = daemon.Duration(liaoMaxPeriod)
	} else {
		s.InitialGlobalPeriod = daemon.Duration(liaoMaxPeriod)
		s.MinGlobalPeriod = daemon.Duration(liaoMaxPeriod)
		s.MaxGlobalPeriod = daemon.Duration(liaoMaxPeriod)
	}
	return c
}

// LiaoFigSpec is one run of Liao's figure 2 (or 3) in the lab.
type LiaoFigSpec struct {
	// Base is the latency measurement every curve runs (Latency is set,
	// the sizes interleaved); its Gclock.Base, Load and LoadOutside are
	// set per curve, its Gclock.Wander.Steps for figure 3.
	Base MeasureSpec
	// Fig3 adds liaoDriftPPM to the drift of every host but the
	// reference, StepAfter after the daemons start (the paper: every node
	// but node 1, the one whose latencies are shown; relative to the
	// reference, the measuring host's frequency changes by 1/2^18 either
	// way).
	Fig3      bool
	StepAfter time.Duration
	// BusyLoad and BusyOutside are the loaded curves' busy loops inside
	// and outside the lab's namespaces (gclock lab bench --profile busy:
	// 4 and 2).
	BusyLoad, BusyOutside int
	// Settings are the curves (liaoSettings when empty).
	Settings []LiaoSetting
	// Keep, if set, is a directory that keeps every curve's stamp files,
	// the reference's configuration (the truth) and its figures
	// (KeepLiaoCurve), from which LoadLiaoFig draws the figure again.
	Keep string
}

// DefaultLiaoFigSpec: base is the measurement to run (gclock's commands
// set), with six sizes from 64 B to 64 KB, 80 messages per size and
// direction 25 ms apart (24 s), a 20-s warm-up (the non-adaptive daemons
// make three rounds in it), figure 3's step 2 s after the warm-up.
func DefaultLiaoFigSpec(base MeasureSpec) LiaoFigSpec {
	base.Sizes, base.LatencyCount, base.LatencyPeriod = "64,256,1024,4096,16384,65536", 80, 25*time.Millisecond
	base.Gclock.Warmup = 20 * time.Second
	return LiaoFigSpec{Base: base, StepAfter: base.Gclock.Warmup + 2*time.Second, BusyLoad: 4, BusyOutside: 2}
}

// LiaoCurve is one setting's measurement.
type LiaoCurve struct {
	Setting LiaoSetting
	Report  MeasureReport
	// LoadAvg is the machine's 1-minute load average when the nodes
	// started and when they were done (MeasureReport.LoadAvgStart and
	// LoadAvgEnd); Start is when the curve was asked for (before the wait
	// for the machine's lab lock), Done when its run was over.
	LoadAvg     [2]float64
	Start, Done time.Time
}

// LiaoFig is the paper's figure 2 (or 3) measured in the lab.
type LiaoFig struct {
	Spec   LiaoFigSpec
	Curves []LiaoCurve
}

// MeasureLiaoFig runs the latency test once per setting, each on a lab
// built anew (Measure), and returns the curves.
func MeasureLiaoFig(ctx context.Context, spec LiaoFigSpec) (LiaoFig, error) {
	f := LiaoFig{Spec: spec}
	settings := spec.Settings
	if len(settings) == 0 {
		settings = liaoSettings()
	}
	if spec.Fig3 && spec.StepAfter <= 0 {
		return f, fmt.Errorf("lab: liao: step after %v: want a positive time", spec.StepAfter)
	}
	for _, st := range settings {
		ms := spec.Base
		ms.Latency, ms.Interleave = true, true
		dc := liaoDaemonConfig(st.Adaptive)
		ms.Gclock.Base = &dc
		ms.Load, ms.LoadOutside = 0, 0
		if st.Loaded {
			ms.Load, ms.LoadOutside = spec.BusyLoad, spec.BusyOutside
		}
		if spec.Fig3 {
			w := ms.Gclock.Wander
			w.Steps = append(append([]WanderStep(nil), w.Steps...), WanderStep{After: spec.StepAfter, DeltaPPM: liaoDriftPPM})
			ms.Gclock.Wander = w
		}
		c := LiaoCurve{Setting: st, Start: time.Now().UTC()}
		r, err := Measure(ctx, ms)
		if err != nil {
			return f, fmt.Errorf("lab: liao: %v: %w", st, err)
		}
		c.Report, c.Done = r, time.Now().UTC()
		c.LoadAvg = [2]float64{r.LoadAvgStart[0], r.LoadAvgEnd[0]}
		f.Curves = append(f.Curves, c)
		if spec.Keep != "" {
			if err := f.keep(spec.Keep, c); err != nil {
				return f, err
			}
		}
	}
	return f, nil
}

// Slug is the setting's directory name under LiaoFigSpec.Keep.
func (s LiaoSetting) slug() string {
	return strings.ReplaceAll(strings.ReplaceAll(s.String(), ", ", "-"), "non-adaptive", "nonadaptive")
}

// liaoMeta is what Keep writes besides the stamps: the figure's settings
// (fig.json) and each curve's (curve.json).
type liaoMeta struct {
	Fig3          bool          `json:"fig3"`
	StepAfter     time.Duration `json:"step_after_ns"`
	BusyLoad      int           `json:"busy_load"`
	BusyOutside   int           `json:"busy_outside"`
	Link          string        `json:"link"`
	MaxDriftPPM   float64       `json:"max_drift_ppm"`
	Wander        Wander        `json:"wander"`
	Warmup        time.Duration `json:"warmup_ns"`
	Sizes         string        `json:"sizes"`
	LatencyCount  int           `json:"latency_count"`
	LatencyPeriod time.Duration `json:"latency_period_ns"`
	Seed          uint64        `json:"seed"`
}

type liaoCurveMeta struct {
	Setting LiaoSetting   `json:"setting"`
	Start   time.Time     `json:"start"`
	LoadAvg [2]float64    `json:"load_avg_1min"`
	Done    time.Time     `json:"done"`
	Gclock  GclockSummary `json:"gclock"`
}

// keep copies curve c's stamp files and the reference's configuration
// into dir/<slug> and writes the figure's and the curve's settings.
func (f LiaoFig) keep(dir string, c LiaoCurve) error {
	s, b := f.Spec, f.Spec.Base
	meta := liaoMeta{Fig3: s.Fig3, StepAfter: s.StepAfter, BusyLoad: s.BusyLoad, BusyOutside: s.BusyOutside, Link: b.Link,
		MaxDriftPPM: b.Gclock.MaxDriftPPM, Wander: b.Gclock.Wander, Warmup: b.Gclock.Warmup, Sizes: b.Sizes,
		LatencyCount: b.LatencyCount, LatencyPeriod: b.LatencyPeriod, Seed: b.Lab.Seed}
	if s.Fig3 {
		meta.Wander.Steps = append(append([]WanderStep(nil), meta.Wander.Steps...), WanderStep{After: s.StepAfter, DeltaPPM: liaoDriftPPM})
	}
	cd := filepath.Join(dir, c.Setting.slug())
	if err := os.MkdirAll(cd, 0o755); err != nil {
		return fmt.Errorf("lab: liao: keep: %w", err)
	}
	if err := writeJSON(filepath.Join(dir, "fig.json"), meta); err != nil {
		return err
	}
	cm := liaoCurveMeta{Setting: c.Setting, Start: c.Start, Done: c.Done, LoadAvg: c.LoadAvg, Gclock: c.Report.Run.Gclock.Summary}
	if err := writeJSON(filepath.Join(cd, "curve.json"), cm); err != nil {
		return err
	}
	run := c.Report.Run.Dir
	for src, dst := range map[string]string{
		filepath.Join(run, "stamps-r0.csv"):                   "stamps-r0.csv",
		filepath.Join(run, "stamps-r1.csv"):                   "stamps-r1.csv",
		filepath.Join(filepath.Dir(run), "gclock", "h0.yaml"): "reference.yaml",
	} {
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("lab: liao: keep: %w", err)
		}
		if err := os.WriteFile(filepath.Join(cd, dst), data, 0o644); err != nil {
			return fmt.Errorf("lab: liao: keep: %w", err)
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("lab: liao: %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("lab: liao: %w", err)
	}
	return nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("lab: liao: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("lab: liao: %s: %w", path, err)
	}
	return nil
}

// LoadLiaoFig reads a figure kept by MeasureLiaoFig (LiaoFigSpec.Keep)
// and analyses every curve's stamps again against the truth rebuilt from
// the kept reference configuration: the same tables and figure without a
// lab. Settings without a directory are left out.
func LoadLiaoFig(dir string) (LiaoFig, error) {
	var meta liaoMeta
	if err := readJSON(filepath.Join(dir, "fig.json"), &meta); err != nil {
		return LiaoFig{}, err
	}
	base := DefaultMeasureSpec()
	base.Link, base.Sizes, base.LatencyCount, base.LatencyPeriod, base.Lab.Seed = meta.Link, meta.Sizes, meta.LatencyCount, meta.LatencyPeriod, meta.Seed
	base.Gclock.MaxDriftPPM, base.Gclock.Wander, base.Gclock.Warmup = meta.MaxDriftPPM, meta.Wander, meta.Warmup
	base.Latency, base.Interleave = true, true
	if meta.Fig3 && len(base.Gclock.Wander.Steps) > 0 {
		// The step is the figure's, said by Fig3 and StepAfter.
		base.Gclock.Wander.Steps = base.Gclock.Wander.Steps[:len(base.Gclock.Wander.Steps)-1]
	}
	f := LiaoFig{Spec: LiaoFigSpec{Base: base, Fig3: meta.Fig3, StepAfter: meta.StepAfter, BusyLoad: meta.BusyLoad, BusyOutside: meta.BusyOutside}}
	for _, st := range liaoSettings() {
		cd := filepath.Join(dir, st.slug())
		if _, err := os.Stat(cd); errors.Is(err, os.ErrNotExist) {
			continue
		}
		var cm liaoCurveMeta
		if err := readJSON(filepath.Join(cd, "curve.json"), &cm); err != nil {
			return f, err
		}
		truth, err := referenceTruth(filepath.Join(cd, "reference.yaml"))
		if err != nil {
			return f, err
		}
		var stamps []measure.Stamp
		for _, name := range []string{"stamps-r0.csv", "stamps-r1.csv"} {
			path := filepath.Join(cd, name)
			fh, err := os.Open(path)
			if err != nil {
				return f, fmt.Errorf("lab: liao: %w", err)
			}
			ss, err := measure.ReadStamps(fh, path)
			fh.Close()
			if err != nil {
				return f, fmt.Errorf("lab: liao: %w", err)
			}
			stamps = append(stamps, ss...)
		}
		res, err := measure.Analyze(stamps, truth)
		if err != nil {
			return f, fmt.Errorf("lab: liao: %s: %w", cd, err)
		}
		rep := MeasureReport{Spec: base, Result: res}
		rep.Run.Gclock.Summary = cm.Gclock
		f.Curves = append(f.Curves, LiaoCurve{Setting: cm.Setting, Report: rep, LoadAvg: cm.LoadAvg, Start: cm.Start, Done: cm.Done})
	}
	if len(f.Curves) == 0 {
		return f, fmt.Errorf("lab: liao: %s: no curve kept (want directories such as %s)", dir, liaoSettings()[0].slug())
	}
	return f, nil
}

// Title is the figure's title.
func (f LiaoFig) Title() string {
	if f.Spec.Fig3 {
		return fmt.Sprintf("Liao fig. 3 in the lab: latencies measured on host 1, drift +1/2^18 on host 1 at %v", f.Spec.StepAfter)
	}
	return "Liao fig. 2 in the lab: latencies measured on host 1 (0->1) in global time"
}

// Plot draws the curves (measure.PlotLatencyCurves) of the messages host
// 1 received, into a .png or .svg file.
func (f LiaoFig) Plot(file string) error {
	var cs []measure.LatencyCurve
	for _, c := range f.Curves {
		cs = append(cs, measure.LatencyCurve{Name: c.Setting.String(), Result: c.Report.Result, Period: c.Report.Spec.LatencyPeriod})
	}
	return measure.PlotLatencyCurves(cs, 0, f.Title(), file)
}

// errOf gathers one direction's errors (estimate - truth, ns) and bound
// coverage over every size of r.
func errOf(r *measure.Result, from int) (abs []float64, mean float64, in, n int) {
	var sum float64
	for _, p := range r.Latency {
		if p.From != from {
			continue
		}
		for _, m := range p.Messages {
			if !m.HasTruth {
				continue
			}
			e := float64(m.Ns - m.TrueNs)
			abs, sum = append(abs, math.Abs(e)), sum+e
			n++
			if m.Lo <= m.TrueNs && m.TrueNs <= m.Hi {
				in++
			}
		}
	}
	if n > 0 {
		mean = sum / float64(n)
	}
	return abs, mean, in, n
}

// WriteMarkdown writes the figure's tables: per curve, the daemons' error
// over the run and their resyncs, every message's error and the truth's
// coverage; then per curve and size, the latency measured on host 1
// beside the truth and the error of each direction.
func (f LiaoFig) WriteMarkdown(w io.Writer) error {
	s := f.Spec
	b := s.Base
	fmt.Fprintf(w, "Lab: 2 hosts, link %s, emulated clocks (drifts up to +-%g ppm, %s), %v warm-up; sizes %s interleaved, %d messages per size and direction %v apart. "+
		"Adaptive: periods %v..%v (Liao's halving and doubling); non-adaptive: %v fixed. Loaded: %d busy loops in the hosts' namespaces and %d outside (gclock lab bench --profile busy).",
		b.Link, b.Gclock.MaxDriftPPM, b.Gclock.Wander, b.Gclock.Warmup, b.Sizes, b.LatencyCount, b.LatencyPeriod,
		liaoMinPeriod, liaoMaxPeriod, liaoMaxPeriod, s.BusyLoad, s.BusyOutside)
	if s.Fig3 {
		fmt.Fprintf(w, " Figure 3: host 1's drift changes by +1/2^18 (%.3f ppm) %v after the daemons start (%v into the measurement).", liaoDriftPPM, s.StepAfter, s.StepAfter-b.Gclock.Warmup)
	}
	fmt.Fprintf(w, "\n\n| curve | run done (UTC) | load avg (1 min) at the nodes' start, end | daemons: host 1 \\|error\\| p50 / p99 | resyncs/s | messages 0->1 (lost, both ways) | \\|error\\| 0->1 p50 / p99 / max | mean error 0->1 / 1->0 | truth inside the bounds |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range f.Curves {
		done := "?"
		if !c.Done.IsZero() {
			done = c.Done.Format("15:04:05")
		}
		r := c.Report
		g := r.Run.Gclock.Summary
		abs, mean, in, n := errOf(r.Result, 0)
		_, mean10, in10, n10 := errOf(r.Result, 1)
		if n == 0 {
			fmt.Fprintf(w, "| %s | %s | %.1f, %.1f | %s / %s | %.3f | 0 (%d) | | | |\n", c.Setting, done, c.LoadAvg[0], c.LoadAvg[1],
				nsStr(float64(g.ErrorP50Ns)), nsStr(float64(g.ErrorP99Ns)), g.RoundsPerNodePerS, r.Result.LostMsgs)
			continue
		}
		slices.Sort(abs)
		fmt.Fprintf(w, "| %s | %s | %.1f, %.1f | %s / %s | %.3f | %d (%d) | %s / %s / %s | %s / %s | %.2f%% of %d |\n",
			c.Setting, done, c.LoadAvg[0], c.LoadAvg[1], nsStr(float64(g.ErrorP50Ns)), nsStr(float64(g.ErrorP99Ns)), g.RoundsPerNodePerS,
			n, r.Result.LostMsgs, nsStr(liaoQuantile(abs, 0.5)), nsStr(liaoQuantile(abs, 0.99)), nsStr(abs[len(abs)-1]), signedNs(mean), signedNs(mean10),
			100*float64(in+in10)/float64(max(1, n+n10)), n+n10)
	}
	fmt.Fprintf(w, "\nPer size, the messages host 1 received (0->1): the median latency in global time beside the true median, and each direction's error (estimate - truth):\n\n| curve | size | n | latency 0->1 measured / true (median) | error 0->1 mean / \\|p99\\| | error 1->0 mean / \\|p99\\| |\n|---|---|---|---|---|---|\n")
	for _, c := range f.Curves {
		back := map[int]measure.LatencyPoint{}
		for _, p := range c.Report.Result.Latency {
			if p.From == 1 {
				back[p.Size] = p
			}
		}
		for _, p := range c.Report.Result.Latency {
			if p.From != 0 || p.Err == nil {
				continue
			}
			rev := ""
			if bp, ok := back[p.Size]; ok && bp.Err != nil {
				rev = fmt.Sprintf("%s / %s", signedNs(bp.Err.MeanNs), nsStr(bp.Err.P99AbsNs))
			}
			fmt.Fprintf(w, "| %s | %d B | %d | %s / %s | %s / %s | %s |\n", c.Setting, p.Size, p.N, nsStr(p.P50Ns), nsStr(p.TrueP50),
				signedNs(p.Err.MeanNs), nsStr(p.Err.P99AbsNs), rev)
		}
	}
	return nil
}

func signedNs(v float64) string {
	if v < 0 {
		return "-" + nsStr(-v)
	}
	return "+" + nsStr(v)
}

// liaoQuantile is the nearest-rank quantile of sorted values.
func liaoQuantile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
