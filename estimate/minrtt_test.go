package estimate

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestShortest(t *testing.T) {
	tests := []struct {
		name  string
		round []Sample
		want  int
	}{
		{"empty", nil, -1},
		{"one", []Sample{{0, 10, 20, 30}}, 0},
		{"second shortest", []Sample{{0, 50, 60, 100}, {0, 10, 20, 30}, {0, 40, 45, 90}}, 1},
		{"tie keeps first", []Sample{{0, 10, 20, 30}, {100, 110, 120, 130}}, 0},
	}
	for _, tc := range tests {
		s, i := Shortest(tc.round)
		if i != tc.want {
			t.Errorf("%s: index %d, want %d", tc.name, i, tc.want)
		}
		if i >= 0 && s != tc.round[i] {
			t.Errorf("%s: sample %+v is not round[%d]", tc.name, s, i)
		}
	}
}

// Liao Figure 1: redo the round when shortest_T_net-this-round -
// shortest_T_net-ever > NETWORK_LATENCY_ERROR_THRESH.
func TestLiaoFig1_RepeatRound(t *testing.T) {
	tests := []struct {
		this, ever, thresh int64
		want               bool
	}{
		{1000, 900, 50, true},
		{1000, 900, 100, false}, // equal to the threshold: not more
		{1000, 900, 101, false},
		{900, 1000, 0, false},
		{1000, -1, 0, false}, // nothing seen yet
		{math.MaxInt64, 0, math.MaxInt64, false},
		{math.MinInt64, math.MaxInt64, math.MaxInt64, false},
	}
	for _, tc := range tests {
		if got := RepeatRound(tc.this, tc.ever, tc.thresh); got != tc.want {
			t.Errorf("RepeatRound(%d, %d, %d) = %v, want %v", tc.this, tc.ever, tc.thresh, got, tc.want)
		}
	}
}

// Cristian / Liao: the shortest exchange's midpoint is within RTT/2 of the
// truth, and the drift from successive rounds converges to the true skew.
func TestLiao_MinRTTBoundAndDrift(t *testing.T) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			var skewErr float64
			for seed := uint64(0); seed < 20; seed++ {
				r := rand.New(rand.NewPCG(seed, 21))
				w := randomWorld(r)
				e, err := NewMinRTT(DefaultMinRTTConfig())
				if err != nil {
					t.Fatal(err)
				}
				for i, rd := range w.rounds(r, m, w.t0, 10e9, 30, 3) {
					if err := e.AddRound(rd); err != nil && !errors.Is(err, ErrInconsistent) {
						t.Fatal(err)
					}
					mp := e.Mapping()
					if truth := w.y(mp.X0); truth < mp.Y0-mp.W0 || truth > mp.Y0+mp.W0 {
						t.Fatalf("seed %d round %d: truth %d outside %d ± %d", seed, i, truth, mp.Y0, mp.W0)
					}
				}
				skewErr += math.Abs(e.Mapping().Skew - w.skew())
			}
			mean := skewErr / 20
			t.Logf("mean |skew error| after 30 rounds 10 s apart: %.3g", mean)
			if mean > 1.5e-6 {
				t.Errorf("mean |skew error| = %g, want < 1.5e-6", mean)
			}
		})
	}
}

func TestMinRTTDriftChange(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	w := world{t0: 1e12, off: 0, ppb: 50000}
	m := delayModel{"exp", 5000, 5000, expo(2000)}
	e, _ := NewMinRTT(MinRTTConfig{Smoothing: 0.3, MaxDrift: 100e-6})
	for _, rd := range w.rounds(r, m, w.t0, 1e9, 20, 3) {
		if err := e.AddRound(rd); err != nil {
			t.Fatal(err)
		}
	}
	start := w.t0 + 20e9
	w2 := world{t0: start, off: w.y(start) - start, ppb: -50000}
	restarted := false
	for _, rd := range w2.rounds(r, m, start, 1e9, 20, 3) {
		if err := e.AddRound(rd); errors.Is(err, ErrInconsistent) {
			restarted = true
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !restarted {
		t.Errorf("a 100 ppm drift change never gave ErrInconsistent")
	}
	if d := math.Abs(e.Mapping().Skew - w2.skew()); d > 1e-6 {
		t.Errorf("skew after the change off by %g", d)
	}
}

func TestMinRTTConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		c     MinRTTConfig
	}{
		{"Granularity", MinRTTConfig{Granularity: -1, Smoothing: 1}},
		{"Smoothing", MinRTTConfig{Smoothing: 0}},
		{"Smoothing", MinRTTConfig{Smoothing: math.NaN()}},
		{"MaxDrift", MinRTTConfig{Smoothing: 1, MaxDrift: -1}},
	} {
		if _, err := NewMinRTT(tc.c); err == nil || !contains(err.Error(), "MinRTTConfig."+tc.field) {
			t.Errorf("NewMinRTT(%+v) = %v, want an error naming %s", tc.c, err, tc.field)
		}
	}
}
