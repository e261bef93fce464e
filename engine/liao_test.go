package engine

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
)

// Tests named after the lines of Liao et al.'s Figure 1. The source is
// driven by hand: the test plays the child and the network.

func newNode(t *testing.T, c Config) *Node {
	t.Helper()
	n, err := NewWithEstimators(c, nil, fakeEstimators)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func only(t *testing.T, rd Ready, typ MsgType) Message {
	t.Helper()
	if len(rd.Messages) != 1 || rd.Messages[0].Type != typ {
		t.Fatalf("want one message of type %d, got %+v", typ, rd.Messages)
	}
	return rd.Messages[0]
}

func hasEvent(rd Ready, k EventKind) (Event, bool) {
	for _, e := range rd.Events {
		if e.Kind == k {
			return e, true
		}
	}
	return Event{}, false
}

// answer plays the child for one round starting with the probe in rd, at
// source time now: each probe is answered after rtt[i] (the last value
// repeats). It returns the TimeDiff, the source's last Ready and the time.
func answer(t *testing.T, n *Node, rd Ready, now int64, rtt []int64) (Message, Ready, int64) {
	t.Helper()
	for i := 0; ; i++ {
		for _, m := range rd.Messages {
			if m.Type == MsgTimeDiff {
				return m, rd, now
			}
		}
		// Period changes go out with the next probe (period_test.go).
		rd.Messages = slices.DeleteFunc(slices.Clone(rd.Messages), func(m Message) bool { return m.Type == MsgPeriodChange })
		if len(rd.Messages) != 1 {
			t.Fatalf("ping %d: want one message, got %+v", i, rd.Messages)
		}
		m := rd.Messages[0]
		if m.Type != MsgProbe {
			t.Fatalf("ping %d: unexpected %+v", i, m)
		}
		r := rtt[min(i, len(rtt)-1)]
		childT := now + 1_000_000 + r/2 // child clock 1 ms ahead
		now += r
		n.Step(Message{Type: MsgProbeReply, From: m.To, To: m.From, Round: m.Round, Seq: m.Seq, T2: childT, T3: childT}, now)
		rd = n.Ready()
	}
}

func TestLiaoFig1ThreePingsThenTimeDiff(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	n := newNode(t, c)
	n.Tick(1000)
	rd := n.Ready()
	p := only(t, rd, MsgProbe)
	if p.To != 1 || p.Round != 1 || rd.NextTick != 1000+int64(c.ProbeTimeout) {
		t.Fatalf("first probe %+v next tick %d", p, rd.NextTick)
	}
	// One at a time: the next probe leaves only when the reply arrives.
	n.Tick(1500)
	if rd := n.Ready(); len(rd.Messages) != 0 {
		t.Fatalf("second probe before the reply: %+v", rd.Messages)
	}
	td, rd, end := answer(t, n, rd, 1000, []int64{10_000})
	if len(td.Samples) != c.PingsPerRound {
		t.Fatalf("time diff has %d samples, want %d", len(td.Samples), c.PingsPerRound)
	}
	s := td.Samples[0]
	if s.SrcSend != 1000 || s.SrcRecv != 11_000 || s.LocRecv != 1_006_000 || s.RTT() != 10_000 {
		t.Fatalf("sample not in the child's orientation: %+v", s)
	}
	if !td.Mapping.Valid || td.Mapping.W0 != 0 || td.Mapping.Skew != 0 || td.Mapping.X0 != td.Mapping.Y0 {
		t.Fatalf("reference mapping is not the identity: %+v", td.Mapping)
	}
	if rd.NextTick != end+int64(c.InitialGlobalPeriod) {
		t.Fatalf("next round at %d, want %d", rd.NextTick, end+int64(c.InitialGlobalPeriod))
	}
}

func TestLiaoFig1RepeatWhenShortestThisRoundExceedsShortestEver(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	th := int64(c.NetworkLatencyErrorThresh)
	tests := []struct {
		name        string
		second      int64 // RTT of every ping of round 2
		wantSamples int
	}{
		{"at the threshold: no repeat", 10_000 + th, 3},
		{"above the threshold: pings once more", 10_000 + th + 1, 6},
		{"shorter than ever: no repeat", 9_000, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, c)
			n.Tick(0)
			_, rd, now := answer(t, n, n.Ready(), 0, []int64{10_000})
			n.Tick(rd.NextTick)
			td, _, _ := answer(t, n, n.Ready(), rd.NextTick, []int64{tt.second})
			if len(td.Samples) != tt.wantSamples {
				t.Fatalf("round 2 sent %d samples, want %d", len(td.Samples), tt.wantSamples)
			}
			_ = now
		})
	}
	t.Run("repeated only once", func(t *testing.T) {
		n := newNode(t, c)
		n.Tick(0)
		_, rd, _ := answer(t, n, n.Ready(), 0, []int64{10_000})
		n.Tick(rd.NextTick)
		var events []Event
		now := rd.NextTick
		rd = n.Ready()
		for {
			m := rd.Messages[0]
			if m.Type == MsgTimeDiff {
				if len(m.Samples) != 2*c.PingsPerRound {
					t.Fatalf("%d samples, want %d", len(m.Samples), 2*c.PingsPerRound)
				}
				break
			}
			now += 10_000 + 10*th
			n.Step(Message{Type: MsgProbeReply, From: 1, To: 0, Round: m.Round, Seq: m.Seq, T2: now, T3: now}, now)
			rd = n.Ready()
			events = append(events, rd.Events...)
		}
		repeats := 0
		for _, e := range events {
			if e.Kind == EvRoundRepeated {
				repeats++
			}
		}
		if repeats != 1 || n.Snapshot().Children[0].Repeats != 1 {
			t.Fatalf("%d repeat events, snapshot %+v", repeats, n.Snapshot().Children[0])
		}
		// The slow round did not lower shortest-ever.
		if got := n.Snapshot().Children[0].ShortestRTT; got != 10_000 {
			t.Fatalf("shortest ever %d, want 10000", got)
		}
	})
}

// runRounds completes k rounds, reporting err[i] (if > 0) after round i.
// It returns the local start time of each round.
func runRounds(t *testing.T, n *Node, k int, errs []float64) []int64 {
	t.Helper()
	var starts []int64
	now := int64(0)
	n.Tick(now)
	for i := range k {
		if i > 0 {
			n.Tick(now)
		}
		starts = append(starts, now)
		td, rd, end := answer(t, n, n.Ready(), now, []int64{10_000})
		if i < len(errs) && errs[i] > 0 {
			n.Step(Message{Type: MsgErrReport, From: td.To, To: td.From, Round: td.Round, Err: errs[i]}, end+20_000)
			rd = n.Ready()
		}
		now = rd.NextTick
	}
	return starts
}

func TestLiaoFig1ErrorThreshHalvesPeriod(t *testing.T) {
	tests := []struct {
		name     string
		adaptive bool
		initial  int64
		errs     []float64
		want     int64 // period after the reports
		wantSum  float64
	}{
		{"sum below ERROR_THRESH keeps the period", true, 400e6, []float64{1.5, 2.5}, 400e6, 4},
		{"sum above ERROR_THRESH halves and zeroes", true, 400e6, []float64{1.5, 3}, 200e6, 0},
		{"one big report halves once", true, 400e6, []float64{100}, 200e6, 0},
		{"two halvings", true, 400e6, []float64{5, 5}, 100e6, 0},
		{"never below MIN_GLOBAL_PERIOD", true, 400e6, []float64{5, 5, 5, 5}, 100e6, 0},
		{"non-adaptive keeps the initial period", false, 400e6, []float64{5, 5}, 400e6, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(0, nil, []NodeID{1})
			c.Adaptive = tt.adaptive
			c.InitialGlobalPeriod = time.Duration(tt.initial)
			n := newNode(t, c)
			runRounds(t, n, len(tt.errs), tt.errs)
			cs := n.Snapshot().Children[0]
			if cs.Period != tt.want || cs.ErrSum != tt.wantSum {
				t.Fatalf("period %d errsum %g, want %d %g", cs.Period, cs.ErrSum, tt.want, tt.wantSum)
			}
			if cs.Reports != uint64(len(tt.errs)) {
				t.Fatalf("%d reports counted, want %d", cs.Reports, len(tt.errs))
			}
		})
	}
}

func TestLiaoFig1HalvingTakesEffectBeforeTheNextRound(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	n := newNode(t, c)
	n.Tick(0)
	td, _, end := answer(t, n, n.Ready(), 0, []int64{10_000})
	n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: 10}, end+5000)
	rd := n.Ready()
	if rd.NextTick != end+int64(c.InitialGlobalPeriod)/2 {
		t.Fatalf("next round at %d, want %d", rd.NextTick, end+int64(c.InitialGlobalPeriod)/2)
	}
	if e, ok := hasEvent(rd, EvPeriodChange); !ok || e.Value != float64(c.InitialGlobalPeriod/2) {
		t.Fatalf("no period change event: %+v", rd.Events)
	}
}

func TestLiaoFig1SuccessThreshDoublesPeriod(t *testing.T) {
	tests := []struct {
		name     string
		adaptive bool
		rounds   int
		errs     []float64
		initial  int64
		want     int64
	}{
		// The verdict on round i is counted when round i+1 starts, so
		// SUCCESS_THRESH=4 quiet rounds double the period at round 5.
		{"three quiet rounds: not yet", true, 4, nil, 400e6, 400e6},
		{"four quiet rounds double", true, 5, nil, 400e6, 800e6},
		{"eight quiet rounds double twice", true, 9, nil, 400e6, 1600e6},
		{"never above MAX_GLOBAL_PERIOD", true, 13, nil, 800e6, 1600e6},
		{"a small report restarts the count", true, 6, []float64{0, 1}, 400e6, 400e6},
		{"non-adaptive", false, 9, nil, 400e6, 400e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(0, nil, []NodeID{1})
			c.Adaptive = tt.adaptive
			c.SuccessThresh = 4
			c.InitialGlobalPeriod = time.Duration(tt.initial)
			n := newNode(t, c)
			starts := runRounds(t, n, tt.rounds, tt.errs)
			if got := n.Snapshot().Children[0].Period; got != tt.want {
				t.Fatalf("period %d, want %d (round starts %v)", got, tt.want, starts)
			}
		})
	}
}

func TestLiaoFig1RetryLostProbeIgnoreLateAndDuplicate(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	n := newNode(t, c)
	n.Tick(0)
	rd := n.Ready()
	p1 := only(t, rd, MsgProbe)
	// The probe is lost: at the deadline the probe is sent again with a
	// new sequence number, in the same round.
	n.Tick(rd.NextTick)
	rd = n.Ready()
	p2 := only(t, rd, MsgProbe)
	if p2.Seq == p1.Seq || p2.Round != p1.Round {
		t.Fatalf("retry %+v after %+v", p2, p1)
	}
	now := int64(c.ProbeTimeout) + 3000
	// The late reply to the first probe is ignored: no new probe.
	n.Step(Message{Type: MsgProbeReply, From: 1, To: 0, Round: p1.Round, Seq: p1.Seq, T2: 5, T3: 5}, now)
	if rd := n.Ready(); len(rd.Messages) != 0 {
		t.Fatalf("late reply answered: %+v", rd.Messages)
	}
	now += 1000
	reply := Message{Type: MsgProbeReply, From: 1, To: 0, Round: p2.Round, Seq: p2.Seq, T2: now - 500, T3: now - 500}
	n.Step(reply, now)
	p3 := only(t, n.Ready(), MsgProbe)
	// A duplicate of the reply that was already used is ignored too.
	n.Step(reply, now+10)
	if rd := n.Ready(); len(rd.Messages) != 0 {
		t.Fatalf("duplicate reply answered: %+v", rd.Messages)
	}
	cs := n.Snapshot().Children[0]
	if cs.Retries != 1 || cs.Ignored != 2 {
		t.Fatalf("snapshot %+v, want 1 retry 2 ignored", cs)
	}
	_ = p3
}

func TestLiaoFig1RetryTimeoutFollowsMeasuredRTT(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	c.ProbeTimeout = 1e6
	c.RetryRTTs = 4
	n := newNode(t, c)
	n.Tick(0)
	// First round: the 1 ms floor applies.
	if rd := n.Ready(); rd.NextTick != 1e6 {
		t.Fatalf("first deadline %d, want the 1 ms floor", rd.NextTick)
	}
	n.Tick(0)
	// A round of 10 ms RTTs: the timeout becomes 4 x 10 ms.
	n = newNode(t, c)
	n.Tick(0)
	_, rd, _ := answer(t, n, n.Ready(), 0, []int64{10e6})
	if got := n.Snapshot().Children[0].SRTT; got != 10e6 {
		t.Fatalf("srtt %d, want 10 ms", got)
	}
	start := rd.NextTick
	n.Tick(start)
	rd = n.Ready()
	only(t, rd, MsgProbe)
	if rd.NextTick != start+40e6 {
		t.Fatalf("deadline %d, want start+40ms", rd.NextTick-start)
	}
	n.Tick(start + 40e6 - 1)
	if len(n.Ready().Messages) != 0 {
		t.Fatal("retried before 4 RTTs")
	}
	n.Tick(start + 40e6)
	only(t, n.Ready(), MsgProbe)
}

func TestLiaoFig1RetriesExhausted(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	c.MaxProbeRetries = 2
	t.Run("no sample: round abandoned", func(t *testing.T) {
		n := newNode(t, c)
		n.Tick(0)
		rd := n.Ready()
		for range 3 {
			n.Tick(rd.NextTick)
			rd = n.Ready()
		}
		if len(rd.Messages) != 0 {
			t.Fatalf("after the last retry: %+v", rd.Messages)
		}
		cs := n.Snapshot().Children[0]
		if cs.Abandoned != 1 || cs.Rounds != 0 || cs.Retries != 3 {
			t.Fatalf("snapshot %+v", cs)
		}
		// The next round comes one period later.
		last := 3 * int64(c.ProbeTimeout)
		if rd.NextTick != last+int64(c.InitialGlobalPeriod) {
			t.Fatalf("next tick %d, want %d", rd.NextTick, last+int64(c.InitialGlobalPeriod))
		}
	})
	t.Run("one sample: sent as it is", func(t *testing.T) {
		n := newNode(t, c)
		n.Tick(0)
		p := only(t, n.Ready(), MsgProbe)
		n.Step(Message{Type: MsgProbeReply, From: 1, To: 0, Round: p.Round, Seq: p.Seq, T2: 100, T3: 100}, 200)
		rd := n.Ready()
		only(t, rd, MsgProbe)
		for range 3 {
			n.Tick(rd.NextTick)
			rd = n.Ready()
		}
		td := only(t, rd, MsgTimeDiff)
		if len(td.Samples) != 1 {
			t.Fatalf("%d samples", len(td.Samples))
		}
	})
}

func TestLiaoFig1OneChildAtATime(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1, 2, 3})
	n := newNode(t, c)
	n.Tick(0)
	p := only(t, n.Ready(), MsgProbe)
	if p.To != 1 {
		t.Fatalf("first probe to %d", p.To)
	}
	_, rd, _ := answer(t, n, Ready{Messages: []Message{p}}, 0, []int64{1000})
	// Once child 1's round ends, child 2's starts at once.
	if len(rd.Messages) != 2 || rd.Messages[1].Type != MsgProbe || rd.Messages[1].To != 2 {
		t.Fatalf("after child 1: %+v", rd.Messages)
	}
	c.MaxConcurrentRounds = 0
	n = newNode(t, c)
	n.Tick(0)
	if rd := n.Ready(); len(rd.Messages) != 3 {
		t.Fatalf("unlimited: %d probes at start", len(rd.Messages))
	}
}

// childRound builds a TimeDiff for a child whose clock is source+offset
// (no drift), with exchanges of the given RTT, at source time at.
func childRound(round uint32, at, offset, rtt int64) Message {
	var ss []estimate.Sample
	for i := range int64(3) {
		t1 := at + i*rtt
		ss = append(ss, estimate.Sample{SrcSend: t1, LocRecv: t1 + rtt/2 + offset, LocSend: t1 + rtt/2 + offset, SrcRecv: t1 + rtt})
	}
	return Message{Type: MsgTimeDiff, From: 0, To: 1, Round: round, Samples: ss, Mapping: estimate.Identity(at + 3*rtt)}
}

func TestLiaoFig1ChildReportsDifferenceThresh(t *testing.T) {
	c := testConfig(1, []NodeID{0}, nil)
	n := newNode(t, c)
	n.Tick(0)
	n.Ready()
	const off = 5_000_000
	dt := int64(c.DifferenceThresh)
	steps := []struct {
		round   uint32
		offset  int64
		wantErr float64 // 0: no report
	}{
		{1, off, 0},        // nothing projected yet
		{2, off, 0},        // as projected
		{3, off + dt/2, 0}, // within DIFFERENCE_THRESH
		// The clock jumped. The projection extrapolates the drift seen
		// between rounds 2 and 3 (dt/2 per second): off + dt, so err = 6.
		{4, off - 5*dt, 6},
	}
	for i, st := range steps {
		at := int64(i+1) * 1e9
		m := childRound(st.round, at, st.offset, 10_000)
		n.Step(m, at+st.offset+40_000)
		rd := n.Ready()
		var rep *Message
		for k := range rd.Messages {
			if rd.Messages[k].Type == MsgErrReport {
				rep = &rd.Messages[k]
			}
		}
		if st.wantErr == 0 {
			if rep != nil {
				t.Fatalf("round %d: unexpected report %+v", st.round, *rep)
			}
			continue
		}
		if rep == nil || rep.Round != st.round || rep.To != 0 || math.Abs(rep.Err-st.wantErr) > 0.05 {
			t.Fatalf("round %d: report %+v, want err %.2f", st.round, rep, st.wantErr)
		}
	}
	// The same TimeDiff again (a duplicate) is ignored: no second report.
	m := childRound(4, 4e9, off-5*dt, 10_000)
	n.Step(m, 4e9+off+50_000)
	if rd := n.Ready(); len(rd.Messages) != 0 {
		t.Fatalf("duplicate time diff answered: %+v", rd.Messages)
	}
}

func TestLiaoFig1SelfResyncLargeDriftShortensSelfPeriod(t *testing.T) {
	const drift = 50e-6
	for _, continuous := range []bool{false, true} {
		cfgs := []Config{testConfig(0, nil, []NodeID{1}), testConfig(1, []NodeID{0}, nil)}
		cfgs[1].ContinuousDrift = continuous
		tn := newTestNet(t, 1, cfgs, [][2]float64{{0, 0}, {3e6, drift}}, fixedLink(5000), fakeEstimators)
		tn.run(5e9, 0, nil)
		n := tn.nodes[1].n
		if got := n.Snapshot().SelfPeriod; got != int64(cfgs[1].MinSelfPeriod) {
			t.Fatalf("continuous=%v: self period %d, want MinSelfPeriod %d", continuous, got, cfgs[1].MinSelfPeriod)
		}
		selfEvents := 0
		for _, e := range tn.events {
			if e.Kind == EvSelfResync {
				selfEvents++
			}
		}
		if continuous != (selfEvents == 0) {
			t.Fatalf("continuous=%v: %d self-resync events", continuous, selfEvents)
		}
		// Between self resyncs Liao holds the offset: Est-local is constant
		// within one self period and moves by about drift x period at the
		// next; with ContinuousDrift it moves at every read.
		x := tn.nodes[1].local(tn.now)
		g := n.selfGrid(x)
		o1 := n.Estimate(g+1).Est - (g + 1)
		o2 := n.Estimate(g+int64(cfgs[1].MinSelfPeriod)-1).Est - (g + int64(cfgs[1].MinSelfPeriod) - 1)
		if continuous {
			if d := o1 - o2; d < 30 || d > 70 { // about 50 ppm of 1 ms
				t.Fatalf("continuous: offset moved %d ns over one self period", d)
			}
		} else if o1 != o2 {
			t.Fatalf("stepwise: offset moved %d ns within one self period", o1-o2)
		}
	}
}

func TestStepIgnoresStrangersAndCorruptReplies(t *testing.T) {
	c := testConfig(1, []NodeID{0}, []NodeID{2})
	tests := []struct {
		name string
		m    Message
	}{
		{"addressed to another node", Message{Type: MsgProbe, From: 0, To: 7}},
		{"probe from a child", Message{Type: MsgProbe, From: 2, To: 1}},
		{"reply from a source", Message{Type: MsgProbeReply, From: 0, To: 1, Seq: 1, Round: 1}},
		{"time diff from a child", Message{Type: MsgTimeDiff, From: 2, To: 1, Round: 1}},
		{"report from a source", Message{Type: MsgErrReport, From: 0, To: 1, Round: 1, Err: 3}},
		{"unknown type", Message{Type: 99, From: 0, To: 1}},
		{"report before any round", Message{Type: MsgErrReport, From: 2, To: 1, Round: 0, Err: 3}},
		{"reply with T3 before T2", Message{Type: MsgProbeReply, From: 2, To: 1, Seq: 1, Round: 1, T2: 50, T3: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := newNode(t, c)
			n.Tick(0)
			n.Ready()
			n.Step(tt.m, 100)
			rd := n.Ready()
			if len(rd.Messages) != 0 || len(rd.Events) != 0 {
				t.Fatalf("answered: %+v", rd)
			}
			s := n.Snapshot()
			if s.Ignored+s.Children[0].Ignored == 0 {
				t.Fatalf("not counted: %+v", s)
			}
		})
	}
}

func TestErrReportWithInvalidValueIgnored(t *testing.T) {
	for _, e := range []float64{math.NaN(), math.Inf(1), -3, -0.5} { // -1 is CheckErr (checks.go), -2 BrokeErr (periods.go)
		c := testConfig(0, nil, []NodeID{1})
		n := newNode(t, c)
		n.Tick(0)
		td, _, end := answer(t, n, n.Ready(), 0, []int64{10_000})
		m := Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: e}
		var re *RejectError
		if err := n.CheckMessage(m, end+1); !errors.As(err, &re) || re.Reason != RejectMalformed || re.Field != "err" {
			t.Fatalf("err %v: CheckMessage = %v, want a %s rejection of err", e, err, RejectMalformed)
		}
		n.Step(m, end+1)
		// Refused before it reaches the child's state: counted in the
		// node's Ignored, not in the child's (late/duplicate) Ignored.
		s := n.Snapshot()
		cs := s.Children[0]
		if cs.Reports != 0 || cs.ErrSum != 0 || cs.Ignored != 0 || s.Ignored != 1 {
			t.Fatalf("err %v: snapshot %+v, child %+v", e, s, cs)
		}
	}
}

func TestSnapshotCountsAgree(t *testing.T) {
	cfgs := []Config{testConfig(0, nil, []NodeID{1}), testConfig(1, []NodeID{0}, nil)}
	cfgs[0].Adaptive, cfgs[1].Adaptive = false, false
	tn := newTestNet(t, 1, cfgs, [][2]float64{{0, 0}, {1e6, 10e-6}}, fixedLink(5000), fakeEstimators)
	tn.run(10e9, 0, nil)
	s0, s1 := tn.nodes[0].n.Snapshot(), tn.nodes[1].n.Snapshot()
	if !s0.Reference || s1.Reference || len(s0.Children) != 1 || len(s1.Sources) != 1 {
		t.Fatalf("shape: %+v %+v", s0, s1)
	}
	c, s := s0.Children[0], s1.Sources[0]
	// 10 s at a fixed 400 ms period: 25 rounds (the first at 0).
	if c.Rounds != 25 || s.Rounds != c.Rounds || c.Period != 400e6 {
		t.Fatalf("child %+v source %+v", c, s)
	}
	if s.Period < 399e6 || s.Period > 401e6 || s.BoundWidth <= 0 || s.LastRound == 0 {
		t.Fatalf("source snapshot %+v", s)
	}
	if math.Abs(s.Skew-(-10e-6)) > 1e-7 { // source/local - 1 for a local clock 10 ppm fast
		t.Fatalf("skew %g, want about -10e-6", s.Skew)
	}
	if c.ShortestRTT != 10_000 {
		t.Fatalf("shortest RTT %d", c.ShortestRTT)
	}
}

// TestRampRoundSize: while the child's period is below MinGlobalPeriod
// (the convergence ramp) its rounds ask for RampPingsPerRound exchanges,
// after it PingsPerRound; 0 keeps PingsPerRound throughout. The period
// doubles after every quiet round (SuccessThresh 1): 100 ms, 200 ms,
// then 400 ms, the minimum, from the third round on.
func TestRampRoundSize(t *testing.T) {
	for _, tt := range []struct {
		name string
		ramp int
		want []int
	}{
		{"ramp rounds smaller", 3, []int{3, 3, 6, 6}},
		{"0: one size", 0, []int{6, 6, 6, 6}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(0, nil, []NodeID{1})
			c.InitialGlobalPeriod, c.MinGlobalPeriod, c.MaxGlobalPeriod = 100e6, 400e6, 1600e6
			c.SuccessThresh, c.PingsPerRound, c.RampPingsPerRound = 1, 6, tt.ramp
			n := newNode(t, c)
			got := roundSizes(t, n, len(tt.want), 10_000)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("rounds of %v exchanges, want %v", got, tt.want)
			}
		})
	}
}

// TestSharedRoundSize: after the ramp a round asks for PingsPerRound
// unless the children's measured paces say the source's slots cannot
// serve every child a round that size each MinGlobalPeriod in slotShare of
// their time; then fewer, never below RampPingsPerRound.
func TestSharedRoundSize(t *testing.T) {
	const ms = int64(1e6)
	for _, tt := range []struct {
		name     string
		children int
		paces    []int64 // of the first children; the rest unmeasured
		slots    int
		ramp     int
		ramping  bool
		want     int
	}{
		{"4 hosts, 0.3 ms an exchange", 3, []int64{ms * 3 / 10, ms * 3 / 10, ms * 3 / 10}, 2, 240, false, 960},
		{"32 hosts, 0.3 ms", 31, repeat(ms*3/10, 31), 2, 240, false, 960},
		{"32 hosts, 0.6 ms", 31, repeat(ms*6/10, 31), 2, 240, false, 483},
		{"32 hosts, 0.6 ms, one slot", 31, repeat(ms*6/10, 31), 1, 240, false, 241},
		{"32 hosts, 2 ms: the ramp's size at least", 31, repeat(2*ms, 31), 2, 240, false, 240},
		{"unmeasured children count at the mean", 31, repeat(ms*6/10, 10), 2, 240, false, 483},
		{"no pace yet", 31, nil, 2, 240, false, 960},
		{"ramping", 31, repeat(ms*3/10, 31), 2, 240, true, 240},
		{"no slot limit", 31, repeat(2*ms, 31), 0, 240, false, 960},
		{"no ramp size: one size", 31, repeat(2*ms, 31), 2, 0, false, 960},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var kids []NodeID
			for i := range tt.children {
				kids = append(kids, NodeID(i+1))
			}
			c := testConfig(0, nil, kids)
			c.PingsPerRound, c.RampPingsPerRound, c.MaxConcurrentRounds = 960, tt.ramp, tt.slots
			c.MinGlobalPeriod, c.InitialGlobalPeriod, c.MaxGlobalPeriod = 6e9, 6e9, 6e9
			n := newNode(t, c)
			for i, p := range tt.paces {
				n.children[i].pace = p
			}
			ch := n.children[0]
			if tt.ramping {
				ch.period = 1e9
			}
			if got := n.roundPings(ch); got != tt.want {
				t.Fatalf("roundPings = %d, want %d", got, tt.want)
			}
		})
	}
}

// roundSizes runs k rounds of n's one child, every exchange rtt long, and
// returns how many exchanges each round's time diff carried.
func roundSizes(t *testing.T, n *Node, k int, rtt int64) []int {
	t.Helper()
	n.Tick(0)
	rd, now := n.Ready(), int64(0)
	var got []int
	for range k {
		var td Message
		td, rd, now = answer(t, n, rd, now, []int64{rtt})
		got = append(got, len(td.Samples))
		now = max(now, rd.NextTick)
		n.Tick(now)
		rd = n.Ready()
	}
	return got
}

func repeat(v int64, k int) []int64 {
	s := make([]int64, k)
	for i := range s {
		s[i] = v
	}
	return s
}

// TestSharedRoundSizeMeasured: the pace comes from the rounds themselves.
// One child whose exchanges take 4 ms, one slot, a period of 40 ms:
// 0.75 x 40 ms of slot time holds 7 exchanges, so the second round asks
// for 7 of the 12; without a ramp size the rounds keep their 12.
func TestSharedRoundSizeMeasured(t *testing.T) {
	for _, tt := range []struct {
		name string
		ramp int
		want []int
	}{
		{"shared", 3, []int{12, 7, 7}},
		{"no ramp size", 0, []int{12, 12, 12}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(0, nil, []NodeID{1})
			c.InitialGlobalPeriod, c.MinGlobalPeriod, c.MaxGlobalPeriod = 40e6, 40e6, 40e6
			c.PingsPerRound, c.RampPingsPerRound, c.MaxConcurrentRounds = 12, tt.ramp, 1
			n := newNode(t, c)
			got := roundSizes(t, n, len(tt.want), 4e6)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("rounds of %v exchanges, want %v", got, tt.want)
			}
			if s := n.Snapshot().Children[0]; s.Pings != tt.want[len(tt.want)-1] || s.Pace != 4e6 {
				t.Fatalf("snapshot: pings %d, pace %d ns; want %d, 4000000", s.Pings, s.Pace, tt.want[len(tt.want)-1])
			}
		})
	}
}
