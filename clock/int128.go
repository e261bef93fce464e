package clock

// fracUnit is the fixed-point scale of skews and of the sub-nanosecond part
// of local time: 1e-18, so that a drift in ppm (1e-6) is an exact integer
// number of units (1 ppm = 1e12 units) and every product dt*skew is computed
// exactly in 128 bits.
const fracUnit = 1_000_000_000_000_000_000

// floorDiv returns floor(a/b) for b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
