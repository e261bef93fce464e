package sim

import (
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

// Result is the evaluation of one run. Its JSON form is what
// `gclock sim --json` prints; it depends only on the scenario (seed
// included), never on the machine, so the same scenario gives the same JSON.
type Result struct {
	Scenario Scenario `json:"scenario"`
	// Summary is over every node, the reference included (its error is its
	// own read jitter and granularity, and its bounds must hold too); its ID
	// is -1.
	Summary Summary   `json:"summary"`
	Nodes   []Summary `json:"nodes"`
	// Others is the summary of every node but the reference (ID -1): the
	// errors the papers report, of the nodes against node 0. Not in the
	// JSON (its nodes array has the reference's own row).
	Others Summary `json:"-"`
	// Events is the number of simulator events run; Messages the number of
	// engine messages sent (before loss and duplication).
	Events   uint64 `json:"events"`
	Messages uint64 `json:"messages"`
	// Wall is how long the run took (not in the JSON: it varies).
	Wall time.Duration `json:"-"`
	// Trace holds the plot nodes' series when Options.Trace was set.
	Trace *Trace `json:"-"`
	// Recording holds eval.record_node's samples and readings.
	Recording *Recording `json:"-"`
	// Failover is measured when the scenario has a failover order or
	// faults (sim/failover.go).
	Failover *FailoverStats `json:"failover,omitempty"`
	// RealTime evaluates the served time scale (scenario real_time).
	RealTime *RealTimeResult `json:"real_time,omitempty"`
}

func (r *runner) result(wall time.Duration) *Result {
	secs := time.Duration(r.sc.Duration).Seconds()
	res := &Result{Scenario: r.sc, Events: r.events, Wall: wall, Trace: r.trace, Recording: r.rec, RealTime: r.rtResult()}
	all, others := newErrStats(5), newErrStats(5)
	var msgs uint64
	for i := range r.nodes {
		n := &r.nodes[i]
		msgs += n.sent
		res.Nodes = append(res.Nodes, n.stats.summary(i, n.sent, 1, secs))
		all.merge(n.stats)
		if i != r.ref {
			others.merge(n.stats)
		}
	}
	res.Messages = msgs
	res.Summary = all.summary(-1, msgs, len(r.nodes), secs)
	res.Others = others.summary(-1, msgs, len(r.nodes), secs)
	res.Failover = r.failoverResult()
	return res
}

// maxTracePoints bounds the points kept per plotted node: longer runs keep
// every k-th evaluation, so memory does not grow with the run.
const maxTracePoints = 4000

// maxTraceEvents bounds the engine events kept per plotted node.
const maxTraceEvents = 20000

// Trace is what a plot shows: for a few nodes, the error and the bounds
// relative to the truth over time, and their engine events.
type Trace struct {
	Nodes  []int
	Points [][]TracePoint
	Events [][]TraceEvent
	// Dropped counts events left out past maxTraceEvents.
	Dropped int
	stride  int64
	evals   int64
}

// TracePoint is one evaluation of a plotted node, relative to the truth.
type TracePoint struct {
	T      float64 // seconds since the start of the run
	Err    int64   // Est - truth, ns
	Lo, Hi int64   // Earliest - truth and Latest - truth, ns (saturated)
	Mono   int64   // Mono - truth
	Status engine.Status
}

// TraceEvent is an engine event of a plotted node.
type TraceEvent struct {
	T    float64 // seconds since the start of the run (truth)
	Kind engine.EventKind
}

func newTrace(sc *Scenario) *Trace {
	nodes := sc.Eval.PlotNodes
	if len(nodes) == 0 {
		for i := 0; i < sc.Nodes && len(nodes) < 4; i++ {
			if i != sc.Reference {
				nodes = append(nodes, i)
			}
		}
	}
	evals := int64(sc.Duration) / int64(sc.Eval.Interval)
	return &Trace{Nodes: nodes, Points: make([][]TracePoint, len(nodes)),
		Events: make([][]TraceEvent, len(nodes)), stride: max(1, (evals+maxTracePoints-1)/maxTracePoints)}
}

func secondsSince(t int64) float64 { return float64(t-Origin) / 1e9 }

func (tr *Trace) addPoint(i int, now int64, tm engine.Time, truth int64) {
	if i == 0 {
		tr.evals++
	}
	if (tr.evals-1)%tr.stride != 0 {
		return
	}
	tr.Points[i] = append(tr.Points[i], TracePoint{T: secondsSince(now), Err: satSub(tm.Est, truth),
		Lo: satSub(tm.Earliest, truth), Hi: satSub(tm.Latest, truth), Mono: satSub(tm.Mono, truth), Status: tm.Status})
}

func (tr *Trace) addEvent(i int, now int64, ev engine.Event) {
	switch ev.Kind {
	case engine.EvGlobalResync, engine.EvEstimatorRestart, engine.EvRoundRepeated, engine.EvErrReport:
	default:
		return // self resyncs and period changes are too many to draw
	}
	if len(tr.Events[i]) >= maxTraceEvents {
		tr.Dropped++
		return
	}
	tr.Events[i] = append(tr.Events[i], TraceEvent{T: secondsSince(now), Kind: ev.Kind})
}

// maxRecordRounds and maxRecordReadings bound a Recording's memory.
const (
	maxRecordRounds   = 200000
	maxRecordReadings = 2000000
)

// Recording is what one node saw, for post-mortem correction (Intel): every
// round of samples it received from its source, and at each evaluation its
// local reading with the truth.
type Recording struct {
	Node     int
	Rounds   [][]estimate.Sample
	Readings []Reading
}

// Reading pairs a local reading with the truth (the reference's ideal
// clock) at the same instant.
type Reading struct {
	T     int64 // truth time since the start of the run, ns
	Local int64
	Truth int64
}

func (rc *Recording) addRound(s []estimate.Sample) {
	if len(rc.Rounds) < maxRecordRounds && len(s) > 0 {
		rc.Rounds = append(rc.Rounds, append([]estimate.Sample(nil), s...))
	}
}

func (rc *Recording) addReading(local, truth, now int64) {
	if len(rc.Readings) < maxRecordReadings {
		rc.Readings = append(rc.Readings, Reading{T: now - Origin, Local: local, Truth: truth})
	}
}
