package sim

import (
	"context"
	"testing"
	"time"
)

// Liao et al., section 3 and Table 1: "When the system is idle, the adaptive
// algorithm performs only slightly better than the non-adaptive algorithm.
// When the system is heavily loaded, however, the adaptive algorithm works
// nearly twice as well."
func TestLiaoTable1AdaptiveNeverWorseAndBetterUnderLoad(t *testing.T) {
	tb, err := LiaoTable1(context.Background(), Options{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		row  [2]Summary
	}{{"idle", tb.Idle}, {"loaded", tb.Loaded}} {
		non, ad := c.row[0], c.row[1]
		t.Logf("%s: non-adaptive %.0f ns (std %.0f), adaptive %.0f ns (std %.0f)", c.name, non.ErrorMeanNs, non.ErrorStdNs, ad.ErrorMeanNs, ad.ErrorStdNs)
		if ad.ErrorMeanNs > non.ErrorMeanNs {
			t.Errorf("%s: adaptive error %.0f ns worse than non-adaptive %.0f ns", c.name, ad.ErrorMeanNs, non.ErrorMeanNs)
		}
		if non.BoundCoverage != 1 || ad.BoundCoverage != 1 {
			t.Errorf("%s: bound coverage %v / %v, want 1", c.name, non.BoundCoverage, ad.BoundCoverage)
		}
	}
	// The paper's loaded ratio is 2.54/1.26 = 2.0 ("nearly twice"); ours is
	// 1.8 (docs/sim.md). Ask for a clear gain under load, larger than idle.
	loaded := tb.Loaded[0].ErrorMeanNs / tb.Loaded[1].ErrorMeanNs
	idle := tb.Idle[0].ErrorMeanNs / tb.Idle[1].ErrorMeanNs
	if loaded < 1.5 || loaded < idle {
		t.Errorf("non-adaptive / adaptive error: loaded %.2f, idle %.2f; want loaded >= 1.5 and above idle (paper 2.0, 1.2)", loaded, idle)
	}
}

// Liao Fig. 3: with a drift of 1/2^18 added to all nodes but node 1, "the
// two curves using the adaptive algorithm retain their good accuracy ...
// while the two curves for the non-adaptive algorithm have deviated".
func TestLiaoFig3AdaptiveFollowsDriftStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		// gain is how much lower the adaptive error after the step must be.
		gain float64
	}{
		// Idle: both deviate right after the step; the adaptive engine must
		// not be worse over the rest of the run.
		{"liao-fig3", 1},
		// Loaded: "especially when the system is heavily loaded".
		{"liao-fig3-loaded", 1.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := LiaoFig3(context.Background(), Options{}, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			for j, mode := range []string{"non-adaptive", "adaptive"} {
				t.Logf("%s: before mean %.0f ns; %v after mean %.0f ns max %d ns; after mean %.0f ns; resyncs %d -> %d", mode,
					f.Before[j].MeanAbs, fig3Transient, f.Transient[j].MeanAbs, f.Transient[j].MaxAbs, f.After[j].MeanAbs, f.ResyncsBefore[j], f.ResyncsAfter[j])
			}
			non, ad := f.After[0], f.After[1]
			if non.N == 0 || ad.N == 0 {
				t.Fatal("no evaluation after the step")
			}
			// The non-adaptive engine deviates: right after the step its
			// error is well above its error before.
			if f.Transient[0].MeanAbs < 1.3*f.Before[0].MeanAbs {
				t.Errorf("non-adaptive did not deviate after the step: mean |err| %.0f ns, before %.0f ns", f.Transient[0].MeanAbs, f.Before[0].MeanAbs)
			}
			if ad.MeanAbs*tc.gain > non.MeanAbs {
				t.Errorf("adaptive mean |err| %.0f ns after the step, want below non-adaptive %.0f ns / %.1f", ad.MeanAbs, non.MeanAbs, tc.gain)
			}
			if non.Covered != 1 || ad.Covered != 1 {
				t.Errorf("coverage after the step %v / %v, want 1", non.Covered, ad.Covered)
			}
		})
	}
}

// Jezequel section 6: "An initial acquisition period of 300 s" gives, on the
// FPS-T40, a precision on beta of 5e-7; "the imprecision of our global time
// increases linearly with time".
func TestJezequelSection6DriftBoundAndLinearGrowth(t *testing.T) {
	j, err := JezequelFPS(context.Background(), Options{}, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	const g = 64_000 // the FPS T-40's clock granularity, ns
	for i, n := range j.Nodes {
		t.Logf("node %d: width %d ns at 300 s, %d ns at 1 h, drift bound %.2g, linearity %.3f; error grew %d ns, R^2 %.3f, off its line by at most %d ns",
			n, j.WidthAtAcq[i], j.WidthAt1h[i], j.DriftBound[i], j.Linearity[i], j.ErrGrowth[i], j.ErrR2[i], j.ErrResid[i])
		if j.Coverage[i] != 1 {
			t.Errorf("node %d: coverage %v after the acquisition, want 1", n, j.Coverage[i])
		}
		if j.Linearity[i] < 0.9 || j.Linearity[i] > 1.1 {
			t.Errorf("node %d: width grew %.3f times as much in the second half: not linear", n, j.Linearity[i])
		}
		// The error itself grows linearly, up to the 64 us granularity of
		// the reads: it strays from a straight line by less than a granule
		// (the reads' sawtooth: about g/2), and where it grew by several
		// granules the line explains it. Where the learned drift is so
		// good that the error grew by less than that (tens of us in the
		// hour: in 5-8 of 20 seeds, whichever floor filter), R^2 measures
		// the sawtooth, not the growth.
		if j.ErrResid[i] > g {
			t.Errorf("node %d: the error strays %d ns from its line, want within the %d-ns granularity", n, j.ErrResid[i], g)
		}
		if j.ErrGrowth[i] >= 4*g && j.ErrR2[i] < 0.85 {
			t.Errorf("node %d: the error grew %d ns and a line explains R^2 = %.3f of it, want >= 0.85", n, j.ErrGrowth[i], j.ErrR2[i])
		}
	}
	// Node 1 is one hop from the reference, like the paper's measurement.
	// Paper: 5e-7; theory's floor 2g/dT = 4.3e-7. "Of the paper's order":
	// within a factor of 4 either way.
	if d := j.DriftBound[0]; d < 5e-7/4 || d > 5e-7*4 {
		t.Errorf("node 1 drift bound %.2g, want within 4x of the paper's 5e-7", d)
	}
	// Paper: 0.2 ms at the end of the acquisition.
	if w := j.WidthAtAcq[0]; w < 50_000 || w > 800_000 {
		t.Errorf("node 1 width at 300 s = %d ns, want within 4x of the paper's 0.2 ms", w)
	}
	noMu, err := JezequelFPS(context.Background(), Options{}, 20*time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	if noMu.DriftBound[0] < 3*j.DriftBound[0] {
		t.Errorf("without mu the drift bound %.2g should be much wider than with it (%.2g)", noMu.DriftBound[0], j.DriftBound[0])
	}
}

// Intel: with sync only at start and end the correction is linear; a drift
// change in between leaves a large error that a spline through periodic
// sessions (VT_timesync) removes.
func TestIntelSplineRemovesDriftChangeError(t *testing.T) {
	in, err := IntelCorrection(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("line: mean %.0f ns max %d ns; spline: mean %.0f ns max %d ns; %d sessions", in.Line.MeanAbs, in.Line.MaxAbs, in.Spline.MeanAbs, in.Spline.MaxAbs, in.Sessions)
	// A 5 ppm change halfway through 20 minutes: the two-session line is
	// off by about 5e-6 * 600 s / 4 = 750 us around the middle.
	if in.LineMid.MaxAbs < 300_000 {
		t.Errorf("two-session line max error mid-run %d ns, want a large error (>= 300 us)", in.LineMid.MaxAbs)
	}
	if in.Spline.MaxAbs > 30_000 {
		t.Errorf("spline max error %d ns, want < 30 us", in.Spline.MaxAbs)
	}
	if in.Spline.MeanAbs*20 > in.Line.MeanAbs {
		t.Errorf("spline mean error %.0f ns not 20x below the line's %.0f ns", in.Spline.MeanAbs, in.Line.MeanAbs)
	}
}
