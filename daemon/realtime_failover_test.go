package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/memnet"
)

// utcRead is one read of a page in TestRealTimeFailover.
type utcRead struct {
	at    int64 // fake raw time of the read
	truth int64 // UTC then
	tm    gtime.Time
}

// TestRealTimeFailover: UTC survives failover (issue 29 item 4). Three
// daemons serve reference-realtime with the order 1, 2, 3 on fake clocks;
// each node's CLOCK_REALTIME is UTC plus its own error (0, +30, -20 us),
// which its fake kernel bounds by maxerror 50 us. The reference is
// stopped; node 2 takes over and must serve UTC from its own
// CLOCK_REALTIME and upstream:
//
//   - "synced upstream": every read of nodes 2 and 3 with bounds holds UTC,
//     the served value never goes back, and from one failover time after
//     the stop (failover_after + a status query's timeout) on, the served
//     width is at most twice its widest in the second before the stop;
//   - "no UTC source left" (node 2's kernel says unsynchronised): after the
//     failover no page says synced, and gclock_served_status says why.
//
// Before real_time followed the reference, the followers kept the dead
// reference's model, synced, its bounds growing 1 ms a second.
func TestRealTimeFailover(t *testing.T) {
	for _, tc := range []struct {
		name      string
		up2Synced bool
	}{{"synced upstream", true}, {"no UTC source left", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { realTimeFailover(t, tc.up2Synced) })
		})
	}
}

func realTimeFailover(t *testing.T, up2Synced bool) {
	const (
		ms     = int64(time.Millisecond)
		maxErr = 50_000 // the fake kernels' maxerror, ns
		after  = 400 * time.Millisecond
	)
	utcOff := int64(26*365*24*time.Hour) - fakeRaw() // UTC - raw: UTC starts in 2026
	wallErr := []int64{0, 30_000, -20_000}           // CLOCK_REALTIME - UTC per node
	mn := memnet.New(1)
	mn.SetLink(memLink)
	metrics := &fakeMetrics{}
	cfgs := memCluster(t, 3)
	for i := range cfgs {
		c := &cfgs[i]
		c.Reference.Order = []uint32{1, 2, 3}
		c.Reference.FailoverAfter = Duration(after)
		c.Sync.ProbeTimeout = Duration(20 * time.Millisecond)
		c.RealTime.Mode = RealTimeReference
		c.RealTime.Upstream = UpstreamKernel
		c.RealTime.PollEvery = Duration(200 * time.Millisecond)
		c.Metrics.Listen = fmt.Sprintf("127.0.0.1:%d", 9300+i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: failoverLogLevel}))
	errs := make(chan error, 3)
	ctx1, stop1 := context.WithCancel(ctx)
	running := 0
	defer func() {
		cancel()
		for ; running > 0; running-- {
			<-errs
		}
	}()
	for i, c := range cfgs {
		s := fakeSys(mn, metrics)
		synced := i != 1 || up2Synced
		s.upstream = func() (realtime.Upstream, error) {
			return realtime.Upstream{Known: true, Synced: synced, MaxErr: maxErr, RateKnown: true}, nil
		}
		s.wall = func() (int64, int64) { return utcOff + wallErr[i], 0 }
		rctx := ctx
		if i == 0 {
			rctx = ctx1
		}
		running++
		go func() { errs <- run(rctx, c, logger.With("node", c.Node.ID), s) }()
	}
	select {
	case err := <-errs:
		running--
		t.Fatalf("a daemon stopped: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	deadline := time.Now().Add(30 * time.Second)
	readers := []*gtime.Reader{nil, openPage(t, cfgs[1].GlobalTime.ShmPath, 2, deadline), openPage(t, cfgs[2].GlobalTime.ShmPath, 3, deadline)}
	read := func(r *gtime.Reader) (gtime.Time, error) { return r.At(fakeRaw()) }
	waitPageSyncedBy(t, read, readers[1], 2, deadline)
	waitPageSyncedBy(t, read, readers[2], 3, deadline)
	time.Sleep(5 * time.Second)

	reads := map[int][]utcRead{}
	sample := func() {
		for _, i := range []int{1, 2} {
			x := fakeRaw()
			tm, err := read(readers[i])
			if err != nil {
				t.Fatalf("node %d: %v", i+1, err)
			}
			reads[i] = append(reads[i], utcRead{x, x + utcOff, tm})
		}
	}
	end := time.Now().Add(time.Second)
	for time.Now().Before(end) {
		sample()
		time.Sleep(3 * time.Millisecond)
	}
	stopped := fakeRaw()
	stop1()
	if err := <-errs; err != nil {
		t.Fatalf("node 1: Run: %v", err)
	}
	running--
	end = time.Now().Add(4 * time.Second)
	for time.Now().Before(end) {
		sample()
		time.Sleep(3 * time.Millisecond)
	}

	// One failover time: failover_after and a status query's timeout.
	foTime := int64(after) + min(max(int64(after)/4, 20*ms), int64(time.Second))
	for _, i := range []int{1, 2} {
		var before, during, afterW, settled int64
		var prev int64
		outside, bounded, unsynced := 0, 0, 0
		for k, r := range reads[i] {
			tm := r.tm
			if tm.Status == gtime.StatusUnsynced {
				if r.at > stopped+foTime {
					unsynced++
				}
				continue
			}
			bounded++
			if k > 0 && tm.Est < prev {
				t.Errorf("node %d: served UTC went back by %d ns at %+.3f s", i+1, prev-tm.Est, float64(r.at-stopped)/1e9)
			}
			prev = tm.Est
			if r.truth < tm.Earliest || r.truth > tm.Latest {
				outside++
				if outside <= 3 {
					t.Errorf("node %d: UTC outside the served bounds at %+.3f s: %+d ns from the estimate, half-widths %d, %d",
						i+1, float64(r.at-stopped)/1e9, r.truth-tm.Est, tm.Est-tm.Earliest, tm.Latest-tm.Est)
				}
			}
			w := tm.Latest - tm.Earliest
			switch {
			case r.at < stopped:
				before = max(before, w)
			case r.at < stopped+foTime:
				during = max(during, w)
			default:
				afterW = max(afterW, w)
				if r.at > stopped+2*int64(time.Second) {
					settled = max(settled, w)
				}
			}
		}
		last := reads[i][len(reads[i])-1].tm
		t.Logf("node %d: %d reads with bounds, %d outside; widest before the stop %.1f us, within one failover time (%d ms) %.1f us, after it %.1f us, from 2 s on %.1f us; %d unsynced after it; last %v",
			i+1, bounded, outside, float64(before)/1e3, foTime/ms, float64(during)/1e3, float64(afterW)/1e3, float64(settled)/1e3, unsynced, last.Status)
		if up2Synced {
			if afterW > 2*before {
				t.Errorf("node %d: served width %.1f us from one failover time after the stop on, more than twice the %.1f us before the stop",
					i+1, float64(afterW)/1e3, float64(before)/1e3)
			}
			if unsynced > 0 || last.Status != gtime.StatusSynced {
				t.Errorf("node %d: %d unsynced reads after one failover time, last %v: node 2 serves UTC", i+1, unsynced, last.Status)
			}
		} else if last.Status == gtime.StatusSynced || last.Status == gtime.StatusStale {
			t.Errorf("node %d: page %v after the failover, yet no node serves UTC", i+1, last.Status)
		}
	}
	if !up2Synced {
		for _, i := range []int{1, 2} {
			body := metrics.get(t, cfgs[i].Metrics.Listen, "/metrics")
			want := `status="unsynced"`
			var line string
			for l := range strings.Lines(body) {
				if strings.HasPrefix(l, "gclock_served_status{") && strings.HasSuffix(strings.TrimSpace(l), " 1") {
					line = strings.TrimSpace(l)
				}
			}
			if !strings.Contains(line, want) || !slices.ContainsFunc([]string{"upstream-unsynchronised", realtime.ReasonNoSource}, func(r string) bool {
				return strings.Contains(line, `reason="`+r+`"`)
			}) {
				t.Errorf("node %d: %q, want %s with an upstream reason", i+1, line, want)
			}
		}
	}
}
