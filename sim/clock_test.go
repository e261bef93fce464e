package sim

import (
	"math"
	"testing"
)

func TestDriftStepsBecomeClockSteps(t *testing.T) {
	const s = int64(1e9)
	for _, tc := range []struct {
		name  string
		steps []DriftChange
		// rate is the expected drift (ppm) in each second [k, k+1) s.
		rate []float64
	}{
		{"none", nil, []float64{10, 10, 10}},
		{"one", []DriftChange{{At: Origin + s, DeltaPPM: 5}}, []float64{10, 15, 15}},
		{"unsorted, accumulating", []DriftChange{{At: Origin + 2*s, DeltaPPM: -20}, {At: Origin + s, DeltaPPM: 5}}, []float64{10, 15, -5}},
		{"same time merged", []DriftChange{{At: Origin + s, DeltaPPM: 5}, {At: Origin + s, DeltaPPM: 1}}, []float64{10, 16, 16}},
		{"at the origin", []DriftChange{{At: Origin, DeltaPPM: 2}}, []float64{12, 12, 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := defaultNewClock(ClockParams{Origin: Origin, Offset: 1000, DriftPPM: 10, Steps: tc.steps, Granularity: 1, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range tc.rate {
				t0 := Origin + int64(k)*s
				got := float64(c.Ideal(t0+s)-c.Ideal(t0)-s) / float64(s) * 1e6
				if math.Abs(got-want) > 1e-3 {
					t.Errorf("second %d: drift %.4f ppm, want %v", k, got, want)
				}
			}
			if c.Ideal(Origin) != Origin+1000 {
				t.Errorf("offset at origin %d, want 1000", c.Ideal(Origin)-Origin)
			}
			if tt := c.TruthAt(c.Ideal(Origin + s/2)); tt > Origin+s/2 {
				t.Errorf("TruthAt(Ideal(t)) = %d > t", tt-Origin)
			}
		})
	}
}

func TestDriftStepApplies(t *testing.T) {
	for _, tc := range []struct {
		d    DriftStep
		n    int
		want bool
	}{
		{DriftStep{}, 3, true},
		{DriftStep{Except: []int{1}}, 1, false},
		{DriftStep{Except: []int{1}}, 0, true},
		{DriftStep{Nodes: []int{2, 3}}, 3, true},
		{DriftStep{Nodes: []int{2, 3}}, 4, false},
		{DriftStep{Nodes: []int{2}, Except: []int{2}}, 2, false},
	} {
		if got := tc.d.applies(tc.n); got != tc.want {
			t.Errorf("%+v applies to %d = %v, want %v", tc.d, tc.n, got, tc.want)
		}
	}
}
