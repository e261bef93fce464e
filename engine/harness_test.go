package engine

import (
	"container/heap"
	"encoding/binary"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gclock/gclock/estimate"
)

// ---- fake estimators (the real ones live in package estimate) ----

// twoPoint is a test estimator with guaranteed bounds under a constant
// skew: it keeps the best exchange of the first and of the latest round;
// the offset at each is known within half the RTT, so the skew lies in
// [(o2-o1-h1-h2)/dx, (o2-o1+h1+h2)/dx]. A new exchange outside the current
// bound restarts it (ErrInconsistent), like the real Hull.
type twoPoint struct {
	first, last estimate.Sample
	n           int
}

func (e *twoPoint) AddRound(round []estimate.Sample) error {
	if len(round) == 0 {
		return nil
	}
	best := round[0]
	for _, s := range round[1:] {
		if s.RTT() < best.RTT() {
			best = s
		}
	}
	if m := e.Mapping(); m.Valid {
		x, y := best.Mid()
		_, lo, hi := m.At(x)
		h := best.RTT()/2 + 2
		if y+h < lo || y-h > hi {
			e.first, e.n = best, 1
			return estimate.ErrInconsistent
		}
	}
	if e.n == 0 {
		e.first = best
	}
	e.last = best
	e.n++
	return nil
}

func (e *twoPoint) Mapping() estimate.Mapping {
	if e.n < 2 {
		return estimate.Mapping{}
	}
	x1, y1 := e.first.Mid()
	x2, y2 := e.last.Mid()
	if x2 <= x1 {
		return estimate.Mapping{}
	}
	h1 := float64(e.first.RTT()/2 + 2)
	h2 := float64(e.last.RTT()/2 + 2)
	dx := float64(x2 - x1)
	o1, o2 := float64(y1-x1), float64(y2-x2)
	return estimate.Mapping{
		X0:      x2,
		Y0:      y2,
		Skew:    (o2 - o1) / dx,
		W0:      int64(h2) + 1,
		SkewErr: (h1 + h2) / dx,
		Valid:   true,
	}
}

func (e *twoPoint) Reset() { *e = twoPoint{} }

// lastOffset is a test point estimator: the latest best exchange's offset
// and the skew between the last two rounds, no bounds worth anything.
type lastOffset struct {
	prev, last estimate.Sample
	n          int
}

func (e *lastOffset) AddRound(round []estimate.Sample) error {
	if len(round) == 0 {
		return nil
	}
	best := round[0]
	for _, s := range round[1:] {
		if s.RTT() < best.RTT() {
			best = s
		}
	}
	e.prev, e.last = e.last, best
	e.n++
	return nil
}

func (e *lastOffset) Mapping() estimate.Mapping {
	if e.n < 2 {
		return estimate.Mapping{}
	}
	x1, y1 := e.prev.Mid()
	x2, y2 := e.last.Mid()
	if x2 <= x1 {
		return estimate.Mapping{}
	}
	skew := float64((y2-x2)-(y1-x1)) / float64(x2-x1)
	return estimate.Mapping{X0: x2, Y0: y2, Skew: skew, W0: math.MaxInt64 / 8, Valid: true}
}

func (e *lastOffset) Reset() { *e = lastOffset{} }

func fakeEstimators(Config) (estimate.Estimator, estimate.Estimator, error) {
	return &twoPoint{}, &lastOffset{}, nil
}

// ---- a tiny deterministic network ----

type simNode struct {
	n       *Node
	off     int64   // local clock at truth 0
	drift   float64 // local rate - 1
	tickGen uint64
}

func (s *simNode) local(t int64) int64 { return s.off + t + int64(math.Round(s.drift*float64(t))) }

// truthAt returns the first truth time at which the local clock reads >= l.
func (s *simNode) truthAt(l int64) int64 {
	t := int64(math.Floor(float64(l-s.off) / (1 + s.drift)))
	for s.local(t) < l {
		t++
	}
	for s.local(t-1) >= l {
		t--
	}
	return t
}

type linkFunc func(from, to NodeID, r *rand.Rand) (delay int64, drop, dup bool)

type netEvent struct {
	at   int64
	seq  uint64
	node NodeID
	tick bool
	gen  uint64
	msg  Message
}

type eventQueue []netEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int)    { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)      { *q = append(*q, x.(netEvent)) }
func (q *eventQueue) Pop() any        { o := *q; e := o[len(o)-1]; *q = o[:len(o)-1]; return e }
func (q *eventQueue) push(e netEvent) { heap.Push(q, e) }

type testNet struct {
	t      testing.TB
	nodes  map[NodeID]*simNode
	ids    []NodeID
	ref    NodeID
	q      eventQueue
	seq    uint64
	now    int64
	rng    *rand.Rand
	link   linkFunc
	digest hash.Hash64
	events []Event
	sent   map[MsgType]int
	onMsg  func(m Message) // optional tap on every delivered message
}

// newTestNet builds nodes from configs; clocks[i] = {offset ns, drift}.
func newTestNet(t testing.TB, seed uint64, cfgs []Config, clocks [][2]float64, link linkFunc, est Estimators) *testNet {
	t.Helper()
	tn := &testNet{
		t: t, nodes: map[NodeID]*simNode{}, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		link: link, digest: fnv.New64a(), sent: map[MsgType]int{},
	}
	for i, c := range cfgs {
		n, err := NewWithEstimators(c, nil, est)
		if err != nil {
			t.Fatal(err)
		}
		tn.nodes[c.ID] = &simNode{n: n, off: int64(clocks[i][0]), drift: clocks[i][1]}
		tn.ids = append(tn.ids, c.ID)
		if len(c.Sources) == 0 {
			tn.ref = c.ID
		}
	}
	for _, id := range tn.ids {
		s := tn.nodes[id]
		s.n.Tick(s.local(0))
		tn.collect(id)
	}
	return tn
}

func (tn *testNet) collect(id NodeID) {
	s := tn.nodes[id]
	rd := s.n.Ready()
	var b [8]byte
	w := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); tn.digest.Write(b[:]) }
	w(uint64(id))
	w(uint64(rd.NextTick))
	for _, m := range rd.Messages {
		w(uint64(m.Type)<<56 | uint64(m.To)<<24 | uint64(m.Seq))
		w(uint64(m.Round))
		w(uint64(m.T2))
		w(math.Float64bits(m.Err))
		w(uint64(m.Mapping.Y0))
		w(uint64(m.Mapping.W0))
		w(math.Float64bits(m.Mapping.Skew))
		for _, x := range m.Samples {
			w(uint64(x.SrcSend ^ x.SrcRecv ^ x.LocRecv ^ x.LocSend))
		}
		tn.sent[m.Type]++
		d, drop, dup := tn.link(m.From, m.To, tn.rng)
		if drop {
			continue
		}
		tn.seq++
		tn.q.push(netEvent{at: tn.now + d, seq: tn.seq, node: m.To, msg: m})
		if dup {
			d2, _, _ := tn.link(m.From, m.To, tn.rng)
			tn.seq++
			tn.q.push(netEvent{at: tn.now + d2, seq: tn.seq, node: m.To, msg: m})
		}
	}
	for _, e := range rd.Events {
		w(uint64(e.Kind)<<32 | uint64(e.Peer))
		w(math.Float64bits(e.Value))
	}
	tn.events = append(tn.events, rd.Events...)
	if rd.NextTick != 0 {
		s.tickGen++
		at := max(s.truthAt(rd.NextTick), tn.now)
		tn.seq++
		tn.q.push(netEvent{at: at, seq: tn.seq, node: id, tick: true, gen: s.tickGen})
	}
}

// run processes events until truth time until, calling probe (if not nil)
// every `every` ns of truth time.
func (tn *testNet) run(until, every int64, probe func(now int64)) {
	nextProbe := every
	for {
		if probe != nil && every > 0 && (tn.q.Len() == 0 || tn.q[0].at > nextProbe) && nextProbe <= until {
			tn.now = nextProbe
			probe(tn.now)
			nextProbe += every
			continue
		}
		if tn.q.Len() == 0 || tn.q[0].at > until {
			tn.now = until
			return
		}
		e := heap.Pop(&tn.q).(netEvent)
		tn.now = e.at
		s := tn.nodes[e.node]
		if e.tick {
			if e.gen != s.tickGen {
				continue
			}
			s.n.Tick(s.local(tn.now))
		} else {
			if tn.onMsg != nil {
				tn.onMsg(e.msg)
			}
			s.n.Step(e.msg, s.local(tn.now))
		}
		tn.collect(e.node)
	}
}

// truth is global time (the reference's clock) at truth time t.
func (tn *testNet) truth(t int64) int64 { return tn.nodes[tn.ref].local(t) }

// fixedLink is a perfect network: a constant delay each way.
func fixedLink(d int64) linkFunc {
	return func(NodeID, NodeID, *rand.Rand) (int64, bool, bool) { return d, false, false }
}

// noisyLink: min delay plus an exponential tail, asymmetric by direction
// (from < to gets asym more), with loss and duplication.
func noisyLink(minDelay, asym, tail int64, loss, dup float64) linkFunc {
	return func(from, to NodeID, r *rand.Rand) (int64, bool, bool) {
		d := minDelay + int64(r.ExpFloat64()*float64(tail))
		if from < to {
			d += asym
		}
		return d, r.Float64() < loss, r.Float64() < dup
	}
}

// testConfig is DefaultConfig with fast periods for short test runs.
func testConfig(id NodeID, sources, children []NodeID) Config {
	c := DefaultConfig()
	c.ID = id
	c.Sources = sources
	c.Children = children
	c.MinGlobalPeriod = 100e6
	c.InitialGlobalPeriod = 400e6
	c.MaxGlobalPeriod = 1600e6
	c.MinSelfPeriod = 1e6
	c.MaxSelfPeriod = 64e6
	c.ProbeTimeout = 5e6
	c.StaleAfter = 10e9
	c.NetworkLatencyErrorThresh = 5000
	c.DifferenceThresh = 1000
	return c
}
