package sim

import (
	"context"
	"testing"
)

// TestChecksFollowFrequencyJump runs link-matrix-drift-step (host 1's
// frequency +10 ppm and host 2's -20 ppm at 35 s, the precise profile) on
// its pareto link with the profile's check exchanges and without
// (checks_per_period 0): with them the jump is found between rounds, so
// the hosts' p99 falls to less than half (measured: 56.6 -> 8.4 us over
// 30 seeds, gclock sim matrix --base link-matrix-drift-step); every synced
// read stays in its bounds either way.
func TestChecksFollowFrequencyJump(t *testing.T) {
	base, err := Shipped("link-matrix-drift-step")
	if err != nil {
		t.Fatal(err)
	}
	if base.Engine.ChecksPerPeriod == 0 {
		t.Fatal("the precise profile sends no check exchanges")
	}
	p99 := func(checks int, seed uint64) int64 {
		sc := base
		sc.Seed, sc.Engine.ChecksPerPeriod = seed, checks
		res, err := Run(context.Background(), sc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Others.BoundCoverage != 1 {
			t.Errorf("checks %d seed %d: coverage %.5f, want 1", checks, seed, res.Others.BoundCoverage)
		}
		return res.Others.ErrorP99Ns
	}
	for seed := uint64(1); seed <= 2; seed++ {
		with, without := p99(base.Engine.ChecksPerPeriod, seed), p99(0, seed)
		t.Logf("seed %d: p99 %d ns with checks, %d without", seed, with, without)
		if 2*with > without {
			t.Errorf("seed %d: p99 %d ns with checks, want under half the %d without", seed, with, without)
		}
	}
}
