package causality

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/gclock/gclock/trace/format"
)

func msg(t, raw int64, proc uint32, kind format.Kind, peer uint32, id uint64) format.Merged {
	return format.Merged{Event: format.Event{Time: t, Kind: kind, Peer: peer, ID: id}, Raw: raw, Proc: proc}
}

func TestChecker(t *testing.T) {
	tests := []struct {
		name      string
		ev        []format.Merged
		want      []Counts
		unmatched int64
	}{
		{"ok", []format.Merged{msg(1, 1, 0, format.Send, 1, 7), msg(5, 5, 1, format.Recv, 0, 7)},
			[]Counts{{Pair{0, 1}, 1, 0, 0}}, 0},
		// raw times say the receive was first; corrected ones do not.
		{"raw violation", []format.Merged{msg(1, 100, 0, format.Send, 1, 7), msg(5, 50, 1, format.Recv, 0, 7)},
			[]Counts{{Pair{0, 1}, 1, 1, 0}}, 0},
		{"corrected violation", []format.Merged{msg(1, 1, 1, format.Recv, 0, 7), msg(5, 0, 0, format.Send, 1, 7)},
			[]Counts{{Pair{0, 1}, 1, 0, 1}}, 0},
		{"equal is fine", []format.Merged{msg(3, 3, 1, format.Recv, 0, 7), msg(3, 3, 0, format.Send, 1, 7)},
			[]Counts{{Pair{0, 1}, 1, 0, 0}}, 0},
		{"pairs apart", []format.Merged{
			msg(1, 1, 0, format.Send, 1, 1), msg(2, 2, 0, format.Send, 2, 1),
			msg(3, 0, 2, format.Recv, 0, 1), msg(4, 4, 1, format.Recv, 0, 1), msg(9, 9, 2, format.Send, 0, 5)},
			[]Counts{{Pair{0, 1}, 1, 0, 0}, {Pair{0, 2}, 1, 1, 0}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(0)
			for i := range tc.ev {
				c.Observe(&tc.ev[i])
			}
			got, un, _ := c.Result()
			if len(got) != len(tc.want) || un != tc.unmatched {
				t.Fatalf("got %+v unmatched %d, want %+v %d", got, un, tc.want, tc.unmatched)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("pair %d: %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// randomTrace: procs processes whose corrected clocks are off by up to
// skewNs, exchanging messages with true latency >= 1000 ns.
func randomTrace(seed uint64, procs, n int, skewNs int64) []format.Merged {
	rng := rand.New(rand.NewPCG(seed, 3))
	off := make([]int64, procs)
	for i := range off {
		off[i] = rng.Int64N(2*skewNs+1) - skewNs
	}
	var ev []format.Merged
	var id uint64
	for k := 0; k < n; k++ {
		t := int64(k) * 700
		p := uint32(rng.IntN(procs))
		q := uint32(rng.IntN(procs))
		id++
		d := 1000 + rng.Int64N(2000)
		ev = append(ev, msg(t+off[p], t, p, format.Send, q, id))
		ev = append(ev, msg(t+d+off[q], t+d, q, format.Recv, p, id))
		ev = append(ev, msg(t+5+off[p], t+5, p, format.Instant, 0, 0))
	}
	// per-process times must be non-decreasing: sort by time (stable)
	for i := 1; i < len(ev); i++ {
		for j := i; j > 0 && ev[j].Time < ev[j-1].Time; j-- {
			ev[j], ev[j-1] = ev[j-1], ev[j]
		}
	}
	return ev
}

func count(ev []format.Merged, lmin int64) Counts {
	c := NewChecker(lmin)
	for i := range ev {
		c.Observe(&ev[i])
	}
	p, _, _ := c.Result()
	return Totals(p)
}

// TestCLCRemovesViolations: after CLC no receive precedes its send plus the
// minimum latency, every process's events keep their order and local
// intervals never shrink (gamma 1), and nothing moves backwards.
func TestCLCRemovesViolations(t *testing.T) {
	for _, tc := range []struct {
		seed     uint64
		skew     int64
		gamma    float64
		amortize float64
	}{{1, 3000, 1, 0}, {2, 10000, 1, 0}, {3, 1500, 1, 0}, {4, 5000, 0.9, 0}, {5, 3000, 1, 10}, {6, 10000, 1, 100}, {7, 5000, 0.9, 3}} {
		ev := randomTrace(tc.seed, 5, 2000, tc.skew)
		before := count(ev, 100)
		if before.Corrected == 0 {
			t.Fatalf("seed %d: test trace has no violation to remove", tc.seed)
		}
		orig := map[[2]int64]int64{} // (proc, raw) -> time before
		for _, e := range ev {
			orig[[2]int64{int64(e.Proc), e.Raw*8 + int64(e.Kind)}] = e.Time
		}
		moved, err := CLC(ev, CLCOptions{MinLatency: 100, Gamma: tc.gamma, Amortize: tc.amortize})
		if err != nil {
			t.Fatal(err)
		}
		if after := count(ev, 100); after.Corrected != 0 || after.Messages != before.Messages {
			t.Fatalf("seed %d: %d violations left of %d messages", tc.seed, after.Corrected, after.Messages)
		}
		last := map[uint32]format.Merged{}
		var jumps int64
		for i, e := range ev {
			if i > 0 && e.Time < ev[i-1].Time {
				t.Fatalf("output not sorted at %d", i)
			}
			o := orig[[2]int64{int64(e.Proc), e.Raw*8 + int64(e.Kind)}]
			if e.Time < o {
				t.Fatalf("event moved backwards: %d -> %d", o, e.Time)
			}
			if p, ok := last[e.Proc]; ok {
				if e.Raw < p.Raw {
					t.Fatalf("proc %d: events reordered", e.Proc)
				}
				po := orig[[2]int64{int64(p.Proc), p.Raw*8 + int64(p.Kind)}]
				if tc.gamma == 1 && e.Time-p.Time < o-po {
					t.Fatalf("proc %d: interval shrank from %d to %d", e.Proc, o-po, e.Time-p.Time)
				}
			}
			last[e.Proc] = e
		}
		for _, m := range moved {
			jumps += m.Jumps
		}
		if jumps == 0 {
			t.Fatalf("seed %d: no jump reported", tc.seed)
		}
	}
}

func TestCLCNoViolationNoMove(t *testing.T) {
	ev := randomTrace(9, 4, 500, 0)
	moved, err := CLC(ev, CLCOptions{MinLatency: 500})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range moved {
		if m.Moved != 0 || m.MaxShift != 0 {
			t.Fatalf("proc %d moved %d events by up to %d without a violation", m.Proc, m.Moved, m.MaxShift)
		}
	}
}

func TestCLCErrors(t *testing.T) {
	if _, err := CLC(nil, CLCOptions{MinLatency: -1}); err == nil {
		t.Error("negative latency accepted")
	}
	if _, err := CLC(nil, CLCOptions{Gamma: 2}); err == nil {
		t.Error("gamma 2 accepted")
	}
	// Two processes each receive before sending the message the other one
	// waits for: no replay order exists.
	ev := []format.Merged{
		msg(1, 1, 0, format.Recv, 1, 1), msg(2, 2, 0, format.Send, 1, 2),
		msg(1, 1, 1, format.Recv, 0, 2), msg(2, 2, 1, format.Send, 0, 1),
	}
	if _, err := CLC(ev, CLCOptions{}); !errors.Is(err, ErrCycle) {
		t.Fatalf("cycle: %v", err)
	}
}

// TestAmortizeSpreadsJump: process 1 runs events every 100 ns and receives
// at 550 a message sent at 1000 by process 0. The forward pass moves the
// receive (and what follows) by 500 ns in one step; backward amortization
// spreads the move over the events before it.
func TestAmortizeSpreadsJump(t *testing.T) {
	build := func() []format.Merged {
		var ev []format.Merged
		for i := int64(0); i <= 5; i++ {
			ev = append(ev, msg(i*100, i*100, 1, format.Instant, 0, 0))
		}
		ev = append(ev, msg(550, 550, 1, format.Recv, 0, 9))
		ev = append(ev, msg(1000, 1000, 0, format.Send, 1, 9))
		return ev
	}
	times := func(ev []format.Merged) []int64 {
		var out []int64
		for _, e := range ev {
			if e.Proc == 1 {
				out = append(out, e.Time)
			}
		}
		return out
	}
	fwd := build()
	if _, err := CLC(fwd, CLCOptions{MinLatency: 0}); err != nil {
		t.Fatal(err)
	}
	am := build()
	moved, err := CLC(am, CLCOptions{MinLatency: 0, Amortize: 2})
	if err != nil {
		t.Fatal(err)
	}
	f, a := times(fwd), times(am)
	want := []int64{0, 100, 200, 300, 400, 500, 1000} // forward: only the receive moves
	for i := range want {
		if f[i] != want[i] {
			t.Fatalf("forward pass: %v, want %v", f, want)
		}
	}
	// Window: 2*450 ns before 550, so (-350, 550]: ramp 450*(t+350)/900.
	wantA := []int64{0 + 175, 100 + 225, 200 + 275, 300 + 325, 400 + 375, 500 + 425, 1000}
	for i := range wantA {
		if a[i] != wantA[i] {
			t.Fatalf("amortized: %v, want %v", a, wantA)
		}
	}
	if moved[1].Moved != 7 || moved[1].MaxShift != 450 {
		t.Fatalf("report %+v", moved[1])
	}
}

// A send inside the window moves only as far as its receive allows.
func TestAmortizeRespectsSends(t *testing.T) {
	ev := []format.Merged{
		msg(0, 0, 1, format.Instant, 0, 0),
		msg(400, 400, 1, format.Send, 2, 5), // received at 450 by process 2
		msg(450, 450, 2, format.Recv, 1, 5),
		msg(500, 500, 1, format.Recv, 0, 9), // sent at 1000: jump 500
		msg(1000, 1000, 0, format.Send, 1, 9),
	}
	if _, err := CLC(ev, CLCOptions{MinLatency: 10, Amortize: 4}); err != nil {
		t.Fatal(err)
	}
	if c := count(ev, 10); c.Corrected != 0 {
		t.Fatalf("%d violations", c.Corrected)
	}
	for _, e := range ev {
		if e.Proc == 1 && e.Kind == format.Send && e.Time != 440 {
			t.Fatalf("send moved to %d, want 440 (its receive at 450 - 10)", e.Time)
		}
	}
}
