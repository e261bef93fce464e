package daemon

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/wire"
)

// TestRunChallengeFloodKeepsSource is issue 29's challenge flood end to
// end: an attacker on the path captures a challenge node 2 (a follower)
// sent node 1 (its reference) and floods node 1 with copies from node 2's
// address, 70,000 at a time (more than wire.MaxSeqJump) every 100 ms for
// 2 s. Node 2 must keep node 1 as its synced source and refuse none of
// node 1's datagrams as a jump. On main node 1 answered every copy, each
// answer moved its counter toward node 2, and node 2 refused node 1's next
// datagrams as seq_jump (the issue: a follower lost its source for ~10 s).
func TestRunChallengeFloodKeepsSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &capturer{keyed: true, from: 2, to: 1}
		mn := memnet.New(29)
		mn.SetLink(cp.link())
		var metrics fakeMetrics
		cfgs := memCluster(t, 2)
		for i := range cfgs {
			cfgs[i].Reference.Order = []uint32{1, 2}
			cfgs[i].Reference.FailoverAfter = Duration(400 * time.Millisecond)
			cfgs[i].Sync.ProbeTimeout = Duration(20 * time.Millisecond)
			cfgs[i].Metrics.Listen = netip.AddrPortFrom(netip.MustParseAddr("10.0.0.9"), uint16(9100+i)).String()
		}
		clusterKey(t, cfgs)
		r2, read, stop := startSyncedPair(t, mn, &metrics, cfgs)
		defer stop()
		var chal []byte
		for _, b := range cp.stop() {
			if wire.Op(b[3]).Kind() == wire.OpAuthChallenge {
				chal = b
			}
		}
		if chal == nil {
			t.Fatal("node 2 sent node 1 no challenge")
		}
		a1, a2 := netip.MustParseAddrPort(cfgs[0].Peers[0].Address), netip.MustParseAddrPort(cfgs[1].Peers[1].Address)
		jumps := dropsOf(t, metrics.get(t, cfgs[1].Metrics.Listen, "/metrics"))["seq_jump"]
		const perBurst = wire.MaxSeqJump + 4500
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
			for sent := 0; sent < perBurst; sent += 4000 { // below memnet's queue
				for range 4000 {
					mn.Deliver(chal, a2, a1)
				}
				synctest.Wait()
			}
			for range 2 {
				time.Sleep(50 * time.Millisecond)
				in, err := r2.Info()
				if err != nil {
					t.Fatal(err)
				}
				if tm, err := read(r2); err != nil || tm.Status != gtime.StatusSynced || in.Reference != 1 {
					t.Fatalf("node 2 %v, reference %d, during the challenge flood (%v)", tm.Status, in.Reference, err)
				}
			}
		}
		drops2 := dropsOf(t, metrics.get(t, cfgs[1].Metrics.Listen, "/metrics"))
		drops1 := dropsOf(t, metrics.get(t, cfgs[0].Metrics.Listen, "/metrics"))
		t.Logf("node 1 drops %v; node 2 drops %v", drops1, drops2)
		if drops2["seq_jump"] != jumps {
			t.Errorf("node 2 refused %v of node 1's datagrams as jumps during the flood", drops2["seq_jump"]-jumps)
		}
		if min := float64(20 * (perBurst - 1)); drops1["challenge"] < min {
			t.Errorf("node 1 counted %v refused challenges, want at least %v", drops1["challenge"], min)
		}
	})
}
