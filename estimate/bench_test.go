package estimate

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchRounds is a long stream of 3-exchange rounds (exponential delays,
// 50 ppm skew), one every 100 ms.
func benchRounds(n int) [][]Sample {
	r := rand.New(rand.NewPCG(1, 1))
	w := world{t0: 1e15, off: 3e9, ppb: 50000}
	return w.rounds(r, models[0], w.t0, 100e6, n, 3)
}

func benchEstimator(b *testing.B, e Estimator) {
	rounds := benchRounds(20000)
	i := 0
	for b.Loop() {
		if i == len(rounds) {
			b.StopTimer()
			e.Reset()
			i = 0
			b.StartTimer()
		}
		if err := e.AddRound(rounds[i]); err != nil {
			b.Fatal(err)
		}
		e.Mapping()
		i++
	}
}

// BenchmarkHullAddRound: ns per round (3 samples) plus a Mapping; the
// amortized cost must not grow with the window.
func BenchmarkHullAddRound(b *testing.B) {
	for _, w := range []int{256, 1024} {
		b.Run(fmt.Sprintf("window=%d", w), func(b *testing.B) {
			benchEstimator(b, mustHull(b, HullConfig{Window: w, Shift: 100}))
		})
	}
}

func BenchmarkMinRTTAddRound(b *testing.B) {
	e, _ := NewMinRTT(DefaultMinRTTConfig())
	benchEstimator(b, e)
}

func BenchmarkRegressionAddRound(b *testing.B) {
	for _, n := range []int{16, 64} {
		b.Run(fmt.Sprintf("rounds=%d", n), func(b *testing.B) {
			e, _ := NewRegression(RegressionConfig{Rounds: n, DropFrac: DefaultDropFrac})
			benchEstimator(b, e)
		})
	}
}

func BenchmarkSplineAddRound(b *testing.B) {
	rounds := benchRounds(1000)
	for b.Loop() {
		s := NewSplineEstimator()
		for _, rd := range rounds[:64] {
			if err := s.AddRound(rd); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkHullBounds(b *testing.B) {
	h := mustHull(b, HullConfig{Window: 256})
	for _, rd := range benchRounds(600) {
		if err := h.AddRound(rd); err != nil {
			b.Fatal(err)
		}
	}
	x := int64(1e15 + 61e9)
	for b.Loop() {
		h.Bounds(x)
	}
}

// BenchmarkCenterRound: ns per round of the precise profile's centre hull
// (centre line with its memory, span adaptation and breaks) on a 10-us
// bell, one round every 6 s plus a Mapping and a Center read: 240
// exchanges a round over a window of 4096 (the profile until stop 50) and
// 480 over 8192 (stop 50) and 960 over 16384 (since stop 51). The daemon
// does this once a round per source.
func BenchmarkCenterRound(b *testing.B) {
	for _, tc := range []struct{ pings, window int }{{240, 4096}, {480, 8192}, {960, 16384}} {
		b.Run(fmt.Sprintf("pings=%d/window=%d", tc.pings, tc.window), func(b *testing.B) {
			r := rand.New(rand.NewPCG(2, 2))
			w := world{t0: 1e15, off: 3e9, ppb: 20000}
			bell := delayModel{"normal 10us", 100000, 100000, func(r *rand.Rand) float64 { return 10000 * r.NormFloat64() }}
			rounds := w.rounds(r, bell, w.t0, 6e9, 64, tc.pings)
			hc := HullConfig{Window: tc.window, Center: true, CenterMemory: 2.5, CenterAdapt: true, CenterBreaks: true}
			h := mustHull(b, hc)
			i := 0
			for b.Loop() {
				if i == len(rounds) {
					b.StopTimer()
					h = mustHull(b, hc)
					i = 0
					b.StartTimer()
				}
				if err := h.AddRound(rounds[i]); err != nil {
					b.Fatal(err)
				}
				h.Mapping()
				last := rounds[i][len(rounds[i])-1].LocRecv
				h.Center(last + 3e9)
				i++
			}
		})
	}
}
