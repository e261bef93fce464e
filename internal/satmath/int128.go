package satmath

import (
	"math"
	"math/bits"
)

// Int128 is a signed 128-bit integer (two's complement): exact products of
// two int64 and sums of a few of them. Its zero value is 0. Add and Sub
// wrap only beyond ±2^127, which a sum of two products (each at most 2^126
// in magnitude) and an int64 never reaches.
type Int128 struct {
	hi int64
	lo uint64
}

// Mul returns a*b exactly.
func Mul(a, b int64) Int128 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	h := int64(hi) - ((a >> 63) & b) - ((b >> 63) & a)
	return Int128{h, lo}
}

// From64 widens a.
func From64(a int64) Int128 { return Int128{a >> 63, uint64(a)} }

// Add returns x+y.
func (x Int128) Add(y Int128) Int128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	return Int128{x.hi + y.hi + int64(c), lo}
}

// Sub returns x-y.
func (x Int128) Sub(y Int128) Int128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	return Int128{x.hi - y.hi - int64(b), lo}
}

// Neg returns -x.
func (x Int128) Neg() Int128 { return Int128{}.Sub(x) }

// Cmp returns -1, 0 or 1 as x <, ==, > y.
func (x Int128) Cmp(y Int128) int {
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

// Sign returns -1, 0 or 1.
func (x Int128) Sign() int {
	if x.hi < 0 {
		return -1
	}
	if x.hi == 0 && x.lo == 0 {
		return 0
	}
	return 1
}

// DivFloor returns floor(x/d) for d > 0, saturated to the int64 range.
func (x Int128) DivFloor(d int64) int64 {
	if x.hi < 0 {
		// floor(-a/d) = -ceil(a/d)
		q, ok := x.Neg().divPos(d, true)
		if !ok {
			return math.MinInt64
		}
		return -q
	}
	q, ok := x.divPos(d, false)
	if !ok {
		return math.MaxInt64
	}
	return q
}

// DivCeil returns ceil(x/d) for d > 0, saturated to the int64 range.
func (x Int128) DivCeil(d int64) int64 {
	if x.hi < 0 {
		q, ok := x.Neg().divPos(d, false)
		if !ok {
			return math.MinInt64
		}
		return -q
	}
	return x.divCeilPos(d)
}

func (x Int128) divCeilPos(d int64) int64 {
	q, ok := x.divPos(d, true)
	if !ok {
		return math.MaxInt64
	}
	return q
}

// divPos divides a non-negative x by d > 0, rounding down or up; ok is false
// when the quotient does not fit in an int64.
func (x Int128) divPos(d int64, ceil bool) (int64, bool) {
	ud := uint64(d)
	if uint64(x.hi) >= ud {
		return 0, false
	}
	q, r := bits.Div64(uint64(x.hi), x.lo, ud)
	if ceil && r != 0 {
		if q >= math.MaxInt64 { // q+1 would not fit (nor, at 2^64-1, wrap to 0)
			return 0, false
		}
		q++
	}
	if q > math.MaxInt64 {
		return 0, false
	}
	return int64(q), true
}

// Float returns x as a float64 (within 1 ulp: the two halves are rounded
// separately).
func (x Int128) Float() float64 {
	if x.hi < 0 {
		return -x.Neg().Float()
	}
	return float64(uint64(x.hi))*(1<<64) + float64(x.lo)
}

// MulAddFloorDiv returns q, r with a*b + add = q*d + r and 0 <= r < d,
// computed exactly in 128 bits. It requires d > 0, 0 <= add < d and a
// quotient that fits in an int64 (|a*b| < 2^63*d is enough); the emulated
// clock's skew products meet these by construction. Outside them it panics
// (integer divide overflow) or returns a wrapped q.
func MulAddFloorDiv(a, b, add, d int64) (q, r int64) {
	neg := (a < 0) != (b < 0)
	ph, pl := bits.Mul64(absU(a), absU(b))
	ud := uint64(d)
	if !neg || (ph == 0 && pl == 0) {
		var c uint64
		pl, c = bits.Add64(pl, uint64(add), 0)
		ph += c
		uq, ur := bits.Div64(ph, pl, ud)
		return int64(uq), int64(ur)
	}
	// value = add - P with P > 0.
	if ph == 0 && pl <= uint64(add) {
		return 0, add - int64(pl)
	}
	var bw uint64
	pl, bw = bits.Sub64(pl, uint64(add), 0)
	ph -= bw
	uq, ur := bits.Div64(ph, pl, ud)
	if ur == 0 {
		return -int64(uq), 0
	}
	return -int64(uq) - 1, d - int64(ur)
}

// absU returns |x| as a uint64 (exact for math.MinInt64 too).
func absU(x int64) uint64 {
	if x < 0 {
		return uint64(-(x + 1)) + 1
	}
	return uint64(x)
}
