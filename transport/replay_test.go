package transport

import (
	"context"
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/wire"
)

// Issue 17, item 4: authentication that no single packet can poison. The
// cases an insider found (with the cluster key) and the restart replays,
// each on internal/memnet in a testing/synctest bubble.

// meshAddr is node id's address in the tests below.
func meshAddr(id uint32) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), uint16(id))
}

// meshPeers binds ids 1..n to meshAddr.
func meshPeers(n uint32) map[uint32]netip.AddrPort {
	m := map[uint32]netip.AddrPort{}
	for id := uint32(1); id <= n; id++ {
		m[id] = meshAddr(id)
	}
	return m
}

// meshNode starts endpoint id of a keyed cluster of n nodes, serving pages
// with rec (nil: none), until ctx ends; done is closed when Run returned
// (its socket is then free for a restarted node).
func meshNode(t *testing.T, ctx context.Context, nw *memnet.Network, kr *wire.Keyring, id, n uint32, rec *recorder) (e *Endpoint, done chan struct{}) {
	t.Helper()
	c, err := nw.Listen(meshAddr(id))
	if err != nil {
		t.Fatal(err)
	}
	var h Handler
	if rec != nil {
		h = rec
	}
	cfg := Config{ID: id, Conn: c, Handler: h, Clock: clockFunc(fakeClock()),
		InitialRTO: 50 * time.Millisecond, MinRTO: 5 * time.Millisecond, MaxRTO: 400 * time.Millisecond,
		MaxAttempts: 16, RecentTTL: 30 * time.Second, Keyring: kr, Peers: meshPeers(n)}
	e, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	return e, done
}

// getPage asks to for one page and reports whether it came.
func getPage(ctx context.Context, from *Endpoint, to netip.AddrPort, addr uint64) error {
	rep, _, err := from.Request(ctx, to, &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: addr}})
	if err != nil {
		return err
	}
	return CheckPage(rep.Page.Data, addr, 512)
}

// sealedGetp is a key holder's GETP claiming sender, sealed for dest with
// auth sequence seq.
func sealedGetp(t *testing.T, kr *wire.Keyring, sender, dest uint32, seq uint64) []byte {
	t.Helper()
	p := wire.Packet{Op: wire.OpGetPage, Sender: sender, Seq: 7, Page: wire.Page{Addr: 1}}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return kr.Seal(b, dest, seq)
}

// TestInsiderSequenceJump: a key holder seals one datagram as node 1 with
// a sequence number far above node 1's (2^63, the probe) or just
// above it. Node 2 must go on hearing node 1: the first is refused
// (seq_jump) and moves nothing; the second is accepted (nothing tells it
// from node 1's own) but node 1's next datagrams, now below the window,
// make node 2 challenge node 1 and rebase the window to node 1's real
// number. On main the 2^63 probe made node 2 drop every later datagram of
// node 1 as a replay, for good.
func TestInsiderSequenceJump(t *testing.T) {
	tests := []struct {
		name     string
		ahead    uint64 // forged seq - node 1's current counter toward 2
		absolute uint64 // if set, the forged seq
		jump     bool   // refused as seq_jump
	}{
		{"2^63", 0, 1 << 63, true},
		{"just beyond the jump limit", wire.MaxSeqJump + 10, 0, true},
		{"within the jump limit", wire.MaxSeqJump - 10, 0, false},
		{"inside the window", 30, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				nw := memnet.New(3)
				nw.SetLink(memnet.Link{Delay: 200 * time.Microsecond})
				kr := testKeyring(t, 1, 1)
				rec := newRecorder()
				one, _ := meshNode(t, ctx, nw, kr, 1, 2, nil)
				two, _ := meshNode(t, ctx, nw, kr, 2, 2, rec)
				for i := range 5 {
					if err := getPage(ctx, one, meshAddr(2), uint64(i)); err != nil {
						t.Fatalf("honest request %d before the forgery: %v", i, err)
					}
				}
				synctest.Wait()
				seq := tt.absolute
				if seq == 0 {
					seq = one.authSeqs[2].Load() + tt.ahead
				}
				before := two.Stats()
				nw.Deliver(sealedGetp(t, kr, 1, 2, seq), meshAddr(1), meshAddr(2))
				time.Sleep(time.Millisecond)
				synctest.Wait()
				if got := two.Stats().SeqJumps - before.SeqJumps; (got == 1) != tt.jump {
					t.Errorf("seq_jump drops %d, want jump %v", got, tt.jump)
				}
				// Node 1 is heard again at once: every request answered,
				// each within a couple of retransmissions.
				for i := range 20 {
					start := time.Now()
					if err := getPage(ctx, one, meshAddr(2), uint64(100+i)); err != nil {
						t.Fatalf("honest request %d after the forgery: %v (node 2: %+v)", i, err, two.Stats())
					}
					if d := time.Since(start); d > time.Second {
						t.Errorf("honest request %d took %v", i, d)
					}
				}
				after := two.Stats()
				if !tt.jump && tt.ahead > wire.ReplayWindowSize && after.Challenges == before.Challenges {
					t.Errorf("window moved %d ahead but node 2 never challenged node 1: %+v", tt.ahead, after)
				}
			})
		})
	}
}

// TestDestinationBound: a datagram node 1 sealed for node 2, replayed to
// node 3 from node 1's address, is dropped by node 3 as misaddressed (the
// destination is under the tag); so is one a key holder seals as a peer
// with the "unknown" destination 0. On main the reference's datagrams to
// one follower were fresh to every other (one counter, no destination).
func TestDestinationBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		nw := memnet.New(4)
		var mu sync.Mutex
		var toTwo [][]byte
		nw.SetLink(memnet.Link{Delay: 200 * time.Microsecond, Drop: func(b []byte) bool {
			if len(b) >= wire.HeaderLen+wire.AuthLen && binary.BigEndian.Uint32(b[4:]) == 1 &&
				binary.BigEndian.Uint32(b[len(b)-wire.AuthLen+4:]) == 2 {
				mu.Lock()
				toTwo = append(toTwo, append([]byte(nil), b...))
				mu.Unlock()
			}
			return false
		}})
		kr := testKeyring(t, 1, 1)
		rec2, rec3 := newRecorder(), newRecorder()
		one, _ := meshNode(t, ctx, nw, kr, 1, 3, nil)
		_, _ = meshNode(t, ctx, nw, kr, 2, 3, rec2)
		three, _ := meshNode(t, ctx, nw, kr, 3, 3, rec3)
		for i := range 5 {
			if err := getPage(ctx, one, meshAddr(2), uint64(i)); err != nil {
				t.Fatal(err)
			}
			if err := getPage(ctx, one, meshAddr(3), uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		before, served := three.Stats(), rec3.Served()
		mu.Lock()
		captured := toTwo
		mu.Unlock()
		if len(captured) < 5 {
			t.Fatalf("captured %d datagrams from 1 to 2", len(captured))
		}
		for _, b := range captured {
			nw.Deliver(b, meshAddr(1), meshAddr(3))
		}
		nw.Deliver(sealedGetp(t, kr, 1, 0, one.authSeqs[3].Load()+1), meshAddr(1), meshAddr(3))
		time.Sleep(time.Millisecond)
		synctest.Wait()
		after := three.Stats()
		if got, want := after.Misaddressed-before.Misaddressed, uint64(len(captured)+1); got != want {
			t.Errorf("node 3 dropped %d as misaddressed, want %d: %+v", got, want, after)
		}
		if after.Received != before.Received || rec3.Served() != served {
			t.Errorf("node 3 heard node 2's datagrams: received %d -> %d, served %d -> %d", before.Received, after.Received, served, rec3.Served())
		}
	})
}

// TestRestartReplays: datagrams captured before node 2 restarted are
// replayed to the new node 2 (the issue: 30/30 accepted after a follower
// restart, and it said synced on 30-s-old data). None may be accepted:
// the restarted node takes nothing from node 1 before node 1 answered its
// challenge, and the answer rebases the window above every old number.
// Node 1 restarting is heard again after one challenge too.
func TestRestartReplays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		nw := memnet.New(5)
		var mu sync.Mutex
		var toTwo [][]byte
		capture := true
		nw.SetLink(memnet.Link{Delay: 200 * time.Microsecond, Drop: func(b []byte) bool {
			mu.Lock()
			defer mu.Unlock()
			if capture && len(b) >= wire.HeaderLen && binary.BigEndian.Uint32(b[4:]) == 1 {
				toTwo = append(toTwo, append([]byte(nil), b...))
			}
			return false
		}})
		kr := testKeyring(t, 1, 1)
		one, _ := meshNode(t, ctx, nw, kr, 1, 2, newRecorder())
		ctx2, stop2 := context.WithCancel(ctx)
		_, done2 := meshNode(t, ctx2, nw, kr, 2, 2, newRecorder())
		for i := range 30 {
			if err := getPage(ctx, one, meshAddr(2), uint64(i)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
		}
		mu.Lock()
		captured, capture := toTwo, false
		mu.Unlock()
		_ = capture
		stop2()
		<-done2
		rec := newRecorder()
		two, _ := meshNode(t, ctx, nw, kr, 2, 2, rec)
		for _, b := range captured {
			nw.Deliver(b, meshAddr(1), meshAddr(2))
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		// A replayed challenge may be answered (at most once per
		// challengeEvery: the answer goes to node 1, which asked nothing);
		// nothing else may be received.
		chals := uint64(0)
		for _, b := range captured {
			if wire.Op(b[3]).Kind() == wire.OpAuthChallenge {
				chals++
			}
		}
		if st := two.Stats(); st.Received > chals || rec.Served() != 0 {
			t.Fatalf("restarted node accepted %d of %d captured datagrams (%d challenges; served %d): %+v", st.Received, len(captured), chals, rec.Served(), st)
		}
		// Node 1 is heard at once (after one challenge), and the replays,
		// again, are not.
		if err := getPage(ctx, one, meshAddr(2), 999); err != nil {
			t.Fatalf("node 1 not heard after node 2 restarted: %v (%+v)", err, two.Stats())
		}
		synctest.Wait()
		received := two.Stats().Received
		for _, b := range captured {
			nw.Deliver(b, meshAddr(1), meshAddr(2))
		}
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if st := two.Stats(); st.Received > received+chals || st.Challenges == 0 {
			t.Errorf("after verification: received %d -> %d replays; %d challenges", received, st.Received, st.Challenges)
		}
		// Node 1 restarts: its new counter jumps; node 2 challenges it and
		// hears it again.
		time.Sleep(5 * time.Second)
		// (node 1's old endpoint still holds its socket: the new one gets
		// the old one's address by closing it first.)
		one.conn.Close()
		synctest.Wait()
		one2, _ := meshNode(t, ctx, nw, kr, 1, 2, nil)
		jumps := two.Stats().SeqJumps
		if err := getPage(ctx, one2, meshAddr(2), 1000); err != nil {
			t.Fatalf("restarted node 1 not heard: %v (%+v)", err, two.Stats())
		}
		if two.Stats().SeqJumps == jumps {
			t.Errorf("restarted node 1's counter (+5 s of ns) was not seen as a jump: %+v", two.Stats())
		}
	})
}
