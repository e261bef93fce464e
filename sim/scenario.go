package sim

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/gclock/gclock/engine/engineconf"
	"github.com/gclock/gclock/internal/conf"
	"github.com/gclock/gclock/netmodel"
)

// Duration is the one YAML duration type (conf.Duration, which the
// engine's section and the links of netmodel use too): a time span in
// nanoseconds written as a Go duration string ("10ms", "1h30m").
type Duration = conf.Duration

// Scenario is one simulation: the cluster, its clocks, its links, the load
// over time and the engine's configuration. Every field has a default (see
// DefaultScenario); a YAML file only names what it changes.
type Scenario struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`
	// Seed seeds every random source of the run: same seed, same result.
	Seed     uint64   `yaml:"seed" json:"seed"`
	Nodes    int      `yaml:"nodes" json:"nodes"`
	Duration Duration `yaml:"duration" json:"duration"`
	// Reference is the node whose clock is global time.
	Reference int          `yaml:"reference" json:"reference"`
	Topology  TopologySpec `yaml:"topology" json:"topology"`
	// Engine is the engine's parameters, the same keys as the daemon's
	// sync: section (engineconf.Config).
	Engine engineconf.Config `yaml:"engine" json:"engine"`
	Clocks ClockSpec         `yaml:"clocks" json:"clocks"`
	Links  netmodel.Spec     `yaml:"links" json:"links"`
	// Phases change the load over time; the first phase starts at 0.
	Phases []Phase  `yaml:"phases" json:"phases,omitempty"`
	Eval   EvalSpec `yaml:"eval" json:"eval"`
	// Failover is the reference order and its silence limit
	// (engine.MemberConfig); no order: the reference alone, no failover.
	Failover FailoverSpec `yaml:"failover" json:"failover,omitempty"`
	// Faults stop nodes and start them again (sim/failover.go).
	Faults []Fault `yaml:"faults" json:"faults,omitempty"`
	// RealTime, if set, runs the served time scale (realtime.go).
	RealTime *RealTimeSpec `yaml:"real_time" json:"real_time,omitempty"`
}

// FailoverSpec is the scenario's reference order (docs/daemon.md,
// "Reference failover").
type FailoverSpec struct {
	// Order starts with the reference, then the nodes that take over in
	// turn.
	Order []int `yaml:"order" json:"order,omitempty"`
	// After is how long the reference may be silent before the next of
	// the order takes over (reference.failover_after).
	After Duration `yaml:"after" json:"after,omitempty"`
}

// Fault is one fault from Down (from the run's start) to Up (0: to the
// end). Kind says which:
//
//   - "stop" (the default, a kill): Node stops; at Up it starts again with
//     a fresh engine and the same clock (a restart).
//   - "pause" (SIGSTOP, SIGCONT): Node neither ticks nor steps; what
//     reaches it waits, as in a stopped process's socket buffer, and at Up
//     it continues with its state and steps what waited.
//   - "partition": the links between Nodes and the other nodes are cut;
//     OneWay "out" cuts only what Nodes send to the others, "in" only what
//     they receive from them, "" both ways.
type Fault struct {
	Kind   string   `yaml:"kind" json:"kind,omitempty"`
	Node   int      `yaml:"node" json:"node"`
	Nodes  []int    `yaml:"nodes" json:"nodes,omitempty"`
	OneWay string   `yaml:"one_way" json:"one_way,omitempty"`
	Down   Duration `yaml:"down" json:"down"`
	Up     Duration `yaml:"up" json:"up,omitempty"`
}

// Fault kinds.
const (
	FaultStop      = "stop"
	FaultPause     = "pause"
	FaultPartition = "partition"
)

// TopologySpec names the graph the nodes form.
type TopologySpec struct {
	// Kind is star, tree, ring, hypercube or mesh.
	Kind string `yaml:"kind" json:"kind"`
	// Fanout is the number of children per node of a tree.
	Fanout int `yaml:"fanout" json:"fanout,omitempty"`
}

// engineDefaults are the engine's own defaults (engineconf.Default), so
// that a scenario that says nothing runs the engine as its owner tuned it,
// except for what the simulator derives from its clock model when 0:
// max_drift_ppm, max_wander_ppm_per_s and max_freq_step_ppm (so that the
// bounds hold, with margin) and granularity (the clock's granularity plus
// twice its jitter).
func engineDefaults() engineconf.Config {
	e := engineconf.Default()
	e.MaxDriftPPM, e.MaxWanderPPMPerS, e.MaxFreqStepPPM, e.Granularity = 0, 0, 0, 0
	return e
}

// ClockSpec is the emulated clock of every node. Each node draws its offset
// and drift uniformly from [-max, max] with the scenario's seed.
type ClockSpec struct {
	MaxOffset   Duration `yaml:"max_offset" json:"max_offset"`
	MaxDriftPPM float64  `yaml:"max_drift_ppm" json:"max_drift_ppm"`
	// WanderPPMPerSqrtS is the random walk of the frequency: its standard
	// deviation after one second, in ppm.
	WanderPPMPerSqrtS float64 `yaml:"wander_ppm_per_sqrt_s" json:"wander_ppm_per_sqrt_s"`
	// SinePPM and SinePeriod add a sinusoidal frequency change, as a
	// room's temperature cycle drives a crystal: amplitude in ppm, period
	// (each node its own phase). 0: none.
	SinePPM     float64  `yaml:"sine_ppm" json:"sine_ppm,omitempty"`
	SinePeriod  Duration `yaml:"sine_period" json:"sine_period,omitempty"`
	Granularity Duration `yaml:"granularity" json:"granularity"`
	// Jitter is the maximum read jitter (uniform in [0, jitter]).
	Jitter Duration `yaml:"jitter" json:"jitter"`
	// SchedNoise is the mean (exponential) of the delay between an event and
	// the moment the node's software stamps it: receives are stamped late,
	// sends leave late, timers fire late.
	SchedNoise Duration    `yaml:"sched_noise" json:"sched_noise"`
	DriftSteps []DriftStep `yaml:"drift_steps" json:"drift_steps,omitempty"`
}

// DriftStep changes the drift of some nodes at one truth time.
type DriftStep struct {
	At       Duration `yaml:"at" json:"at"`
	DeltaPPM float64  `yaml:"delta_ppm" json:"delta_ppm"`
	// Nodes lists the nodes affected; empty means all nodes.
	Nodes []int `yaml:"nodes" json:"nodes,omitempty"`
	// Except lists nodes left out (Liao Fig. 3: every node except node 1).
	Except []int `yaml:"except" json:"except,omitempty"`
}

// Phase is a period of the run with its own load. It lasts until the next
// phase starts.
type Phase struct {
	Name  string   `yaml:"name" json:"name"`
	Start Duration `yaml:"start" json:"start"`
	// TailScale multiplies the mean of every link's delay tail.
	TailScale float64 `yaml:"tail_scale" json:"tail_scale"`
	// SchedScale multiplies every node's scheduling noise.
	SchedScale float64 `yaml:"sched_scale" json:"sched_scale"`
	// Loss, when set (>= 0), replaces the links' loss in this phase; 1 cuts
	// every link (no more sync after an acquisition period).
	Loss *float64 `yaml:"loss" json:"loss,omitempty"`
	// Duplicate and Reorder, when set, replace the links' duplication and
	// reordering probabilities in this phase.
	Duplicate *float64 `yaml:"duplicate" json:"duplicate,omitempty"`
	Reorder   *float64 `yaml:"reorder" json:"reorder,omitempty"`
	// Bursts: every BurstEvery, for BurstLength, tails and noise are further
	// multiplied by BurstScale.
	BurstEvery  Duration `yaml:"burst_every" json:"burst_every,omitempty"`
	BurstLength Duration `yaml:"burst_length" json:"burst_length,omitempty"`
	BurstScale  float64  `yaml:"burst_scale" json:"burst_scale,omitempty"`
}

// EvalSpec says when the evaluator reads the nodes.
type EvalSpec struct {
	Interval Duration `yaml:"interval" json:"interval"`
	// Warmup is left out of the statistics (the first rounds).
	Warmup Duration `yaml:"warmup" json:"warmup"`
	// PlotNodes are the nodes drawn by --plot; empty means up to 4 nodes.
	PlotNodes []int `yaml:"plot_nodes" json:"plot_nodes,omitempty"`
	// RecordNode, if >= 0, records that node's sync samples and readings for
	// post-mortem correction (the Intel reproduction).
	RecordNode int `yaml:"record_node" json:"record_node"`
}

//go:embed scenarios/*.yaml
var scenarioFS embed.FS

// Names lists the shipped scenarios.
func Names() []string {
	ents, err := scenarioFS.ReadDir("scenarios")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Shipped returns the shipped scenario called name ("default",
// "liao-table1-loaded-adaptive", ...).
func Shipped(name string) (Scenario, error) {
	b, err := scenarioFS.ReadFile(path.Join("scenarios", name+".yaml"))
	if err != nil {
		return Scenario{}, fmt.Errorf("no shipped scenario %q (have %s)", name, strings.Join(Names(), ", "))
	}
	return Parse(b, name+".yaml")
}

// DefaultScenario is the embedded default: 16 nodes on a star, drifts up to
// +-50 ppm, an idle phase and a loaded phase.
func DefaultScenario() Scenario {
	s, err := Shipped("default")
	if err != nil {
		panic("sim: embedded default scenario is broken: " + err.Error())
	}
	return s
}

// base is the value every scenario starts from before its YAML is applied.
func base() Scenario {
	return Scenario{
		Name:     "unnamed",
		Seed:     1,
		Nodes:    16,
		Duration: Duration(10 * time.Minute),
		Topology: TopologySpec{Kind: "star", Fanout: 4},
		Engine:   engineDefaults(),
		Clocks: ClockSpec{
			MaxOffset:         Duration(10 * time.Millisecond),
			MaxDriftPPM:       50,
			WanderPPMPerSqrtS: 0.001,
			Granularity:       Duration(1),
			Jitter:            Duration(20),
			SchedNoise:        Duration(500),
		},
		Links: netmodel.Spec{
			MinDelay:     Duration(5 * time.Microsecond),
			Asymmetry:    Duration(200),
			Tail:         netmodel.TailSpec{Dist: netmodel.TailExponential, Mean: Duration(2 * time.Microsecond), Sigma: 1, Alpha: 2.5},
			ReorderDelay: Duration(100 * time.Microsecond),
		},
		Eval: EvalSpec{
			Interval:   Duration(100 * time.Millisecond),
			Warmup:     Duration(30 * time.Second),
			RecordNode: -1,
		},
	}
}

// Parse decodes a scenario from YAML (conf.Unmarshal: one document of at
// most conf.MaxBytes, aliases capped). Unknown fields are rejected; every
// error names the field path and the line. name says where the YAML came
// from (a file name) for the messages.
func Parse(data []byte, name string) (Scenario, error) {
	s := base()
	root, err := conf.Unmarshal(data, &s)
	if err != nil {
		return s, fmt.Errorf("%s: %w", name, err)
	}
	if root == nil {
		return s, fmt.Errorf("%s: empty scenario", name)
	}
	if err := s.Validate(); err != nil {
		conf.AddLines(err, root)
		return s, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

// Validate checks the scenario; the error names the field.
func (s *Scenario) Validate() error {
	var errs conf.Errors
	bad := errs.Add
	if s.Nodes < 2 || s.Nodes > 1_000_000 {
		bad("nodes", "%d out of range [2, 1000000]", s.Nodes)
	}
	if s.Duration <= 0 {
		bad("duration", "must be positive, got %v", s.Duration)
	}
	if s.Reference < 0 || s.Reference >= s.Nodes {
		bad("reference", "%d is not a node (0..%d)", s.Reference, s.Nodes-1)
	}
	switch s.Topology.Kind {
	case "star", "ring", "hypercube", "mesh":
	case "tree":
		if s.Topology.Fanout < 1 {
			bad("topology.fanout", "must be >= 1 for a tree, got %d", s.Topology.Fanout)
		}
	default:
		bad("topology.kind", "unknown topology %q (star, tree, ring, hypercube, mesh)", s.Topology.Kind)
	}
	if s.Topology.Kind == "hypercube" && s.Nodes&(s.Nodes-1) != 0 {
		bad("nodes", "a hypercube needs a power of two, got %d", s.Nodes)
	}
	if s.Topology.Kind == "mesh" && s.Nodes > 256 {
		bad("nodes", "a full mesh of %d nodes is too large (max 256: node k follows every node below k)", s.Nodes)
	}
	if o := s.Failover.Order; len(o) > 0 {
		seen := map[int]bool{}
		for i, id := range o {
			if id < 0 || id >= s.Nodes || seen[id] {
				bad(fmt.Sprintf("failover.order[%d]", i), "%d is not a node (0..%d) or is named twice", id, s.Nodes-1)
			}
			seen[id] = true
		}
		if o[0] != s.Reference {
			bad("failover.order[0]", "%d, must be the reference %d", o[0], s.Reference)
		}
		if len(o) > 1 && s.Failover.After <= 0 {
			bad("failover.after", "must be positive with an order of %d nodes, got %v", len(o), s.Failover.After)
		}
	}
	for i, f := range s.Faults {
		switch f.Kind {
		case "", FaultStop, FaultPause:
			if len(f.Nodes) > 0 || f.OneWay != "" {
				bad(fmt.Sprintf("faults[%d].nodes", i), "only a partition takes nodes and one_way; %s takes node", f.Kind)
			}
		case FaultPartition:
			if len(f.Nodes) == 0 || len(f.Nodes) >= s.Nodes {
				bad(fmt.Sprintf("faults[%d].nodes", i), "%v: a partition cuts 1 to %d nodes from the others", f.Nodes, s.Nodes-1)
			}
			for k, id := range f.Nodes {
				if id < 0 || id >= s.Nodes || slices.Index(f.Nodes, id) != k {
					bad(fmt.Sprintf("faults[%d].nodes[%d]", i, k), "%d is not a node (0..%d) or is named twice", id, s.Nodes-1)
				}
			}
			if f.OneWay != "" && f.OneWay != "in" && f.OneWay != "out" {
				bad(fmt.Sprintf("faults[%d].one_way", i), "%q, want in, out or empty (both ways)", f.OneWay)
			}
		default:
			bad(fmt.Sprintf("faults[%d].kind", i), "%q, want stop, pause or partition", f.Kind)
		}
		if f.Node < 0 || f.Node >= s.Nodes {
			bad(fmt.Sprintf("faults[%d].node", i), "%d is not a node (0..%d)", f.Node, s.Nodes-1)
		}
		if f.Down < 0 || f.Down >= s.Duration {
			bad(fmt.Sprintf("faults[%d].down", i), "%v outside the run [0, %v)", f.Down, s.Duration)
		}
		if f.Up != 0 && f.Up <= f.Down {
			bad(fmt.Sprintf("faults[%d].up", i), "%v, must be after down (%v) or 0 (never)", f.Up, f.Down)
		}
	}
	e := &s.Engine
	e.Check(func(field, format string, args ...any) { bad("engine."+field, format, args...) })
	if e.HullMinDelay > 0 && e.HullMinDelay > s.Links.MinDelay {
		bad("engine.hull_min_delay", "%v must be in [0, links.min_delay = %v]: a larger mu breaks the guaranteed bounds", e.HullMinDelay, s.Links.MinDelay)
	}
	c := &s.Clocks
	if c.MaxOffset < 0 || c.MaxOffset > Duration(24*time.Hour) {
		bad("clocks.max_offset", "%v out of range [0, 24h]", c.MaxOffset)
	}
	if !finiteIn(c.MaxDriftPPM, 0, 1000) {
		bad("clocks.max_drift_ppm", "%v out of range [0, 1000]", c.MaxDriftPPM)
	}
	if !finiteIn(c.WanderPPMPerSqrtS, 0, 100) {
		bad("clocks.wander_ppm_per_sqrt_s", "%v out of range [0, 100]", c.WanderPPMPerSqrtS)
	}
	if !finiteIn(c.SinePPM, 0, 1000) {
		bad("clocks.sine_ppm", "%v out of range [0, 1000]", c.SinePPM)
	}
	if c.SinePPM > 0 && (c.SinePeriod < Duration(2*time.Second) || c.SinePeriod > Duration(1000*time.Hour)) {
		bad("clocks.sine_period", "%v out of range [2s, 1000h] (needed with sine_ppm)", c.SinePeriod)
	}
	if c.Granularity < 1 || c.Granularity > Duration(time.Second) {
		bad("clocks.granularity", "%v out of range [1ns, 1s]", c.Granularity)
	}
	if c.Jitter < 0 || c.SchedNoise < 0 {
		bad("clocks.jitter", "jitter and sched_noise must be >= 0")
	}
	for i, d := range c.DriftSteps {
		f := fmt.Sprintf("clocks.drift_steps[%d]", i)
		if d.At < 0 {
			bad(f+".at", "must be >= 0")
		}
		if !finiteIn(d.DeltaPPM, -1000, 1000) {
			bad(f+".delta_ppm", "%v out of range [-1000, 1000]", d.DeltaPPM)
		}
		for _, n := range append(append([]int(nil), d.Nodes...), d.Except...) {
			if n < 0 || n >= s.Nodes {
				bad(f, "node %d is not a node (0..%d)", n, s.Nodes-1)
			}
		}
	}
	if err := s.Links.Validate("links"); err != nil {
		errs = append(errs, err)
	}
	for i := range s.Phases {
		p := &s.Phases[i]
		f := fmt.Sprintf("phases[%d]", i)
		if i == 0 && p.Start != 0 {
			bad(f+".start", "the first phase must start at 0")
		}
		if i > 0 && p.Start <= s.Phases[i-1].Start {
			bad(f+".start", "phases must start in increasing order")
		}
		if p.TailScale == 0 {
			p.TailScale = 1
		}
		if p.SchedScale == 0 {
			p.SchedScale = 1
		}
		if p.BurstScale == 0 {
			p.BurstScale = 1
		}
		if !finiteIn(p.TailScale, 0, 1e6) || !finiteIn(p.SchedScale, 0, 1e6) || !finiteIn(p.BurstScale, 0, 1e6) {
			bad(f, "scales must be in [0, 1e6]")
		}
		for _, pr := range []struct {
			name string
			v    *float64
		}{{"loss", p.Loss}, {"duplicate", p.Duplicate}, {"reorder", p.Reorder}} {
			if pr.v != nil && !finiteIn(*pr.v, 0, 1) {
				bad(f+"."+pr.name, "probability %v out of range [0, 1]", *pr.v)
			}
		}
		if p.BurstEvery < 0 || p.BurstLength < 0 || (p.BurstLength > 0 && p.BurstEvery <= 0) {
			bad(f+".burst_every", "bursts need burst_every > 0 and burst_length >= 0")
		}
	}
	if s.Eval.Interval <= 0 {
		bad("eval.interval", "must be positive")
	}
	if s.Eval.Warmup < 0 || s.Eval.Warmup >= s.Duration {
		bad("eval.warmup", "%v must be in [0, duration)", s.Eval.Warmup)
	}
	for _, n := range s.Eval.PlotNodes {
		if n < 0 || n >= s.Nodes {
			bad("eval.plot_nodes", "node %d is not a node (0..%d)", n, s.Nodes-1)
		}
	}
	if s.Eval.RecordNode >= s.Nodes || s.Eval.RecordNode == s.Reference {
		bad("eval.record_node", "%d must be a non-reference node or -1", s.Eval.RecordNode)
	}
	if s.RealTime != nil {
		s.RealTime.validate(bad)
		if len(s.Failover.Order) > 1 || len(s.Faults) > 0 {
			// As in the daemon: the scale is the first reference's.
			bad("real_time", "does not follow reference changes yet: no failover order or faults with it")
		}
	}
	return errors.Join(errs...)
}

func finiteIn(v, lo, hi float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= lo && v <= hi
}
