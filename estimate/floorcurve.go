package estimate

import (
	"cmp"
	"math"
	"slices"
)

// The floor line's memory and the wander (floorCurve). The floor line
// (refineCenter) remembers HullConfig.CenterMemory rounds, and like the
// body line (bodyCurve) it lags a frequency that moves: by about the
// frequency's rate of change times the memory squared. On a sharp floor a
// round's own fastest exchanges place the line within tens of ns, so the
// rounds themselves can say which memory follows the clocks best. Each
// round's own floor location is kept (the mean of its k fastest
// exchanges each way, matched), and for each of floorCurveSteps+1
// memories, from half a gap between rounds (or 1/32 of the default) to
// the default, a line through the locations before each of the newest
// floorPredictRounds rounds predicts that round's location. The memory
// whose squared misses beat the default's by the most, if by more than
// floorPredictT standard errors of their paired difference (so that the
// choice among a dozen memories does not chase noise), replaces the
// default; a clock that does not wander keeps the default. A parabola's
// curvature (as bodyCurve) did less: a random walk of the frequency is no
// parabola. In the simulator's link matrix run for 20 minutes with the
// lab's wander (gclock sim matrix --duration 20m --seeds 1-5) the mean
// per-host median went from 0.178 to 0.165 us on pareto, 0.180 to 0.165
// on exponential, 0.159 to 0.147 on one floor with different tails, 0.269
// to 0.260 on uniform; without wander it was unchanged; on the lab's kept
// 60-s runs within a few percent, mostly better (docs/estimators.md, "The
// floor line's memory").
const (
	// floorCurveSteps: the memories tried, geometrically spaced.
	floorCurveSteps = 12
	// floorCurveMinPoints: the fewest exchanges per side of a round whose
	// location is kept.
	floorCurveMinPoints = 12
	// floorPredictRounds: the newest rounds each memory predicts;
	// floorPredictMin: rounds kept before the choice is made. At 8 the
	// choice came in a 70-s run's first rounds (the ramp's, 1-4 s apart),
	// on too little: the simulator's bursty lab-like scenario
	// (TestCenterLabLikeBurstyHostMedians, 40 seeds) went from 256 to 283
	// ns, against 264 at 12; over 20 minutes with its bursts the three
	// were within 1%, and on the wandering floors 12 kept about two thirds
	// of 8's gain (pareto 176 -> 162 ns against 157; 16 kept a third).
	floorPredictRounds = 12
	floorPredictMin    = 12
	// floorPredictT: how many standard errors of the paired difference
	// the chosen memory's squared misses must beat the default's by.
	floorPredictT = 1.0
)

// floorCurveOn: the floor line's memory follows the wander (tests turn it
// off to compare with the default memory).
var floorCurveOn = true

// floorState is a hull's record of the rounds' own floor locations and
// the floor line's memory they chose.
type floorState struct{ roundTrack }

// fastMeet is where the means of the k fastest of each direction's delays
// beyond a line meet, as an offset from that line (k as the floor line's
// own points, 3-15); its variance is not estimated (0: curveMemory weighs
// the rounds by their misses). It sorts up and low.
func fastMeet(up, low []wv) (d, v float64, ok bool) {
	k := max(3, min(centerPoints, min(len(up), len(low))/centerShare))
	meanK := func(q []wv) float64 {
		slices.SortFunc(q, func(a, b wv) int { return cmp.Compare(a.v, b.v) })
		var sum float64
		for _, e := range q[:k] {
			sum += e.v
		}
		return sum / float64(k)
	}
	return (meanK(up) - meanK(low)) / 2, 0, true
}

// curveMemory is the floor line's memory given the kept rounds'
// locations: tau (the default) where no shorter memory predicted the
// newest rounds clearly better.
func (f *floorState) curveMemory(h *Hull, tau float64) float64 {
	f.memory = 0
	if tau <= 0 {
		return tau
	}
	var ts, ys []float64
	for _, p := range f.rounds {
		if p.x >= float64(h.minX) {
			ts, ys = append(ts, p.x/1e9), append(ys, p.y)
		}
	}
	n := len(ts)
	if n < floorPredictMin {
		return tau
	}
	lo := max(h.roundGap/2, tau/32)
	if !(lo < tau*bodyCurveMinCut) {
		return tau
	}
	var memories [floorCurveSteps + 1]float64
	for i := range memories {
		memories[i] = lo * math.Pow(tau/lo, float64(i)/floorCurveSteps)
	}
	// miss[j][k]: the squared miss of memory k on the j-th predicted round.
	var miss [][floorCurveSteps + 1]float64
	rt, w := make([]float64, n), make([]float64, n)
	for j := max(4, n-floorPredictRounds); j < n; j++ {
		var row [floorCurveSteps + 1]float64
		for k, T := range memories {
			for i := range j {
				rt[i] = ts[i] - ts[j]
				w[i] = math.Exp(rt[i] * 1e9 / T)
			}
			g, ok := lineGain(rt[:j], w[:j])
			if !ok {
				return tau
			}
			e := ys[j]
			for i := range j {
				e -= g[i] * ys[i]
			}
			row[k] = e * e
		}
		miss = append(miss, row)
	}
	// The memory whose misses beat the default's by the most, if by more
	// than floorPredictT standard errors of the paired difference.
	def := floorCurveSteps
	best, bestGain := def, 0.0
	m := float64(len(miss))
	for k := range def {
		var s, s2 float64
		for _, row := range miss {
			d := row[def] - row[k]
			s += d
			s2 += d * d
		}
		mean := s / m
		se := math.Sqrt(max(0, s2/m-mean*mean) / (m - 1))
		if mean > floorPredictT*se && mean > bestGain {
			best, bestGain = k, mean
		}
	}
	if best == def {
		return tau
	}
	f.memory = memories[best]
	return f.memory
}

// lineGain is the weighted least-squares line's value at t = 0 as a
// linear function of the ys: the gains g with yhat(0) = sum g_i y_i.
func lineGain(ts, w []float64) ([]float64, bool) {
	var sw, st, stt float64
	for i, t := range ts {
		sw += w[i]
		st += w[i] * t
		stt += w[i] * t * t
	}
	det := sw*stt - st*st
	if !(det > 0) {
		return nil, false
	}
	// yhat(0) = intercept = (stt*sum(w y) - st*sum(w t y)) / det.
	g := make([]float64, len(ts))
	for i, t := range ts {
		g[i] = w[i] * (stt - st*t) / det
	}
	return g, true
}
