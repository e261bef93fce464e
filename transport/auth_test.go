package transport

import (
	"bytes"
	"context"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/wire"
)

func testKeyring(t *testing.T, send uint32, ids ...uint32) *wire.Keyring {
	t.Helper()
	var keys []wire.Key
	for _, id := range ids {
		keys = append(keys, wire.Key{ID: id, Secret: bytes.Repeat([]byte{byte(id)}, wire.MinKeyLen)})
	}
	r, err := wire.NewKeyring(send, keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// authPair is newPair with a cluster key on both ends and each bound to
// the other's address.
func authPair(t *testing.T, ctx context.Context, n *memnet.Network, ackEvery bool, anonymous ...wire.Op) *pair {
	t.Helper()
	kr := testKeyring(t, 1, 1)
	peers := map[uint32]netip.AddrPort{
		1: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), 1),
		2: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), 2),
	}
	return newPair(t, ctx, n, ackEvery, func(c *Config) {
		c.Keyring, c.Peers, c.Anonymous = kr, peers, anonymous
	})
}

// TestAuthLossDuplicationReordering is TestLossDuplicationReordering's
// worst case with a key: retransmissions and cached replies are sealed
// afresh, so they are not taken for replays, while the network's own
// duplicates are.
func TestAuthLossDuplicationReordering(t *testing.T) {
	for _, ackEvery := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			n := memnet.New(7)
			n.SetLink(memnet.Link{Loss: 0.2, Dup: 0.3, Delay: time.Millisecond, Jitter: 3 * time.Millisecond})
			p := authPair(t, ctx, n, ackEvery)
			var wg sync.WaitGroup
			wg.Go(func() { p.getPages(t, ctx, 200, 8) })
			for r := range 50 {
				wg.Go(func() {
					m := engine.Message{Type: engine.MsgErrReport, From: 1, To: 2, Round: uint32(r), Err: 1.5}
					if _, err := p.client.Send(ctx, p.srvAddr, &wire.Packet{Op: wire.OpErrReport | wire.ReliableFlag, Msg: m}); err != nil {
						t.Errorf("flagged message %d: %v", r, err)
					}
				})
			}
			wg.Wait()
			c, s := p.client.Stats(), p.server.Stats()
			if c.Replays+s.Replays == 0 {
				t.Errorf("duplicating network but no replay dropped: %+v %+v", c, s)
			}
			if c.BadTag+s.BadTag+c.UnknownSender+s.UnknownSender+c.DecodeErrors+s.DecodeErrors != 0 {
				t.Errorf("honest traffic dropped: %+v %+v", c, s)
			}
			p.srv.mu.Lock()
			defer p.srv.mu.Unlock()
			for r := range 50 {
				if k := p.srv.messages[uint32(r)]; k != 1 {
					t.Errorf("flagged message %d delivered %d times", r, k)
				}
			}
		})
	}
}

// TestAuthDrops sends forged datagrams from a third address and checks
// that each is dropped for its reason before the handler sees it.
func TestAuthDrops(t *testing.T) {
	getp := func(sender, seq uint32) []byte {
		p := wire.Packet{Op: wire.OpGetPage, Sender: sender, Seq: seq, Page: wire.Page{Addr: 3}}
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name      string
		key       bool // the server has a key
		anonymous bool // the server answers getp from authenticated non-peers
		send      func(n *memnet.Network, a *memnet.Conn, good, other *wire.Keyring, srv netip.AddrPort, captured []byte)
		reason    func(Stats) uint64
		served    bool
	}{
		{"no tag", true, false, func(n *memnet.Network, a *memnet.Conn, _, _ *wire.Keyring, srv netip.AddrPort, _ []byte) {
			a.WriteTo(getp(1, 5), srv)
		}, func(s Stats) uint64 { return s.BadTag }, false},
		{"tag under another key", true, false, func(n *memnet.Network, a *memnet.Conn, _, other *wire.Keyring, srv netip.AddrPort, _ []byte) {
			a.WriteTo(other.Seal(getp(1, 5), 2, 1<<62), srv)
		}, func(s Stats) uint64 { return s.BadTag }, false},
		{"flipped bit", true, false, func(n *memnet.Network, a *memnet.Conn, good, _ *wire.Keyring, srv netip.AddrPort, _ []byte) {
			b := good.Seal(getp(1, 5), 2, 1<<62)
			b[20] ^= 1
			a.WriteTo(b, srv)
		}, func(s Stats) uint64 { return s.BadTag }, false},
		{"replayed capture", true, false, func(n *memnet.Network, a *memnet.Conn, _, _ *wire.Keyring, srv netip.AddrPort, captured []byte) {
			// From the client's own address, as a spoofer would.
			n.Deliver(captured, netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), 1), srv)
		}, func(s Stats) uint64 { return s.Replays }, false},
		{"key holder claims a peer's id", true, false, func(n *memnet.Network, a *memnet.Conn, good, _ *wire.Keyring, srv netip.AddrPort, _ []byte) {
			a.WriteTo(good.Seal(getp(1, 5), 2, 1<<62), srv)
		}, func(s Stats) uint64 { return s.UnknownSender }, false},
		{"key holder, unknown id, op not anonymous", true, false, func(n *memnet.Network, a *memnet.Conn, good, _ *wire.Keyring, srv netip.AddrPort, _ []byte) {
			a.WriteTo(good.Seal(getp(77, 5), 2, 1<<62), srv)
		}, func(s Stats) uint64 { return s.UnknownSender }, false},
		{"key holder, unknown id, anonymous op", true, true, func(n *memnet.Network, a *memnet.Conn, good, _ *wire.Keyring, srv netip.AddrPort, _ []byte) {
			a.WriteTo(good.Seal(getp(77, 5), 2, 1<<62), srv)
		}, func(s Stats) uint64 { return 0 }, true},
		{"no key, peer id from another address", false, true, func(n *memnet.Network, a *memnet.Conn, _, _ *wire.Keyring, srv netip.AddrPort, _ []byte) {
			a.WriteTo(getp(1, 5), srv)
		}, func(s Stats) uint64 { return s.UnknownSender }, false},
		{"no key, unknown id, anonymous op", false, true, func(n *memnet.Network, a *memnet.Conn, _, _ *wire.Keyring, srv netip.AddrPort, _ []byte) {
			a.WriteTo(getp(77, 5), srv)
		}, func(s Stats) uint64 { return s.UnknownSender }, false},
		{"sealed garbage", true, true, func(n *memnet.Network, a *memnet.Conn, good, _ *wire.Keyring, srv netip.AddrPort, _ []byte) {
			b := getp(77, 5)
			b[len(b)-1] = 0xff
			b = append(b, 1) // the header's length no longer matches
			a.WriteTo(good.Seal(b, 2, 1<<62), srv)
		}, func(s Stats) uint64 { return s.DecodeErrors }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				n := memnet.New(1)
				var mu sync.Mutex
				var captured []byte
				n.SetLink(memnet.Link{Delay: 100 * time.Microsecond, Drop: func(b []byte) bool {
					mu.Lock()
					if captured == nil && len(b) > 3 && wire.Op(b[3]).Kind() == wire.OpGetPage { // the request, not a start challenge
						captured = append([]byte(nil), b...)
					}
					mu.Unlock()
					return false
				}})
				var anon []wire.Op
				if tt.anonymous {
					anon = []wire.Op{wire.OpGetPage}
				}
				var p *pair
				if tt.key {
					p = authPair(t, ctx, n, false, anon...)
				} else {
					p = newPair(t, ctx, n, false, func(c *Config) {
						c.Peers = map[uint32]netip.AddrPort{1: netip.MustParseAddrPort("10.0.0.1:1"), 2: netip.MustParseAddrPort("10.0.0.1:2")}
						c.Anonymous = anon
					})
				}
				// One honest request first: it is what the spoofer captures.
				if errs := p.getPages(t, ctx, 1, 1); errs != 0 {
					t.Fatal("honest request failed")
				}
				synctest.Wait()
				before := p.server.Stats()
				served := p.srv.Served()
				a := listenMem(n, 3)
				tt.send(n, a, testKeyring(t, 1, 1), testKeyring(t, 9, 9), p.srvAddr, captured)
				time.Sleep(10 * time.Millisecond)
				synctest.Wait()
				after := p.server.Stats()
				if got := tt.reason(after) - tt.reason(before); !tt.served && got != 1 {
					t.Errorf("dropped for the reason %d times, want 1: %+v", got, after)
				}
				if after.Received-before.Received != map[bool]uint64{true: 1}[tt.served] {
					t.Errorf("received %d -> %d: a dropped datagram counts as received", before.Received, after.Received)
				}
				if got := p.srv.Served() - served; (got == 1) != tt.served {
					t.Errorf("handler served %d", got)
				}
			})
		})
	}
}

// TestAuthSealTooLong: a datagram that would exceed a UDP payload once
// sealed is not sent (and the request times out), rather than truncated.
func TestAuthSealTooLong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		n := memnet.New(1)
		p := authPair(t, ctx, n, false)
		synctest.Wait() // the challenges both ends send at start, and their answers
		before := p.client.Stats()
		_, err := p.client.Send(ctx, p.srvAddr, &wire.Packet{Op: wire.OpTimeDiff, Msg: engine.Message{Type: engine.MsgTimeDiff, From: 1, To: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if s := p.client.Stats(); s.Sent-before.Sent != 1 {
			t.Fatalf("a short datagram was not sent: %+v", s)
		}
		var sent []byte
		p.client.seal(make([]byte, wire.MaxPacket-wire.AuthLen+1), 2, func(b []byte) { sent = b })
		if sent != nil {
			t.Fatal("sealed a datagram beyond wire.MaxPacket")
		}
	})
}
