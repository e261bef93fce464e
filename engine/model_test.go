package engine

import (
	"math"
	"testing"

	"github.com/gclock/gclock/estimate"
)

// HullSpan minimises (delta + s T + w T^2/2)(1 + 2p/T) + s p over T >= 1.5 p:
// checked against a fine scan, with steps alone (where the minimum is
// sqrt(2 delta p / s)), wander alone, both, and neither (0: whole window).
func TestHullSpanMinimisesTheBound(t *testing.T) {
	bound := func(d, p, w, s, T float64) float64 { return (d+s*T+w*T*T/2)*(1+2*p/T) + s*p }
	for _, tc := range []struct {
		name         string
		delta, p     int64
		wander, step float64
	}{
		{"steps", 100_000, 5_500_000_000, 0, 2e-6},
		{"wander", 100_000, 5_500_000_000, 1e-17, 0},
		{"both", 10_000, 1_000_000_000, 1e-17, 2e-6},
		{"tiny step", 100_000, 2_000_000_000, 0, 1e-9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := HullSpan(tc.delta, tc.p, tc.wander, tc.step)
			d, p := float64(tc.delta), float64(tc.p)
			best := math.Inf(1)
			for T := minSpanPeriods * p; T < 1e16; T *= 1.001 {
				best = math.Min(best, bound(d, p, tc.wander, tc.step, T))
			}
			if b := bound(d, p, tc.wander, tc.step, float64(got)); b > best*1.01 {
				t.Errorf("HullSpan = %d ns: bound %.0f, the scan's minimum %.0f", got, b, best)
			}
		})
	}
	if got := HullSpan(100_000, 5_500_000_000, 0, 2e-6); math.Abs(float64(got)-math.Sqrt(2*100_000*5.5e9/2e-6))/float64(got) > 0.05 {
		t.Errorf("steps alone: HullSpan %d, want about sqrt(2 delta p / s) = %.0f", got, math.Sqrt(2*100_000*5.5e9/2e-6))
	}
	if got := HullSpan(100_000, 5_500_000_000, 0, 0); got != 0 {
		t.Errorf("no wander, no steps: HullSpan %d, want 0 (the whole window)", got)
	}
}

// A mapping a hull gives early (a wide skew range whose middle lies beyond
// any crystal) is sent with its skew clamped into the wire's limit and its
// SkewErr widened by the shift, so the child's bounds still cover the
// sender's, and InvalidFields lets it through.
func TestSendableMappingCoversTheOriginal(t *testing.T) {
	orig := estimate.Mapping{X0: 5e15, Y0: 5e15 + 123, Skew: 0.3, W0: 1e6, SkewErr: 0.31, Valid: true}
	m := sendable(orig)
	if f, v := InvalidFields(&Message{Mapping: m}, MsgTimeDiff); f != "" {
		t.Fatalf("sendable mapping still refused: %s = %v", f, v)
	}
	for _, dx := range []int64{-60e9, -1e9, 0, 1e9, 60e9} {
		x := orig.X0 + dx
		_, olo, ohi := orig.At(x)
		_, lo, hi := m.At(x)
		if lo > olo || hi < ohi {
			t.Errorf("at X0%+d: sendable bounds [%d, %d] do not cover the original [%d, %d]", dx, lo, hi, olo, ohi)
		}
	}
	if got := sendable(estimate.Mapping{X0: 1, Y0: 1, Skew: 0.3, SkewErr: 0.9, Valid: true}); got.Valid {
		t.Errorf("a mapping whose SkewErr would pass the wire's limit is sent as valid: %+v", got)
	}
	if in := (estimate.Mapping{X0: 1, Y0: 2, Skew: 1e-5, SkewErr: 1e-6, W0: 10, Valid: true}); sendable(in) != in {
		t.Errorf("an ordinary mapping was changed: %+v", sendable(in))
	}
}
