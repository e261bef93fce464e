package estimate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Intel: with symmetric delays the midpoints lie on the line, so the fit is
// exact; the 10% highest-RTT exchanges (here an asymmetric outlier) are
// ignored.
func TestIntel_FitLineExactAndDrop(t *testing.T) {
	w := world{t0: 1e15, off: -4e9, ppb: 37000}
	var ss []Sample
	for i := int64(0); i < 20; i++ {
		tt := w.t0 + i*1e9
		ss = append(ss, Sample{SrcSend: w.y(tt), LocRecv: tt + 5000, LocSend: tt + 6000, SrcRecv: w.y(tt + 11000)})
	}
	ss[7].SrcRecv += 900000 // one slow, asymmetric exchange (largest RTT)
	m, err := FitLine(ss, DefaultDropFrac)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m.Skew-w.skew()) > 1e-10 {
		t.Errorf("Skew = %.12g, want %.12g", m.Skew, w.skew())
	}
	if d := m.Y0 - w.y(m.X0); d < -2 || d > 2 {
		t.Errorf("Y0 off by %d ns", d)
	}
	m0, err := FitLine(ss, 0)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(m0.Skew-w.skew()) < 1e-9 {
		t.Errorf("without the drop the outlier did not matter: the test does not exercise it")
	}
}

func TestFitLineErrors(t *testing.T) {
	one := []Sample{{0, 10, 20, 30}}
	same := []Sample{{0, 10, 20, 30}, {0, 10, 20, 30}}
	tests := []struct {
		name string
		ss   []Sample
		drop float64
		want string
	}{
		{"dropFrac", same, 1, "dropFrac"},
		{"dropFrac NaN", same, math.NaN(), "dropFrac"},
		{"too few", one, 0, "need at least 2"},
		{"same x", same, 0, "undetermined"},
		{"spread", []Sample{{0, 10, 20, 30}, {1 << 50, 1 << 50, 1 << 50, 1 << 50}}, 0, "round[1]"},
	}
	for _, tc := range tests {
		if _, err := FitLine(tc.ss, tc.drop); err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// meanAbsErr runs one estimate function over seeds and returns the mean
// |estimate - truth| at the last exchange's midpoint.
func meanAbsErr(t *testing.T, m delayModel, seeds int, est func(rounds [][]Sample, x int64) (int64, bool)) float64 {
	t.Helper()
	var sum float64
	n := 0
	for seed := uint64(0); seed < uint64(seeds); seed++ {
		r := rand.New(rand.NewPCG(seed, 77))
		w := randomWorld(r)
		rounds := w.rounds(r, m, w.t0, 500e6, 20, 3)
		last := rounds[len(rounds)-1]
		x, _ := last[len(last)-1].Mid()
		v, ok := est(rounds, x)
		if !ok {
			t.Fatalf("seed %d: no estimate", seed)
		}
		sum += math.Abs(float64(v - w.y(x)))
		n++
	}
	return sum / float64(n)
}

func hullEst(t *testing.T) func([][]Sample, int64) (int64, bool) {
	return func(rounds [][]Sample, x int64) (int64, bool) {
		h := mustHull(t, HullConfig{Window: 256})
		for _, rd := range rounds {
			if err := h.AddRound(rd); err != nil {
				t.Fatal(err)
			}
		}
		return h.Estimate(x)
	}
}

func regEst(t *testing.T) func([][]Sample, int64) (int64, bool) {
	return func(rounds [][]Sample, x int64) (int64, bool) {
		r, _ := NewRegression(RegressionConfig{Rounds: 64, DropFrac: DefaultDropFrac})
		for _, rd := range rounds {
			if err := r.AddRound(rd); err != nil {
				t.Fatal(err)
			}
		}
		est, _, _ := r.Mapping().At(x)
		return est, r.Mapping().Valid
	}
}

// single: the midpoint of the last exchange alone.
func singleEst(rounds [][]Sample, x int64) (int64, bool) {
	last := rounds[len(rounds)-1]
	_, y := last[len(last)-1].Mid()
	return y, true
}

// Jezequel footnote 2 / Intel: with a heavy-tailed (Pareto) delay the hull,
// which only uses the exchanges nearest the minimum, beats the regression,
// which averages the tail in.
func TestJezequel42_HullBeatsRegressionParetoTail(t *testing.T) {
	m := delayModel{"pareto", 4000, 4000, pareto(5000, 1.1)}
	h := meanAbsErr(t, m, 200, hullEst(t))
	r := meanAbsErr(t, m, 200, regEst(t))
	t.Logf("pareto: mean |error| hull %.0f ns, regression %.0f ns", h, r)
	if h >= r {
		t.Errorf("hull mean |error| %.0f ns is not below regression's %.0f ns", h, r)
	}
}

// Intel: the regression over many exchanges beats a single exchange's
// midpoint.
func TestIntel_RegressionBeatsSingleExchange(t *testing.T) {
	m := delayModel{"exp", 5000, 5000, expo(20000)}
	r := meanAbsErr(t, m, 200, regEst(t))
	s := meanAbsErr(t, m, 200, singleEst)
	t.Logf("exponential: mean |error| regression %.0f ns, single exchange %.0f ns", r, s)
	if r >= s {
		t.Errorf("regression mean |error| %.0f ns is not below a single exchange's %.0f ns", r, s)
	}
}

func TestRegressionWindowAndValidity(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	w := randomWorld(r)
	e, err := NewRegression(RegressionConfig{Rounds: 4, DropFrac: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	for i, rd := range w.rounds(r, models[0], w.t0, 1e9, 10, 5) {
		if err := e.AddRound(rd); err != nil {
			t.Fatal(err)
		}
		if e.Mapping().Valid != (i >= 1) {
			t.Fatalf("round %d: Valid = %v", i, e.Mapping().Valid)
		}
		if len(e.rounds) > 4 {
			t.Fatalf("holds %d rounds, want <= 4", len(e.rounds))
		}
	}
	if d := math.Abs(e.Mapping().Skew - w.skew()); d > 5e-6 {
		t.Errorf("skew off by %g", d)
	}
	for _, c := range []RegressionConfig{{Rounds: 0}, {Rounds: 2, DropFrac: -0.1}} {
		if _, err := NewRegression(c); err == nil {
			t.Errorf("NewRegression(%+v) accepted", c)
		}
	}
}
