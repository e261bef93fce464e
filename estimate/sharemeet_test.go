package estimate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLowerShare: the mean of the lowest share of weighted values counts
// the edge value with the part of its weight inside the share, and the
// variance is the clamped values' variance over b^2 n.
func TestLowerShare(t *testing.T) {
	tests := []struct {
		name     string
		q        []wv
		b        float64
		mean, vr float64
	}{
		// Ten values 1..10 of weight 1: the lowest half is 1..5 (mean 3);
		// clamped at 5: 1,2,3,4,5,5,5,5,5,5, variance 2, over 0.25*10.
		{"half", seq(10, 1), 0.5, 3, 2 / 2.5},
		// The lowest 0.25 of ten: 1, 2 and half of 3 (mean 1.8).
		{"partial edge", seq(10, 1), 0.25, (1 + 2 + 0.5*3) / 2.5, clampVar(seq(10, 1), 3) / (0.0625 * 10)},
		// Weights: the first value carries half the weight, so it alone
		// is the lowest half.
		{"weighted", []wv{{1, 3}, {2, 1}, {3, 1}, {4, 1}}, 0.5, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sw, n := sortWeighted(tt.q)
			m, v := lowerShare(tt.q, sw, n, tt.b)
			if math.Abs(m-tt.mean) > 1e-9 || math.Abs(v-tt.vr) > 1e-9 {
				t.Errorf("lowerShare(%v) = %g, %g; want %g, %g", tt.b, m, v, tt.mean, tt.vr)
			}
		})
	}
	if _, v := lowerShare(nil, 0, 0, 0.5); !math.IsNaN(v) {
		t.Errorf("no values: variance %g, want NaN", v)
	}
}

func seq(n int, w float64) []wv {
	out := make([]wv, n)
	for i := range out {
		out[i] = wv{float64(i + 1), w}
	}
	return out
}

// clampVar is the variance of unit-weight values clamped at c.
func clampVar(q []wv, c float64) float64 {
	var s, s2 float64
	for _, e := range q {
		x := min(e.v, c)
		s += x
		s2 += x * x
	}
	n := float64(len(q))
	return s2/n - (s/n)*(s/n)
}

// TestShareMeetEfficiency: on the delay shapes of the link matrix, where a
// round's 240 exchanges each way meet, by the lower means of the share of
// least variance (shareMeet) and by the lower tenth (lowerMeet), over
// 1500 rounds with the true offset 0: the shares' rms is well below the
// tenth's on a bell, on two modes, on uniform delays and with a fifth of
// one direction's delays waiting; and the variance shareMeet gives is the
// scatter it has (the share fixed at a half on a bell, where a choice
// among five does not make the least variance too low).
func TestShareMeetEfficiency(t *testing.T) {
	const n, rounds = 240, 1500
	shapes := []struct {
		name string
		up   func(r *rand.Rand) float64
		down func(r *rand.Rand) float64
		// most is the largest shareMeet rms / lowerMeet rms allowed.
		most float64
	}{
		{"bell 10 us", bell(10e3), bell(10e3), 0.8},
		{"two modes 40 us apart", modes(0.5), modes(0.5), 0.95},
		{"two modes, the slow one 70%", modes(0.7), modes(0.7), 0.95},
		{"uniform 40 us", uniform(40e3), uniform(40e3), 0.7},
		{"bell, a fifth of one way waiting", waiting(bell(10e3), 0.2, 15e3), bell(10e3), 0.95},
	}
	for _, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			var mseShare, mseTenth float64
			for range rounds {
				up, low := make([]wv, n), make([]wv, n)
				for i := range n {
					up[i], low[i] = wv{sh.up(r), 1}, wv{sh.down(r), 1}
				}
				ds, _, _, ok1 := shareMeet(up, low, bodyLowerShares)
				dt, _, ok2 := lowerMeet(up, low)
				if !ok1 || !ok2 {
					t.Fatal("no meeting point")
				}
				mseShare += ds * ds
				mseTenth += dt * dt
			}
			ratio := math.Sqrt(mseShare / mseTenth)
			t.Logf("rms: shares %.0f ns, tenth %.0f ns (%.2fx)", math.Sqrt(mseShare/rounds), math.Sqrt(mseTenth/rounds), ratio)
			if ratio > sh.most {
				t.Errorf("shares' rms %.2fx the tenth's, want at most %.2fx", ratio, sh.most)
			}
		})
	}
	r := rand.New(rand.NewPCG(3, 4))
	var mse, sumV float64
	for range rounds {
		up, low := make([]wv, n), make([]wv, n)
		for i := range n {
			up[i], low[i] = wv{bell(10e3)(r), 1}, wv{bell(10e3)(r), 1}
		}
		d, v, _, ok := shareMeet(up, low, []float64{0.5})
		if !ok {
			t.Fatal("no meeting point")
		}
		mse += d * d
		sumV += v
	}
	if q := sumV / mse; q < 0.8 || q > 1.25 {
		t.Errorf("bell, the lower half: mean variance %.0f ns^2 against the scatter %.0f (%.2fx), want within 0.8-1.25x", sumV/rounds, mse/rounds, q)
	}
}

func bell(sd float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return 100e3 + sd*r.NormFloat64() }
}

func uniform(w float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return 80e3 + w*r.Float64() }
}

// modes: two 5-us bells 40 us apart, the slower taking share slow.
func modes(slow float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 {
		d := 80e3 + 5e3*r.NormFloat64()
		if r.Float64() < slow {
			d += 40e3
		}
		return d
	}
}

// waiting adds an exponential wait of mean w to a share p of f's delays.
func waiting(f func(*rand.Rand) float64, p, w float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 {
		d := f(r)
		if r.Float64() < p {
			d += w * r.ExpFloat64()
		}
		return d
	}
}
