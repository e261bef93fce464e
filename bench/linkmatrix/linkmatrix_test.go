package linkmatrix

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gclock/gclock/netmodel"
)

// TestMatrixOrdering runs every class of the link matrix on two seeds
// (the benchmark runs 100: gclock sim matrix --seeds 1-100) and holds each
// run to what the matrix must show: every synced read inside its bounds;
// gclock ahead of the chrony stand-in; on floor classes the centre line
// as it was (the body line stays out), on bells the body line at least
// twice better than the floor line alone; and gclock within 2.5x of the
// limit everywhere (the benchmark's target is 1.5x over the median run),
// and of the oracle (the Kalman filter told the true wander), which every
// run has.
func TestMatrixOrdering(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 42 simulations")
	}
	rep, err := Run(context.Background(), Spec{Seeds: []uint64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	floor := map[string]bool{}
	for _, c := range netmodel.Matrix() {
		floor[c.Name] = c.Floor
	}
	for _, r := range rep.Runs {
		t.Logf("%-12s seed %d: gclock %.0f / %.0f ns, floor-only %.0f, chrony %.0f / %.0f, limit %.0f, oracle %.0f, coverage %.4f",
			r.Class, r.Seed, r.Median, r.P99, r.FloorMedian, r.ChronyMedian, r.ChronyP99, r.Limit, r.Oracle, r.Coverage)
		if r.Coverage < 1 {
			t.Errorf("%s seed %d: coverage %.5f of synced reads", r.Class, r.Seed, r.Coverage)
		}
		if !(r.Median < r.ChronyMedian) || !(r.P99 < r.ChronyP99) {
			t.Errorf("%s seed %d: gclock %.0f / %.0f ns not ahead of chrony's %.0f / %.0f", r.Class, r.Seed, r.Median, r.P99, r.ChronyMedian, r.ChronyP99)
		}
		if !(r.Median <= 2.5*r.Limit) {
			t.Errorf("%s seed %d: gclock %.0f ns, more than 2.5x the limit %.0f", r.Class, r.Seed, r.Median, r.Limit)
		}
		if !(r.Oracle > 0) || !(r.Median <= 2.5*r.Oracle) {
			t.Errorf("%s seed %d: gclock %.0f ns, the oracle %.0f: want an oracle and gclock within 2.5x of it", r.Class, r.Seed, r.Median, r.Oracle)
		}
		switch {
		case floor[r.Class] && r.Class != "uniform": // uniform has a hard edge above too: the body may help
			if r.Median > 1.05*r.FloorMedian+10 {
				t.Errorf("%s seed %d: %.0f ns against the floor line's %.0f: the body line must stay out of a floor", r.Class, r.Seed, r.Median, r.FloorMedian)
			}
		case !floor[r.Class]:
			if r.Median > r.FloorMedian/2 {
				t.Errorf("%s seed %d: %.0f ns against the floor line's %.0f: want at most half on a bell", r.Class, r.Seed, r.Median, r.FloorMedian)
			}
		}
	}
	var b bytes.Buffer
	rep.WriteMarkdown(&b)
	for _, c := range netmodel.MatrixNames() {
		if !strings.Contains(b.String(), "| "+c+" |") {
			t.Errorf("report has no row for %s:\n%s", c, b.String())
		}
	}
}
