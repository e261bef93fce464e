// Package satmath is gclock's one home for int64 arithmetic that must not
// wrap: nanosecond timestamps near the ends of the int64 range, bounds that
// are "unbounded" as math.MaxInt64, and the exact 128-bit products the
// convex hull and the emulated clock compare and divide.
//
// Three families, pick by what the caller does with an overflow:
//
//   - Add, Sub, Neg, Abs, AbsDiff and FromFloat saturate: the result is
//     clamped to [math.MinInt64, math.MaxInt64], so an unbounded bound stays
//     unbounded and an error far out of range stays huge with the right sign.
//   - AddChecked and SubChecked report the overflow (ok false) for callers
//     that must reject the input instead of clamping it.
//   - Int128 holds exact products of two int64 (Mul) and their sums;
//     DivFloor and DivCeil divide back into int64 with the rounding a bound
//     needs (saturating), and MulAddFloorDiv is a*b+add split into quotient
//     and remainder of a positive divisor.
//
// For example, the evaluator's error against the truth:
//
//	err := satmath.Sub(t.Est, truth) // never wraps, even for a page at MaxInt64
//
// Everything is tested against math/big (table tests and fuzz tests).
package satmath
