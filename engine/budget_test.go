package engine

import (
	"testing"
	"time"
)

// TestRoundBudget: a round that has probed for Config.RoundBudget sends no
// further probe and ends with the exchanges it has; the repeat of a slow
// round gets the budget again; a probe lost after the budget ends the round
// at its timeout instead of being retried; the next child's round starts
// when the cut one ends.
func TestRoundBudget(t *testing.T) {
	const ms = int64(time.Millisecond)
	tests := []struct {
		name        string
		budget      time.Duration
		first       int64 // RTT of round 1's exchanges (sets the shortest ever)
		second      int64 // RTT of round 2's exchanges
		wantSamples int   // in round 2's TimeDiff
		wantCut     uint64
		wantRepeats uint64
	}{
		// Replies at 10, 20, 30 ms: the third arrives after the 25-ms
		// budget, so no fourth probe.
		{"cut at the budget", 25 * time.Millisecond, 10 * ms, 10 * ms, 3, 1, 0},
		{"budget exactly spent at a reply", 20 * time.Millisecond, 10 * ms, 10 * ms, 2, 1, 0},
		{"no budget", 0, 10 * ms, 10 * ms, 10, 0, 0},
		{"budget not reached", time.Second, 10 * ms, 10 * ms, 10, 0, 0},
		// Round 2 is slower than the shortest ever by more than the
		// threshold: cut at 3, repeated with the budget again, cut at 3.
		{"repeat gets the budget again", 25 * time.Millisecond, 1 * ms, 10 * ms, 6, 1, 1},
		{"repeat without a budget", 0, 1 * ms, 10 * ms, 20, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(0, nil, []NodeID{1})
			c.PingsPerRound = 10
			c.ProbeTimeout = 500 * time.Millisecond
			c.RoundBudget = tt.budget
			n := newNode(t, c)
			n.Tick(0)
			_, rd, _ := answer(t, n, n.Ready(), 0, []int64{tt.first})
			cut1 := n.Snapshot().Children[0].Cut
			n.Tick(rd.NextTick)
			td, _, _ := answer(t, n, n.Ready(), rd.NextTick, []int64{tt.second})
			if len(td.Samples) != tt.wantSamples {
				t.Errorf("round 2 sent %d samples, want %d", len(td.Samples), tt.wantSamples)
			}
			cs := n.Snapshot().Children[0]
			if cs.Cut-cut1 != tt.wantCut || cs.Repeats != tt.wantRepeats || cs.Rounds != 2 {
				t.Errorf("round 2: cut %d repeats %d rounds %d, want cut %d repeats %d rounds 2", cs.Cut-cut1, cs.Repeats, cs.Rounds, tt.wantCut, tt.wantRepeats)
			}
		})
	}

	t.Run("a deadline at local time 0 is still a deadline", func(t *testing.T) {
		c := testConfig(0, nil, []NodeID{1})
		c.PingsPerRound = 10
		c.ProbeTimeout = 500 * time.Millisecond
		c.RoundBudget = 25 * time.Millisecond
		n := newNode(t, c)
		start := -25 * ms // the deadline falls on 0
		n.Tick(start)
		td, _, _ := answer(t, n, n.Ready(), start, []int64{10 * ms})
		if len(td.Samples) != 3 {
			t.Fatalf("%d samples, want 3 (cut at the budget)", len(td.Samples))
		}
	})

	t.Run("lost probe after the budget ends the round at its timeout", func(t *testing.T) {
		c := testConfig(0, nil, []NodeID{1})
		c.PingsPerRound = 10
		c.ProbeTimeout = 50 * time.Millisecond
		c.RetryRTTs = 1
		c.RoundBudget = 15 * time.Millisecond
		n := newNode(t, c)
		n.Tick(0)
		now := int64(0)
		rd := n.Ready()
		for range 2 { // replies at 10 and 20 ms
			p := only(t, rd, MsgProbe)
			now += 10 * ms
			n.Step(Message{Type: MsgProbeReply, From: 1, To: 0, Round: p.Round, Seq: p.Seq, T2: now - 5*ms, T3: now - 5*ms}, now)
			rd = n.Ready()
		}
		// 20 ms is past the budget: the second reply ended the round.
		td := only(t, rd, MsgTimeDiff)
		if len(td.Samples) != 2 {
			t.Fatalf("%d samples, want 2", len(td.Samples))
		}
		// Next round: one reply inside the budget, then the probe is lost.
		start := rd.NextTick
		n.Tick(start)
		p := only(t, n.Ready(), MsgProbe)
		n.Step(Message{Type: MsgProbeReply, From: 1, To: 0, Round: p.Round, Seq: p.Seq, T2: start + 5*ms, T3: start + 5*ms}, start+10*ms)
		rd = n.Ready()
		only(t, rd, MsgProbe) // 10 ms < 15 ms: one more
		n.Tick(rd.NextTick)   // its timeout, after the budget
		td = only(t, n.Ready(), MsgTimeDiff)
		if len(td.Samples) != 1 {
			t.Fatalf("%d samples, want 1", len(td.Samples))
		}
		cs := n.Snapshot().Children[0]
		if cs.Cut != 2 || cs.Retries != 1 || cs.Abandoned != 0 || cs.Rounds != 2 {
			t.Fatalf("snapshot %+v", cs)
		}
	})

	t.Run("the next child starts when the cut round ends", func(t *testing.T) {
		c := testConfig(0, nil, []NodeID{1, 2})
		c.PingsPerRound = 100
		c.RoundBudget = 30 * time.Millisecond
		n := newNode(t, c)
		n.Tick(0)
		_, rd, end := answer(t, n, n.Ready(), 0, []int64{10 * ms})
		if end != 30*ms {
			t.Fatalf("child 1's round ended at %d ns, want 30 ms", end)
		}
		var p Message
		for _, m := range rd.Messages {
			if m.Type == MsgProbe {
				p = m
			}
		}
		if p.To != 2 {
			t.Fatalf("after child 1's round: %+v, want a probe to child 2", rd.Messages)
		}
	})
}
