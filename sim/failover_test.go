package sim

import (
	"context"
	"math/rand/v2"
	"slices"
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
		if a := res.Agreement; a.Violations != 0 || f.TwoReferences != 0 {
			t.Errorf("seed %d: %d instants of %d with disjoint synced reads (gap up to %d ns), %d with two leased references",
				seed, a.Violations, a.Instants, a.MaxGap, f.TwoReferences)
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
		{"unknown kind", "faults: [{kind: freeze, node: 1, down: 1s}]", "faults[0].kind"},
		{"partition of nobody", "faults: [{kind: partition, down: 1s}]", "faults[0].nodes"},
		{"partition of everybody", "nodes: 2\nfaults: [{kind: partition, nodes: [0, 1], down: 1s}]", "faults[0].nodes"},
		{"partition naming a node twice", "faults: [{kind: partition, nodes: [1, 1], down: 1s}]", "faults[0].nodes[1]"},
		{"bad one_way", "faults: [{kind: partition, nodes: [1], one_way: both, down: 1s}]", "faults[0].one_way"},
		{"nodes on a pause", "faults: [{kind: pause, node: 1, nodes: [2], down: 1s}]", "faults[0].nodes"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml), tt.name)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.field)
		}
	}
}

// The faults of issue 17 around the reference, each a shipped scenario:
// a pause (SIGSTOP 10 s, SIGCONT) and partitions (the reference with one
// follower cut off from the majority, a reference that hears nothing, one
// that can send nothing). There must be one global time throughout: no
// instant whose synced reads share no point, never two references under
// a lease, every synced read holding its scale's truth, and the cluster
// back on one reference after each fault. On the engine before terms the
// pause gave 1170 instants of disjoint synced reads (two references, 5.7
// us apart and diverging), the partitions 1523.
func TestFailoverFaults(t *testing.T) {
	tests := []struct {
		name      string
		wantTerms uint32 // failovers the faults call for
	}{
		{"failover-pause", 1},
		{"failover-partition", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Shipped(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			f, a := res.Failover, res.Agreement
			t.Logf("agreement %+v; failover %+v; coverage %v, synced share %v", a, *f, res.Summary.BoundCoverage, res.Summary.StatusShare["synced"])
			if a.Violations != 0 || a.Instants == 0 {
				t.Errorf("%d instants of %d with disjoint synced reads (gap up to %d ns), want 0", a.Violations, a.Instants, a.MaxGap)
			}
			if f.TwoReferences != 0 {
				t.Errorf("%d evaluations with two leased references, want 0", f.TwoReferences)
			}
			if res.Summary.BoundCoverage != 1 {
				t.Errorf("coverage of synced reads %v, want 1", res.Summary.BoundCoverage)
			}
			if f.Terms != tt.wantTerms {
				t.Errorf("term %d at the end, want %d", f.Terms, tt.wantTerms)
			}
			for k, d := range f.BackInSync {
				if d < 0 || time.Duration(d) > 10*time.Second {
					t.Errorf("fault %d: back in sync after %v, want within 10 s", k, time.Duration(d))
				}
			}
		})
	}
}

// randomFaults is a Jepsen-style schedule for a scenario of n nodes and
// duration d (as lab.RandomFaults): after 20 s, one fault at a time (stop
// and restart, pause, partition both ways or one way), 2-12 s long, each
// followed by 8-20 s of quiet.
func randomFaults(seed uint64, n int, d time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x6661756c74))
	var out []Fault
	at := 22 * time.Second
	for {
		f := Fault{Down: Duration(at), Up: Duration(at + time.Duration(2+rng.IntN(11))*time.Second)}
		switch rng.IntN(5) {
		case 0:
			f.Kind, f.Node = FaultStop, rng.IntN(n)
		case 1:
			f.Kind, f.Node = FaultPause, rng.IntN(n)
		default:
			f.Kind, f.Nodes = FaultPartition, []int{rng.IntN(n)}
			f.OneWay = []string{"", "in", "out"}[rng.IntN(3)]
		}
		if time.Duration(f.Up)+5*time.Second >= d {
			return out
		}
		out = append(out, f)
		at = time.Duration(f.Up) + time.Duration(8+rng.IntN(13))*time.Second
	}
}

// Random fault schedules on four nodes (order 0, 1, 2): whatever the
// faults, one global time (no instant with disjoint synced reads, never
// two leased references), every synced read holding its scale's truth,
// and no election without a fault of the reference to cause it.
func TestFailoverRandomSchedules(t *testing.T) {
	base, err := Shipped("failover-pause")
	if err != nil {
		t.Fatal(err)
	}
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if testing.Short() {
		seeds = seeds[:2]
	}
	for _, seed := range seeds {
		s := base
		s.Nodes, s.Duration, s.Seed = 4, Duration(4*time.Minute), seed
		s.Faults = randomFaults(seed, s.Nodes, time.Duration(s.Duration))
		res, err := Run(context.Background(), s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, a := res.Failover, res.Agreement
		refFaults := 0
		for _, ft := range s.Faults {
			if ft.Node == 0 || ft.Node == 1 || ft.Node == 2 || slices.ContainsFunc(ft.Nodes, func(i int) bool { return i <= 2 }) {
				refFaults++
			}
		}
		t.Logf("seed %d: %d faults (%d on nodes of the order): agreement %+v, last term %d, coverage %v, largest jump %d ns, back in sync %v",
			seed, len(s.Faults), refFaults, a, f.Terms, res.Summary.BoundCoverage, f.MaxJump, f.BackInSync)
		if a.Violations != 0 || f.TwoReferences != 0 {
			t.Errorf("seed %d: %d instants with disjoint synced reads (gap up to %d ns), %d with two leased references",
				seed, a.Violations, a.MaxGap, f.TwoReferences)
		}
		if res.Summary.BoundCoverage != 1 {
			t.Errorf("seed %d: coverage %v, want 1", seed, res.Summary.BoundCoverage)
		}
		// A takeover continues the scale within its bounds' width (some
		// us); a node restarting global time from its own clock would jump
		// by its offset (up to 10 ms here).
		if f.MaxJump > 100_000 {
			t.Errorf("seed %d: served time jumped by %d ns, want <= 100 us", seed, f.MaxJump)
		}
		if int(f.Terms) > 2*refFaults {
			t.Errorf("seed %d: term %d after %d faults on nodes of the order: elections without cause", seed, f.Terms, refFaults)
		}
	}
}
