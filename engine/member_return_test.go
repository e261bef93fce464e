package engine

import (
	"testing"
	"time"
)

// TestMemberRestartedChildGetsRoundsAtOnce: a follower restarted after the
// reference's rounds with it had reached the longest period asks who the
// reference is (discovery); the reference answers and gives it its rounds
// again at once, at the initial period, so it is synced again within a few
// initial periods, not after several of the long ones (issue 19: a
// restarted follower needed 22-32 s at a 16-s period).
func TestMemberRestartedChildGetsRoundsAtOnce(t *testing.T) {
	n := newMemberNet(t, []NodeID{1, 2, 3}, time.Second)
	n.run(n.now+60e9, nil) // periods grow to MaxGlobalPeriod
	cfg := testConfig(3, nil, nil)
	var period int64
	for _, c := range n.ms[1].Node().Snapshot().Children {
		if c.Child == 3 {
			period = c.Period
		}
	}
	if period < int64(cfg.MaxGlobalPeriod) {
		t.Fatalf("child 3's period %v before the restart, want the longest, %v", time.Duration(period), cfg.MaxGlobalPeriod)
	}
	if st := n.ms[3].Estimate(n.local(3)).Status; st != StatusSynced {
		t.Fatalf("node 3 is %v before the restart", st)
	}
	n.start(3, time.Second) // a new process: no state
	restart := n.now
	var synced int64
	n.run(n.now+30e9, func() {
		if synced == 0 && n.ms[3].Estimate(n.local(3)).Status == StatusSynced {
			synced = n.now
		}
	})
	if synced == 0 {
		t.Fatal("node 3 not synced within 30 s of its restart")
	}
	took := time.Duration(synced - restart)
	// Discovery, then the acquisition's rounds, the first at once, the
	// next at the initial period: within two initial periods and a half
	// (it took 3.05 s, about two of the longest periods, without the
	// reset).
	limit := 2*cfg.InitialGlobalPeriod + 500*time.Millisecond
	t.Logf("node 3 synced %v after its restart (initial period %v, longest %v)", took, cfg.InitialGlobalPeriod, cfg.MaxGlobalPeriod)
	if took > limit {
		t.Errorf("node 3 synced %v after its restart, want within %v", took, limit)
	}
}
