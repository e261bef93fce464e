package estimate

import (
	"math"
	"math/bits"
)

// i128 is a signed 128-bit integer (two's complement), enough for the
// products of relative times and offsets the hull compares exactly.
type i128 struct {
	hi int64
	lo uint64
}

// mul128 returns a*b exactly.
func mul128(a, b int64) i128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	h := int64(hi) - ((a >> 63) & b) - ((b >> 63) & a)
	return i128{h, lo}
}

// from64 widens a.
func from64(a int64) i128 { return i128{a >> 63, uint64(a)} }

// add returns x+y (wrapping only beyond 2^127, which our ranges never reach).
func (x i128) add(y i128) i128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return i128{x.hi + y.hi + int64(c), lo}
}

// sub returns x-y.
func (x i128) sub(y i128) i128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	return i128{x.hi - y.hi - int64(b), lo}
}

// cmp returns -1, 0 or 1 as x <, ==, > y.
func (x i128) cmp(y i128) int {
	switch {
	case x.hi < y.hi:
		return -1
	case x.hi > y.hi:
		return 1
	case x.lo < y.lo:
		return -1
	case x.lo > y.lo:
		return 1
	}
	return 0
}

func (x i128) neg() i128 { return i128{}.sub(x) }

// sign returns -1, 0 or 1.
func (x i128) sign() int {
	if x.hi < 0 {
		return -1
	}
	if x.hi == 0 && x.lo == 0 {
		return 0
	}
	return 1
}

// divFloor returns floor(x/d) for d > 0, saturated to the int64 range.
func (x i128) divFloor(d int64) int64 {
	if x.hi < 0 {
		// floor(-a/d) = -ceil(a/d)
		return satNeg(x.neg().divCeilPos(d))
	}
	q, ok := x.divPos(d, false)
	if !ok {
		return math.MaxInt64
	}
	return q
}

// divCeil returns ceil(x/d) for d > 0, saturated to the int64 range.
func (x i128) divCeil(d int64) int64 {
	if x.hi < 0 {
		q, ok := x.neg().divPos(d, false)
		if !ok {
			return math.MinInt64
		}
		return -q
	}
	return x.divCeilPos(d)
}

func (x i128) divCeilPos(d int64) int64 {
	q, ok := x.divPos(d, true)
	if !ok {
		return math.MaxInt64
	}
	return q
}

// satNeg negates a non-negative saturated quotient.
func satNeg(q int64) int64 {
	if q == math.MaxInt64 {
		return math.MinInt64
	}
	return -q
}

// divPos divides a non-negative x by d > 0, rounding down or up; ok is false
// when the quotient does not fit in an int64.
func (x i128) divPos(d int64, ceil bool) (int64, bool) {
	ud := uint64(d)
	if uint64(x.hi) >= ud {
		return 0, false
	}
	q, r := bits.Div64(uint64(x.hi), x.lo, ud)
	if ceil && r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}

// float returns x as a float64 (rounded).
func (x i128) float() float64 {
	if x.hi < 0 {
		return -x.neg().float()
	}
	return float64(uint64(x.hi))*(1<<64) + float64(x.lo)
}

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
	return mul128(a.p, b.q).cmp(mul128(b.p, a.q))
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
