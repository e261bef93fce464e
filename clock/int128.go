package clock

import (
	"math"
	"math/bits"
)

// fracUnit is the fixed-point scale of skews and of the sub-nanosecond part
// of local time: 1e-18, so that a drift in ppm (1e-6) is an exact integer
// number of units (1 ppm = 1e12 units) and every product dt*skew is computed
// exactly in 128 bits.
const fracUnit = 1_000_000_000_000_000_000

// mulAddFloorDiv returns q, r with dt*k + add = q*fracUnit + r and
// 0 <= r < fracUnit, computed exactly with 128-bit products. It requires
// |k| <= maxSkewUnits and 0 <= add < fracUnit, so that q fits in an int64.
func mulAddFloorDiv(dt, k, add int64) (q, r int64) {
	neg := (dt < 0) != (k < 0)
	ph, pl := bits.Mul64(absU(dt), absU(k))
	if !neg || (ph == 0 && pl == 0) {
		var c uint64
		pl, c = bits.Add64(pl, uint64(add), 0)
		ph += c
		uq, ur := bits.Div64(ph, pl, fracUnit)
		return int64(uq), int64(ur)
	}
	// value = add - P with P > 0.
	if ph == 0 && pl <= uint64(add) {
		return 0, add - int64(pl)
	}
	var b uint64
	pl, b = bits.Sub64(pl, uint64(add), 0)
	ph -= b
	uq, ur := bits.Div64(ph, pl, fracUnit)
	if ur == 0 {
		return -int64(uq), 0
	}
	return -int64(uq) - 1, fracUnit - int64(ur)
}

// absU returns |x| as a uint64 (exact for math.MinInt64 too).
func absU(x int64) uint64 {
	if x < 0 {
		return uint64(-(x + 1)) + 1
	}
	return uint64(x)
}

// addSat returns a+b saturated to the int64 range.
func addSat(a, b int64) int64 {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// floorDiv returns floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
