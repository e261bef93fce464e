package estimate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// kalmanRounds draws n rounds gap s apart whose true offset follows a
// frequency that walks at random with intensity q (ns^2/s^3), each round's
// location off by white noise of variance v; it returns the rounds and the
// true offset and frequency at the last.
func kalmanRounds(r *rand.Rand, n int, gap, q, v, f0 float64) (rounds []roundLoc, th, f float64) {
	f = f0
	x := 1e9
	for i := range n {
		if i > 0 {
			// Exact integrated random walk over the gap: the frequency's
			// step and the offset's share of it are correlated normals.
			df := math.Sqrt(q*gap) * r.NormFloat64() * 1e-9
			extra := math.Sqrt(q*gap*gap*gap/12) * r.NormFloat64() // the offset's own part, uncorrelated
			th += f*gap*1e9 + df*gap*1e9/2 + extra
			f += df
			x += gap * 1e9
		}
		rounds = append(rounds, roundLoc{x: x, y: th + math.Sqrt(v)*r.NormFloat64(), v: v})
	}
	return rounds, th, f
}

// leastSquaresAt is the rounds' inverse-variance weighted least-squares
// line read at x: offset (ns) and slope (ns per s).
func leastSquaresAt(rounds []roundLoc, x float64) ([2]float64, bool) {
	xs, ys, ws := make([]float64, len(rounds)), make([]float64, len(rounds)), make([]float64, len(rounds))
	for i, p := range rounds {
		xs[i], ys[i], ws[i] = p.x, p.y, 1/p.v
	}
	return solve2(xs, ys, ws, x)
}

// TestKalmanLineSteadyIsLeastSquares: without wander and with a wide
// prior on the frequency the filter's line is the weighted least-squares
// line of the rounds, read at the last.
func TestKalmanLineSteadyIsLeastSquares(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rounds, _, _ := kalmanRounds(r, 20, 4, 0, 150*150, 20e-6)
	for i := range rounds {
		rounds[i].v *= 1 + float64(i%3) // uneven noise: weights matter
	}
	x, th, f, _, ok := kalmanLine(rounds, 0, 0, 1e-6)
	if !ok {
		t.Fatal("no line")
	}
	c, ok2 := leastSquaresAt(rounds, x)
	if !ok2 {
		t.Fatal("no least-squares line")
	}
	if math.Abs(th-c[0]) > 1e-3 || math.Abs(f-c[1]/1e9) > 1e-12 {
		t.Errorf("filter %.6f ns, %.4e; least squares %.6f ns, %.4e", th, f, c[0], c[1]/1e9)
	}
}

// TestKalmanLineCalibrated: on rounds drawn from its own model the
// filter's error at the last round scatters as its covariance says, it
// errs less than the same filter told 4x or a quarter of the wander, and
// it beats the least-squares line of the same rounds, which lags the
// wander.
func TestKalmanLineCalibrated(t *testing.T) {
	const trials, q, v = 2000, 60.0, 170 * 170
	r := rand.New(rand.NewPCG(5, 6))
	var z2, ek2, el2 float64
	var em2 [2]float64
	for range trials {
		rounds, th, _ := kalmanRounds(r, 60, 4, q, v, 20e-6)
		x, kth, _, p, ok := kalmanLine(rounds, q, 0, 1e-8)
		if !ok {
			t.Fatal("no line")
		}
		c, _ := leastSquaresAt(rounds, x)
		for i, m := range []float64{4, 0.25} { // told the wander wrong
			_, mth, _, _, _ := kalmanLine(rounds, q*m, 0, 1e-8)
			em2[i] += (mth - th) * (mth - th)
		}
		e := kth - th
		z2 += e * e / p[0][0]
		ek2 += e * e
		el2 += (c[0] - th) * (c[0] - th)
	}
	z2 /= trials
	t.Logf("mean squared error over its variance %.3f; rms error %.1f ns, least squares %.1f ns", z2, math.Sqrt(ek2/trials), math.Sqrt(el2/trials))
	// z2 averages 2000 squares of unit normals: its scatter is 0.03.
	if z2 < 0.92 || z2 > 1.08 {
		t.Errorf("mean squared error over the filter's variance %.3f, want 1 within 0.08", z2)
	}
	t.Logf("told 4x and 1/4 the wander: rms error %.1f and %.1f ns", math.Sqrt(em2[0]/trials), math.Sqrt(em2[1]/trials))
	if ek2 >= em2[0] || ek2 >= em2[1] {
		t.Errorf("rms error %.1f ns told the true wander, %.1f and %.1f told 4x and 1/4 of it: want the least", math.Sqrt(ek2/trials), math.Sqrt(em2[0]/trials), math.Sqrt(em2[1]/trials))
	}
	if ek2 > 0.8*el2 {
		t.Errorf("filter rms %.1f ns against least squares' %.1f: want under 0.8x of its square", math.Sqrt(ek2/trials), math.Sqrt(el2/trials))
	}
}

// TestKalmanLineSkipsBadRounds: rounds without a usable variance or out
// of order are skipped, and too few rounds say so.
func TestKalmanLineSkipsBadRounds(t *testing.T) {
	good := []roundLoc{{x: 1e9, y: 100, v: 400}, {x: 5e9, y: 180, v: 400}}
	bad := []roundLoc{{x: 0, y: 50, v: 0}, good[0], {x: 3e9, y: math.NaN(), v: 400}, {x: 1e9, y: 999, v: 400}, {x: 2e9, y: 5, v: math.Inf(1)}, good[1]}
	x1, th1, f1, _, ok1 := kalmanLine(good, 60, 0, 1e-8)
	x2, th2, f2, _, ok2 := kalmanLine(bad, 60, 0, 1e-8)
	if !ok1 || !ok2 || x1 != x2 || th1 != th2 || f1 != f2 {
		t.Errorf("with bad rounds %v %v %v %v, without %v %v %v %v", x2, th2, f2, ok2, x1, th1, f1, ok1)
	}
	if _, _, _, _, ok := kalmanLine(good[:1], 60, 0, 1e-8); ok {
		t.Error("one round gave a line")
	}
	if _, _, _, _, ok := kalmanLine(nil, 60, 0, 1e-8); ok {
		t.Error("no rounds gave a line")
	}
}
