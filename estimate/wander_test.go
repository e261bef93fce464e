package estimate

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// wanderTrackOf draws n rounds' locations gap apart (s) of a clock whose
// frequency is a random walk of intensity q (ns^2/s^3), each location
// seen through noise of variance v (ns^2), and the phase of a frequency
// that changes at accel (ns/s^2) besides.
func wanderTrackOf(r *rand.Rand, n int, gap, q, v, accel float64) []roundLoc {
	out := make([]roundLoc, n)
	var phase, freq float64
	const steps = 10 // the walk's steps between rounds
	dt := gap / steps
	for i := range out {
		t := float64(i) * gap
		out[i] = roundLoc{x: t * 1e9, y: phase + accel/2*t*t + math.Sqrt(v)*r.NormFloat64(), v: v}
		for range steps { // the frequency holds for a step
			phase += freq * dt
			freq += math.Sqrt(q*dt) * r.NormFloat64()
		}
	}
	return out
}

// TestWanderQ: over wanderRounds rounds the measured wander is within a
// factor of two of the truth (the median over 20 clocks) across three
// decades of it and two noises, falls far below the prior on a steady
// clock, and counts a frequency that changes steadily as wander.
func TestWanderQ(t *testing.T) {
	for _, c := range []struct {
		name        string
		q, v, accel float64
		gap         float64
		lo, hi      float64 // the median estimate's range
	}{
		{"lab's wander, 3-us bell", 60, 170 * 170, 0, 6, 30, 120},
		{"lab's wander, 10-us bell", 60, 530 * 530, 0, 6, 25, 140},
		{"ten times the wander", 600, 170 * 170, 0, 6, 300, 1200},
		{"a tenth of the wander", 6, 170 * 170, 0, 6, 3, 12},
		{"rounds every 2 s", 60, 170 * 170, 0, 2, 30, 120},
		{"steady clock", 0, 170 * 170, 0, 6, 0, 6},
		{"a crystal warming, 1 ns/s^2", 0, 170 * 170, 1, 6, 60, math.Inf(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 5))
			var est []float64
			for range 20 {
				est = append(est, wanderQ(wanderTrackOf(r, wanderRounds, c.gap, c.q, c.v, c.accel)))
			}
			slices.Sort(est)
			med := est[len(est)/2]
			var mean float64
			for _, e := range est {
				mean += e / float64(len(est))
			}
			t.Logf("q %.0f: median estimate %.1f, mean %.1f (range %.1f-%.1f)", c.q, med, mean, est[0], est[len(est)-1])
			if med < c.lo || med > c.hi {
				t.Errorf("median estimate %.1f ns^2/s^3, want %.1f-%.1f", med, c.lo, c.hi)
			}
		})
	}
}

// TestWanderQShortTrack: with few rounds the prior holds, and odd tracks
// (one round, rounds at one time) give the prior, never NaN.
func TestWanderQShortTrack(t *testing.T) {
	for _, rounds := range [][]roundLoc{
		nil,
		{{x: 0, y: 5, v: 100}},
		{{x: 0, y: 5, v: 100}, {x: 0, y: 7, v: 100}, {x: 0, y: 9, v: 100}, {x: 0, y: 1, v: 100}},
	} {
		if q := wanderQ(rounds); q != wanderRef {
			t.Errorf("%d rounds: %v, want the prior %v", len(rounds), q, wanderRef)
		}
	}
}
