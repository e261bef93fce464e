package limit

import (
	"math"
	"slices"

	"github.com/gclock/gclock/estimate"
)

// The oracle: what the exchanges allow to an estimator that knows the
// clocks' model. The textbook estimators' best, chosen per node with
// hindsight, is an optimistic reference: it picks, among ten correlated
// estimators, the one whose noise happened to be smallest on the very
// reads it is judged on. The oracle is the other reference: the Kalman
// filter of the rounds (state: offset and frequency difference) with the
// process noise of the clocks' true random walk of the frequency, which
// only the evaluator knows (the simulator's scenario; 0 on the lab's raw
// clocks, which share one kernel clock). For a random walk of the
// frequency seen through white measurement noise it is the least-squares
// optimum among causal estimators of each round's location, so no
// estimator that reads only these exchanges and has to learn the wander is
// promised to do better on average.
//
// Each round is one measurement: the M-estimate of the location of its
// exchanges' midpoint offsets (detrended by the filter's frequency), with
// the Huber constant and the set of exchanges (all, or the faster half by
// round trip) of least estimated variance over the rounds so far (the
// choices the body line of package estimate weighs); its variance is the
// M-estimator's sandwich variance.

// oracleHubers are the Huber constants of a round's location (robust
// standard deviations): nearly the mean (the first, on all the exchanges,
// is the yardstick of the others' variances), between, nearly the median.
var oracleHubers = []float64{1.5, 0.6, 0.25}

const (
	// oracleSkip: midpoints beyond this many robust standard deviations
	// count nothing.
	oracleSkip = 3.5
	// oracleFreqVar is the prior variance of the frequency difference
	// before the first round: (100 ppm)^2, beyond any crystal pair.
	oracleFreqVar = 1e-8
	// oracleMinPoints: rounds with fewer exchanges are skipped.
	oracleMinPoints = 8
)

// oracle is the Kalman filter: offset th (ns, y - x) and frequency
// difference f at local time x (ns relative to origin), covariance p.
type oracle struct {
	q float64 // frequency random walk, (ns/ns)^2 per second
	// choice sums, per location estimator (roundLocation's order), the
	// rounds' variance relative to the first's: the estimator is chosen by
	// the link's shape over every round so far, not by one round's noisy
	// variances (picking the least of six noisy estimates each round cost
	// a quarter of the error on a plain bell).
	choice []float64
	init   bool
	origin int64
	x      float64
	th, f  float64
	p      [2][2]float64
}

// add takes one round.
func (o *oracle) add(round []estimate.Sample) {
	if len(round) < oracleMinPoints {
		return
	}
	xc, locs, vars := roundLocation(round, o.f, o.init)
	if len(o.choice) < len(vars) {
		o.choice = make([]float64, len(vars))
	}
	best := -1
	for i, v := range vars {
		if v > 0 && vars[0] > 0 && !math.IsInf(v, 0) {
			o.choice[i] += v / vars[0]
		} else {
			o.choice[i] = math.Inf(1)
		}
		if !math.IsInf(o.choice[i], 0) && (best < 0 || o.choice[i] < o.choice[best]) {
			best = i
		}
	}
	if best < 0 {
		return
	}
	z, r := locs[best], vars[best]
	if !o.init {
		o.init, o.origin = true, xc
		o.x, o.th = 0, z
		o.p = [2][2]float64{{r, 0}, {0, oracleFreqVar}}
		return
	}
	x := float64(xc - o.origin)
	dt := x - o.x
	ds := dt / 1e9
	// Predict: offset grows by f dt; the random walk of the frequency
	// adds q ds to its variance and its integral to the offset's.
	th := o.th + o.f*dt
	p00 := o.p[0][0] + 2*dt*o.p[0][1] + dt*dt*o.p[1][1] + o.q*ds*ds*ds/3*1e18
	p01 := o.p[0][1] + dt*o.p[1][1] + o.q*ds*ds/2*1e9
	p11 := o.p[1][1] + o.q*ds
	// Update with the round's location.
	s := p00 + r
	k0, k1 := p00/s, p01/s
	nu := z - th
	o.th, o.f = th+k0*nu, o.f+k1*nu
	o.p = [2][2]float64{{(1 - k0) * p00, (1 - k0) * p01}, {(1 - k0) * p01, p11 - k1*p01}}
	o.x = x
}

// line is the filter's line as the textbook estimators give theirs:
// offset at local time x0 and slope.
func (o *oracle) line(x0 int64) (a, b float64, ok bool) {
	if !o.init {
		return 0, 0, false
	}
	return o.th + o.f*(float64(x0-o.origin)-o.x), o.f, true
}

// roundLocation is a round's measurement: its exchanges' local midpoints'
// mean xc, and the locations of their midpoint offsets at xc (detrended by
// frequency f, or by the round's own least-squares slope when haveF is
// false) with their variances, by every Huber constant on all the
// exchanges and then on the faster half by round trip (+Inf: none).
func roundLocation(round []estimate.Sample, f float64, haveF bool) (xc int64, locs, vars []float64) {
	x0 := round[0].LocSend
	xs, ys := make([]float64, len(round)), make([]float64, len(round))
	rtt := make([]float64, len(round))
	for i, s := range round {
		xs[i], ys[i] = mid(s, x0)
		rtt[i] = float64(s.RTT())
	}
	if !haveF {
		_, f, _ = lineFit(xs, ys)
	}
	var mx float64
	for _, x := range xs {
		mx += x
	}
	mx /= float64(len(xs))
	for i := range ys {
		ys[i] -= f * (xs[i] - mx)
	}
	var half []float64
	if c := slices.Clone(rtt); len(c) >= 2*oracleMinPoints {
		slices.Sort(c)
		lim := c[len(c)/2]
		for i, t := range rtt {
			if t <= lim {
				half = append(half, ys[i])
			}
		}
	}
	for _, set := range [][]float64{ys, half} {
		for _, hk := range oracleHubers {
			loc, lv, good := huberLocation(set, hk)
			if !good {
				lv = math.Inf(1)
			}
			locs, vars = append(locs, loc), append(vars, lv)
		}
	}
	return x0 + int64(math.Round(mx)), locs, vars
}

// huberLocation is Huber's M-estimate of the location of ys with constant
// hk robust standard deviations (values beyond oracleSkip of them count
// nothing) and its sandwich variance sum(psi^2) / sum(psi')^2.
func huberLocation(ys []float64, hk float64) (loc, v float64, ok bool) {
	if len(ys) < oracleMinPoints {
		return 0, 0, false
	}
	c := slices.Clone(ys)
	slices.Sort(c)
	loc = c[len(c)/2]
	for i, y := range ys {
		c[i] = math.Abs(y - loc)
	}
	slices.Sort(c)
	sc := 1.4826 * c[len(c)/2]
	if !(sc > 0) {
		return loc, 0, true
	}
	k := hk * sc
	psi := func(r float64) (float64, float64) {
		switch a := math.Abs(r); {
		case a > oracleSkip*sc:
			return 0, 0
		case a > k:
			return math.Copysign(k, r), 0
		}
		return r, 1
	}
	for range 8 {
		var num, den float64
		for _, y := range ys {
			p, _ := psi(y - loc)
			num += p
			if p != 0 {
				den += p / (y - loc)
			} else if y == loc {
				den++
			}
		}
		if !(den > 0) {
			break
		}
		loc += num / den
	}
	var s2, d float64
	for _, y := range ys {
		p, dp := psi(y - loc)
		s2 += p * p
		d += dp
	}
	if !(d > 0) {
		return 0, 0, false
	}
	return loc, s2 / (d * d), true
}
