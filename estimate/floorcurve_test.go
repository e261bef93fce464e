package estimate_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/netmodel"
)

// floorWanderRun feeds a centre-line hull 60 rounds of 240 exchanges over
// a pareto floor (100 us + a tail of 50 us, each way), a round every 6 s,
// the source's clock's frequency a random walk of walk ppm/sqrt(s) against
// the local one's (0: a steady clock; the lab's crystals wander 0.005 each,
// seeded), and returns the mean |error| of Center half a period after each
// of the last 30 rounds and the floor line's memory at the end.
func floorWanderRun(t testing.TB, walk float64, seed uint64) (float64, float64) {
	t.Helper()
	h, err := estimate.NewHull(estimate.HullConfig{Window: 4096, Center: true, CenterMemory: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	l, err := netmodel.ParseLink("pareto:100us:50us")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 11))
	// The source's offset from the local clock at whole seconds (ns): the
	// frequency takes a random step every second; between seconds the
	// offset is interpolated (exact for a piecewise-constant frequency).
	const seconds = 60*6 + 10
	off := make([]float64, seconds+1)
	freq := 20e-6
	wr := rand.New(rand.NewPCG(seed, 12))
	for i := 1; i <= seconds; i++ {
		off[i] = off[i-1] + freq*1e9
		freq += walk * 1e-6 * wr.NormFloat64()
	}
	src := func(x int64) int64 {
		s := float64(x) / 1e9
		i := min(max(int(s), 0), seconds-1)
		return x + 3_000_000 + int64(math.Round(off[i]+(off[i+1]-off[i])*(s-float64(i))))
	}
	up := func() int64 { return l.Forward.Sample(r) }
	down := func() int64 { return l.Reverse.Sample(r) }
	mean := feedRounds(t, h, 60, 30, int64(2e6), src, up, down)
	sh, _ := h.CenterShape()
	return mean, sh.FloorMemory
}

// TestCenterFloorFollowsWander: where the frequency wanders (here 0.015
// ppm/sqrt(s), a crystal in a draught), the floor line's memory shortens
// to what predicts the rounds' own floors best and the line lags less than
// with its default memory, over eight seeds; on a steady clock the memory
// stays the default and nothing changes. Each run moves the hull's origin
// (14400 exchanges through a window of 4096): kept locations that did not
// move with it fail the wandering case.
func TestCenterFloorFollowsWander(t *testing.T) {
	var sumW, sumWFixed float64
	for seed := uint64(1); seed <= 8; seed++ {
		wandering, mem := floorWanderRun(t, 0.015, seed)
		steady, memSteady := floorWanderRun(t, 0, seed)
		restore := estimate.SetFloorCurve(false)
		wanderingFixed, _ := floorWanderRun(t, 0.015, seed)
		steadyFixed, _ := floorWanderRun(t, 0, seed)
		restore()
		t.Logf("seed %d: wandering clock %.0f ns (memory %.1f s) against %.0f ns with the default memory; steady clock %.0f ns (memory %.1f s) against %.0f",
			seed, wandering, mem/1e9, wanderingFixed, steady, memSteady/1e9, steadyFixed)
		sumW += wandering
		sumWFixed += wanderingFixed
		if math.Abs(steady-steadyFixed) > 0.05*steadyFixed+2 {
			t.Errorf("seed %d: steady clock: %.0f ns with memory %.1f s, want the default memory's %.0f ns", seed, steady, memSteady/1e9, steadyFixed)
		}
	}
	if sumW > 0.85*sumWFixed {
		t.Errorf("wandering clock: mean %.0f ns over eight seeds, want at most 0.85x the default memory's %.0f", sumW/8, sumWFixed/8)
	}
}
