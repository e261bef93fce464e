package sim

import (
	"testing"

	"gonum.org/v1/plot/plotter"
)

// TestClipXYMarks: points beyond the axis limit are drawn on its edge and
// returned, with the largest magnitude, so the plot marks them (they were
// drawn at the limit as if they were values there).
func TestClipXYMarks(t *testing.T) {
	xy := plotter.XYs{{X: 1, Y: 5}, {X: 2, Y: -40}, {X: 3, Y: 12}, {X: 4, Y: 10}}
	got, beyond, worst := clipXY(xy, 10)
	if got[1].Y != -10 || got[2].Y != 10 || got[0].Y != 5 || got[3].Y != 10 {
		t.Errorf("clipped %v", got)
	}
	if len(beyond) != 2 || beyond[0].X != 2 || beyond[1].X != 3 || worst != 40 {
		t.Errorf("beyond %v, worst %v; want the points at x=2 and x=3, worst 40", beyond, worst)
	}
}
