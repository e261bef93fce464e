package estimate

import (
	"math"

	"github.com/gclock/gclock/internal/satmath"
)

// rat is a rational p/q with q > 0; q == 0 encodes an infinite value with
// the sign of p.
type rat struct{ p, q int64 }

// cmpRat compares a and b exactly (infinities included).
func cmpRat(a, b rat) int {
	if a.q == 0 || b.q == 0 {
		av, bv := 0, 0
		if a.q == 0 {
			av = sgn(a.p)
		}
		if b.q == 0 {
			bv = sgn(b.p)
		}
		switch {
		case av < bv:
			return -1
		case av > bv:
			return 1
		case av != 0:
			return 0
		}
	}
	return satmath.Mul(a.p, b.q).Cmp(satmath.Mul(b.p, a.q))
}

func sgn(v int64) int {
	switch {
	case v < 0:
		return -1
	case v > 0:
		return 1
	}
	return 0
}

// float returns r as a float64.
func (r rat) float() float64 {
	if r.q == 0 {
		return math.Inf(sgn(r.p))
	}
	return float64(r.p) / float64(r.q)
}
