package lab

import (
	"math"
	"sort"
)

// Summary condenses signed errors (estimate minus truth, ns) into the
// figures `gclock sim --json` reports, under the same JSON names and with
// the same meaning as sim.Summary (mean, p50, p99 and max of |error|; bias
// and std of the signed error), plus error_p95_ns, which the peer
// table uses. Quantiles here are exact (nearest rank), not histogram bins.
type Summary struct {
	Evaluations uint64  `json:"evaluations"`   // readings summarised
	ErrorMeanNs float64 `json:"error_mean_ns"` // mean |error|
	ErrorBiasNs float64 `json:"error_bias_ns"` // mean signed error
	ErrorStdNs  float64 `json:"error_std_ns"`  // standard deviation of the signed error (n-1)
	ErrorP50Ns  int64   `json:"error_p50_ns"`  // median |error|
	ErrorP95Ns  int64   `json:"error_p95_ns"`  // 95th percentile of |error|
	ErrorP99Ns  int64   `json:"error_p99_ns"`  // 99th percentile of |error|
	ErrorMaxNs  int64   `json:"error_max_ns"`  // largest |error|
}

// Summarize computes the Summary of signed errors in ns. An empty input
// gives a zero Summary (Evaluations 0).
func Summarize(errs []int64) Summary {
	s := Summary{Evaluations: uint64(len(errs))}
	if len(errs) == 0 {
		return s
	}
	abs := make([]int64, len(errs))
	var sum, sumAbs float64
	for i, e := range errs {
		if e < 0 {
			if e == math.MinInt64 {
				e = -math.MaxInt64
			}
			abs[i] = -e
		} else {
			abs[i] = e
		}
		sum += float64(e)
		sumAbs += float64(abs[i])
	}
	n := float64(len(errs))
	mean := sum / n
	var ss float64
	for _, e := range errs {
		d := float64(e) - mean
		ss += d * d
	}
	sort.Slice(abs, func(a, b int) bool { return abs[a] < abs[b] })
	s.ErrorMeanNs = sumAbs / n
	s.ErrorBiasNs = mean
	if len(errs) > 1 {
		s.ErrorStdNs = math.Sqrt(ss / (n - 1))
	}
	s.ErrorP50Ns = quantileSorted(abs, 0.50)
	s.ErrorP95Ns = quantileSorted(abs, 0.95)
	s.ErrorP99Ns = quantileSorted(abs, 0.99)
	s.ErrorMaxNs = abs[len(abs)-1]
	return s
}

// quantileSorted returns the q-quantile of sorted values by the
// nearest-rank method (no interpolation, so every result is an observed
// value). q outside [0,1] is clamped; an empty slice gives 0.
func quantileSorted(s []int64, q float64) int64 {
	if len(s) == 0 {
		return 0
	}
	if !(q > 0) {
		return s[0]
	}
	if q >= 1 {
		return s[len(s)-1]
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	if i < 0 {
		i = 0
	}
	return s[i]
}

// quantiles sorts a copy of v and returns the quantiles qs.
func quantiles(v []int64, qs ...float64) []int64 {
	s := append([]int64(nil), v...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	out := make([]int64, len(qs))
	for i, q := range qs {
		out[i] = quantileSorted(s, q)
	}
	return out
}
