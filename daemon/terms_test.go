package daemon

import (
	"context"
	"log/slog"
	"math"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/wire"
)

// A tool with the cluster key, from outside the peer list, sends every
// node one status query of the last term (issue 29: all three nodes
// adopted it, and after the reference died nobody could take over). Its
// queries are answered from a snapshot and never reach the Member: the
// terms stay, and a kill of the reference is followed by a takeover.
func TestToolStatusQueryMovesNoTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New(1)
		mn.SetLink(memLink)
		sys := fakeSys(mn, nil)
		cfgs := memCluster(t, 3)
		for i := range cfgs {
			cfgs[i].Reference.Order = []uint32{1, 2, 3}
			cfgs[i].Reference.FailoverAfter = Duration(400 * time.Millisecond)
			cfgs[i].Sync.ProbeTimeout = Duration(20 * time.Millisecond)
		}
		kr := clusterKey(t, cfgs)
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 3)
		ctx1, stop1 := context.WithCancel(ctx)
		for i, c := range cfgs {
			cx := ctx
			if i == 0 {
				cx = ctx1
			}
			go func() { errs <- run(cx, c, slog.New(slog.DiscardHandler), sys) }()
		}
		defer func() {
			cancel()
			for range cfgs {
				<-errs
			}
		}()
		conn, err := mn.Listen(netip.MustParseAddrPort("10.0.0.1:99"))
		if err != nil {
			t.Fatal(err)
		}
		client := statusClient(t, ctx, conn, kr)
		addr := func(i int) netip.AddrPort { return netip.MustParseAddrPort(cfgs[i].Peers[i].Address) }
		time.Sleep(3 * time.Second)
		for i := range cfgs {
			rctx, c := context.WithTimeout(ctx, 200*time.Millisecond)
			_, _, err := client.Request(rctx, addr(i), &wire.Packet{Op: wire.OpStatusQuery, Sender: 99,
				Status: wire.Status{Term: math.MaxUint32}})
			c()
			if err != nil {
				t.Fatalf("node %d: %v", i+1, err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		for i := range cfgs {
			st, err := queryStatus(ctx, client, 99, addr(i), 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if st.Term != 0 || st.Reference != 1 {
				t.Fatalf("node %d: term %d reference %d after the tool's query, want 0 and 1", i+1, st.Term, st.Reference)
			}
		}
		stop1()
		<-errs
		errs <- nil // the deferred wait counts three
		killed := time.Now()
		for time.Since(killed) < 5*time.Second {
			time.Sleep(50 * time.Millisecond)
			s2, err2 := queryStatus(ctx, client, 99, addr(1), 200*time.Millisecond)
			s3, err3 := queryStatus(ctx, client, 99, addr(2), 200*time.Millisecond)
			if err2 == nil && err3 == nil && s2.Reference == 2 && s3.Reference == 2 {
				t.Logf("node 2 took over %v after the kill", time.Since(killed))
				return
			}
		}
		t.Fatal("no takeover by node 2 within 5 s of the kill")
	})
}
