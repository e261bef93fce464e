package sim

import (
	"context"
	"slices"
	"testing"
)

// TestCenterLabLikeHostMedians runs testdata/lab-like.yaml (gclock lab's
// link, timestamp noise, clock wander and daemon config: the centre line
// with a memory of 2.5 rounds, 480 exchanges per resync, 240 on the
// convergence ramp, two rounds at once within a 1-s budget) with seeds
// 1-24 and holds the per-host medians of |error| to what the lab's quiet
// target needs with a margin: their mean at most 150 ns and, per seed, the
// worst host's median at most 190 ns in the middle seed, every synced read
// inside its bounds (measured with that profile, stop 50: 131 and 165 ns,
// 296 ns at most; 480 on the ramp too: 119 and 147 ns; 240 throughout,
// the profile before: 145 and 190 ns, 386 ns at most, held to 165 and
// 220; earlier, 120 exchanges and no memory: 208 and 257 ns; with the
// floor line's memory chosen by the rounds, floorCurve: 144 and 197 ns,
// 328 ns at most).
//
// The centre line's drift is what limits a host's median: with a
// convergence ramp, half a minute-long run's exchanges fall in its first
// ten seconds, and the fastest exchanges over the whole window, which the
// line was fitted to, came mostly from there, so the line was extrapolated
// over 40 s from an early centroid. Before refineCenter chose its points
// per quarter of the window: mean 259 ns, worst host 354 ns in the middle
// seed, 789 ns at most (four seeds above 500 ns). After: 212, 257 and
// 544 ns (two).
func TestCenterLabLikeHostMedians(t *testing.T) {
	mean, mid, _ := labLikeHostMedians(t, "testdata/lab-like.yaml", 24)
	if mean > 150 || mid > 190 {
		t.Errorf("mean host median %d ns (want <= 150), worst host's median %d ns in the middle seed (want <= 190)", mean, mid)
	}
}

// TestCenterLabLikeBurstyHostMedians runs testdata/lab-like-bursty.yaml
// (the lab-like scenario with a longer tail and bursts of queueing every 5
// s, in which whole rounds have no exchange near the floor either way)
// with seeds 1-40. Rounds of queued exchanges tilted the centre line's
// least-squares fit; with the queued points weighted down
// (estimate.fitCenter) the mean per-host median went from 326 to 288 ns,
// the worst host's median in the middle seed from 479 to 421 ns, and the
// seeds with a host above 500 ns from 16 to 10 (with the FloorFilter of
// two floors; before it 325 -> 301 ns, 452 -> 403 ns, 13 -> 7). With the
// lab's config of 240 exchanges a round (480 since stop 50), two at once
// within a 1-s budget, and the centre line's memory: 255 ns, 374 ns and 3
// seeds, held here with a margin. The floor line's memory chosen by the
// rounds (estimate's floorCurve) failed it when it chose from 8 rounds on
// (283 ns, 383 ns, 7 seeds); from 12 rounds on: 264 ns, 382 ns and 5 seeds. The check
// exchanges between rounds (engine Config.ChecksPerPeriod, 32 in the
// precise profile) moved every later delay of a run to other draws of the
// links' random streams: 269 ns, 380 ns and 7 seeds with them, 269 ns,
// 382 ns and 6 seeds with checks_per_period 0 at the same commit (two
// rounds in 20 seeds were started by checks), so the count of seeds is
// held at 7: the medians did not move. With rounds of 480 and 240 on the
// ramp (the precise profile since stop 50) 202 ns, 273 ns and no seed
// (480 on the ramp too: 178 ns, 228 ns; 240 throughout at the same commit:
// 268 ns, 343 ns and 6), held at 235 ns, 310 ns and 3 seeds.
func TestCenterLabLikeBurstyHostMedians(t *testing.T) {
	mean, mid, worst := labLikeHostMedians(t, "testdata/lab-like-bursty.yaml", 40)
	over := 0
	for _, w := range worst {
		if w > 500 {
			over++
		}
	}
	t.Logf("%d of %d seeds with a host's median above 500 ns", over, len(worst))
	if mean > 235 || mid > 310 || over > 3 {
		t.Errorf("mean host median %d ns (want <= 235), worst host's median %d ns in the middle seed (want <= 310), %d seeds with a host above 500 ns (want <= 3)", mean, mid, over)
	}
}

// labLikeHostMedians runs the scenario at path with seeds 1..seeds and
// returns the mean over seeds and hosts (but the reference) of the
// per-host median |error|, the worst host's median in the middle seed, and
// every seed's worst host median, sorted; every synced read must lie inside
// its bounds.
func labLikeHostMedians(t *testing.T, path string, seeds uint64) (mean, mid int64, worst []int64) {
	t.Helper()
	sc := readScenario(t, path)
	var sum, n int64
	for seed := uint64(1); seed <= seeds; seed++ {
		sc.Seed = seed
		res, err := Run(context.Background(), sc, Options{})
		if err != nil {
			t.Fatalf("%s, seed %d: %v", path, seed, err)
		}
		var w int64
		for _, nd := range res.Nodes {
			if nd.BoundCoverage != 1 {
				t.Errorf("%s, seed %d, node %d: %.5f of the synced reads inside the bounds, want 1", path, seed, nd.ID, nd.BoundCoverage)
			}
			if nd.ID == sc.Reference {
				continue
			}
			sum, n = sum+nd.ErrorP50Ns, n+1
			w = max(w, nd.ErrorP50Ns)
		}
		t.Logf("seed %d: worst host median %d ns", seed, w)
		worst = append(worst, w)
	}
	slices.Sort(worst)
	mean, mid = sum/n, worst[len(worst)/2]
	t.Logf("%s: mean host median %d ns; worst host's median per seed: %d ns in the middle seed, %d ns at most", path, mean, mid, worst[len(worst)-1])
	return mean, mid, worst
}
