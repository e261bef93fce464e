package sim

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The failover scenario on several seeds: every read that says synced has
// the truth of its time scale inside its bounds, global time never goes
// backwards and never jumps by more than the takeover's widths, and every
// fault is followed by all running nodes synced on one running reference
// within a few failover_after.
func TestFailoverScenario(t *testing.T) {
	base, err := Shipped("failover-star")
	if err != nil {
		t.Fatal(err)
	}
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		s := base
		s.Seed = seed
		res, err := Run(context.Background(), s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		f := res.Failover
		if f == nil {
			t.Fatal("no failover statistics")
		}
		t.Logf("seed %d: coverage %v over %d reads, max jump %d ns, back in sync %v, %d reference changes",
			seed, res.Summary.BoundCoverage, res.Summary.Evaluations, f.MaxJump, f.BackInSync, f.Changes)
		if res.Summary.BoundCoverage != 1 {
			t.Errorf("seed %d: coverage of synced reads %v, want 1", seed, res.Summary.BoundCoverage)
		}
		if f.Backwards != 0 {
			t.Errorf("seed %d: global time went backwards %d times", seed, f.Backwards)
		}
		if f.MaxJump > 50_000 {
			t.Errorf("seed %d: largest jump of served time %d ns, want <= 50 us", seed, f.MaxJump)
		}
		for k, d := range f.BackInSync {
			if d < 0 || time.Duration(d) > 10*time.Second {
				t.Errorf("seed %d: fault %d: back in sync after %v, want within 10 s", seed, k, time.Duration(d))
			}
		}
		if f.Changes < 8 {
			t.Errorf("seed %d: %d reference changes, want at least 8 (7 nodes to node 1, then to node 2)", seed, f.Changes)
		}
	}
}

// Faults and the failover order are checked, each error naming its field.
func TestFaultValidation(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		field string
	}{
		{"node out of range", "faults: [{node: 16, down: 1s}]", "faults[0].node"},
		{"down after the end", "faults: [{node: 1, down: 20m}]", "faults[0].down"},
		{"up before down", "faults: [{node: 1, down: 2m, up: 1m}]", "faults[0].up"},
		{"order not starting at the reference", "failover: {order: [1, 0], after: 1s}", "failover.order[0]"},
		{"order naming a node twice", "failover: {order: [0, 1, 1], after: 1s}", "failover.order[2]"},
		{"no after", "failover: {order: [0, 1]}", "failover.after"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml), tt.name)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.field)
		}
	}
}
