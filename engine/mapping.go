package engine

import (
	"math"
	"time"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
)

// ComposeHorizon is how far from its anchor a mapping built by Compose is
// guaranteed to hold. Composition produces cubic and quartic growth terms
// that the quadratic Mapping form cannot carry; they are folded into the
// quadratic term for |x-X0| <= ComposeHorizon. A day is far beyond any
// staleness limit; beyond it MapInterval refuses to use the mapping.
const ComposeHorizon = int64(24 * time.Hour)

// maxWidth mirrors estimate.Mapping.At's cap: a half-width this large means
// "unbounded".
const maxWidth = math.MaxInt64 / 4

// Identity is the reference's mapping from its local clock to global time:
// the identity with zero width, anchored at x0.
func Identity(x0 int64) estimate.Mapping {
	return estimate.Mapping{X0: x0, Y0: x0, Valid: true}
}

// halfWidth evaluates m's bound half-width at x as a float (no rounding).
func halfWidth(m estimate.Mapping, x int64) float64 {
	fdx := math.Abs(float64(x - m.X0))
	return float64(m.W0) + m.SkewErr*fdx + m.Wander*fdx*fdx/2
}

// toWidth rounds a half-width up to whole nanoseconds, saturating.
func toWidth(w float64) int64 {
	if math.IsNaN(w) || w >= maxWidth {
		return maxWidth
	}
	if w <= 0 {
		return 0
	}
	return int64(math.Ceil(w))
}

// Reanchor returns m anchored at x0: the same line (up to 1 ns of rounding,
// added to the width) and a bound that is at least as wide as m's for every
// x. The half-width W0 + SkewErr|x-X0| + Wander(x-X0)^2/2 is convex in x,
// so with e = x0-X0 it is bounded by w(x0) + (SkewErr + Wander|e|)|x-x0| +
// Wander(x-x0)^2/2, exactly.
func Reanchor(m estimate.Mapping, x0 int64) estimate.Mapping {
	if !m.Valid {
		return m
	}
	est, _, _ := m.At(x0)
	e := math.Abs(float64(x0 - m.X0))
	w := halfWidth(m, x0)
	if m.W0 >= maxWidth || w >= maxWidth {
		return estimate.Mapping{X0: x0, Y0: est, Skew: m.Skew, W0: maxWidth, Valid: true}
	}
	return estimate.Mapping{
		X0:      x0,
		Y0:      est,
		Skew:    m.Skew,
		W0:      toWidth(w) + 1,
		SkewErr: m.SkewErr + m.Wander*e,
		Wander:  m.Wander,
		Valid:   true,
	}
}

// Compose returns outer∘inner anchored at x0: inner maps this node's clock
// x to its source's clock y, outer maps y to global time z (the source's own
// mapping, sent in MsgTimeDiff). This is Jezequel's step 1 of A3 for one
// source. The result's bound holds for |x-x0| <= ComposeHorizon, provided
// both inputs' bounds hold. It is invalid if either input is.
//
// With both anchored at the composition point (u = |x-x0|, k = 1+inner.Skew):
//
//	|y - y*| <= a(u) = Wf + (|k|+Ef)u + Vf u^2/2
//	|z - zest| <= |1+Sg| wf(u) + Wg + Eg a(u) + Vg a(u)^2/2
//
// and a(u)^2's cubic and quartic terms are bounded with u <= ComposeHorizon.
func Compose(outer, inner estimate.Mapping, x0 int64) estimate.Mapping {
	if !outer.Valid || !inner.Valid {
		return estimate.Mapping{}
	}
	f := Reanchor(inner, x0)
	g := Reanchor(outer, f.Y0)
	if f.W0 >= maxWidth || g.W0 >= maxWidth {
		return estimate.Mapping{X0: x0, Y0: g.Y0, Skew: f.Skew + g.Skew + f.Skew*g.Skew, W0: maxWidth, Valid: true}
	}
	k := math.Abs(1 + f.Skew)
	kg := math.Abs(1 + g.Skew)
	h := float64(ComposeHorizon)
	A := float64(f.W0)
	B := k + f.SkewErr
	C := f.Wander / 2
	a2lin := 2 * A * B
	a2quad := B*B + 2*A*C + 2*B*C*h + C*C*h*h
	w0 := kg*A + float64(g.W0) + g.SkewErr*A + g.Wander/2*A*A
	e := kg*f.SkewErr + g.SkewErr*B + g.Wander/2*a2lin
	q := kg*f.Wander/2 + g.SkewErr*C + g.Wander/2*a2quad
	return estimate.Mapping{
		X0:      x0,
		Y0:      g.Y0,
		Skew:    f.Skew + g.Skew + f.Skew*g.Skew,
		W0:      toWidth(w0) + 1,
		SkewErr: e,
		Wander:  2 * q,
		Valid:   true,
	}
}

// MapInterval maps a point estimate and an interval of source time through
// the source's mapping m to global time: the estimate through m's line, the
// interval's ends through m's lower and upper bounds. ok is false when m is
// invalid, when the interval lies beyond ComposeHorizon from m's anchor, or
// when m's bound grows so fast that its ends might not be monotonic (then
// nothing is claimed).
func MapInterval(m estimate.Mapping, est, lo, hi int64) (gest, glo, ghi int64, ok bool) {
	if !m.Valid || lo > hi {
		return 0, 0, 0, false
	}
	dlo := satmath.AbsDiff(lo, m.X0)
	dhi := satmath.AbsDiff(hi, m.X0)
	far := max(dlo, dhi)
	if far > ComposeHorizon {
		return 0, 0, 0, false
	}
	// The bounds est(y) -+ w(y) increase with y while w's slope stays
	// below 1+Skew; demand a wide margin.
	if m.SkewErr+m.Wander*float64(far) >= 0.5 || m.W0 >= maxWidth {
		return 0, 0, 0, false
	}
	gest, _, _ = m.At(est)
	_, glo, _ = m.At(lo)
	_, _, ghi = m.At(hi)
	return gest, glo, ghi, true
}

// Intersect returns the intersection of [alo, ahi] and [blo, bhi]; ok is
// false when it is empty (the two bounds contradict each other).
func Intersect(alo, ahi, blo, bhi int64) (lo, hi int64, ok bool) {
	lo, hi = max(alo, blo), min(ahi, bhi)
	return lo, hi, lo <= hi
}

// clamp limits v to [lo, hi] (lo <= hi).
func clamp(v, lo, hi int64) int64 {
	return min(max(v, lo), hi)
}

// sampleMapping is the bound one exchange gives on its own, before any
// drift is known: the source time at the local midpoint lies within half
// the RTT (plus granularity and the drift over the hold time), and it moves
// away at most at maxDrift and maxWander. It is valid for any estimator and
// never tighter than the exchange proves under those assumptions.
//
// With a known minimum one-way delay mu (Jezequel's 4.3) each direction is
// at least mu long, which takes mu off the half-width.
func sampleMapping(s estimate.Sample, maxDrift, maxWander float64, gran, mu int64) estimate.Mapping {
	x, y := s.Mid()
	hold := float64(s.LocSend - s.LocRecv)
	w := max(float64(s.RTT())/2-float64(mu), 0) + float64(gran) + maxDrift*hold + 1
	return estimate.Mapping{
		X0:      x,
		Y0:      y,
		W0:      toWidth(w),
		SkewErr: maxDrift,
		Wander:  maxWander,
		Valid:   true,
	}
}
