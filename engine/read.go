package engine

import (
	"math"

	"github.com/gclock/gclock/internal/satmath"
)

// Reading global time: the bounds the sources give (trust.go, bounds.go),
// with the restored prior while no source is trusted (prior.go), widened
// by the uncertainty of the reading itself, and Read's never-decreasing
// value.

// Estimate returns global time at local without changing any state (Mono is
// what Read would return).
func (n *Node) Estimate(local int64) Time {
	t, _ := n.read(local)
	return t
}

// Read returns global time at local and advances the monotonic reading.
func (n *Node) Read(local int64) Time {
	t, _ := n.read(local)
	if !n.monoSet || local > n.monoLocal {
		n.monoLocal = local
	}
	n.monoSet, n.monoValue = true, t.Mono
	return t
}

func (n *Node) read(x int64) (Time, float64) {
	var t Time
	skew := 0.0
	switch {
	case n.IsReference():
		t = Time{Est: x, Earliest: x, Latest: x, Status: StatusSynced}
	default:
		t = Time{Est: x, Earliest: math.MinInt64, Latest: math.MaxInt64, Status: StatusUnsynced}
		lo, hi, newest, st, have := n.sourceBounds(x)
		if have {
			e, sk, _ := n.line(x)
			if g := n.selfGrid(x); g != x {
				if ge, gsk, ok := n.line(g); ok {
					e, sk = x+(ge-g), gsk
				}
			}
			skew = sk
			t = Time{Est: clamp(e, lo, hi), Earliest: lo, Latest: hi, Status: st}
			if st == StatusSynced && x-newest > int64(n.cfg.StaleAfter) {
				t.Status = StatusStale
			}
		}
		if t2, sk2, contra := n.withPrior(x, t, skew); !contra { // prior.go
			t, skew = t2, sk2
		}
		t.Earliest, t.Latest = n.widenRead(t.Earliest, t.Latest) // saturates when unbounded
	}
	if n.IsReference() {
		t.Earliest, t.Latest = n.widenRead(t.Earliest, t.Latest)
	}
	t.Mono = n.mono(x, t, skew)
	return t, skew
}

// widenRead adds the uncertainty of the local reading itself
// (ReadUncertainty, converted to the global scale at up to MaxDrift) to
// bounds computed for that reading: the truth is the ideal clock, the
// reading carries granularity and jitter.
func (n *Node) widenRead(lo, hi int64) (int64, int64) {
	u := int64(n.cfg.ReadUncertainty)
	if u == 0 {
		u = int64(n.cfg.Granularity)
	}
	if u <= 0 {
		return lo, hi
	}
	if !n.IsReference() {
		u += int64(math.Ceil(float64(u) * n.cfg.MaxDrift))
	}
	return satmath.Sub(lo, u), satmath.Add(hi, u)
}

// mono is Read's never-decreasing value: it runs at the estimated rate,
// slews toward Est by at most MaxSlewRate, and steps forward only to stay
// at or above Earliest.
func (n *Node) mono(x int64, t Time, skew float64) int64 {
	if !n.monoSet {
		return t.Est
	}
	v := n.monoValue
	if dx := x - n.monoLocal; dx > 0 {
		fdx := float64(dx)
		// The line's skew is only an estimate: early in a hull's life its
		// middle can be far beyond any crystal (0.3), and a monotonic
		// reading that ran at that rate would be hundreds of ms ahead
		// after a second, unable to come back. The model bounds it.
		skew = max(-n.cfg.MaxDrift, min(n.cfg.MaxDrift, skew))
		nat := n.monoValue + dx + int64(skew*fdx)
		limit := int64(n.cfg.MaxSlewRate * fdx)
		v = nat + clamp(t.Est-nat, -limit, limit)
	}
	if t.Status != StatusUnsynced && v < t.Earliest {
		v = t.Earliest
	}
	return max(v, n.monoValue)
}

// clamp limits v to [lo, hi] (lo <= hi).
func clamp(v, lo, hi int64) int64 {
	return min(max(v, lo), hi)
}
