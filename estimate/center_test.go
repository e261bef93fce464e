package estimate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// centerErr is |Center(x) - truth| and |Estimate(x) - truth| (the middle of
// the bounds) at local time x.
func centerErr(t *testing.T, h *Hull, w world, x int64) (center, mid float64) {
	t.Helper()
	c, _, ok := h.Center(x)
	e, ok2 := h.Estimate(x)
	if !ok || !ok2 {
		t.Fatalf("Center ok %v, Estimate ok %v", ok, ok2)
	}
	truth := float64(w.y(x))
	return math.Abs(float64(c) - truth), math.Abs(float64(e) - truth)
}

// Hull.Center on a symmetric link (equal minimum delays both ways): as
// exchanges accumulate, the fastest one in each direction approaches the
// minimum delay and the centre line converges on the true line, offset and
// skew; it always lies inside the bounds.
func TestHullCenterConvergesOnSymmetricLinks(t *testing.T) {
	m := delayModel{"symmetric-exp", 5000, 5000, expo(20000)}
	checkpoints := []int{10, 40, 160, 640}
	var sumErr = make([]float64, len(checkpoints))
	var sumSkew = make([]float64, len(checkpoints))
	const seeds = 30
	for seed := uint64(0); seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 31))
		w := randomWorld(r)
		h := mustHull(t, HullConfig{Window: 4096, Center: true})
		rounds := w.rounds(r, m, w.t0, 100e6, checkpoints[len(checkpoints)-1], 3)
		k := 0
		for i, rd := range rounds {
			if err := h.AddRound(rd); err != nil {
				t.Fatal(err)
			}
			if i+1 != checkpoints[k] {
				continue
			}
			x := rd[2].LocSend
			ce, _ := centerErr(t, h, w, x)
			_, skew, _ := h.Center(x)
			sumErr[k] += ce
			sumSkew[k] += math.Abs(skew - w.skew())
			c, _, _ := h.Center(x)
			lo, hi, _ := h.Bounds(x)
			if c < lo || c > hi {
				t.Fatalf("seed %d round %d: Center %d outside the bounds [%d, %d]", seed, i, c, lo, hi)
			}
			// Mapping (Center: true) is the centre line at the newest
			// sample, and its bounds cover the exact ones.
			mp := h.Mapping()
			if _, mlo, mhi := mp.At(x); !mp.Valid || mp.X0 != x || mp.Y0 != c || mlo > lo || mhi < hi {
				t.Fatalf("seed %d round %d: Mapping %+v, want Y0 %d at X0 %d covering [%d, %d]", seed, i, mp, c, x, lo, hi)
			}
			k++
		}
	}
	prev := math.Inf(1)
	for k, n := range checkpoints {
		e, s := sumErr[k]/seeds, sumSkew[k]/seeds
		t.Logf("after %4d rounds: mean |Center - truth| %6.0f ns, |skew error| %.2g", n, e, s)
		if e >= prev {
			t.Errorf("after %d rounds the mean error %.0f ns did not shrink (was %.0f)", n, e, prev)
		}
		prev = e
	}
	if e := sumErr[len(checkpoints)-1] / seeds; e > 150 {
		t.Errorf("after %d rounds the centre line is %.0f ns from the truth, want < 150 ns", checkpoints[len(checkpoints)-1], e)
	}
	if s := sumSkew[len(checkpoints)-1] / seeds; s > 2e-9 {
		t.Errorf("centre skew off by %.2g, want < 2e-9", s)
	}
}

// On a heavy-tailed link the middle of the bounds at the newest sample
// depends on the few exchanges near it; the centre line rests on the
// fastest exchange each way over the whole window, so it is closer to the
// truth (same rounds, 0.5 s after the last of 20, 200 seeds).
func TestHullCenterBeatsMidpointOnPareto(t *testing.T) {
	m := models[2] // 4 us each way + Pareto(3 us, alpha 1.1)
	const seeds = 200
	var sc, sm float64
	for seed := uint64(0); seed < seeds; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		w := randomWorld(r)
		h := mustHull(t, HullConfig{Window: 256})
		rounds := w.rounds(r, m, w.t0, 1e9, 20, 3)
		for _, rd := range rounds {
			if err := h.AddRound(rd); err != nil {
				t.Fatal(err)
			}
		}
		ce, me := centerErr(t, h, w, rounds[len(rounds)-1][2].LocSend+500e6)
		sc += ce
		sm += me
	}
	t.Logf("pareto: mean |error| centre line %.0f ns, middle of the bounds %.0f ns", sc/seeds, sm/seeds)
	if sc >= sm {
		t.Errorf("centre line %.0f ns not better than the middle of the bounds %.0f ns", sc/seeds, sm/seeds)
	}
}

// With few exchanges the default centre fit does not average the fastest 15
// each way, which would reach far above the floor: under 75 exchanges a
// side the max-margin line stands alone. Here 25 exchanges, 4 each way at
// the floor and the others with an asymmetric excess (20-40 us one way,
// 2-4 us the other): the default stays within 100 ns of the truth, the 15
// fastest (CenterPoints: 15) are hundreds of ns off (748 ns; 11.5 us
// before the fit weighted queued points down, see centerSoft).
func TestHullCenterFewExchanges(t *testing.T) {
	w := world{t0: 1e15, off: 3e9, ppb: 20000}
	build := func(cfg HullConfig) *Hull {
		h := mustHull(t, cfg)
		r := rand.New(rand.NewPCG(7, 7))
		for i := range 25 {
			tt := w.t0 + int64(i)*1e9
			ef, eb := int64(20000+r.IntN(20000)), int64(2000+r.IntN(2000))
			if i%8 == 0 {
				ef, eb = int64(r.IntN(10)), int64(r.IntN(10)) // at the floor
			}
			d1, d2, hold := 50000+ef, 50000+eb, int64(1500)
			s := Sample{SrcSend: w.y(tt), LocRecv: tt + d1, LocSend: tt + d1 + hold, SrcRecv: w.y(tt + d1 + hold + d2)}
			if err := h.AddRound([]Sample{s}); err != nil {
				t.Fatal(err)
			}
		}
		return h
	}
	x := w.t0 + 25e9
	ce, _ := centerErr(t, build(HullConfig{Window: 256, Center: true}), w, x)
	if ce > 100 {
		t.Errorf("default centre line %.0f ns from the truth with 25 exchanges, want <= 100", ce)
	}
	fe, _ := centerErr(t, build(HullConfig{Window: 256, Center: true, CenterPoints: 15}), w, x)
	if fe < 400 {
		t.Errorf("the 15 fastest each way are only %.0f ns off: the case does not show the difference", fe)
	}
	t.Logf("default %.0f ns, 15 fastest each way %.0f ns", ce, fe)
}
