package engine

import (
	"math"
	"testing"
	"time"
)

// TestMemberRestartedReferenceKeepsItsScale: node 2 takes over (its frozen
// line defines term t's global time), is killed and restarts before
// anyone elects another (node 3 alone is no majority): discovery names it
// the reference of t again. With the scale restored (RestoreScale, the
// daemon's state file) it leads t on the same line, and node 3's synced
// reads hold it; without, global time restarts from its clock, 3 ms away:
// two scales in one term, the jump docs/daemon.md warns of.
func TestMemberRestartedReferenceKeepsItsScale(t *testing.T) {
	const after = 400 * time.Millisecond
	for _, tt := range []struct {
		name    string
		restore bool
	}{{"restored", true}, {"lost", false}} {
		t.Run(tt.name, func(t *testing.T) {
			order := []NodeID{1, 2, 3}
			n := newMemberNet(t, order, after)
			n.run(n.now+int64(5*time.Second), nil)
			n.down[1] = true
			n.run(n.now+int64(3*time.Second), nil)
			term, sc, ok := n.ms[2].Scale()
			if !ok || term == 0 || n.ms[3].Reference() != 2 {
				t.Fatalf("no takeover by node 2: term %d, scale %v, node 3 follows %d", term, ok, n.ms[3].Reference())
			}
			at := func(l int64) int64 { return sc.Y0 + (l - sc.X0) + int64(math.Round(sc.Skew*float64(l-sc.X0))) }
			n.down[2] = true
			n.run(n.now+int64(100*time.Millisecond), nil)
			m, err := NewMember(MemberConfig{Engine: testConfig(2, nil, nil), Order: order, Cluster: order, FailoverAfter: after,
				Roles: starRoles(order, 2)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.restore {
				if err := m.RestoreScale(term, sc); err != nil {
					t.Fatal(err)
				}
			}
			n.ms[2], n.down[2] = m, false
			m.Tick(n.local(2))
			n.collect(2)
			var synced3, outside3 int
			n.run(n.now+int64(3*time.Second), func() {
				tm := n.ms[3].Estimate(n.local(3))
				if tm.Status != StatusSynced {
					return
				}
				synced3++
				if g := n.ms[2].Estimate(n.local(2)).Est; g < tm.Earliest || g > tm.Latest {
					outside3++
				}
			})
			t2, sc2, ok2 := m.Scale()
			l := n.local(2)
			jump := m.Estimate(l).Est - at(l)
			t.Logf("restarted node 2: term %d (was %d), scale %+v, its global time %+d ns from the old line; node 3 synced %d reads, %d missing node 2's time",
				t2, term, sc2, jump, synced3, outside3)
			if m.Reference() != 2 || t2 != term || !ok2 {
				t.Fatalf("restarted node 2: reference %d of term %d (scale %v), want 2 of %d", m.Reference(), t2, ok2, term)
			}
			if tt.restore {
				if sc2 != sc || jump != 0 || outside3 != 0 || synced3 == 0 {
					t.Errorf("restored: scale %+v (want %+v), %+d ns from the line, node 3: %d of %d synced reads without node 2's time",
						sc2, sc, jump, outside3, synced3)
				}
			} else if jump > -1e6 && jump < 1e6 {
				t.Errorf("lost: global time %+d ns from the old line, want the restart from node 2's clock (3 ms)", jump)
			}
		})
	}
}
