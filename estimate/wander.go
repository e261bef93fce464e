package estimate

import "math"

// The clocks' wander, measured (bodyWander). The body line's memory
// stretches with the fourth root of its rounds' noise (bodyNoise) on the
// assumption that the clocks wander as the lab's do (a random walk of the
// frequency, 0.005 ppm/sqrt(s), and a 0.1-ppm temperature cycle): the
// best memory goes as (r / q)^(1/4), q the wander's intensity, so a
// steadier clock wants a longer memory and a restless one a shorter. The
// rounds' own locations (the body's track keeps the newest wanderRounds,
// not the window's; bodyCurve reads its newest bodyCurveRounds) show q:
// where a round's location
// is interpolated from the two rounds k before and k after it, the
// residual's variance is its noise (the three rounds' variances) plus
// q h1^2 h2^2 / (3 (h1 + h2)) (h1 and h2 the two gaps, s: the integrated
// random walk's), which grows as the cube of the span while the noise stays.
// The residuals of lags 1, 2, 4, ... rounds each give an estimate of q,
// weighed by their variance, and the whole by a prior at the lab's wander
// (wanderRef, as sure as one estimate of 100% error): early in a daemon's
// life and on short runs the lab's wander holds, and over minutes the
// clocks' own takes over. A frequency that moves with the temperature
// counts as wander too (its curvature adds to the residuals), as it should:
// it, too, makes an old round a worse guide.
const (
	// wanderRounds: the rounds' locations the wander is measured on.
	wanderRounds = 192
	// wanderRef: the wander's intensity (ns^2/s^3, the residuals' way) at
	// which the body's memory stretches by the noise alone (bodyNoise):
	// what the residuals measured on the simulator's lab-like clocks.
	wanderRef = 60.0
	// wanderFloor: the least wander, times wanderRef, the estimate takes
	// (and weighs the residuals by).
	wanderFloor = 1e-3
	// wanderMinLagTriples: a lag with fewer residuals is not used.
	wanderMinLagTriples = 4
)

// wanderQ estimates the wander's intensity q (ns^2/s^3) from the kept
// rounds' locations (x in ns, relative; y and variances in ns, ns^2),
// combined with the prior wanderRef; it returns the prior when the
// rounds say nothing.
func wanderQ(rounds []roundLoc) float64 {
	// The residuals' variances depend on q itself: weighed first at the
	// prior, then at the estimate (twice), never below wanderFloor of it.
	q := wanderRef
	for range 3 {
		q = wanderFit(rounds, max(q, wanderRef*wanderFloor))
	}
	return max(q, wanderRef*wanderFloor)
}

// wanderFit is one pass of wanderQ, the residuals weighed as if the
// wander were qw.
func wanderFit(rounds []roundLoc, qw float64) float64 {
	prior := wanderRef
	// Inverse-variance weights, the prior's variance its square.
	sw, swq := 1/(prior*prior), 1/prior
	n := len(rounds)
	for k := 1; 2*k < n; k *= 2 {
		var se, sg, sv float64
		m := 0
		for j := k; j+k < n; j++ {
			pi, pj, pl := rounds[j-k], rounds[j], rounds[j+k]
			h1, h2 := (pj.x-pi.x)/1e9, (pl.x-pj.x)/1e9
			if !(h1 > 0) || !(h2 > 0) {
				continue
			}
			a, b := h2/(h1+h2), h1/(h1+h2)
			e := pj.y - (a*pi.y + b*pl.y)
			nv := pj.v + a*a*pi.v + b*b*pl.v
			g := h1 * h1 * h2 * h2 / (3 * (h1 + h2))
			se += e*e - nv
			sg += g
			// A residual's square scatters by about sqrt(2) of its
			// variance; overlapping triples share rounds, so twice that.
			sv += 4 * (nv + g*qw) * (nv + g*qw)
			m++
		}
		if m < wanderMinLagTriples || !(sg > 0) {
			continue
		}
		q, vq := se/sg, sv/(sg*sg)
		if !(vq > 0) || math.IsNaN(q) || math.IsInf(q, 0) {
			continue
		}
		sw += 1 / vq
		swq += q / vq
	}
	return swq / sw
}
