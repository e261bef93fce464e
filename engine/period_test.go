package engine

import (
	"math"
	"testing"
)

// A source announces every change of a child's global period with a
// MsgPeriodChange carrying the new period and a per-child change count.
func TestPeriodChangeAnnounced(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	c.SuccessThresh = 1
	n := newNode(t, c)
	n.Tick(0)
	td, _, end := answer(t, n, n.Ready(), 0, []int64{10_000})
	// A big report halves the period: announced at once.
	n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: 100}, end+5000)
	rd := n.Ready()
	pc := only(t, rd, MsgPeriodChange)
	if pc.To != 1 || pc.Period != int64(c.InitialGlobalPeriod)/2 || pc.Seq != 1 {
		t.Fatalf("halving announced as %+v, want period %d seq 1", pc, int64(c.InitialGlobalPeriod)/2)
	}
	// The next round is quiet; its verdict (a success, SuccessThresh 1)
	// doubles the period when the round after starts.
	now := rd.NextTick
	n.Tick(now)
	_, rd, _ = answer(t, n, n.Ready(), now, []int64{10_000})
	n.Tick(rd.NextTick)
	rd = n.Ready()
	var got []Message
	for _, m := range rd.Messages {
		if m.Type == MsgPeriodChange {
			got = append(got, m)
		}
	}
	if len(got) != 1 || got[0].Period != int64(c.InitialGlobalPeriod) || got[0].Seq != 2 {
		t.Fatalf("doubling announced as %+v, want one with period %d seq 2", got, int64(c.InitialGlobalPeriod))
	}
}

// The child keeps the announced period and calls the source silent when
// nothing came from it for SilentPeriods periods (widened by MaxDrift)
// plus ProbeTimeout x (MaxProbeRetries+1).
func TestSourceSilence(t *testing.T) {
	c := testConfig(1, []NodeID{0}, nil)
	slack := int64(c.ProbeTimeout) * int64(c.MaxProbeRetries+1)
	deadline := func(from, period int64) int64 {
		return from + int64(math.Ceil(3*float64(period)*(1+c.MaxDrift))) + slack
	}
	initial := int64(c.InitialGlobalPeriod)
	type step struct {
		at   int64
		msg  *Message // nil: Tick
		want bool     // silent after the step
		ev   EventKind
	}
	pc := func(seq uint32, p int64) *Message {
		return &Message{Type: MsgPeriodChange, From: 0, To: 1, Seq: seq, Period: p}
	}
	probe := &Message{Type: MsgProbe, From: 0, To: 1, Round: 1, Seq: 1}
	stranger := &Message{Type: MsgPeriodChange, From: 7, To: 1, Seq: 1, Period: 1}
	tests := []struct {
		name       string
		steps      []step
		wantPeriod int64
	}{
		{"silent after three initial periods and the slack", []step{
			{0, nil, false, 0},
			{deadline(0, initial) - 1, nil, false, 0},
			{deadline(0, initial), nil, true, EvSourceSilent},
		}, initial},
		{"an announced period moves the deadline", []step{
			{0, nil, false, 0},
			{10, pc(1, 100e6), false, EvSourcePeriod},
			{deadline(10, 100e6) - 1, nil, false, 0},
			{deadline(10, 100e6), nil, true, EvSourceSilent},
		}, 100e6},
		{"late and duplicate changes are ignored", []step{
			{0, nil, false, 0},
			{10, pc(2, 100e6), false, EvSourcePeriod},
			{20, pc(1, 1600e6), false, 0},
			{30, pc(2, 1600e6), false, 0},
			{deadline(30, 100e6), nil, true, EvSourceSilent},
		}, 100e6},
		{"invalid periods are ignored", []step{
			{0, nil, false, 0},
			{10, pc(1, 0), false, 0},
			{20, pc(2, -5), false, 0},
			{30, pc(3, math.MaxInt64), false, 0},
		}, initial},
		{"probes keep it alive; heard again after silence", []step{
			{0, nil, false, 0},
			{1e9, probe, false, 0},
			{2e9, probe, false, 0},
			{deadline(2e9, initial), nil, true, EvSourceSilent},
			{5e9, probe, false, EvSourceAlive},
		}, initial},
		{"rounds further apart than announced widen the deadline", []step{
			{0, nil, false, 0},
			{1e9, ptr(childRound(1, 1e9-100_000, 0, 10_000)), false, 0},
			{2e9, ptr(childRound(2, 2e9-100_000, 0, 10_000)), false, 0},
			{deadline(2e9, 1e9) - 1, nil, false, 0},
			{deadline(2e9, 1e9), nil, true, EvSourceSilent},
		}, initial},
		{"a stranger does not count", []step{
			{0, nil, false, 0},
			{1e9, stranger, false, 0},
			{deadline(0, initial), nil, true, EvSourceSilent},
		}, initial},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, c)
			for i, s := range tt.steps {
				if s.msg == nil {
					n.Tick(s.at)
				} else {
					n.Step(*s.msg, s.at)
				}
				rd := n.Ready()
				if got := n.SourceSilent(0); got != s.want {
					t.Fatalf("step %d at %d: silent %v, want %v", i, s.at, got, s.want)
				}
				if s.ev != 0 {
					if _, ok := hasEvent(rd, s.ev); !ok {
						t.Fatalf("step %d: no event %d in %+v", i, s.ev, rd.Events)
					}
				}
				if _, ok := hasEvent(rd, EvSourceSilent); ok && s.ev != EvSourceSilent {
					t.Fatalf("step %d: unexpected silence event", i)
				}
			}
			ss := n.Snapshot().Sources[0]
			if ss.GlobalPeriod != tt.wantPeriod {
				t.Fatalf("period %d, want %d", ss.GlobalPeriod, tt.wantPeriod)
			}
			if ss.Silent != n.SourceSilent(0) {
				t.Fatalf("snapshot silent %v disagrees", ss.Silent)
			}
		})
	}
}

// The silence deadline saturates instead of overflowing near the end of
// the int64 range, and a negative start (a clock offset) is fine.
func TestSourceSilenceEdges(t *testing.T) {
	c := testConfig(1, []NodeID{0}, nil)
	tests := []struct {
		name       string
		start, end int64
		want       bool
	}{
		{"negative start, before", -5e9, -4e9, false},
		{"negative start, after", -5e9, -3e9, true},
		{"near the end of int64", math.MaxInt64 - 1e9, math.MaxInt64 - 1, false},
		{"at the end of int64", math.MaxInt64 - 1e9, math.MaxInt64, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, c)
			n.Tick(tt.start)
			n.Tick(tt.end)
			if got := n.SourceSilent(0); got != tt.want {
				t.Fatalf("silent %v, want %v", got, tt.want)
			}
		})
	}
}

// Over a lossy simulated tree, announced periods reach the children:
// every child ends up knowing the period its source uses for it.
func TestPeriodChangeReachesChildren(t *testing.T) {
	cfgs := []Config{testConfig(0, nil, []NodeID{1, 2}), testConfig(1, []NodeID{0}, nil), testConfig(2, []NodeID{0}, nil)}
	for i := range cfgs {
		cfgs[i].SuccessThresh = 2
	}
	tn := newTestNet(t, 1, cfgs, [][2]float64{{0, 0}, {1e6, 20e-6}, {-2e6, -30e-6}}, fixedLink(5_000), fakeEstimators)
	tn.run(20e9, 0, nil)
	src := tn.nodes[0].n.Snapshot()
	for _, ch := range src.Children {
		got := tn.nodes[ch.Child].n.Snapshot().Sources[0]
		if got.GlobalPeriod != ch.Period || got.Silent {
			t.Errorf("child %d knows period %d (silent %v), source uses %d", ch.Child, got.GlobalPeriod, got.Silent, ch.Period)
		}
		if ch.Period == int64(cfgs[0].InitialGlobalPeriod) {
			t.Errorf("child %d: period never changed, the test shows nothing", ch.Child)
		}
	}
	if tn.sent[MsgPeriodChange] == 0 {
		t.Error("no period change sent")
	}
}

func ptr(m Message) *Message { return &m }
