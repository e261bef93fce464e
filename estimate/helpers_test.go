package estimate

import (
	"math"
	"math/rand/v2"
)

// delayModel draws one-way network delays: a minimum per direction plus a
// random excess.
type delayModel struct {
	name       string
	min1, min2 int64 // source->local, local->source minimum delays, ns (>= 1)
	excess     func(r *rand.Rand) float64
}

func expo(mean float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return r.ExpFloat64() * mean }
}

func lognormal(median, sigma float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 { return median * math.Exp(sigma*r.NormFloat64()) }
}

// pareto draws xm*(U^(-1/alpha)-1): heavy-tailed excess starting at 0.
func pareto(xm, alpha float64) func(*rand.Rand) float64 {
	return func(r *rand.Rand) float64 {
		u := 1 - r.Float64()
		return math.Min(xm*(math.Pow(u, -1/alpha)-1), 1e9)
	}
}

var models = []delayModel{
	{"exponential", 5000, 5000, expo(20000)},
	{"lognormal", 3000, 3000, lognormal(8000, 1)},
	{"pareto", 4000, 4000, pareto(3000, 1.1)},
	{"asymmetric-exp", 2000, 30000, expo(10000)},
	{"tiny-min", 1, 1, expo(500)},
}

// world is a source clock y(t) = off + t + floor(t*ppb/1e9) over truth t;
// the local clock is truth itself, so the true mapping is f(x) = y(x).
type world struct {
	t0  int64 // epoch of the skew term (keeps t-t0 small)
	off int64
	ppb int64 // skew in parts per billion
	g   int64 // read granularity of both clocks (0: none)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func (w world) y(t int64) int64 { return w.off + t + floorDiv((t-w.t0)*w.ppb, 1e9) }

func (w world) q(v int64) int64 {
	if w.g <= 1 {
		return v
	}
	return floorDiv(v, w.g) * w.g
}

func (w world) skew() float64 { return float64(w.ppb) * 1e-9 }

// exchange is one source-initiated ping-pong starting at truth t.
func (w world) exchange(r *rand.Rand, m delayModel, t int64) Sample {
	d1 := m.min1 + int64(m.excess(r))
	hold := 1000 + r.Int64N(2000)
	d2 := m.min2 + int64(m.excess(r))
	return Sample{
		SrcSend: w.q(w.y(t)),
		LocRecv: w.q(t + d1),
		LocSend: w.q(t + d1 + hold),
		SrcRecv: w.q(w.y(t + d1 + hold + d2)),
	}
}

// rounds generates n rounds of k exchanges, one round every period ns from
// truth start.
func (w world) rounds(r *rand.Rand, m delayModel, start, period int64, n, k int) [][]Sample {
	out := make([][]Sample, n)
	for i := range out {
		t := start + int64(i)*period
		for j := 0; j < k; j++ {
			s := w.exchange(r, m, t)
			out[i] = append(out[i], s)
			t = s.LocSend + 200000 // next ping after the pong
		}
	}
	return out
}

func randomWorld(r *rand.Rand) world {
	return world{t0: 1e15 + r.Int64N(1e12), off: r.Int64N(2e12) - 1e12, ppb: r.Int64N(200000) - 100000}
}
