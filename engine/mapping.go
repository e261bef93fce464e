package engine

import "github.com/gclock/gclock/estimate"

// clamp limits v to [lo, hi] (lo <= hi).
func clamp(v, lo, hi int64) int64 {
	return min(max(v, lo), hi)
}

// sampleMapping is the bound one exchange gives on its own, before any
// drift is known: the source time at the local midpoint lies within half
// the RTT (plus granularity and the drift over the hold time), and it moves
// away at most at maxDrift and maxWander. It is valid for any estimator and
// never tighter than the exchange proves under those assumptions.
//
// With a known minimum one-way delay mu (Jezequel's 4.3) each direction is
// at least mu long, which takes mu off the half-width.
func sampleMapping(s estimate.Sample, maxDrift, maxWander float64, gran, mu int64) estimate.Mapping {
	x, y := s.Mid()
	hold := float64(s.LocSend - s.LocRecv)
	w := max(float64(s.RTT())/2-float64(mu), 0) + float64(gran) + maxDrift*hold + 1
	return estimate.Mapping{
		X0:      x,
		Y0:      y,
		W0:      estimate.CeilWidth(w),
		SkewErr: maxDrift,
		Wander:  maxWander,
		Valid:   true,
	}
}
