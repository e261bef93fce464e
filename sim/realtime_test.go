package sim

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// TestRealTimeScenarios runs the shipped real-time scenarios on several
// seeds: every synced served read holds the true served time (coverage 1;
// reads between a CLOCK_REALTIME step and the next model are left out and
// must end), served time never goes backwards, and it moves at most at
// 1 + the drifts + the slew rate per ns of local clock.
func TestRealTimeScenarios(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, name := range []string{"realtime-ntp", "realtime-mean-drift"} {
		for _, seed := range seeds {
			sc, err := Shipped(name)
			if err != nil {
				t.Fatal(err)
			}
			sc.Seed = seed
			res, err := Run(context.Background(), sc, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rt := res.RealTime
			if rt == nil {
				t.Fatalf("%s: no real-time result", name)
			}
			t.Logf("%s seed %d: %d reads, coverage %.6f, blind %d, unserved %d, max |err| %d ns, max width %d ns, rate [%.6f, %.6f], jumps %d, polls %d (%d failed), segments %d, mean %.9f (true %.9f)",
				name, seed, rt.Reads, rt.Coverage, rt.Blind, rt.Unserved, rt.MaxAbsErr, rt.MaxWidth, rt.MinRate, rt.MaxRate,
				rt.Jumps, rt.Polls, rt.PollFails, rt.Segments, rt.Mean, rt.TrueMean)
			if rt.Reads < int(sc.Duration-sc.Eval.Warmup)/int(sc.Eval.Interval)*sc.Nodes/2 {
				t.Errorf("%s seed %d: only %d reads served", name, seed, rt.Reads)
			}
			if rt.Coverage != 1 {
				t.Errorf("%s seed %d: coverage %.6f (%d of %d)", name, seed, rt.Coverage, rt.Covered, rt.Reads)
			}
			if rt.Backward != 0 {
				t.Errorf("%s seed %d: served time went backwards %d times", name, seed, rt.Backward)
			}
			// The rate of a node's clock against the reference's (its
			// engine's max_drift), the page's slew, and the scale's own
			// rate: CLOCK_REALTIME's frequency and slews, or a mean.
			scale := 2 * (2*sc.Clocks.MaxDriftPPM + 1)
			if c := sc.RealTime; c.Mode == "reference-realtime" {
				scale = math.Abs(c.Clock.FreqPPM) + c.MaxSlewPPM
			}
			limit := 1 + (2*(2*sc.Clocks.MaxDriftPPM+1)+sc.Engine.MaxSlewPPM+scale)*1e-6
			if rt.MaxRate > limit || rt.MinRate < 2-limit {
				t.Errorf("%s seed %d: served rate [%.6f, %.6f] beyond 1 +- %.6f", name, seed, rt.MinRate, rt.MaxRate, limit-1)
			}
			if strings.HasSuffix(name, "ntp") {
				if rt.Jumps != 2 {
					t.Errorf("%s seed %d: %d CLOCK_REALTIME jumps detected, want the 2 steps", name, seed, rt.Jumps)
				}
				// Blind: at most ~2 polls per step and node.
				if max := 2 * 2 * 10 * sc.Nodes; rt.Blind > max {
					t.Errorf("%s seed %d: %d blind reads, more than %d", name, seed, rt.Blind, max)
				}
			} else if d := math.Abs(rt.Mean - rt.TrueMean); d > 2e-6 {
				t.Errorf("%s seed %d: mean rate %.9f, %.3f ppm from the clocks' mean", name, seed, rt.Mean, d*1e6)
			}
		}
	}
}

// TestRealTimeScenarioChecked: the evaluator sees a served time that
// misses the truth (the emulated CLOCK_REALTIME slewing faster than the
// model's max_slew_ppm).
func TestRealTimeScenarioChecked(t *testing.T) {
	sc, err := Shipped("realtime-ntp")
	if err != nil {
		t.Fatal(err)
	}
	sc.Duration = Duration(2 * time.Minute)
	sc.RealTime.Clock.Steps = nil
	sc.RealTime.MaxSlewPPM = 1 // the 30 ppm correction's changes are fine; the 400 ppm slew is not
	res, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rt := res.RealTime; rt.Coverage == 1 || rt.Jumps == 0 {
		t.Errorf("a slew beyond max_slew_ppm went unseen: coverage %.6f, %d jumps", rt.Coverage, rt.Jumps)
	}
}

// TestRealTimeUpstream runs realtime-upstream (a fake adjtimex on the
// reference): served UTC holds UTC itself, not just CLOCK_REALTIME, no
// node serves synced time through the span its reference's kernel says
// unsynchronised, and the leap announcement reaches every node. A kernel
// whose maxerror is below the true error (1 ms < 1.5 ms) is caught.
func TestRealTimeUpstream(t *testing.T) {
	for _, tt := range []struct {
		name   string
		maxErr Duration
		cover  bool
	}{
		{"honest kernel", Duration(2 * time.Millisecond), true},
		{"maxerror below the true error", Duration(time.Millisecond), false},
	} {
		sc, err := Shipped("realtime-upstream")
		if err != nil {
			t.Fatal(err)
		}
		sc.RealTime.Upstream.MaxError = tt.maxErr
		res, err := Run(context.Background(), sc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		rt := res.RealTime
		t.Logf("%s: %d reads, coverage %.6f, max |err| %d ns, max width %d ns, unserved %d (upstream %d), late %d, leap nodes %d",
			tt.name, rt.Reads, rt.Coverage, rt.MaxAbsErr, rt.MaxWidth, rt.Unserved, rt.UpstreamUnserved, rt.UpstreamLate, rt.LeapNodes)
		if (rt.Coverage == 1) != tt.cover {
			t.Errorf("%s: coverage %.6f (%d of %d)", tt.name, rt.Coverage, rt.Covered, rt.Reads)
		}
		if !tt.cover {
			continue
		}
		// 40 s of 10 evaluations/s on 8 nodes, less what the nodes learn
		// within a poll.
		if rt.UpstreamUnserved < 8*10*(40-3) || rt.UpstreamLate != 0 {
			t.Errorf("unsynced upstream: %d synced engine reads unserved, %d served late", rt.UpstreamUnserved, rt.UpstreamLate)
		}
		if rt.LeapNodes != sc.Nodes {
			t.Errorf("%d nodes know the leap second, want %d", rt.LeapNodes, sc.Nodes)
		}
		if rt.MaxWidth < 2*int64(2*time.Millisecond) {
			t.Errorf("max width %d ns: the 2 ms maxerror not folded in", rt.MaxWidth)
		}
		if rt.Reads < int(sc.Duration-sc.Eval.Warmup-Duration(40*time.Second))/int(sc.Eval.Interval)*sc.Nodes*9/10 {
			t.Errorf("only %d reads served", rt.Reads)
		}
	}
}
