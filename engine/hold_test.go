package engine

import "testing"

// TestHoldContradictingRound: a synced child gets one round 100 us off
// its bounds: held (degraded, the bounds kept), then the next round
// decides: back in line, the held one was an outlier (synced again at
// once, counted); off again, the data moved (re-acquiring from it).
func TestHoldContradictingRound(t *testing.T) {
	tests := []struct {
		name      string
		next      int64 // offset of the round after the held one
		wantTrust string
		outliers  uint64
	}{
		{"outlier", 0, "synced", 1},
		{"moved", 100_000, "degraded", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig(1, []NodeID{0}, nil)
			n, err := New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			n.Tick(0)
			var r uint32
			round := func(at, off int64) {
				r++
				n.Step(childRound(r, at, off, 10_000), at+40_000+off)
			}
			for k := int64(1); k <= 6; k++ {
				round(k*1e9, 0)
			}
			if tr := n.SourceTrust(0); tr != "synced" {
				t.Fatalf("after 6 rounds in line: %s", tr)
			}
			before := n.Estimate(6e9 + 100_000)
			round(7e9, 100_000)
			held := n.Estimate(7e9 + 100_000)
			if tr := n.SourceTrust(0); tr != "degraded" || held.Status != StatusDegraded {
				t.Fatalf("after the round 100 us off: trust %s, read %v; want degraded", tr, held.Status)
			}
			// The held round is not used: the bounds are those held before.
			if d := held.Est - before.Est - 1e9; d > 1000 || d < -1000 {
				t.Errorf("the held round moved the estimate by %d ns", d)
			}
			round(8e9, tt.next)
			s := n.Snapshot().Sources[0]
			if tr := n.SourceTrust(0); tr != tt.wantTrust || s.Outliers != tt.outliers {
				t.Errorf("after the next round: trust %s, %d outliers; want %s, %d", tr, s.Outliers, tt.wantTrust, tt.outliers)
			}
		})
	}
}
