package estimate

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
)

func mustHull(t testing.TB, c HullConfig) *Hull {
	t.Helper()
	h, err := NewHull(c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A hand-computed case: y = x + 100, symmetric delays of 10 ns, two
// exchanges 1000 ns apart. UP offsets 110, LOW offsets 90.
func TestHullHandComputed(t *testing.T) {
	h := mustHull(t, HullConfig{Window: 16})
	round := []Sample{
		{SrcSend: 100, LocRecv: 10, LocSend: 10, SrcRecv: 120},
		{SrcSend: 1100, LocRecv: 1010, LocSend: 1010, SrcRecv: 1120},
	}
	if err := h.AddRound(round); err != nil {
		t.Fatal(err)
	}
	lo, hi, ok := h.SkewBounds()
	if !ok || lo != -0.02 || hi != 0.02 {
		t.Errorf("SkewBounds = %v, %v, %v; want -0.02, 0.02", lo, hi, ok)
	}
	tests := []struct{ x, lo, hi int64 }{
		{1010, 1100, 1120},
		{10, 100, 120},
		{510, 600, 620},
		{2010, 2080, 2140}, // extrapolated along the extreme lines
		{-990, -920, -860}, // the extreme lines through LOW(1010) and UP(10)
	}
	for _, tc := range tests {
		lo, hi, ok := h.Bounds(tc.x)
		if !ok || lo != tc.lo || hi != tc.hi {
			t.Errorf("Bounds(%d) = %d, %d, %v; want %d, %d", tc.x, lo, hi, ok, tc.lo, tc.hi)
		}
	}
	m := h.Mapping()
	if !m.Valid || m.X0 != 1010 || m.Y0 != 1110 || m.W0 != 11 || math.Abs(m.SkewErr-0.02) > 1e-9 {
		t.Errorf("Mapping = %+v", m)
	}
}

// bruteBounds computes the feasible skew range and the bounds at x from all
// points with big rationals: the reference for the incremental hull.
func bruteBounds(ups, lows []pt, sigma, x int64) (slo, shi *big.Rat, lo, hi *big.Rat, ok bool) {
	r := func(a, b int64) *big.Rat { return big.NewRat(a, b) }
	for _, l := range lows {
		for _, u := range ups {
			den := u.x - l.x
			num := u.d - l.d + 2*sigma
			switch {
			case den > 0:
				if v := r(num, den); shi == nil || v.Cmp(shi) < 0 {
					shi = v
				}
			case den < 0:
				if v := r(num, den); slo == nil || v.Cmp(slo) > 0 {
					slo = v
				}
			default:
				if num < 0 {
					return nil, nil, nil, nil, false
				}
			}
		}
	}
	if slo == nil || shi == nil || slo.Cmp(shi) > 0 {
		return nil, nil, nil, nil, false
	}
	// Candidate slopes: the ends and every pairwise slope inside.
	cands := []*big.Rat{slo, shi}
	for _, set := range [][]pt{ups, lows} {
		for i := range set {
			for j := range set {
				if set[j].x > set[i].x {
					v := r(set[j].d-set[i].d, set[j].x-set[i].x)
					if v.Cmp(slo) >= 0 && v.Cmp(shi) <= 0 {
						cands = append(cands, v)
					}
				}
			}
		}
	}
	for _, s := range cands {
		var mn, mx *big.Rat
		for _, u := range ups {
			v := new(big.Rat).Mul(s, r(x-u.x, 1))
			v.Add(v, r(u.d+sigma, 1))
			if mn == nil || v.Cmp(mn) < 0 {
				mn = v
			}
		}
		for _, l := range lows {
			v := new(big.Rat).Mul(s, r(x-l.x, 1))
			v.Add(v, r(l.d-sigma, 1))
			if mx == nil || v.Cmp(mx) > 0 {
				mx = v
			}
		}
		if hi == nil || mn.Cmp(hi) > 0 {
			hi = mn
		}
		if lo == nil || mx.Cmp(lo) < 0 {
			lo = mx
		}
	}
	return slo, shi, lo, hi, true
}

func ratFloor(r *big.Rat) int64 {
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor for a positive denominator
	return q.Int64()
}

func ratCeil(r *big.Rat) int64 { return -ratFloor(new(big.Rat).Neg(r)) }

// The incremental hull (monotone chain, out-of-order inserts, window trims)
// gives exactly the bounds of a brute-force search over all points.
func TestHullMatchesBruteForce(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		shift := r.Int64N(50) - 10
		window := 64
		if seed%2 == 1 {
			window = 2 + r.IntN(6) // exercise trims and origin moves
		}
		h := mustHull(t, HullConfig{Window: window, Shift: shift})
		var all []Sample
		base := int64(1e15)
		n := 2 + r.IntN(22)
		for i := 0; i < n; i++ {
			x := base + int64(i)*1000 + r.Int64N(3000) - 1500 // out of order sometimes
			if r.IntN(10) == 0 && i > 0 {
				x = all[len(all)-1].LocRecv // equal x
			}
			off := int64(500) + r.Int64N(7)*int64(i)/3
			s := Sample{SrcSend: x + off - 20 - r.Int64N(100), LocRecv: x, LocSend: x + 10 + r.Int64N(20)}
			s.SrcRecv = s.LocSend + off + 20 + r.Int64N(100)
			all = append(all, s)
			err := h.AddRound([]Sample{s})
			if errors.Is(err, ErrInconsistent) {
				all = all[len(all)-1:]
			} else if err != nil {
				t.Fatalf("seed %d: AddRound: %v", seed, err)
			}
		}
		ups := make([]pt, len(all))
		lows := make([]pt, len(all))
		for i, s := range all {
			ups[i] = pt{s.LocSend - h.x0, s.SrcRecv - s.LocSend - h.c}
			lows[i] = pt{s.LocRecv - h.x0, s.SrcSend - s.LocRecv - h.c}
		}
		if window < 64 {
			// After trims the window holds the newest samples by local time:
			// compare with a brute force over exactly the held points.
			ups = append([]pt(nil), h.up.pts...)
			lows = nil
			for _, p := range h.low.pts {
				lows = append(lows, pt{p.x, -p.d})
			}
		}
		for k := 0; k < 5; k++ {
			x := base + r.Int64N(int64(n)*1500) - 2000
			slo, shi, blo, bhi, bok := bruteBounds(ups, lows, shift, x-h.x0)
			lo, hi, ok := h.Bounds(x)
			if bok != ok {
				t.Fatalf("seed %d: Bounds ok = %v, brute force %v", seed, ok, bok)
			}
			if !ok {
				continue
			}
			if want := ratFloor(blo) + x + h.c; lo != want {
				t.Fatalf("seed %d x %d: lo = %d, brute force %d", seed, x, lo, want)
			}
			if want := ratCeil(bhi) + x + h.c; hi != want {
				t.Fatalf("seed %d x %d: hi = %d, brute force %d", seed, x, hi, want)
			}
			a, b, _ := h.SkewBounds()
			fa, _ := slo.Float64()
			fb, _ := shi.Float64()
			if a != fa || b != fb {
				t.Fatalf("seed %d: SkewBounds %v %v, brute force %v %v", seed, a, b, fa, fb)
			}
		}
	}
}

// Jezequel 4.2: "the wanted line lies between the two separate sets of
// points UP and LOW": the bounds contain the truth for every delay model.
func TestJezequel42_BoundsContainTruth(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			for seed := uint64(0); seed < 40; seed++ {
				r := rand.New(rand.NewPCG(seed, 42))
				w := randomWorld(r)
				h := mustHull(t, HullConfig{Window: 32})
				for i, rd := range w.rounds(r, m, w.t0, 200e6, 60, 3) {
					if err := h.AddRound(rd); err != nil {
						t.Fatalf("seed %d round %d: %v", seed, i, err)
					}
					checkContains(t, h, w, rd[len(rd)-1].LocSend, seed, i)
				}
				lo, hi, ok := h.SkewBounds()
				if !ok || lo > w.skew() || hi < w.skew() {
					t.Fatalf("seed %d: SkewBounds [%g, %g] %v miss the true skew %g", seed, lo, hi, ok, w.skew())
				}
			}
		})
	}
}

// checkContains checks Bounds and Mapping.At against the truth now, a
// little back and 5 s ahead.
func checkContains(t *testing.T, h *Hull, w world, now int64, seed uint64, round int) {
	t.Helper()
	for _, x := range []int64{now, now - 1e8, now + 5e9} {
		truth := w.y(x)
		lo, hi, ok := h.Bounds(x)
		if ok && (lo > truth || hi < truth) {
			t.Fatalf("seed %d round %d: Bounds(%d) = [%d, %d] miss the truth %d by %d", seed, round, x, lo, hi, truth, max(lo-truth, truth-hi))
		}
		if m := h.Mapping(); m.Valid {
			_, mlo, mhi := m.At(x)
			if mlo > truth || mhi < truth {
				t.Fatalf("seed %d round %d: Mapping.At(%d) = [%d, %d] miss the truth %d", seed, round, x, mlo, mhi, truth)
			}
			if ok && (mlo > lo || mhi < hi) {
				t.Fatalf("seed %d round %d: Mapping.At(%d) = [%d, %d] inside the exact bounds [%d, %d]", seed, round, x, mlo, mhi, lo, hi)
			}
		}
	}
}

// Jezequel 4.3: with a granularity larger than the minimum delay the sets
// overlap; moving them apart by nu (Shift) restores bounds that contain the
// truth. Without the shift at least some runs go wrong.
func TestJezequel43_GranularityShift(t *testing.T) {
	const g = 20000 // 20 us granularity, minimum delay 1 ns
	m := delayModel{"tiny-min", 1, 1, expo(3000)}
	failuresWithout := 0
	for seed := uint64(0); seed < 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 43))
		w := randomWorld(r)
		w.g = g
		rounds := w.rounds(r, m, w.t0, 200e6, 40, 3)
		shift := g + int64(math.Ceil(g*math.Abs(w.skew()))) + 1
		h := mustHull(t, HullConfig{Window: 32, Shift: shift})
		raw := mustHull(t, HullConfig{Window: 32})
		failed := false
		for i, rd := range rounds {
			if err := h.AddRound(rd); err != nil {
				t.Fatalf("seed %d round %d with Shift %d: %v", seed, i, shift, err)
			}
			checkContains(t, h, w, rd[len(rd)-1].LocSend, seed, i)
			if err := raw.AddRound(rd); err != nil {
				failed = true
			}
			x := rd[len(rd)-1].LocSend
			if lo, hi, ok := raw.Bounds(x); ok && (lo > w.y(x) || hi < w.y(x)) {
				failed = true
			}
		}
		if failed {
			failuresWithout++
		}
	}
	if failuresWithout == 0 {
		t.Errorf("without Shift no run went wrong: the test does not exercise the granularity problem")
	}
	t.Logf("without Shift, %d of 40 runs were inconsistent or missed the truth", failuresWithout)
}

// Jezequel 4.3: "the lower bound for Delta beta = (b+ - b-)/2 is 2 mu/Delta T"
// (isotropic network, nu = 0): the skew half-width narrows like 1/dT, and
// width*dT stays of the order of 2*mu as dT grows 8x.
func TestJezequel43_DriftBoundNarrowsAsOneOverDT(t *testing.T) {
	const mu = 5000
	m := delayModel{"exp", mu, mu, expo(1000)}
	const period = 10e6 // a round every 10 ms
	var products []float64
	for _, dT := range []int64{1e9, 2e9, 4e9, 8e9} {
		var sum float64
		const seeds = 10
		for seed := uint64(0); seed < seeds; seed++ {
			r := rand.New(rand.NewPCG(seed, 44))
			w := randomWorld(r)
			h := mustHull(t, HullConfig{Window: 4096})
			for _, rd := range w.rounds(r, m, w.t0, period, int(dT/period)+1, 3) {
				if err := h.AddRound(rd); err != nil {
					t.Fatal(err)
				}
			}
			lo, hi, ok := h.SkewBounds()
			if !ok {
				t.Fatal("unbounded skew")
			}
			sum += (hi - lo) / 2
		}
		hw := sum / seeds
		p := hw * float64(dT) / (2 * mu)
		products = append(products, p)
		t.Logf("dT = %v s: mean skew half-width %.3g, half-width*dT/(2 mu) = %.3f", float64(dT)/1e9, hw, p)
		if p < 0.5 || p > 3 {
			t.Errorf("dT = %d: half-width*dT/(2 mu) = %.3f, want within [0.5, 3] of the paper's 2 delta/dT", dT, p)
		}
	}
	if r := products[3] / products[0]; r < 0.5 || r > 2 {
		t.Errorf("width*dT changed by %.2fx from dT to 8 dT: not a 1/dT narrowing", r)
	}
}

// A drift step makes UP and LOW inseparable: ErrInconsistent, window
// restarted, and the bounds contain the new truth afterwards.
func TestHullDriftStepRestarts(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	w := world{t0: 1e12, off: 1e9, ppb: 50000}
	m := models[0]
	h := mustHull(t, HullConfig{Window: 64})
	for _, rd := range w.rounds(r, m, w.t0, 100e6, 40, 3) {
		if err := h.AddRound(rd); err != nil {
			t.Fatal(err)
		}
	}
	// Step: from now on the source runs 100 ppm slower, continuous in time.
	start := w.t0 + 40*100e6
	w2 := world{t0: start, off: w.y(start) - start, ppb: -50000}
	restarted := false
	for i, rd := range w2.rounds(r, m, start, 100e6, 40, 3) {
		err := h.AddRound(rd)
		if errors.Is(err, ErrInconsistent) {
			restarted = true
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		if restarted {
			checkContains(t, h, w2, rd[len(rd)-1].LocSend, 0, i)
		}
	}
	if !restarted {
		t.Fatal("a 100 ppm drift step never gave ErrInconsistent")
	}
}

// Out-of-order rounds give the same bounds as in-order ones.
func TestHullOutOfOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	w := randomWorld(r)
	rounds := w.rounds(r, models[0], w.t0, 50e6, 30, 3)
	a := mustHull(t, HullConfig{Window: 256})
	b := mustHull(t, HullConfig{Window: 256})
	for _, rd := range rounds {
		if err := a.AddRound(rd); err != nil {
			t.Fatal(err)
		}
	}
	shuffled := append([][]Sample(nil), rounds...)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for _, rd := range shuffled {
		if err := b.AddRound(rd); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range []int64{w.t0, w.t0 + 1e9, w.t0 + 5e9} {
		la, ha, oa := a.Bounds(x)
		lb, hb, ob := b.Bounds(x)
		if la != lb || ha != hb || oa != ob {
			t.Errorf("Bounds(%d): in order [%d, %d], shuffled [%d, %d]", x, la, ha, lb, hb)
		}
	}
}

// The window holds between Window and 2*Window samples.
func TestHullWindowBounded(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	w := randomWorld(r)
	h := mustHull(t, HullConfig{Window: 16})
	for i, rd := range w.rounds(r, models[0], w.t0, 10e6, 200, 3) {
		if err := h.AddRound(rd); err != nil {
			t.Fatal(err)
		}
		if i > 20 && (h.Len() < 16 || h.Len() >= 32) {
			t.Fatalf("round %d: Len = %d, want in [16, 32)", i, h.Len())
		}
		checkContains(t, h, w, rd[2].LocSend, 9, i)
	}
}

// MaxWander: a source whose skew changes linearly (offset quadratic in x)
// stays inside the bounds widened by MaxWander*span^2/2.
func TestHullWander(t *testing.T) {
	const wander = 1e-17 // skew change per ns: 0.01 ppm per second
	r := rand.New(rand.NewPCG(12, 12))
	base := world{t0: 1e12, off: 5e6, ppb: 20000}
	y := func(x int64) int64 {
		dx := float64(x - base.t0)
		return base.y(x) + int64(math.Floor(wander*dx*dx/2))
	}
	h := mustHull(t, HullConfig{Window: 64, Shift: 1, MaxWander: wander})
	plain := mustHull(t, HullConfig{Window: 64, Shift: 1})
	missedPlain := false
	m := models[4] // tiny minimum delay: the curvature matters
	for i := 0; i < 300; i++ {
		t0 := base.t0 + int64(i)*500e6
		var rd []Sample
		for k := int64(0); k < 3; k++ {
			tt := t0 + k*300000
			d1, d2 := m.min1+int64(m.excess(r)), m.min2+int64(m.excess(r))
			rd = append(rd, Sample{SrcSend: y(tt), LocRecv: tt + d1, LocSend: tt + d1 + 1000, SrcRecv: y(tt + d1 + 1000 + d2)})
		}
		if err := h.AddRound(rd); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		for _, x := range []int64{rd[2].LocSend, rd[2].LocSend + 2e9} {
			lo, hi, ok := h.Bounds(x)
			if ok && (lo > y(x) || hi < y(x)) {
				t.Fatalf("round %d: Bounds(%d) = [%d, %d] miss %d", i, x, lo, hi, y(x))
			}
			if mp := h.Mapping(); mp.Valid {
				if _, mlo, mhi := mp.At(x); mlo > y(x) || mhi < y(x) {
					t.Fatalf("round %d: Mapping.At(%d) misses the truth", i, x)
				}
			}
		}
		if err := plain.AddRound(rd); err != nil {
			missedPlain = true
		} else if lo, hi, ok := plain.Bounds(rd[2].LocSend + 2e9); ok && (lo > y(rd[2].LocSend+2e9) || hi < y(rd[2].LocSend+2e9)) {
			missedPlain = true
		}
	}
	if !missedPlain {
		t.Errorf("without MaxWander the bounds never missed: the test does not exercise the wander")
	}
}

func TestHullConfigValidate(t *testing.T) {
	tests := []struct {
		field string
		c     HullConfig
	}{
		{"Window", HullConfig{Window: 1}},
		{"Shift", HullConfig{Window: 8, Shift: 1 << 41}},
		{"MaxWander", HullConfig{Window: 8, MaxWander: math.NaN()}},
		{"MaxWander", HullConfig{Window: 8, MaxWander: -1}},
		{"MaxSpan", HullConfig{Window: 8, MaxSpan: -1}},
		{"CenterPoints", HullConfig{Window: 8, CenterPoints: 2}},
		{"CenterPoints", HullConfig{Window: 8, CenterPoints: 9}},
		{"CenterBand", HullConfig{Window: 8, CenterBand: -1}},
		{"CenterMemory", HullConfig{Window: 8, CenterMemory: -1}},
		{"CenterMemory", HullConfig{Window: 8, CenterMemory: math.NaN()}},
	}
	for _, tc := range tests {
		if _, err := NewHull(tc.c); err == nil || !contains(err.Error(), "HullConfig."+tc.field) {
			t.Errorf("NewHull(%+v) = %v, want an error naming %s", tc.c, err, tc.field)
		}
	}
}

func TestHullBadRounds(t *testing.T) {
	h := mustHull(t, HullConfig{Window: 8})
	tests := []struct {
		name  string
		round []Sample
	}{
		{"empty", nil},
		{"spread", []Sample{{0, 0, 10, 10}, {1 << 50, 1 << 50, 1<<50 + 1, 1<<50 + 2}}},
		{"overflow", []Sample{{math.MinInt64, math.MaxInt64, 0, 0}}},
	}
	for _, tc := range tests {
		if err := h.AddRound(tc.round); !errors.Is(err, ErrBadRound) {
			t.Errorf("%s: err = %v, want ErrBadRound", tc.name, err)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

var _ = sort.Ints
