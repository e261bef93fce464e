package lab

import (
	"context"
	"testing"
	"time"
)

// restartFaults is TestRestarts' timeline (4 hosts, host 0 the reference).
// Host 2's pause falls within host 3's partition (two followers, each
// judged on its own); the reference's kill comes 8 s after both are back.
var restartFaults = []Fault{
	{At: 12 * time.Second, Host: 3, Kind: faultPartition, For: 30 * time.Second},
	{At: 16 * time.Second, Host: 1, Kind: faultKill, For: 3 * time.Second},
	{At: 24 * time.Second, Host: 2, Kind: faultStop, For: 10 * time.Second},
	{At: 50 * time.Second, Host: 0, Kind: faultKill, For: 3 * time.Second},
}

// TestRestarts runs four daemons with state files and, after they
// synchronised, partitions host 3 for 30 s, SIGKILLs host 1 and starts it
// again 3 s later, SIGKILLs the reference (host 0) and starts it again,
// and SIGSTOPs host 2 for 10 s. It checks what docs/daemon.md ("Restarts
// and state") promises: the truth inside every read's bounds throughout
// (while a daemon is dead or paused its page widens at the worst-case
// drift; a restarted daemon serves its restored prior), no read without
// bounds after the warm-up (a restarted daemon never publishes unsynced),
// and every host synced again within FaultWindow of each fault's end.
// Root only (network namespaces); about 70 s.
func TestRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 68-s lab")
	}
	l, gc := gclockLab(t, 4)
	gc.Duration, gc.Warmup = 68*time.Second, 10*time.Second
	gc.StateFiles = true
	gc.Faults = restartFaults
	res, err := l.RunGclock(context.Background(), gc)
	if err != nil {
		t.Fatalf("RunGclock: %v", err)
	}
	for _, n := range res.Nodes {
		t.Logf("host %d: %d reads; synced reads covering the truth %.5f, all reads %.5f; max |err| %d ns; statuses %v; longest not synced %.2f s",
			n.ID, n.Evaluations, n.BoundCoverage, n.BoundCoverageAll, n.ErrorMaxNs, n.StatusShare, n.LongestNotSyncedS)
		if n.ID == 0 {
			// The reference's own page: its fitted line misses its own
			// wandering clock by a few ns (TestRunGclock fails the same way
			// on this branch's base, without any fault); its faults'
			// figures are the other hosts'.
			continue
		}
		if n.BoundCoverage != 1 || n.BoundCoverageAll != 1 {
			t.Errorf("host %d: truth outside the bounds (synced reads %.5f, all %.5f)", n.ID, n.BoundCoverage, n.BoundCoverageAll)
		}
		if n.UnsyncedShare != 0 {
			t.Errorf("host %d: %.4f of the reads after the warm-up without bounds", n.ID, n.UnsyncedShare)
		}
	}
	for _, f := range res.Faults {
		t.Logf("%v, host %d: %d reads (%d synced), truth inside %d (synced %d), max |err| %d ns (synced %d ns), max half-width %d ns, lost synced %v, back to synced %.2f s after the end",
			f.Fault, f.Host, f.Reads, f.Synced, f.Inside, f.SyncedInside, f.MaxErrNs, f.MaxSyncedErrNs, f.MaxHalfWidthNs, f.LostSynced, f.BackToSyncedS)
		if f.Host == 0 {
			continue // see above
		}
		if f.Inside != f.Reads {
			t.Errorf("%v, host %d: truth outside the bounds in %d of %d reads", f.Fault, f.Host, f.Reads-f.Inside, f.Reads)
		}
		if f.BackToSyncedS < 0 {
			t.Errorf("%v, host %d: not synced again within %v of the end", f.Fault, f.Host, FaultWindow)
		}
	}
	t.Logf("logs: %s", res.Logs)
}
