package sim

import (
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/eval"
	"github.com/gclock/gclock/eval/limit"
	"github.com/gclock/gclock/internal/satmath"
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
	// Agreement is the check that needs no truth (eval.Agreement): at
	// every evaluation after the warm-up, the synced reads of all nodes
	// share a point. Violations must be 0.
	Agreement eval.Agreement `json:"agreement"`
	// Limits is every node's limit but the reference's (Options.Limit).
	Limits []limit.Result `json:"limits,omitempty"`
}

func (r *runner) result(wall time.Duration) *Result {
	secs := time.Duration(r.sc.Duration).Seconds()
	res := &Result{Scenario: r.sc, Events: r.events, Wall: wall, Trace: r.trace, Recording: r.rec, RealTime: r.rtResult()}
	for i, t := range r.limits {
		if i != r.ref {
			res.Limits = append(res.Limits, t.Result(i))
		}
	}
	all, others := eval.New(r.evalOptions()), eval.New(r.evalOptions())
	var msgs uint64
	var total int
	for i := range r.nodes {
		n := &r.nodes[i]
		msgs += n.sent
		s := n.stats.Summary()
		total += int(s.Evaluations)
		res.Nodes = append(res.Nodes, summary(i, s, n.sent, 1, secs))
	}
	all.Reserve(total)
	others.Reserve(total)
	for i := range r.nodes {
		n := &r.nodes[i]
		all.Merge(n.stats)
		if i != r.ref {
			others.Merge(n.stats)
		}
	}
	res.Messages = msgs
	res.Summary = summary(-1, all.Summary(), msgs, len(r.nodes), secs)
	res.Others = summary(-1, others.Summary(), msgs, len(r.nodes), secs)
	res.Failover = r.failoverResult()
	res.Agreement = r.agree
	return res
}

// Summary is the evaluation of one node or of the whole cluster (package
// eval's, under the JSON names of `gclock sim --json`). Errors are Est -
// truth in ns; the mean, p50, p99 and max are of |error|; the std is of
// the signed error. p50/p99 are exact (QuantileResolution 0) unless the run
// has more than 2^21 evaluations: then they come from a log-linear
// histogram of the resolution QuantileResolution states.
type Summary struct {
	ID            int     `json:"id"`
	Evaluations   uint64  `json:"evaluations"`
	UnsyncedShare float64 `json:"unsynced_share"`
	ErrorMeanNs   float64 `json:"error_mean_ns"`
	ErrorBiasNs   float64 `json:"error_bias_ns"`
	ErrorStdNs    float64 `json:"error_std_ns"`
	ErrorP50Ns    int64   `json:"error_p50_ns"`
	ErrorP99Ns    int64   `json:"error_p99_ns"`
	ErrorMaxNs    int64   `json:"error_max_ns"`
	// BoundCoverage is the share of reads claiming synced whose bounds
	// held the truth (1 when none claimed synced); BoundCoverageAll the
	// share over every read with an estimate, degraded and stale included.
	BoundCoverage    float64 `json:"bound_coverage"`
	BoundCoverageAll float64 `json:"bound_coverage_all"`
	// StatusShare is the share of evaluations in each status.
	StatusShare         map[string]float64 `json:"status_share"`
	BoundWidthMeanNs    float64            `json:"bound_width_mean_ns"`
	MonoErrorMeanNs     float64            `json:"mono_error_mean_ns"`
	MonoErrorMaxNs      int64              `json:"mono_error_max_ns"`
	MessagesPerNodePerS float64            `json:"messages_per_node_per_s"`
	QuantileResolution  float64            `json:"quantile_resolution"`
}

// summary lays out eval's summary of node id (-1: several) with its
// traffic: msgs messages sent by nodes nodes in seconds.
func summary(id int, s eval.Summary, msgs uint64, nodes int, seconds float64) Summary {
	return Summary{ID: id, Evaluations: s.Evaluations, UnsyncedShare: s.UnsyncedShare,
		ErrorMeanNs: s.ErrorMeanNs, ErrorBiasNs: s.ErrorBiasNs, ErrorStdNs: s.ErrorStdNs,
		ErrorP50Ns: s.ErrorP50Ns, ErrorP99Ns: s.ErrorP99Ns, ErrorMaxNs: s.ErrorMaxNs,
		BoundCoverage: s.BoundCoverage, BoundCoverageAll: s.BoundCoverageAll, StatusShare: s.StatusShare,
		BoundWidthMeanNs: s.BoundWidthMeanNs, MonoErrorMeanNs: s.MonoErrorMeanNs, MonoErrorMaxNs: s.MonoErrorMaxNs,
		MessagesPerNodePerS: eval.PerNodePerS(float64(msgs), nodes, seconds), QuantileResolution: s.QuantileResolution}
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
	tr.Points[i] = append(tr.Points[i], TracePoint{T: secondsSince(now), Err: satmath.Sub(tm.Est, truth),
		Lo: satmath.Sub(tm.Earliest, truth), Hi: satmath.Sub(tm.Latest, truth), Mono: satmath.Sub(tm.Mono, truth), Status: tm.Status})
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
