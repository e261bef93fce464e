package engine

import (
	"errors"
	"math"
	"testing"

	"github.com/gclock/gclock/estimate"
)

// restartNet runs a reference and one child (clock 3 ms ahead, +40 ppm)
// for 20 s, takes the child's prior, and returns the net and the prior.
func restartNet(t *testing.T) (*testNet, Prior) {
	t.Helper()
	c0 := testConfig(0, nil, []NodeID{1})
	c1 := testConfig(1, []NodeID{0}, nil)
	tn := newTestNet(t, 7, []Config{c0, c1}, [][2]float64{{0, 0}, {3e6, 40e-6}}, noisyLink(20_000, 2_000, 5_000, 0.02, 0), DefaultEstimators)
	tn.run(20e9, 0, nil)
	s := tn.nodes[1]
	p, ok := s.n.Prior(s.local(tn.now))
	if !ok {
		t.Fatalf("no prior after 20 s: status %v", s.n.Estimate(s.local(tn.now)).Status)
	}
	if err := CheckPrior(p); err != nil {
		t.Fatalf("the engine's own prior: %v", err)
	}
	return tn, p
}

// restart replaces the child by a new node seeded with p at truth time
// now (its clock kept running).
func restart(t *testing.T, tn *testNet, p *Prior) *Node {
	t.Helper()
	n, err := New(tn.nodes[1].n.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p != nil {
		if err := n.Restore(*p); err != nil {
			t.Fatalf("Restore: %v", err)
		}
	}
	s := tn.nodes[1]
	s.n = n
	s.tickGen++ // the old node's timers are gone
	n.Tick(s.local(tn.now))
	tn.collect(1)
	return n
}

// TestRestorePrior: a child restarted 5 s after its prior was saved
// serves bounded time at once (stale, the truth inside, the width what the
// prior allows), never says synced before its source is trusted again,
// keeps the truth inside throughout, and drops the prior once trusted.
func TestRestorePrior(t *testing.T) {
	tn, p := restartNet(t)
	tn.run(25e9, 0, nil) // the daemon is down for 5 s
	n := restart(t, tn, &p)
	s := tn.nodes[1]
	x := s.local(tn.now)
	first := n.Read(x)
	truth := tn.truth(tn.now)
	if first.Status != StatusStale || truth < first.Earliest || truth > first.Latest {
		t.Fatalf("first read after restart: %+v, truth %d (%+d from the estimate)", first, truth, truth-first.Est)
	}
	dx := float64(x - p.Saved)
	limit := float64(p.Mapping.W0) + (math.Abs(p.Mapping.Skew)+n.cfg.MaxDrift)*dx + 2*float64(n.cfg.Granularity) + 10
	if w := float64(first.Latest - first.Earliest); w/2 > limit {
		t.Fatalf("first read's half-width %.0f ns above the worst-case drift's %.0f", w/2, limit)
	}
	t.Logf("prior saved 5 s before: half-width %d ns (at saving %d ns), error %+d ns", (first.Latest-first.Earliest)/2, p.Mapping.W0, first.Est-truth)
	syncedAt := int64(-1)
	tn.run(40e9, 10e6, func(now int64) {
		rd := n.Read(s.local(now))
		tr := tn.truth(now)
		if rd.Status == StatusUnsynced {
			t.Fatalf("t=%.2fs: unsynced after a restore", float64(now)/1e9)
		}
		if tr < rd.Earliest || tr > rd.Latest {
			t.Fatalf("t=%.2fs: truth outside [%+d, %+d] (%v)", float64(now)/1e9, rd.Earliest-tr, rd.Latest-tr, rd.Status)
		}
		if rd.Status == StatusSynced {
			if n.SourceTrust(0) != "synced" {
				t.Fatalf("t=%.2fs: synced while the source is %s", float64(now)/1e9, n.SourceTrust(0))
			}
			if syncedAt < 0 {
				syncedAt = now
			}
		}
	})
	if syncedAt < 0 || n.HasPrior() {
		t.Fatalf("not synced 15 s after the restart (prior kept: %v)", n.HasPrior())
	}
	t.Logf("synced %.2f s after the restart", float64(syncedAt-25e9)/1e9)
}

// TestRestoreWrongPrior: a prior whose line is 2 ms off (the clock model
// did not hold across the gap) is dropped as soon as fresh bounds exclude
// it; reads never say synced before the source is trusted.
func TestRestoreWrongPrior(t *testing.T) {
	tn, p := restartNet(t)
	p.Mapping.Y0 += 2e6
	tn.run(21e9, 0, nil)
	n := restart(t, tn, &p)
	s := tn.nodes[1]
	dropped := false
	tn.run(40e9, 10e6, func(now int64) {
		rd := n.Read(s.local(now))
		tr := tn.truth(now)
		if rd.Status == StatusSynced && n.SourceTrust(0) != "synced" {
			t.Fatalf("t=%.2fs: synced while the source is %s", float64(now)/1e9, n.SourceTrust(0))
		}
		if !n.HasPrior() && !dropped {
			dropped = true
			t.Logf("prior dropped %.2f s after the restart", float64(now-21e9)/1e9)
		}
		if dropped && rd.Status != StatusUnsynced && (tr < rd.Earliest || tr > rd.Latest) {
			t.Fatalf("t=%.2fs: after the prior was dropped, truth outside [%+d, %+d] (%v)", float64(now)/1e9, rd.Earliest-tr, rd.Latest-tr, rd.Status)
		}
	})
	if !dropped {
		t.Fatal("a prior 2 ms off was never dropped")
	}
	if rd := n.Read(s.local(tn.now)); rd.Status != StatusSynced {
		t.Fatalf("not synced at the end: %v", rd.Status)
	}
}

func TestRestoreRules(t *testing.T) {
	tn, p := restartNet(t)
	started := tn.nodes[1].n
	if err := started.Restore(p); !errors.Is(err, ErrConfig) {
		t.Fatalf("Restore on a started node: %v, want ErrConfig", err)
	}
	ref, err := New(testConfig(0, nil, []NodeID{1}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ref.Restore(p); err != nil || ref.HasPrior() {
		t.Fatalf("reference: err %v, prior kept %v; want it ignored", err, ref.HasPrior())
	}
	if _, ok := tn.nodes[0].n.Prior(1); ok {
		t.Fatal("the reference gave a prior")
	}
	fresh, err := New(testConfig(1, []NodeID{0}, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fresh.Prior(1); ok {
		t.Fatal("an unsynced node gave a prior")
	}
}

func TestCheckPrior(t *testing.T) {
	good := Prior{Saved: 1e9, Mapping: estimate.Mapping{X0: 1e9, Y0: 2e9, Skew: 1e-5, W0: 1000, SkewErr: 1e-8, Wander: 1e-20, Valid: true}}
	if err := CheckPrior(good); err != nil {
		t.Fatalf("good prior: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Prior)
		field string
	}{
		{"saved", func(p *Prior) { p.Saved, p.Mapping.X0 = MaxMsgTime, MaxMsgTime }, "saved"},
		{"invalid", func(p *Prior) { p.Mapping.Valid = false }, "not valid"},
		{"anchor", func(p *Prior) { p.Mapping.X0++ }, "mapping.x0"},
		{"y0", func(p *Prior) { p.Mapping.Y0 = -MaxMsgTime }, "mapping.y0"},
		{"skew nan", func(p *Prior) { p.Mapping.Skew = math.NaN() }, "mapping.skew"},
		{"skew big", func(p *Prior) { p.Mapping.Skew = 2e-3 }, "mapping.skew"},
		{"w0", func(p *Prior) { p.Mapping.W0 = -1 }, "mapping.w0"},
		{"skew_err", func(p *Prior) { p.Mapping.SkewErr = math.Inf(1) }, "mapping.skew_err"},
		{"wander", func(p *Prior) { p.Mapping.Wander = -1 }, "mapping.wander"},
	} {
		p := good
		tc.edit(&p)
		err := CheckPrior(p)
		if err == nil || !errors.Is(err, ErrConfig) || !contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.field)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}
