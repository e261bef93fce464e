package engine

import "testing"

// TestFollowBreak: an error report that says BreakErr (a child whose centre
// line found a round suspect of a frequency break) brings the child's next
// round forward to 1/earlyDiv of its period after the round reported on,
// once: not the round after an early one, not for a smaller report, not
// on the convergence ramp, not without Liao's adaptivity.
func TestFollowBreak(t *testing.T) {
	tests := []struct {
		name      string
		adaptive  bool
		ramp      bool    // the period still below MinGlobalPeriod
		err       float64 // the report on the first round
		wantEarly bool
	}{
		{"break", true, false, BreakErr, true},
		{"far beyond", true, false, 4 * BreakErr, true},
		{"large error, no break", true, false, BreakErr / 2, false},
		{"on the ramp", true, true, BreakErr, false},
		{"fixed periods", false, false, BreakErr, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, period, td, end := earlyNode(t, tc.adaptive, tc.ramp)
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: tc.err}, end+5000)
			rd := n.Ready()
			want := end + period
			if tc.wantEarly {
				want = end + period/earlyDiv
			}
			if rd.NextTick != want {
				t.Fatalf("next round at %d, want %d (round ended at %d, period %d)", rd.NextTick, want, end, period)
			}
			if got := n.Snapshot().Children[0].Early; got != b2u(tc.wantEarly) {
				t.Errorf("ChildSnapshot.Early = %d, want %d", got, b2u(tc.wantEarly))
			}
			if !tc.wantEarly {
				return
			}
			// The early round: a report on it, as large, brings nothing
			// forward; the next round comes a period after it.
			n.Tick(rd.NextTick)
			td, _, end = answer(t, n, n.Ready(), rd.NextTick, []int64{10_000})
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: tc.err}, end+5000)
			if rd = n.Ready(); rd.NextTick != end+period {
				t.Fatalf("after the early round the next at %d, want %d: no chain of early rounds", rd.NextTick, end+period)
			}
			// The round after it may be brought forward again.
			n.Tick(rd.NextTick)
			td, _, end = answer(t, n, n.Ready(), rd.NextTick, []int64{10_000})
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: tc.err}, end+5000)
			if rd = n.Ready(); rd.NextTick != end+period/earlyDiv {
				t.Fatalf("a period later the next at %d, want %d", rd.NextTick, end+period/earlyDiv)
			}
			if got := n.Snapshot().Children[0].Early; got != 2 {
				t.Errorf("ChildSnapshot.Early = %d, want 2", got)
			}
		})
	}
}

// earlyNode is a source with one child, 800-ms periods (400 ms at the
// start on the ramp), after the child's first round: the node, its
// period, the round's time diff and when it ended.
func earlyNode(t *testing.T, adaptive, ramp bool) (n *Node, period int64, td Message, end int64) {
	t.Helper()
	c := testConfig(0, nil, []NodeID{1})
	c.Adaptive = adaptive
	c.MinGlobalPeriod, c.InitialGlobalPeriod, c.MaxGlobalPeriod = 800e6, 800e6, 800e6
	if ramp {
		c.InitialGlobalPeriod = 400e6
	}
	n = newNode(t, c)
	n.Tick(0)
	td, _, end = answer(t, n, n.Ready(), 0, []int64{10_000})
	return n, int64(c.InitialGlobalPeriod), td, end
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestFollowBroke: a child's BrokeErr report (its centre line restarted at
// a frequency break on the round reported) brings the next round forward
// to a quarter period after that round and the one after it to half a
// period after that; then periods again. None on the ramp or with fixed
// periods; a second BrokeErr about the same round counts once; a
// BrokeErr about another round than the last is late.
func TestFollowBroke(t *testing.T) {
	tests := []struct {
		name      string
		adaptive  bool
		ramp      bool
		wantEarly bool
	}{
		{"break", true, false, true},
		{"on the ramp", true, true, false},
		{"fixed periods", false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, period, td, end := earlyNode(t, tc.adaptive, tc.ramp)
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round + 1, Err: BrokeErr}, end+4000)
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: BrokeErr}, end+5000)
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: BrokeErr}, end+6000)
			rd := n.Ready()
			want := end + period
			if tc.wantEarly {
				want = end + period/4
			}
			if rd.NextTick != want {
				t.Fatalf("next round at %d, want %d (round ended at %d, period %d)", rd.NextTick, want, end, period)
			}
			if !tc.wantEarly {
				return
			}
			if got := n.Snapshot().Children[0].Early; got != 1 {
				t.Errorf("ChildSnapshot.Early = %d, want 1", got)
			}
			for i, gap := range []int64{period / 2, period} {
				n.Tick(rd.NextTick)
				_, _, end = answer(t, n, n.Ready(), rd.NextTick, []int64{10_000})
				if rd = n.Ready(); rd.NextTick != end+gap {
					t.Fatalf("follow-up %d: next round at %d, want %d", i+1, rd.NextTick, end+gap)
				}
			}
		})
	}
}
