package estimate

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// stepWorld is a source clock whose skew against the local clock (truth)
// jumps by stepPPB at truth tStep: y(t) = off + t + skew(t) integrated.
type stepWorld struct {
	ppb, stepPPB, tStep int64
}

func (w stepWorld) y(t int64) int64 {
	v := t + t*w.ppb/1e9
	if t > w.tStep {
		v += (t - w.tStep) * w.stepPPB / 1e9
	}
	return v
}

func (w stepWorld) exchange(r *rand.Rand, t int64) Sample {
	d1 := 1_000 + int64(r.ExpFloat64()*200)
	d2 := 1_000 + int64(r.ExpFloat64()*200)
	return Sample{SrcSend: w.y(t), LocRecv: t + d1, LocSend: t + d1 + 1000, SrcRecv: w.y(t + d1 + 1000 + d2)}
}

// TestHullMaxStepCovers checks the frequency-step term of the clock model:
// with MaxStep at least the step, the truth stays inside Bounds at every
// instant, between rounds and after the step, and the window never goes
// inconsistent; with MaxStep 0 the same data leave the bounds (so the term
// is what holds them).
func TestHullMaxStepCovers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		step    int64 // ppb
		maxStep float64
		wantOK  bool
	}{
		{"2ppm-step-covered", 2000, 2e-6, true},
		{"10ppm-step-covered", -10000, 10e-6, true},
		{"2ppm-step-no-step-term", 2000, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := stepWorld{ppb: 30_000, stepPPB: tc.step, tStep: 20_500_000_000}
			h, err := NewHull(HullConfig{Window: 64, MaxStep: tc.maxStep, MaxWander: 1e-17})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(7, 1))
			misses, inconsistent := 0, 0
			const period = 2_000_000_000
			for k := int64(0); k < 30; k++ {
				t0 := k * period
				if err := h.AddRound([]Sample{w.exchange(r, t0), w.exchange(r, t0+300_000), w.exchange(r, t0+600_000)}); err != nil {
					if !errors.Is(err, ErrInconsistent) {
						t.Fatalf("round %d: %v", k, err)
					}
					inconsistent++
				}
				// Read between this round and the next, every 100 ms.
				for x := t0 + 700_000; x < t0+period; x += 100_000_000 {
					lo, hi, ok := h.Bounds(x)
					if !ok {
						continue
					}
					if y := w.y(x); y < lo || y > hi {
						misses++
					}
				}
			}
			if tc.wantOK && (misses > 0 || inconsistent > 0) {
				t.Fatalf("MaxStep %g with a %d ppb step: %d reads outside the bounds, %d inconsistent rounds; want none", tc.maxStep, tc.step, misses, inconsistent)
			}
			if !tc.wantOK && misses+inconsistent == 0 {
				t.Fatalf("MaxStep 0 with a %d ppb step: bounds held everywhere; the test no longer exercises the step term", tc.step)
			}
		})
	}
}
