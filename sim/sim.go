package sim

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/eval"
	"github.com/gclock/gclock/eval/limit"
	"github.com/gclock/gclock/netmodel"
)

// Origin is the truth time at which every run starts. Runs start far from 0
// so that local clocks with a negative offset still read positive values and
// no engine mistakes a reading for "no timer" (0).
const Origin int64 = 1_000_000_000_000_000 // 1e15 ns, about 11.6 days

// Node is what the simulator drives: an engine.Node satisfies it. Times are
// the node's local clock in ns.
type Node interface {
	Tick(local int64)
	Step(msg engine.Message, recvLocal int64)
	Ready() engine.Ready
	Read(local int64) engine.Time
}

// Clock is a node's emulated clock as the simulator sees it (clock.Emulated
// satisfies it). t is truth time in ns; Read must be called with
// non-decreasing t.
type Clock interface {
	// Ideal is the reading at truth t without granularity or jitter.
	Ideal(t int64) int64
	// Read is the reading at truth t as software sees it.
	Read(t int64) int64
	// TruthAt is the first truth time at which Ideal reaches local.
	TruthAt(local int64) int64
}

// ClockParams are the parameters the simulator draws for one node's clock.
type ClockParams struct {
	Node              int
	Origin            int64   // truth time of the run's start
	Offset            int64   // local - truth at Origin, ns
	DriftPPM          float64 // frequency error at Origin
	Steps             []DriftChange
	WanderPPMPerSqrtS float64
	SinePPM           float64
	SinePeriod        int64
	Granularity       int64
	Jitter            int64
	Seed              uint64
}

// DriftChange adds DeltaPPM to a clock's drift from truth time At on.
type DriftChange struct {
	At       int64
	DeltaPPM float64
}

// Options are the run's collaborators. The zero value runs the real engine
// and clock.Emulated with no logging, progress or plot.
type Options struct {
	Logger *slog.Logger
	// NewNode builds one node's engine; nil means engine.New.
	NewNode func(cfg engine.Config, logger *slog.Logger) (Node, error)
	// NewClock builds one node's clock; nil means clock.Emulated.
	NewClock func(p ClockParams) (Clock, error)
	// Progress, if set, receives a progress line every few seconds of wall
	// time (simulated time reached, events/s).
	Progress io.Writer
	// Trace records the plot nodes' error and bounds over time and their
	// resync events (needed by Plot).
	Trace bool
	// Limit computes every node's limit (eval/limit): textbook
	// estimators fed the rounds its engine was given, judged at the same
	// evaluations (Result.Limits).
	Limit bool
}

// Event kinds. Simultaneous events run in the order they were scheduled
// (seq), whatever their kind.
const (
	evTick uint8 = iota + 1
	evDeliver
	evEval
	evDown      // a fault stops node
	evUp        // a fault starts node again
	evRTTick    // a real-time Scale's timer (realtime.go)
	evRTDeliver // a real-time message arrives
	evFaultOn   // a pause or partition starts (node: the fault's index)
	evFaultOff  // a pause or partition ends (node: the fault's index)
)

type event struct {
	t    int64
	seq  uint64
	kind uint8
	node int32
	gen  uint32
	msg  *engine.Message
	rtm  *realtime.Message
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*h = old[:len(old)-1]
	return e
}

type nodeState struct {
	eng       Node
	clk       Clock
	tickGen   uint32
	pastTicks int
	sent      uint64
	stats     *eval.Acc
	mem       *engine.Member // eng as a Member (nil with Options.NewNode)
	down      bool           // stopped by a fault
	paused    bool           // paused by a fault: messages wait in queue
	queue     []*engine.Message
}

// runner is one simulation in progress.
type runner struct {
	sc     Scenario
	opt    Options
	log    *slog.Logger
	rng    *rand.Rand
	links  netmodel.Net
	nodes  []nodeState
	ref    int
	heap   eventHeap
	seq    uint64
	now    int64
	events uint64
	buf    []int64
	trace  *Trace
	rec    *Recording
	plotIx map[int]int
	limits []*limit.Tracker // per node with Options.Limit

	agree eval.Agreement // synced reads of each instant share a point
	reads []eval.Read    // this instant's reads (evaluate)

	sources, children [][]int        // roles under the first reference
	fo                *failoverState // nil with Options.NewNode (sim/failover.go)
	rt                *rtRun         // nil: no real_time section
}

// maxPastTicks bounds how often in a row an engine may ask for a timer at or
// before the present: beyond, it is busy-looping and the run stops.
const maxPastTicks = 100000

// pastTickDelay is how late a timer asked for in the past is run.
const pastTickDelay = int64(time.Microsecond)

// Run simulates the scenario and evaluates every node against the
// reference's ideal clock. It stops early, with ctx's error, when ctx ends.
func Run(ctx context.Context, sc Scenario, opt Options) (*Result, error) {
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", sc.Name, err)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	members := opt.NewNode == nil
	if !members && (len(sc.Failover.Order) > 1 || len(sc.Faults) > 0) {
		return nil, fmt.Errorf("scenario %s: failover and faults need the default engine (engine.Member), not Options.NewNode", sc.Name)
	}
	if opt.NewNode == nil {
		opt.NewNode = defaultNewNode
	}
	if opt.NewClock == nil {
		opt.NewClock = defaultNewClock
	}
	r := &runner{sc: sc, opt: opt, log: opt.Logger, ref: sc.Reference,
		rng:   rand.New(rand.NewPCG(sc.Seed, mix64(sc.Seed^0x51ab))),
		links: netmodel.Net{Spec: sc.Links, Seed: mix64(sc.Seed ^ 0x11ce)}}
	if members {
		r.fo = &failoverState{sc: &r.sc, scales: map[engine.NodeID]scale{}, lastEst: make([]int64, sc.Nodes), lastT: make([]int64, sc.Nodes),
			haveLast: make([]bool, sc.Nodes), done: make([]bool, len(sc.Faults))}
		r.fo.stats.BackInSync = make([]Duration, len(sc.Faults))
		for k := range r.fo.stats.BackInSync {
			r.fo.stats.BackInSync[k] = -1
		}
	}
	if err := r.setup(); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := r.loop(ctx, start); err != nil {
		return nil, err
	}
	for i := range r.nodes {
		if c, ok := r.nodes[i].clk.(interface{ Err() error }); ok && c.Err() != nil {
			return nil, fmt.Errorf("clock of node %d was queried outside its range: %w", i, c.Err())
		}
	}
	return r.result(time.Since(start)), nil
}

func (r *runner) setup() error {
	sc := &r.sc
	sources, children, err := roles(sc.Topology, sc.Nodes, sc.Reference)
	if err != nil {
		return fmt.Errorf("topology %s: %w", sc.Topology.Kind, err)
	}
	r.sources, r.children = sources, children
	crng := rand.New(rand.NewPCG(mix64(sc.Seed^0xc10c), sc.Seed))
	r.nodes = make([]nodeState, sc.Nodes)
	ecfg := r.engineConfig()
	for i := range r.nodes {
		p := ClockParams{Node: i, Origin: Origin,
			Offset:            int64((2*crng.Float64() - 1) * float64(sc.Clocks.MaxOffset)),
			DriftPPM:          (2*crng.Float64() - 1) * sc.Clocks.MaxDriftPPM,
			WanderPPMPerSqrtS: sc.Clocks.WanderPPMPerSqrtS,
			SinePPM:           sc.Clocks.SinePPM,
			SinePeriod:        int64(sc.Clocks.SinePeriod),
			Granularity:       int64(sc.Clocks.Granularity),
			Jitter:            int64(sc.Clocks.Jitter),
			Seed:              mix64(sc.Seed ^ uint64(i)*0x9e37 ^ 0xc0c0),
		}
		for _, st := range sc.Clocks.DriftSteps {
			if st.applies(i) {
				p.Steps = append(p.Steps, DriftChange{At: Origin + int64(st.At), DeltaPPM: st.DeltaPPM})
			}
		}
		clk, err := r.opt.NewClock(p)
		if err != nil {
			return fmt.Errorf("clock of node %d: %w", i, err)
		}
		cfg := ecfg
		cfg.ID = engine.NodeID(i)
		cfg.Sources = toIDs(sources[i])
		cfg.Children = toIDs(children[i])
		r.nodes[i] = nodeState{clk: clk, stats: eval.New(r.evalOptions())}
		if r.members() {
			m, err := r.newMember(i, cfg)
			if err != nil {
				return fmt.Errorf("engine of node %d: %w", i, err)
			}
			r.nodes[i].mem, r.nodes[i].eng = m, m
			continue
		}
		eng, err := r.opt.NewNode(cfg, r.log)
		if err != nil {
			return fmt.Errorf("engine of node %d: %w", i, err)
		}
		r.nodes[i].eng = eng
	}
	if err := r.setupRealTime(ecfg); err != nil {
		return err
	}
	if r.opt.Trace {
		r.trace = newTrace(sc)
		r.plotIx = map[int]int{}
		for i, n := range r.trace.Nodes {
			r.plotIx[n] = i
		}
	}
	if sc.Eval.RecordNode >= 0 {
		r.rec = &Recording{Node: sc.Eval.RecordNode}
	}
	if r.opt.Limit {
		// The oracle is told the clocks' random walk of the frequency:
		// every clock wanders by the scenario's ppm per sqrt(s), the
		// node's and its source's independently.
		w := sc.Clocks.WanderPPMPerSqrtS * 1e-6
		r.limits = make([]*limit.Tracker, len(r.nodes))
		for i := range r.limits {
			r.limits[i] = limit.NewWithOracle(2 * w * w)
		}
	}
	// Start every node at the origin; they are ticked in order of id, each a
	// little late (scheduling noise).
	for i := range r.nodes {
		r.push(event{t: Origin + r.schedNoise(Origin), kind: evTick, node: int32(i)})
	}
	r.push(event{t: Origin + int64(sc.Eval.Interval), kind: evEval})
	for k, f := range sc.Faults {
		if f.Kind == FaultPause || f.Kind == FaultPartition {
			r.push(event{t: Origin + int64(f.Down), kind: evFaultOn, node: int32(k)})
			if f.Up != 0 {
				r.push(event{t: Origin + int64(f.Up), kind: evFaultOff, node: int32(k)})
			}
			continue
		}
		r.push(event{t: Origin + int64(f.Down), kind: evDown, node: int32(f.Node)})
		if f.Up != 0 {
			r.push(event{t: Origin + int64(f.Up), kind: evUp, node: int32(f.Node)})
		}
	}
	return nil
}

func (d DriftStep) applies(n int) bool {
	for _, e := range d.Except {
		if e == n {
			return false
		}
	}
	if len(d.Nodes) == 0 {
		return true
	}
	for _, e := range d.Nodes {
		if e == n {
			return true
		}
	}
	return false
}

func toIDs(ns []int) []engine.NodeID {
	out := make([]engine.NodeID, len(ns))
	for i, n := range ns {
		out[i] = engine.NodeID(n)
	}
	return out
}

// engineConfig turns the scenario's engine section into engine.Config. The
// drift and wander the engine assumes default to what the clock model can
// do, with margin, so that the guaranteed bounds hold.
func (r *runner) engineConfig() engine.Config {
	e := r.sc.Engine
	c := r.sc.Clocks
	maxDrift := e.MaxDriftPPM
	if maxDrift == 0 {
		steps := 0.0
		for _, s := range c.DriftSteps {
			steps += math.Abs(s.DeltaPPM)
		}
		maxDrift = 2*(c.MaxDriftPPM+c.SinePPM) + steps + 1 // relative drift of two clocks, plus margin
	}
	wander := e.MaxWanderPPMPerS
	if wander == 0 {
		wander = 10 * c.WanderPPMPerSqrtS
		if c.SinePPM > 0 {
			wander += 2 * c.SinePPM * 2 * math.Pi / (float64(c.SinePeriod) / 1e9)
		}
	}
	freqStep := e.MaxFreqStepPPM
	if freqStep == 0 {
		// The largest jump of one clock's frequency the model makes, for
		// both ends of a link: a drift step, a random walk's step (5
		// sigma; wanderStep is 1 s) or a sine's change over one wander step.
		for _, s := range c.DriftSteps {
			freqStep = max(freqStep, math.Abs(s.DeltaPPM))
		}
		walk := 5 * c.WanderPPMPerSqrtS
		if c.SinePPM > 0 {
			walk += c.SinePPM * 2 * math.Pi * float64(wanderStep) / float64(c.SinePeriod)
		}
		freqStep = max(freqStep, 2*walk) * 1.1
	}
	gran := e.Granularity
	if gran == 0 {
		gran = c.Granularity + 2*c.Jitter
	}
	// Scenario.Validate has checked the keys; the engine's own check runs
	// again in engine.New.
	cfg, _ := e.ToEngine()
	cfg.MaxDrift = maxDrift * 1e-6
	cfg.MaxWander = wander * 1e-6 / 1e9
	cfg.MaxFreqStep = freqStep * 1e-6
	cfg.Granularity = time.Duration(gran)
	// A node's own reads are quantized and jittered: |reading - ideal| is
	// below one granule plus the jitter.
	cfg.ReadUncertainty = time.Duration(c.Granularity + c.Jitter)
	return cfg
}

func (r *runner) push(e event) {
	r.seq++
	e.seq = r.seq
	heap.Push(&r.heap, e)
}

// schedNoise draws how late a node's software reacts at truth t.
func (r *runner) schedNoise(t int64) int64 {
	m := float64(r.sc.Clocks.SchedNoise)
	if m <= 0 {
		return 0
	}
	m *= r.sc.loadAt(t - Origin).schedScale
	return min(int64(m*r.rng.ExpFloat64()), netmodel.MaxDelay)
}

// progressLine says how far a run is: simulated time reached and its
// share, wall time so far, the time left at the pace so far, events/s.
func progressLine(done, total int64, events uint64, wall time.Duration) string {
	frac := float64(done) / float64(max(total, 1))
	eta := "?"
	if frac > 0 {
		eta = (time.Duration(float64(wall) * (1 - frac) / frac)).Round(time.Second).String()
	}
	return fmt.Sprintf("sim: %5.1f%%  %v of %v simulated  wall %v  eta %s  %d events (%.2g/s)",
		100*frac, time.Duration(done).Truncate(time.Second), time.Duration(total), wall.Round(time.Second), eta,
		events, float64(events)/max(wall.Seconds(), 1e-9))
}

// progressEvery is how often (wall time) a progress line is printed.
const progressEvery = 3 * time.Second

func (r *runner) loop(ctx context.Context, start time.Time) error {
	end := Origin + int64(r.sc.Duration)
	nextProgress := start.Add(progressEvery)
	for r.heap.Len() > 0 {
		e := heap.Pop(&r.heap).(event)
		if e.t > end {
			break
		}
		r.now = e.t
		r.events++
		if r.events&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped at %v simulated: %w", time.Duration(r.now-Origin), err)
			}
			if r.opt.Progress != nil {
				if w := time.Now(); w.After(nextProgress) {
					nextProgress = w.Add(progressEvery)
					fmt.Fprintln(r.opt.Progress, progressLine(r.now-Origin, int64(r.sc.Duration), r.events, w.Sub(start)))
				}
			}
		}
		var err error
		switch e.kind {
		case evTick:
			err = r.tick(e)
		case evDeliver:
			err = r.deliver(e)
		case evRTTick:
			r.rtTick(e)
		case evRTDeliver:
			r.rtDeliver(e)
		case evEval:
			r.evaluate()
			r.push(event{t: e.t + int64(r.sc.Eval.Interval), kind: evEval})
		case evDown:
			r.down(int(e.node))
		case evUp:
			err = r.up(int(e.node))
		case evFaultOn:
			r.faultOn(int(e.node))
		case evFaultOff:
			err = r.faultOff(int(e.node))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) tick(e event) error {
	n := &r.nodes[e.node]
	if e.gen != n.tickGen || n.paused {
		return nil // superseded timer, or paused (a new one at the resume)
	}
	local := n.clk.Read(e.t)
	n.eng.Tick(local)
	return r.drain(int(e.node), local)
}

func (r *runner) deliver(e event) error {
	n := &r.nodes[e.node]
	if n.down {
		return nil // lost: the node is stopped
	}
	if n.paused {
		n.queue = append(n.queue, e.msg) // waits in the socket buffer
		return nil
	}
	local := n.clk.Read(e.t)
	n.eng.Step(*e.msg, local)
	// Rounds only: a check exchange (engine.Message.Check) is judged, not
	// taken, and the limit's estimators are per round, as in the lab's
	// measurement logs (engine.Ready.Rounds).
	round := e.msg.Type == engine.MsgTimeDiff && !e.msg.Check
	if r.rec != nil && int(e.node) == r.rec.Node && round {
		r.rec.addRound(e.msg.Samples)
	}
	if r.limits != nil && round {
		r.limits[e.node].AddRound(e.msg.Samples)
	}
	return r.drain(int(e.node), local)
}

// drain takes the node's output after a Tick or Step at local: sends its
// messages over the links and sets its timer.
func (r *runner) drain(id int, local int64) error {
	n := &r.nodes[id]
	rd := n.eng.Ready()
	for i := range rd.Messages {
		m := rd.Messages[i]
		to := int(m.To)
		if to < 0 || to >= len(r.nodes) || to == id {
			return fmt.Errorf("node %d sent a %d message to node %d (not a neighbour of the cluster of %d)", id, m.Type, m.To, len(r.nodes))
		}
		n.sent++
		if r.fo != nil && r.fo.cut(id, to) {
			continue // a partition fault cuts the link
		}
		depart := r.now + r.schedNoise(r.now)
		ld := r.sc.loadAt(depart - Origin)
		r.buf = r.links.Transmit(r.rng, id, to, ld.Load, r.buf)
		for _, d := range r.buf {
			// Every copy in flight owns its samples: the engine may reuse its
			// buffers, and a duplicate must not alias the original.
			mm := &m
			if len(m.Samples) > 0 {
				c := m
				c.Samples = append([]estimate.Sample(nil), m.Samples...)
				mm = &c
			}
			arrive := depart + d
			r.push(event{t: arrive + r.schedNoise(arrive), kind: evDeliver, node: int32(to), msg: mm})
		}
	}
	r.noteEvents(id, rd.Events)
	if r.trace != nil {
		if pi, ok := r.plotIx[id]; ok {
			for _, ev := range rd.Events {
				r.trace.addEvent(pi, r.now, ev)
			}
		}
	}
	n.tickGen++
	if rd.NextTick == 0 {
		return nil
	}
	// A timer fires when the clock, read with its granularity and jitter,
	// shows at least NextTick: ask the clock for the truth time at which its
	// ideal reading is past the next granule by the jitter.
	want := rd.NextTick
	if g := int64(r.sc.Clocks.Granularity); g > 1 {
		if m := want % g; m != 0 {
			want += g - m
			if m < 0 {
				want -= g
			}
		}
	}
	t := n.clk.TruthAt(want + int64(r.sc.Clocks.Jitter))
	if rd.NextTick <= local {
		n.pastTicks++
		if n.pastTicks > maxPastTicks {
			return fmt.Errorf("node %d asked %d times in a row for a timer at or before its present (local %d, asked %d)",
				id, n.pastTicks, local, rd.NextTick)
		}
		t = r.now + pastTickDelay
	} else {
		n.pastTicks = 0
	}
	t = max(t, r.now) + r.schedNoise(t)
	r.push(event{t: t, kind: evTick, node: int32(id), gen: n.tickGen})
	return nil
}

// exactEvaluations is the most evaluations (nodes times reads after the
// warm-up) for which the evaluator keeps every error for exact quantiles:
// 2^21 errors are 16 MB, kept per node and twice for the cluster's
// summaries. Longer runs use eval's histogram (resolution 1/32).
const exactEvaluations = 1 << 21

// evalOptions says how the evaluator accumulates one node's reads.
func (r *runner) evalOptions() eval.Options {
	sc := &r.sc
	reads := (int64(sc.Duration) - int64(sc.Eval.Warmup)) / int64(sc.Eval.Interval)
	return eval.Options{Interval: int64(sc.Eval.Interval), Exact: reads <= exactEvaluations/int64(sc.Nodes)}
}

// evaluate reads every node's global time at the present truth and compares
// it with the reference's ideal clock. Only here are clock parameters used.
func (r *runner) evaluate() {
	truth := r.nodes[r.ref].clk.Ideal(r.now)
	counted := r.now-Origin >= int64(r.sc.Eval.Warmup)
	if r.fo != nil && len(r.sc.Faults) > 0 && counted {
		r.checkBackInSync()
	}
	// The truth of the last reference asked: nearly every node follows the
	// same one, and reading an emulated clock's ideal time is not free.
	lastRef, lastTruth := engine.NodeID(0), int64(0)
	haveLast := false
	for i := range r.nodes {
		n := &r.nodes[i]
		if n.down {
			continue
		}
		local := n.clk.Read(r.now)
		truth := truth
		if r.fo != nil {
			// The scale of the reference this node follows now: a read from
			// the previous view (the old reference's scale) is judged
			// against the new scale, which is what the cluster serves.
			if ref := n.mem.Reference(); haveLast && ref == lastRef {
				truth = lastTruth
			} else {
				truth = r.truthOf(ref)
				lastRef, lastTruth, haveLast = ref, truth, true
			}
		}
		tm := n.eng.Read(local)
		if r.fo != nil && counted && tm.Status != engine.StatusUnsynced {
			r.checkContinuity(i, tm.Est)
		}
		if r.rt != nil {
			r.rtEvaluate(i, local, tm, counted)
		}
		if r.trace != nil {
			if pi, ok := r.plotIx[i]; ok {
				r.trace.addPoint(pi, r.now, tm, truth)
			}
		}
		if r.rec != nil && i == r.rec.Node {
			r.rec.addReading(local, truth, r.now)
		}
		if !counted {
			continue
		}
		if r.limits != nil && i != r.ref {
			r.limits[i].Judge(local, truth)
		}
		rd := eval.Read{At: r.now, Est: tm.Est, Earliest: tm.Earliest, Latest: tm.Latest, Mono: tm.Mono,
			Status: eval.Status(tm.Status), Truth: truth}
		n.stats.Add(rd)
		r.reads = append(r.reads, rd)
	}
	if counted {
		// One global time: every synced read of this instant shares a
		// point, whatever scale the evaluator thinks each node is on.
		r.agree.Check(r.now, r.reads)
		if r.fo != nil {
			r.checkLeases()
		}
	}
	r.reads = r.reads[:0]
}
