package estimate

import (
	"math"
	"time"

	"github.com/gclock/gclock/internal/satmath"
)

// Mapping is a linear map from the local clock x to the source clock y with
// guaranteed bounds, anchored at X0 so that no absolute timestamp ever goes
// into float64:
//
//	est(x) = Y0 + (x-X0) + Skew*(x-X0)
//	half-width(x) = W0 + SkewErr*|x-X0| + Wander*(x-X0)^2/2
//
// The truth lies in [est-halfwidth, est+halfwidth] as long as the clocks
// behave as the estimator's error model assumes. The zero Mapping is
// invalid (Valid false).
type Mapping struct {
	X0      int64   // anchor on the local clock, ns
	Y0      int64   // estimated source time at X0, ns
	Skew    float64 // estimated dy/dx - 1 (1e-6 = 1 ppm)
	W0      int64   // bound half-width at X0, ns
	SkewErr float64 // bound on |true skew - Skew|
	Wander  float64 // bound on |d(skew)/dx|, per ns, for the quadratic growth of the bound
	Valid   bool
}

// At evaluates the mapping at local time x: the estimate and its bounds.
func (m Mapping) At(x int64) (est, lo, hi int64) {
	dx := x - m.X0
	fdx := float64(dx)
	est = m.Y0 + dx + int64(math.Round(m.Skew*fdx))
	w := float64(m.W0) + m.SkewErr*math.Abs(fdx) + m.Wander*fdx*fdx/2
	iw := int64(math.Ceil(w))
	if w > float64(MaxWidth) {
		iw = MaxWidth
	}
	return est, est - iw, est + iw
}

// ComposeHorizon is how far from its anchor a mapping built by Compose is
// guaranteed to hold. Composition produces cubic and quartic growth terms
// that the quadratic Mapping form cannot carry; they are folded into the
// quadratic term for |x-X0| <= ComposeHorizon. A day is far beyond any
// staleness limit; beyond it MapInterval refuses to use the mapping.
const ComposeHorizon = int64(24 * time.Hour)

// MaxWidth is the largest half-width Mapping.At gives: a half-width this
// large means "unbounded". A quarter of the int64 range, so that an
// estimate within +-2^62 ns plus or minus it does not overflow.
const MaxWidth = math.MaxInt64 / 4

// Identity is the reference's mapping from its local clock to global time:
// the identity with zero width, anchored at x0.
func Identity(x0 int64) Mapping {
	return Mapping{X0: x0, Y0: x0, Valid: true}
}

// HalfWidth evaluates m's bound half-width at x as a float (no rounding).
func (m Mapping) HalfWidth(x int64) float64 {
	fdx := math.Abs(float64(x - m.X0))
	return float64(m.W0) + m.SkewErr*fdx + m.Wander*fdx*fdx/2
}

// CeilWidth rounds a half-width up to whole nanoseconds, saturating at
// MaxWidth.
func CeilWidth(w float64) int64 {
	if math.IsNaN(w) || w >= MaxWidth {
		return MaxWidth
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
func Reanchor(m Mapping, x0 int64) Mapping {
	if !m.Valid {
		return m
	}
	est, _, _ := m.At(x0)
	e := math.Abs(float64(x0 - m.X0))
	w := m.HalfWidth(x0)
	if m.W0 >= MaxWidth || w >= MaxWidth {
		return Mapping{X0: x0, Y0: est, Skew: m.Skew, W0: MaxWidth, Valid: true}
	}
	return Mapping{
		X0:      x0,
		Y0:      est,
		Skew:    m.Skew,
		W0:      CeilWidth(w) + 1,
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
func Compose(outer, inner Mapping, x0 int64) Mapping {
	if !outer.Valid || !inner.Valid {
		return Mapping{}
	}
	f := Reanchor(inner, x0)
	g := Reanchor(outer, f.Y0)
	if f.W0 >= MaxWidth || g.W0 >= MaxWidth {
		return Mapping{X0: x0, Y0: g.Y0, Skew: f.Skew + g.Skew + f.Skew*g.Skew, W0: MaxWidth, Valid: true}
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
	return Mapping{
		X0:      x0,
		Y0:      g.Y0,
		Skew:    f.Skew + g.Skew + f.Skew*g.Skew,
		W0:      CeilWidth(w0) + 1,
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
func MapInterval(m Mapping, est, lo, hi int64) (gest, glo, ghi int64, ok bool) {
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
	if m.SkewErr+m.Wander*float64(far) >= 0.5 || m.W0 >= MaxWidth {
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
