package rawclock

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestWallOffset(t *testing.T) {
	off1, hw1 := WallOffset()
	time.Sleep(10 * time.Millisecond)
	off2, hw2 := WallOffset()
	if hw1 < 0 || hw2 < 0 || hw1 > int64(time.Millisecond) {
		t.Fatalf("half widths %d, %d ns", hw1, hw2)
	}
	// Wall and raw differ only by NTP slew (<= 500 ppm: 5 us in 10 ms)
	// unless someone steps the clock during the test.
	if d := off2 - off1; d > 20_000+hw1+hw2 || d < -20_000-hw1-hw2 {
		t.Errorf("offset moved by %d ns in 10 ms", d)
	}
}

// medianBound: the median's bound is the majority's widest half-width, and
// it holds: whatever the sandwiches' widths, the true offset is within it
// of the median (one preempted read of five no longer widens the sample).
func TestMedianBound(t *testing.T) {
	tests := []struct {
		name           string
		offs, hws      []int64
		wantOff, wantH int64
	}{
		{"quiet", []int64{10, 12, 11, 9, 10}, []int64{300, 310, 290, 305, 300}, 10, 300},
		{"one preempted", []int64{10, 12, 900_000, 9, 11}, []int64{300, 310, 1_500_000, 305, 300}, 11, 305},
		{"two preempted", []int64{10, -700_000, 900_000, 9, 11}, []int64{300, 800_000, 1_500_000, 305, 300}, 10, 305},
		{"three preempted", []int64{10, -700_000, 900_000, 9, 400_000}, []int64{300, 800_000, 1_500_000, 305, 500_000}, 10, 500_000},
		{"four", []int64{1, 2, 3, 4}, []int64{5, 6, 7, 8}, 3, 7},
	}
	for _, tt := range tests {
		off, h := medianBound(tt.offs, tt.hws)
		if off != tt.wantOff || h != tt.wantH {
			t.Errorf("%s: %d +- %d, want %d +- %d", tt.name, off, h, tt.wantOff, tt.wantH)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100_000 {
		n := 1 + rng.IntN(7)
		truth := rng.Int64N(1e9)
		offs, hws := make([]int64, n), make([]int64, n)
		for k := range n {
			hws[k] = rng.Int64N(1000)
			if rng.IntN(4) == 0 {
				hws[k] = rng.Int64N(10_000_000) // preempted
			}
			offs[k] = truth + rng.Int64N(2*hws[k]+1) - hws[k]
		}
		if off, h := medianBound(offs, hws); off-truth > h || truth-off > h {
			t.Fatalf("case %d: %v +- %v: median %d +- %d misses the truth %d", i, offs, hws, off, h, truth)
		}
	}
}
