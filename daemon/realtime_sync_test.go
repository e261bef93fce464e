package daemon

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/internal/memnet"
)

// TestRealTimeDriver runs the real-time driver of a reference and of a
// node over internal/memnet on synctest's fake clock: the reference
// samples its (fake) CLOCK_REALTIME, the node polls it, and the node
// serves the reference's CLOCK_REALTIME. With a reference that runs no
// real-time mode, the node's polls fail, are counted, and it serves
// nothing (its page would say unsynced). The reference's fake adjtimex
// says how good its CLOCK_REALTIME is: synchronised with a 2 ms maxerror
// and a leap second announced, the node's bounds hold UTC (CLOCK_REALTIME
// 1.5 ms ahead of it) and it knows the leap; unsynchronised (this VM's
// kernel: STA_UNSYNC, TIME_ERROR, maxerror 16 s), the node serves
// nothing and knows why.
func TestRealTimeDriver(t *testing.T) {
	const off = int64(1_700_000_000) * int64(time.Second)
	for _, tc := range []struct {
		name, refMode string
		kernel        kernelTimex
		utcErr        int64 // CLOCK_REALTIME - UTC: only the test knows it
	}{
		{"reference-realtime", RealTimeReference, kernelTimex{Status: 0x2001}, 0},
		{"none", RealTimeNone, kernelTimex{}, 0},
		{"upstream leap insert", RealTimeReference, kernelTimex{State: 1, Status: 0x2011, MaxErrUs: 2000, EstErrUs: 100}, 1_500_000},
		{"upstream unsynchronised", RealTimeReference, kernelTimex{State: kernelTimeError, Status: 0x6041, MaxErrUs: 16_000_000, EstErrUs: 16_000_000}, 0},
	} {
		refMode := tc.refMode
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				mn := memnet.New(1)
				mn.SetLink(memLink)
				var nodes []*node
				start := time.Now().UnixNano()
				for id := uint32(1); id <= 2; id++ {
					cfg := fuzzCluster(id)
					cfg.RealTime.Mode = RealTimeReference
					cfg.RealTime.PollEvery = Duration(200 * time.Millisecond)
					if id == 1 {
						cfg.RealTime.Mode = refMode
					}
					conn, err := mn.Listen(netip.MustParseAddrPort(cfg.Peers[id-1].Address))
					if err != nil {
						t.Fatal(err)
					}
					n := bareNode(t, ctx, cfg, conn, nil)
					if n.rt != nil {
						// The fake clock is every clock: local, raw and
						// CLOCK_REALTIME (raw + off + 30 ppm).
						n.rt.local = func() int64 { return time.Now().UnixNano() }
						n.rt.rawNow = n.rt.local
						n.rt.fromRaw = func(r int64) int64 { return r }
						n.rt.wallRawOffset = func() (int64, int64) { return off + (time.Now().UnixNano()-start)*30/1_000_000, 20 }
						if n.rt.upstream != nil {
							n.rt.upstream = func() (realtime.Upstream, error) { return upstreamFromKernel(tc.kernel), nil }
						}
					}
					nodes = append(nodes, n)
				}
				var waits []func()
				for _, n := range nodes {
					waits = append(waits, n.startRealTime(ctx))
				}
				time.Sleep(3 * time.Second)
				rt := nodes[1].rt
				rt.mu.Lock()
				st := rt.sc.Stats()
				g := time.Now().UnixNano()
				ts := []engine.Time{{Est: g, Earliest: g - 1000, Latest: g + 1000, Status: engine.StatusSynced}}
				served := rt.sc.Apply(ts)
				up, hasUp := rt.sc.Upstream()
				rt.mu.Unlock()
				cancel()
				for _, w := range waits {
					w()
				}
				t.Logf("reference %s: node polls %d (%d failed), model %v at %d, served %v %+v", refMode, st.Polls, st.PollFails, st.HaveModel, st.ModelAt, served, ts[0])
				if refMode == RealTimeNone {
					if served || st.HaveModel || st.PollFails < 2 {
						t.Errorf("a reference without real time: served %v, model %v, %d failed polls", served, st.HaveModel, st.PollFails)
					}
					return
				}
				if st.Polls < 10 || st.PollFails != 0 || !st.HaveModel {
					t.Fatalf("node: %d polls, %d failed, model %v", st.Polls, st.PollFails, st.HaveModel)
				}
				if want := upstreamFromKernel(tc.kernel); !hasUp || up != want {
					t.Errorf("the node's upstream %+v (%v), want the reference's %+v", up, hasUp, want)
				}
				if tc.kernel.Status&staUnsync != 0 {
					if served || up.Problem() != "upstream-unsynchronised" {
						t.Errorf("served %v with an unsynchronised upstream (problem %q)", served, up.Problem())
					}
					return
				}
				truth := g + off + (g-start)*30/1_000_000 - tc.utcErr
				if !served || truth < ts[0].Earliest || truth > ts[0].Latest {
					t.Errorf("served %+v (ok %v), UTC %d", ts[0], served, truth)
				}
				if tc.kernel.Status&staIns != 0 && up.Leap != realtime.LeapInsert {
					t.Errorf("leap %d, want the insert announced", up.Leap)
				}
			})
		})
	}
}
