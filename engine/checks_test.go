package engine

import (
	"errors"
	"testing"

	"github.com/gclock/gclock/estimate"
)

// TestChecksSource: the source's side of the check exchanges. After a round
// (off the convergence ramp, Adaptive, ChecksPerPeriod > 0) it sends one
// probe every period/(ChecksPerPeriod+1), none within half a gap of the
// next round; an answer goes to the child as a TimeDiff marked Check about
// the last round; a report saying CheckErr starts a round at once, at most
// once a period, and the suspect report on that round brings the
// confirming round forward by period/(2*earlyDiv).
func TestChecksSource(t *testing.T) {
	const period = 1700e6 // 17 gaps of 100 ms with 16 checks
	tests := []struct {
		name       string
		checks     int
		adaptive   bool
		ramp       bool
		wantChecks int // checks before the next round
	}{
		{"checks", 16, true, false, 16},
		{"off", 0, true, false, 0},
		{"fixed periods", 16, false, false, 0},
		{"on the ramp", 16, true, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(0, nil, []NodeID{1})
			c.Adaptive, c.ChecksPerPeriod = tc.adaptive, tc.checks
			c.MinGlobalPeriod, c.InitialGlobalPeriod, c.MaxGlobalPeriod = period, period, period
			if tc.ramp {
				c.InitialGlobalPeriod = period / 2
			}
			p := int64(c.InitialGlobalPeriod)
			n := newNode(t, c)
			n.Tick(0)
			td, rd, end := answer(t, n, n.Ready(), 0, []int64{10_000})
			if td.Check {
				t.Fatal("a round's time diff marked Check")
			}
			var checks []Message
			for rd.NextTick != 0 && rd.NextTick < end+p {
				now := rd.NextTick
				n.Tick(now)
				rd = n.Ready()
				for _, m := range rd.Messages {
					if m.Type != MsgProbe {
						t.Fatalf("at %d: %+v between rounds", now, m)
					}
					if m.Round != td.Round {
						t.Errorf("check probe in round %d, want %d (the last round)", m.Round, td.Round)
					}
					if gap := now - end; len(checks) == 0 && gap != p/int64(tc.checks+1) {
						t.Errorf("first check %d ns after the round, want %d", gap, p/int64(tc.checks+1))
					}
					checks = append(checks, m)
				}
			}
			if len(checks) != tc.wantChecks {
				t.Fatalf("%d checks before the next round, want %d", len(checks), tc.wantChecks)
			}
			if tc.wantChecks == 0 {
				return
			}
			// The last check's answer: a TimeDiff marked Check, one
			// exchange, about the last round. A second answer is ignored.
			last := checks[len(checks)-1]
			now := n.lastLocal + 10_000
			reply := Message{Type: MsgProbeReply, From: 1, To: 0, Round: last.Round, Seq: last.Seq, T2: now + 1e6 - 5000, T3: now + 1e6 - 5000}
			n.Step(reply, now)
			cd := only(t, n.Ready(), MsgTimeDiff)
			if !cd.Check || cd.Round != td.Round || len(cd.Samples) != 1 || cd.Samples[0].RTT() != 10_000 {
				t.Fatalf("check time diff %+v, want Check, round %d, one exchange of 10 us", cd, td.Round)
			}
			n.Step(reply, now+1)
			if rd := n.Ready(); len(rd.Messages) != 0 {
				t.Fatalf("a duplicated check answer sent %+v", rd.Messages)
			}
			if got := n.Snapshot().Children[0].Checks; got != 1 {
				t.Errorf("ChildSnapshot.Checks = %d, want 1", got)
			}

			// The next round; then the child's checks miss its line: a
			// round at once.
			for n.Ready(); ; {
				next := n.Ready().NextTick
				n.Tick(next)
				rd = n.Ready()
				if len(rd.Messages) == 1 && rd.Messages[0].Round > td.Round {
					break
				}
			}
			td, _, end = answer(t, n, rd, n.lastLocal, []int64{10_000})
			at := end + 3*p/int64(tc.checks+1)
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: CheckErr}, at)
			if rd = n.Ready(); rd.NextTick > at {
				t.Fatalf("after a CheckErr report the next tick at %d, want by %d (now)", rd.NextTick, at)
			}
			if got := n.Snapshot().Children[0].CheckRounds; got != 1 {
				t.Errorf("ChildSnapshot.CheckRounds = %d, want 1", got)
			}
			n.Tick(at)
			rd = n.Ready()
			if len(rd.Messages) != 1 || rd.Messages[0].Round != td.Round+1 {
				t.Fatalf("after a CheckErr report, at once: %+v, want the next round's first probe", rd.Messages)
			}
			td, _, end = answer(t, n, rd, at, []int64{10_000})
			// The round's own report says BreakErr (a suspect): the
			// confirming round comes period/(2*earlyDiv) after it.
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: BreakErr}, end+5000)
			n.Ready()
			if due := n.children[0].due; due != end+p/(2*earlyDiv) {
				t.Fatalf("after the checked round's suspect the next round at %d, want %d", due, end+p/(2*earlyDiv))
			}
			confirm := end + p/(2*earlyDiv)
			n.Tick(confirm) // the round starts; the check due before it is dropped
			rd = n.Ready()
			if len(rd.Messages) != 1 || rd.Messages[0].Round != td.Round+1 {
				t.Fatalf("at the confirming round's time: %+v, want the round's first probe alone", rd.Messages)
			}
			td, _, end = answer(t, n, rd, confirm, []int64{10_000})
			// A CheckErr report within a quarter period of the round
			// checks started puts the next round off to that quarter
			// period; a second one about the same round is ignored.
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: CheckErr}, end+1000)
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: CheckErr}, end+2000)
			if rd = n.Ready(); len(rd.Messages) != 0 {
				t.Fatalf("a CheckErr report within a quarter period of the last: %+v, want nothing now", rd.Messages)
			}
			if due, want := n.children[0].due, at+p/checkRoundsDiv; due != want {
				t.Fatalf("a CheckErr report within a quarter period of the last: next round at %d, want %d", due, want)
			}
			if got := n.Snapshot().Children[0].CheckRounds; got != 2 {
				t.Errorf("ChildSnapshot.CheckRounds = %d, want 2", got)
			}
		})
	}
}

// TestCheckReplayStale: the child takes a check about its last round only
// when it was answered after every exchange taken before it, so that a
// replayed check (an insider re-sealing captured datagrams) neither is
// judged twice nor keeps a stopped source heard.
func TestCheckReplayStale(t *testing.T) {
	n, at := childAfterRound(t, 1)
	check := func(recv int64) Message {
		return Message{Type: MsgTimeDiff, From: 0, To: 1, Round: 1, Check: true,
			Samples: []estimate.Sample{{SrcSend: recv - 5000, LocRecv: recv, LocSend: recv + 1000, SrcRecv: recv + 6000}}}
	}
	now := at + 500e6
	tests := []struct {
		name  string
		m     Message
		stale bool
	}{
		{"answered before the round's exchange", check(at + 4000), true},
		{"about another round", func() Message { m := check(at + 100e6); m.Round = 2; return m }(), true},
		{"fresh", check(at + 100e6), false},
	}
	for _, tt := range tests {
		err := n.CheckMessage(tt.m, now)
		var re *RejectError
		if got := errors.As(err, &re) && re.Reason == RejectStaleRound; got != tt.stale {
			t.Errorf("%s: CheckMessage = %v, want stale %v", tt.name, err, tt.stale)
		}
	}
	fresh := check(at + 100e6)
	n.Step(fresh, now)
	heard := n.sources[0].heardAt
	// The same check replayed later: stale, and not heard.
	var re *RejectError
	if err := n.CheckMessage(fresh, now+1e9); !errors.As(err, &re) || re.Reason != RejectStaleRound {
		t.Fatalf("a replayed check: CheckMessage = %v, want stale", err)
	}
	n.Step(fresh, now+1e9)
	if got := n.sources[0].heardAt; got != heard {
		t.Errorf("a replayed check made the source heard at %d (was %d)", got, heard)
	}
}

// TestProbeSignOfLife: a probe from a source shows that it runs only when
// it is of a round a time diff would be accepted for (the last taken + 1
// up to + MaxRoundJump) or a check about the last round taken; a probe of
// any other round (an insider's sealed forgery of a random round) is
// answered but leaves the source's silence clock alone.
func TestProbeSignOfLife(t *testing.T) {
	n, at := childAfterRound(t, 5)
	for i, tt := range []struct {
		round uint32
		alive bool
	}{{5, true}, {6, true}, {7, true}, {5 + MaxRoundJump, true}, {6 + MaxRoundJump, false}, {4, false}, {0xa44c8ac8, false}} {
		before := n.sources[0].heardAt
		now := at + int64(i+1)*1e8
		n.Step(Message{Type: MsgProbe, From: 0, To: 1, Round: tt.round, Seq: uint32(100 + i)}, now)
		if rd := n.Ready(); len(rd.Messages) != 1 || rd.Messages[0].Type != MsgProbeReply {
			t.Errorf("probe of round %d: %+v, want a reply", tt.round, rd.Messages)
		}
		if got := n.sources[0].heardAt != before; got != tt.alive {
			t.Errorf("probe of round %d after round 5: heard %v, want %v", tt.round, got, tt.alive)
		}
	}
}

// childAfterRound is node 1, a child of node 0, that has taken round
// `round` of one exchange at local time at (1 s).
func childAfterRound(t *testing.T, round uint32) (n *Node, at int64) {
	t.Helper()
	n = newNode(t, testConfig(1, []NodeID{0}, nil))
	n.Tick(0)
	n.Ready()
	at = int64(1e9)
	n.Step(Message{Type: MsgTimeDiff, From: 0, To: 1, Round: round,
		Samples: []estimate.Sample{{SrcSend: at, LocRecv: at + 5000, LocSend: at + 6000, SrcRecv: at + 11000}}}, at+20000)
	if n.sources[0].round != round {
		t.Fatalf("round %d not taken", round)
	}
	return n, at
}

// trendChecker is an estimator whose checks hold the line (Check's
// interval within its threshold) while their trend says side.
type trendChecker struct {
	estimate.Estimator
	side     int
	expected []int
}

func (c *trendChecker) Check(estimate.Sample) (lo, hi, thresh float64, ok bool) {
	return -1000, 1000, 5000, true
}
func (c *trendChecker) CheckTrend() (int, float64) { return c.side, 5 * float64(c.side) }
func (c *trendChecker) ExpectBreak(side int)       { c.expected = append(c.expected, side) }

// TestCheckTrendReports: checks whose intervals hold the line but whose
// trend (estimate.Hull.CheckTrend) says it broke make the child report
// CheckErr once for the round, tell its estimator which side to expect,
// and count the report in CheckBreaks and CheckTrends; without a trend,
// nothing is reported.
func TestCheckTrendReports(t *testing.T) {
	for _, side := range []int{0, 1, -1} {
		n, at := childAfterRound(t, 1)
		src := n.sources[0]
		tc := &trendChecker{Estimator: src.sel, side: side}
		src.sel = tc
		n.Ready()
		reports := 0
		for i := range 3 {
			recv := at + int64(i+1)*100e6
			n.Step(Message{Type: MsgTimeDiff, From: 0, To: 1, Round: 1, Check: true,
				Samples: []estimate.Sample{{SrcSend: recv - 5000, LocRecv: recv, LocSend: recv + 1000, SrcRecv: recv + 6000}}}, recv+10000)
			for _, m := range n.Ready().Messages {
				if m.Type == MsgErrReport && m.Err == CheckErr {
					reports++
				}
			}
		}
		want := 0
		if side != 0 {
			want = 1
		}
		st := src.stats
		if reports != want || st.CheckBreaks != uint64(want) || st.CheckTrends != uint64(want) || st.Checks != 3 {
			t.Errorf("trend side %d: %d CheckErr reports, CheckBreaks %d, CheckTrends %d, Checks %d; want %d, %d, %d, 3",
				side, reports, st.CheckBreaks, st.CheckTrends, st.Checks, want, want, want)
		}
		if side != 0 && (len(tc.expected) != 1 || tc.expected[0] != side) {
			t.Errorf("trend side %d: the estimator was told to expect %v", side, tc.expected)
		}
	}
}
