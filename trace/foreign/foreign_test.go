package foreign

import (
	"errors"
	"strings"
	"testing"
)

// TestCorrectDriftSteps: clocks with offsets, drifts, two drift steps each
// and wander, corrected from the offset records and the messages, judged
// against the generator's truth: better than Score-P's linear interpolation,
// within the bound the messages allow, no receive before its send.
func TestCorrectDriftSteps(t *testing.T) {
	for _, c := range []struct{ procs, seed, steps, wander string }{
		{"6", "1", "2", "0.05"}, {"6", "2", "2", "0.05"}, {"12", "4", "2", "0.05"},
		{"6", "3", "4", "0.3"}, // more steps, six times the wander
	} {
		t.Run("procs"+c.procs+"_seed"+c.seed+"_steps"+c.steps+"_wander"+c.wander, func(t *testing.T) {
			_, tr := generate(t, "-procs", c.procs, "-seconds", "12", "-interval-ms", "4", "-seed", c.seed, "-steps", c.steps, "-wander-ppm", c.wander)
			m := modelOf(tr)
			res, err := Correct(m, Options{Reference: -1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Reference != tr.Reference {
				t.Errorf("reference %d, want %d (the location whose offsets are all 0)", res.Reference, tr.Reference)
			}
			lin := Evaluate(tr, func(i, e int) int64 { return Linear(m.Locs[i].Offsets, m.Locs[i].Times[e]) })
			got := Evaluate(tr, func(i, e int) int64 { return res.Global[i][e] })
			b, half := Bound(tr, res.Window)
			t0 := tr.Locations[tr.Reference].Global[0]
			within, judged := 0, 0
			for i, l := range tr.Locations {
				for e, g := range l.Global {
					h, ok := half[[2]int{i, int((g - t0) / res.Window)}]
					if i == tr.Reference || !ok {
						continue
					}
					judged++
					if d := res.Global[i][e] - g; max(d, -d) <= h {
						within++
					}
				}
			}
			share := float64(within) / float64(judged)
			t.Logf("window %.1f ms; Score-P linear: %v", float64(res.Window)/1e6, lin)
			t.Logf("gclock corrected: %v; %.2f%% of %d events within their bound", got, 100*share, judged)
			t.Logf("bound: %v", b)
			t.Logf("receives before sends: raw %d, linear %d, corrected %d of %d", res.Causality.Raw, res.Causality.Linear, res.Causality.Corrected, res.Messages)
			if share < 0.99 {
				t.Errorf("%.2f%% of events within the bound, want >= 99%%", 100*share)
			}
			if got.P99 > b.P99 || got.Max > b.Max {
				t.Errorf("corrected p99/max %d/%d ns, bound %d/%d ns", got.P99, got.Max, b.P99, b.Max)
			}
			if 3*got.P99 > lin.P99 || 3*got.P50 > lin.P50 {
				t.Errorf("corrected %v not 3 times better than Score-P's linear interpolation %v", got, lin)
			}
			if res.Causality.Linear == 0 {
				t.Errorf("no violation on the linear interpolation: the drift steps did not show")
			}
			// CLC removes what is left without moving events far.
			clc, err := Correct(m, Options{Reference: -1, CLC: true})
			if err != nil {
				t.Fatal(err)
			}
			after := Evaluate(tr, func(i, e int) int64 { return clc.Global[i][e] })
			t.Logf("after CLC: %v, receives before sends %d", after, clc.Causality.CLC)
			if clc.Causality.CLC != 0 {
				t.Errorf("%d receives before their sends after CLC", clc.Causality.CLC)
			}
			if after.P99 > b.P99 {
				t.Errorf("after CLC p99 %d ns above the bound's p99 %d ns", after.P99, b.P99)
			}
		})
	}
}

// TestCorrectBadInput: what is wrong is named.
func TestCorrectBadInput(t *testing.T) {
	good := func() *Trace {
		return &Trace{
			Locs: []Location{
				{Name: "rank 0", Times: []int64{10, 20, 30}, Offsets: []OffsetRecord{{Local: 0}, {Local: 100}}},
				{Name: "rank 1", Times: []int64{15, 25, 35}, Offsets: []OffsetRecord{{Local: 0, Offset: 5}, {Local: 1_000_000, Offset: 7}}},
			},
			Msgs: []Message{{From: 0, To: 1, Send: 0, Recv: 1}, {From: 1, To: 0, Send: 2, Recv: 2}},
		}
	}
	if _, err := Correct(good(), Options{Reference: -1}); err != nil {
		t.Fatalf("good trace: %v", err)
	}
	for _, c := range []struct {
		name string
		mod  func(*Trace)
		is   error
		want string
	}{
		{"no offsets", func(tr *Trace) { tr.Locs[1].Offsets = nil }, ErrNoOffsets, "location 1 (rank 1)"},
		{"time backwards", func(tr *Trace) { tr.Locs[0].Times[2] = 5 }, ErrBadTrace, "event 2 at 5 before event 1 at 20"},
		{"offsets out of order", func(tr *Trace) { tr.Locs[1].Offsets[1].Local = 0 }, ErrBadTrace, "clock offset 1"},
		{"message to nowhere", func(tr *Trace) { tr.Msgs[1].Recv = 9 }, ErrBadTrace, "message 1"},
		{"no locations", func(tr *Trace) { tr.Locs = nil }, ErrBadTrace, "no locations"},
		{"offsets no clock", func(tr *Trace) { tr.Locs[1].Offsets[1].Offset = 50_000 }, ErrBadTrace, "rate error of 49995 ppm"},
		{"time beyond 2^62", func(tr *Trace) { tr.Locs[0].Times[2] = 1 << 62 }, ErrBadTrace, "outside [0, 2^62)"},
		{"offset beyond 2^62", func(tr *Trace) { tr.Locs[0].Offsets[0].Offset = -(1 << 62) }, ErrBadTrace, "clock offset 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := good()
			c.mod(tr)
			_, err := Correct(tr, Options{Reference: -1})
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %v naming %q", err, c.is, c.want)
			}
		})
	}
}

// TestLinearMatchesOTF2: the interpolation an OTF2 reader applies, with the
// rounding at large absolute times (no float64 of absolute ns).
func TestLinearMatchesOTF2(t *testing.T) {
	const base = int64(1_732_000_000_000_000_000)
	offs := []OffsetRecord{{Local: base, Offset: -1000}, {Local: base + 10_000_000_000, Offset: 9000}}
	for _, c := range []struct{ local, want int64 }{
		{base, base - 1000},
		{base + 5_000_000_000, base + 5_000_000_000 + 4000},
		{base + 10_000_000_000, base + 10_000_000_000 + 9000},
		{base + 20_000_000_000, base + 20_000_000_000 + 19000}, // after the last: the last interval's line
		{base - 10_000_000_000, base - 10_000_000_000 - 11000}, // before the first
	} {
		if got := Linear(offs, c.local); got != c.want {
			t.Errorf("Linear(%d) = %d, want %d", c.local, got, c.want)
		}
	}
	if got := Linear(offs[:1], base+7); got != base+7-1000 {
		t.Errorf("one record: %d", got)
	}
}

// TestKnots: knots out of order or at one time (a receive after the next
// window's start) still interpolate between neighbours.
func TestKnots(t *testing.T) {
	ks := orderKnots([]knot{{at: 30, d: 3}, {at: 10, d: 1}, {at: 20, d: 4}, {at: 20, d: 2}})
	want := []knot{{10, 1}, {20, 3}, {30, 3}}
	if len(ks) != len(want) {
		t.Fatalf("%v, want %v", ks, want)
	}
	for i := range ks {
		if ks[i] != want[i] {
			t.Fatalf("%v, want %v", ks, want)
		}
	}
	for _, c := range []struct {
		x    int64
		want float64
	}{{0, 1}, {10, 1}, {15, 2}, {20, 3}, {25, 3}, {99, 3}} {
		if got := interp(ks, c.x); got != c.want {
			t.Errorf("interp(%d) = %v, want %v", c.x, got, c.want)
		}
	}
}
