package satmath

import "math"

// Add returns a+b saturated to the int64 range.
func Add(a, b int64) int64 {
	s := a + b
	if (s > a) != (b > 0) { // overflow: the sum moved the wrong way
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}

// Sub returns a-b saturated to the int64 range.
func Sub(a, b int64) int64 {
	d := a - b
	if (a >= 0) != (b >= 0) && (d >= 0) != (a >= 0) { // overflow
		if a >= 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return d
}

// Neg returns -a saturated to the int64 range (-MinInt64 is MaxInt64).
func Neg(a int64) int64 {
	if a == math.MinInt64 {
		return math.MaxInt64
	}
	return -a
}

// Abs returns |a| saturated to the int64 range (|MinInt64| is MaxInt64).
func Abs(a int64) int64 {
	if a == math.MinInt64 {
		return math.MaxInt64
	}
	return max(a, -a)
}

// AbsDiff returns |a-b|, saturated at math.MaxInt64.
func AbsDiff(a, b int64) int64 {
	if a >= b {
		d := a - b
		if d < 0 {
			return math.MaxInt64
		}
		return d
	}
	d := b - a
	if d < 0 {
		return math.MaxInt64
	}
	return d
}

// AddChecked returns a+b, or ok false (and 0) if the sum overflows int64.
func AddChecked(a, b int64) (sum int64, ok bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// SubChecked returns a-b, or ok false (and 0) if the difference overflows
// int64.
func SubChecked(a, b int64) (diff int64, ok bool) {
	d := a - b
	if (b > 0 && d > a) || (b < 0 && d < a) {
		return 0, false
	}
	return d, true
}

// FromFloat converts f to int64, truncating toward zero and saturating at
// the ends of the int64 range; NaN gives 0.
func FromFloat(f float64) int64 {
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	case f != f:
		return 0
	}
	return int64(f)
}
