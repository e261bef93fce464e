package measure

import (
	"math"
	"testing"
)

// TestQuantileNearestRank: quantile (gonum's empirical quantile) is the
// nearest rank, ceil(q*n)-th of n sorted values, as the hand-written one
// it replaced was: the reports' p50/p99 figures are unchanged.
func TestQuantileNearestRank(t *testing.T) {
	var v []float64
	for i := 1; i <= 100; i++ {
		v = append(v, float64(i))
	}
	for _, tc := range []struct {
		v       []float64
		q, want float64
	}{
		{v, 0.5, 50}, {v, 0.99, 99}, {v, 0.1, 10}, {v, 1, 100}, {v, 0, 1}, {v, 0.995, 100},
		{v[:7], 0.5, 4}, {v[:7], 0.9, 7}, {v[:1], 0.99, 1},
	} {
		if got := quantile(tc.v, tc.q); got != tc.want {
			t.Errorf("quantile(1..%d, %v) = %v, want %v", len(tc.v), tc.q, got, tc.want)
		}
	}
	if got := quantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
}
