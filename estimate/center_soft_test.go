package estimate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// softPoints is a window of centre-line points for fitCenter: each side's
// points at the true line (d = s*x) plus or minus a margin of 75 us, plus
// an excess drawn per point (stamp noise, or queueing).
type softPoints struct {
	xs, ds, sg []float64
}

func (p *softPoints) add(x, d, side float64) {
	p.xs, p.ds, p.sg = append(p.xs, x), append(p.ds, d), append(p.sg, side)
}

// TestFitCenterSoftWeights checks fitCenter's soft weights against the
// plain least squares of the same points (refits 0, the fit before): on a
// clean window (stamp noise only) both give the same line within a few ns;
// where a stretch of one direction's points queued microseconds beyond the
// floor, least squares tilts and the soft fit does not. The error is the
// fitted line's offset at the window's end (x = 60 s, where the estimate
// is read) and its skew, against the true line (skew 0.2 ppm).
func TestFitCenterSoftWeights(t *testing.T) {
	const (
		span   = 60e9 // ns
		margin = 75e3 // ns: half the shortest round trip
		skew   = 2e-7
		n      = 30 // points per side
	)
	sharp := func(r *rand.Rand) float64 { return 100 * r.Float64() }
	noise := func(r *rand.Rand) float64 { return 300 * r.ExpFloat64() }
	queued := func(r *rand.Rand) float64 { return 2000 + 18000*r.Float64() }
	tests := []struct {
		name string
		// excess of point i of n on side (+1 UP, -1 LOW)
		excess func(r *rand.Rand, i int, side float64) float64
		// want: soft fit's |offset error| at the end (ns) and |skew error|
		// at most; wantSame: within this of least squares (0: not checked);
		// olsOff: least squares' mean offset error over the seeds at least
		// this (the case shows what the weights do; 0: not checked).
		maxOff, maxSkew, wantSame, olsOff float64
	}{
		{
			name:   "clean window, a sharp floor (stamps within 100 ns)",
			excess: func(r *rand.Rand, i int, side float64) float64 { return sharp(r) },
			maxOff: 50, maxSkew: 2e-9, wantSame: 5,
		},
		{
			// Points up to a few us beyond the margin count less, so the
			// fit moves by tens of ns, not more.
			name:   "clean window, 300 ns of exponential stamp noise",
			excess: func(r *rand.Rand, i int, side float64) float64 { return noise(r) },
			maxOff: 200, maxSkew: 1e-8, wantSame: 150,
		},
		{
			name: "the newest quarter's UP points queued 2-20 us but three",
			excess: func(r *rand.Rand, i int, side float64) float64 {
				if side > 0 && i >= 3*n/4 && i%3 != 0 {
					return queued(r)
				}
				return noise(r)
			},
			maxOff: 400, maxSkew: 1e-8, olsOff: 2000,
		},
		{
			name: "the oldest quarter queued both ways, unequally",
			excess: func(r *rand.Rand, i int, side float64) float64 {
				if i < n/4 && i%4 != 0 {
					if side > 0 {
						return queued(r)
					}
					return 2000 + 3000*r.Float64()
				}
				return noise(r)
			},
			maxOff: 400, maxSkew: 1e-8, olsOff: 500,
		},
		{
			name: "every quarter half queued, each way alike",
			excess: func(r *rand.Rand, i int, side float64) float64 {
				if i%2 == 1 {
					return queued(r)
				}
				return noise(r)
			},
			maxOff: 400, maxSkew: 1e-8, olsOff: 500,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var worstOff, worstSkew, worstSame, meanOLS float64
			for seed := uint64(1); seed <= 20; seed++ {
				r := rand.New(rand.NewPCG(seed, 5))
				var p softPoints
				for _, side := range []float64{1, -1} {
					for i := range n {
						x := span * (float64(i) + r.Float64()) / n
						p.add(x, skew*x+side*(margin+tt.excess(r, i, side)), side)
					}
				}
				a, s, ok := fitCenter(p.xs, p.ds, p.sg, nil, centerRefits)
				a0, s0, ok0 := fitCenter(p.xs, p.ds, p.sg, nil, 0)
				if !ok || !ok0 {
					t.Fatalf("seed %d: fit ok %v, least squares ok %v", seed, ok, ok0)
				}
				off := math.Abs(a + s*span - skew*span)
				ols := math.Abs(a0 + s0*span - skew*span)
				worstOff, worstSkew = max(worstOff, off), max(worstSkew, math.Abs(s-skew))
				worstSame = max(worstSame, math.Abs(a+s*span-(a0+s0*span)))
				meanOLS += ols / 20
			}
			t.Logf("20 seeds: soft fit at most %.0f ns and %.2g off; least squares %.0f ns on average; apart by up to %.1f ns", worstOff, worstSkew, meanOLS, worstSame)
			if worstOff > tt.maxOff || worstSkew > tt.maxSkew {
				t.Errorf("soft fit %.0f ns and skew %.2g off at worst, want <= %.0f ns and %.2g", worstOff, worstSkew, tt.maxOff, tt.maxSkew)
			}
			if tt.wantSame > 0 && worstSame > tt.wantSame {
				t.Errorf("soft fit up to %.1f ns from least squares on a clean window, want <= %.0f", worstSame, tt.wantSame)
			}
			if tt.olsOff > 0 && meanOLS < tt.olsOff {
				t.Errorf("least squares only %.0f ns off on average: the case does not show the queueing (want >= %.0f)", meanOLS, tt.olsOff)
			}
		})
	}
}

// TestFitCenterDegenerate: no points, or points that do not determine a
// line and a margin, give !ok, never a NaN line.
func TestFitCenterDegenerate(t *testing.T) {
	tests := []struct {
		name       string
		xs, ds, sg []float64
	}{
		{"empty", nil, nil, nil},
		{"one side only", []float64{0, 1e9, 2e9}, []float64{5, 6, 7}, []float64{1, 1, 1}},
		{"one instant", []float64{1e9, 1e9}, []float64{5, -5}, []float64{1, -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if a, s, ok := fitCenter(tt.xs, tt.ds, tt.sg, nil, centerRefits); ok {
				t.Errorf("fitCenter = %v, %v, ok; want !ok", a, s)
			}
		})
	}
}
