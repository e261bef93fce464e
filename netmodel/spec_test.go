package netmodel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestNetStatistics checks a Spec's rates and tail means over many seeded
// draws, and that a load scales the tail.
func TestNetStatistics(t *testing.T) {
	const n = 200000
	for _, tc := range []struct {
		dist       string
		sigma, alp float64
	}{{"exponential", 0, 0}, {"lognormal", 1, 0}, {"pareto", 0, 3}} {
		t.Run(tc.dist, func(t *testing.T) {
			spec := Spec{MinDelay: 5000, Asymmetry: 400, Loss: 0.05, Duplicate: 0.02, Reorder: 0.01, ReorderDelay: 1e6,
				Tail: TailSpec{Dist: tc.dist, Mean: 2000, Sigma: tc.sigma, Alpha: tc.alp}}
			m := Net{Spec: spec, Seed: 42}
			rng := rand.New(rand.NewPCG(1, 2))
			ld := spec.Load()
			var lost, dup, sent, reord int
			var sum float64
			base := m.MinDelay(3, 4)
			if base < 5000 || base > 5400 {
				t.Fatalf("min delay %d outside [5000, 5400]", base)
			}
			if m.MinDelay(3, 4) != base {
				t.Fatal("min delay of a link is not fixed")
			}
			var buf []int64
			for range n {
				buf = m.Transmit(rng, 3, 4, ld, buf)
				switch len(buf) {
				case 0:
					lost++
				case 2:
					dup++
				}
				for _, d := range buf {
					if d < base {
						t.Fatalf("delay %d below the minimum %d", d, base)
					}
					if d >= base+int64(spec.ReorderDelay) {
						reord++
						d -= int64(spec.ReorderDelay)
					}
					sent++
					sum += float64(d - base)
				}
			}
			within := func(name string, got, want, tol float64) {
				if math.Abs(got-want) > tol {
					t.Errorf("%s = %.4g, want %.4g +- %.2g", name, got, want, tol)
				}
			}
			within("loss rate", float64(lost)/n, 0.05, 0.004)
			within("duplicate rate", float64(dup)/float64(n-lost), 0.02, 0.003)
			within("reorder rate", float64(reord)/float64(sent), 0.01, 0.002)
			// The pareto's sample mean converges slowly; alpha 3 has finite
			// variance, so 5% is about 10 standard errors.
			within("tail mean", sum/float64(sent), 2000, 100)
			sum, sent = 0, 0
			for range n / 4 {
				buf = m.Transmit(rng, 3, 4, Load{TailScale: 10}, buf)
				for _, d := range buf {
					if d < base+int64(spec.ReorderDelay) {
						sum += float64(d - base)
						sent++
					}
				}
			}
			within("loaded tail mean", sum/float64(sent), 20000, 2000)
		})
	}
}
