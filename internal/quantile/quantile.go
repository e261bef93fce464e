// Package quantile is the exact empirical quantile of a sample of int64s
// (nanoseconds, mostly): the one definition the evaluator (eval), the link
// models (netmodel), the lab's switch and its validation (lab/netlab) and
// the reports share, so that a median means the same number everywhere.
package quantile

import (
	"slices"

	"github.com/gclock/gclock/internal/satmath"
	"gonum.org/v1/gonum/stat"
)

// Of returns the empirical quantiles qs (each in [0, 1], clamped) of v
// (gonum's stat.Quantile, stat.Empirical: the smallest value whose
// cumulative share reaches q), each an element of v; v is not changed. An
// empty v gives zeros.
func Of(v []int64, qs ...float64) []int64 {
	out := make([]int64, len(qs))
	if len(v) == 0 {
		return out
	}
	s := make([]float64, len(v))
	lo, hi := v[0], v[0]
	for i, x := range v {
		s[i] = float64(x)
		lo, hi = min(lo, x), max(hi, x)
	}
	slices.Sort(s)
	for i, q := range qs {
		q = min(max(q, 0), 1)
		// Values beyond 2^53 round as float64s: keep within the sample.
		out[i] = min(max(satmath.FromFloat(stat.Quantile(q, stat.Empirical, s, nil)), lo), hi)
	}
	return out
}
