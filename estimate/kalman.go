package estimate

import "math"

// The body line's Kalman line (bodyKalman). The body line is an
// exponentially weighted fit over its memory's exchanges: it remembers
// the average frequency of a memory whose length follows the rounds'
// noise and the clocks' wander (memoryScale), and weighs every round of
// that memory by a fixed curve. For offset and frequency seen through
// white noise while the frequency walks at random, the least-squares
// optimum among causal estimators is the Kalman filter of the two, each
// round weighed by the gain its own noise and the wander call for; that
// is the oracle of eval/limit, told the clocks' true wander. The body's
// track already holds what such a filter needs: each round's own lower
// body location and its variance (the rounds bodyCurve and the wander
// read), and the wander they show (wanderQ). So once kalmanMinRounds
// rounds were kept, the hull runs the filter over the track (the newest
// wanderRounds rounds, from scratch each time: no state to rebase or to
// forget but the track's) and reads its line.
//
// Which of the two lines to trust is measured, not assumed: before each
// new round is kept, both lines (as they were after the round before)
// predict its own location, and the smoothed squares of their misses,
// less the smoothed variance of the rounds' locations (the part of a miss
// that is the new round's own noise), estimate each line's own error; the
// body line is the blend of the two weighed by the inverse of those
// (never below a tenth of the rounds' noise each, so that one lucky line
// cannot take all). On a plain bell the filter is the better line and
// takes most of the weight; where the rounds' locations mislead it (a
// frequency step before the hull restarts, rounds of uneven noise whose
// variances are misjudged) its misses grow and the weight returns to the
// exponentially weighted line. In the simulator's matrix (gclock sim
// matrix --seeds 1-100): normal 3 us 0.120 -> 0.118 us (runs within a
// third of the chrony stand-in 76 -> 79 of 100, the oracle's 84), two
// modes 0.294 -> 0.282, normal 10 us 0.290 -> 0.289; the filter alone
// (weight 1) did worse on the bells than the blend (normal 3 us 0.126,
// normal 10 us 0.294): a round's own lower body, read from its exchanges
// alone, is a noisier location than the whole memory's, so neither line
// is always the better.

const (
	// kalmanMinRounds: the Kalman line is read once the body's track
	// holds this many rounds (fewer: the wander and the frequency are
	// guesses; 4 did worse in the simulator's matrix).
	kalmanMinRounds = 8
	// kalmanMinScores: rounds both lines predicted before the blend
	// weighs them by their misses (before: the exponentially weighted
	// line alone).
	kalmanMinScores = 3
	// kalmanDecay is the weight of the newest round in the smoothed
	// misses (0.05 and 0.2 did as well in the simulator's matrix).
	kalmanDecay = 0.1
	// kalmanFreqVar is the frequency's prior variance ((ns/ns)^2: 10
	// ppm about the body line's skew) before the track's second round.
	kalmanFreqVar = 1e-10
	// kalmanFloor: neither line's own error counts as less than this
	// share of the rounds' noise.
	kalmanFloor = 0.1
)

// bodyKalmanOn switches the Kalman line off for comparisons (tests).
var bodyKalmanOn = true

// kalmanTrack is the body's record for the blend: both lines as of the
// last round (Kalman: ka, kf; exponentially weighted: pa, psk; relative
// units), and the smoothed squares of their misses predicting the next
// round's own location, and of that location's variance.
type kalmanTrack struct {
	ka, kf, pa, psk     float64
	have                bool
	missK, missP, noise smoothed
}

// forget drops the lines and the scores (the track was reset, or the body
// is not the lower body this round).
func (k *kalmanTrack) forget() { *k = kalmanTrack{} }

// rebase moves the kept lines with the hull's origin (Hull.rebase).
func (k *kalmanTrack) rebase(dx, dd int64) {
	k.ka, k.pa = rebaseLine(k.ka, k.kf, dx, dd), rebaseLine(k.pa, k.psk, dx, dd)
}

// score weighs the lines kept at the last round by their miss of the new
// round's own location r.
func (k *kalmanTrack) score(r roundLoc) {
	if !k.have {
		return
	}
	mk := r.y - (k.ka + k.kf*r.x)
	mp := r.y - (k.pa + k.psk*r.x)
	k.missK.add(mk*mk, kalmanDecay)
	k.missP.add(mp*mp, kalmanDecay)
	k.noise.add(r.v, kalmanDecay)
}

// kalmanBlend returns the body line to use, from the exponentially
// weighted line (a, sk) and the Kalman line of the rounds kept (q: their
// wander, ns^2/s^3), and the Kalman line's weight in it (0: not read).
// lo and hi are the feasible skew range.
func (b *bodyState) kalmanBlend(a, sk, q, lo, hi float64) (float64, float64, float64) {
	k := &b.kalman
	if !bodyKalmanOn || len(b.rounds) < kalmanMinRounds || !(q > 0) {
		k.forget()
		return a, sk, 0
	}
	x, th, f, _, ok := kalmanLine(b.rounds, q, sk, kalmanFreqVar)
	if !ok || f < lo || f > hi {
		k.forget()
		return a, sk, 0
	}
	ka := th - f*x
	k.ka, k.kf, k.pa, k.psk, k.have = ka, f, a, sk, true
	if k.missK.n < kalmanMinScores {
		return a, sk, 0
	}
	fl := kalmanFloor * k.noise.v
	ek, ep := max(fl, k.missK.v-k.noise.v), max(fl, k.missP.v-k.noise.v)
	w := ep / (ek + ep)
	if !(w >= 0 && w <= 1) {
		return a, sk, 0
	}
	return a + w*(ka-a), sk + w*(f-sk), w
}

// kalmanLine runs the Kalman filter of offset and frequency over the
// rounds' own locations (x ns relative, y ns, v their variances ns^2),
// the frequency a random walk of intensity q (ns^2/s^3, wanderQ's unit),
// and returns the filter's state after the last round: its x, the offset
// th there, the frequency f (ns/ns) and their covariance p. The first
// round sets the offset; the frequency starts at f0 with variance fv.
// Rounds with no finite positive variance, or not after the one before,
// are skipped; ok is false with fewer than two rounds used.
func kalmanLine(rounds []roundLoc, q, f0, fv float64) (x, th, f float64, p [2][2]float64, ok bool) {
	n := 0
	for _, r := range rounds {
		if !(r.v > 0) || math.IsInf(r.v, 0) || math.IsNaN(r.y) || math.IsInf(r.y, 0) {
			continue
		}
		if n == 0 {
			x, th, f = r.x, r.y, f0
			p = [2][2]float64{{r.v, 0}, {0, fv}}
			n++
			continue
		}
		dt := r.x - x
		if !(dt > 0) {
			continue
		}
		// Predict: the offset grows by f dt; the frequency's random walk
		// (q ns^2/s^3 = q 1e-18 (ns/ns)^2 per s) adds q s to the
		// frequency's variance and its integral to the offset's.
		ds := dt / 1e9
		pth := th + f*dt
		p00 := p[0][0] + 2*dt*p[0][1] + dt*dt*p[1][1] + q*ds*ds*ds/3
		p01 := p[0][1] + dt*p[1][1] + q*ds*ds/2*1e-9
		p11 := p[1][1] + q*ds*1e-18
		// Update with the round's location.
		s := p00 + r.v
		k0, k1 := p00/s, p01/s
		nu := r.y - pth
		th, f = pth+k0*nu, f+k1*nu
		p = [2][2]float64{{(1 - k0) * p00, (1 - k0) * p01}, {(1 - k0) * p01, p11 - k1*p01}}
		x = r.x
		n++
	}
	return x, th, f, p, n >= 2
}
