package netmodel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/quantile"
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

// TestTailQuantiles checks each tail distribution's quantiles against its
// definition (inverse CDF at mean m), from 400k seeded draws.
func TestTailQuantiles(t *testing.T) {
	const m, n = 10000.0, 400000
	tests := []struct {
		tail TailSpec
		inv  func(q float64) float64
	}{
		{TailSpec{Dist: TailExponential}, func(q float64) float64 { return -m * math.Log(1-q) }},
		{TailSpec{Dist: TailLognormal, Sigma: 1}, func(q float64) float64 {
			return math.Exp(math.Log(m) - 0.5 + math.Sqrt2*math.Erfinv(2*q-1))
		}},
		{TailSpec{Dist: TailPareto, Alpha: 3}, func(q float64) float64 { return m * 2 * (math.Pow(1-q, -1.0/3) - 1) }},
		{TailSpec{Dist: TailPareto, Alpha: 1.5}, func(q float64) float64 { return m * 0.5 * (math.Pow(1-q, -1/1.5) - 1) }},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%g/%g", tt.tail.Dist, tt.tail.Sigma, tt.tail.Alpha), func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, 10))
			v := make([]int64, n)
			for i := range v {
				v[i] = tt.tail.Draw(r, m)
				if v[i] < 0 || v[i] > MaxDelay {
					t.Fatalf("draw %d outside [0, MaxDelay]", v[i])
				}
			}
			qs := []float64{0.1, 0.5, 0.9, 0.99}
			got := quantile.Of(v, qs...)
			for i, q := range qs {
				want := tt.inv(q)
				// 2% of the value plus the truncation to whole ns.
				if math.Abs(float64(got[i])-want) > 0.02*want+1 {
					t.Errorf("q%v = %d, want %.0f +- 2%%", q, got[i], want)
				}
			}
		})
	}
	if d := (TailSpec{Dist: TailPareto, Alpha: 3}).Draw(rand.New(rand.NewPCG(1, 1)), 0); d != 0 {
		t.Errorf("zero mean drew %d", d)
	}
}

// TestOnePareto: the lab's netem-style pareto:D:J is the simulator's pareto
// tail (alpha 3, mean J/sqrt(3)) on a floor at D - J/sqrt(3).
func TestOnePareto(t *testing.T) {
	const d, j = 100000.0, 50000.0
	tail := j / math.Sqrt(3)
	lab := Model{Delay: time.Duration(d), Jitter: time.Duration(j), Dist: DistPareto}
	sim := TailSpec{Dist: TailPareto, Alpha: 3}
	qs := []float64{0, 0.05, 0.5, 0.9, 0.99}
	a := lab.Quantiles(400000, 3, qs...)
	r := rand.New(rand.NewPCG(4, 5))
	v := make([]int64, 400000)
	for i := range v {
		v[i] = int64(d-tail) + sim.Draw(r, tail)
	}
	b := quantile.Of(v, qs...)
	for i, q := range qs {
		if math.Abs(float64(a[i]-b[i])) > 0.02*float64(b[i])+2 {
			t.Errorf("q%v: lab pareto %d ns, sim pareto %d ns", q, a[i], b[i])
		}
	}
	if floor := d - tail; math.Abs(float64(a[0])-floor) > 50 {
		t.Errorf("lab pareto floor %d ns, want %.0f (71.1 us)", a[0], floor)
	}
}

func TestSpecValidate(t *testing.T) {
	ok := Spec{MinDelay: 5000, Tail: TailSpec{Dist: TailExponential, Mean: 2000}}
	if err := ok.Validate("links"); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	tests := []struct {
		name string
		edit func(s *Spec)
		want string
	}{
		{"negative delay", func(s *Spec) { s.MinDelay = -1 }, "links.min_delay: delays must be >= 0"},
		{"negative asymmetry", func(s *Spec) { s.Asymmetry = -1 }, "links.min_delay"},
		{"unknown tail", func(s *Spec) { s.Tail.Dist = "cauchy" }, `links.tail.dist: unknown distribution "cauchy"`},
		{"lognormal sigma", func(s *Spec) { s.Tail = TailSpec{Dist: TailLognormal, Sigma: 0} }, "links.tail.sigma"},
		{"pareto alpha 1", func(s *Spec) { s.Tail = TailSpec{Dist: TailPareto, Alpha: 1} }, "links.tail.alpha"},
		{"pareto alpha NaN", func(s *Spec) { s.Tail = TailSpec{Dist: TailPareto, Alpha: math.NaN()} }, "links.tail.alpha"},
		{"negative mean", func(s *Spec) { s.Tail.Mean = -1 }, "links.tail.mean"},
		{"loss 1", func(s *Spec) { s.Loss = 1 }, "links.loss: 1 would cut every link"},
		{"duplicate 2", func(s *Spec) { s.Duplicate = 2 }, "links.duplicate: probability 2"},
		{"reorder NaN", func(s *Spec) { s.Reorder = math.NaN() }, "links.reorder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.edit(&s)
			err := s.Validate("links")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
