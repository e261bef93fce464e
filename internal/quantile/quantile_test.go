package quantile

import (
	"math"
	"slices"
	"testing"
)

// TestOfNearestRank checks gonum's empirical quantile against the
// nearest-rank definition: the smallest value whose cumulative share
// reaches q.
func TestOfNearestRank(t *testing.T) {
	tests := []struct {
		v    []int64
		q    float64
		want int64
	}{
		{nil, 0.5, 0},
		{[]int64{7}, 0.99, 7},
		{[]int64{4, 1, 3, 2}, 0.5, 2},
		{[]int64{4, 1, 3, 2}, 0.51, 3},
		{[]int64{4, 1, 3, 2}, 0, 1},
		{[]int64{4, 1, 3, 2}, 1, 4},
		{[]int64{4, 1, 3, 2}, 2, 4},  // clamped
		{[]int64{4, 1, 3, 2}, -1, 1}, // clamped
		{[]int64{-5, 5}, 0.5, -5},
		{[]int64{math.MaxInt64, 0}, 1, math.MaxInt64},         // saturates back from float64
		{[]int64{math.MaxInt64 - 2, 0}, 1, math.MaxInt64 - 2}, // rounds to 2^63 as a float64: kept within the sample
	}
	for _, tt := range tests {
		in := slices.Clone(tt.v)
		if got := Of(tt.v, tt.q)[0]; got != tt.want {
			t.Errorf("Of(%v, %v) = %d, want %d", tt.v, tt.q, got, tt.want)
		}
		if !slices.Equal(in, tt.v) {
			t.Errorf("Of changed its input %v to %v", in, tt.v)
		}
	}
	// 1..100: the p-quantile is 100p.
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(100 - i)
	}
	if got := Of(v, 0.5, 0.95, 0.99); !slices.Equal(got, []int64{50, 95, 99}) {
		t.Errorf("quantiles of 1..100 = %v, want [50 95 99]", got)
	}
}
