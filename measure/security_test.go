package measure

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
	"github.com/gclock/gclock/wire/keyfile"
)

// testKeyring is a cluster key for the tests.
func testKeyring(t *testing.T) *wire.Keyring {
	t.Helper()
	kr, err := wire.NewKeyring(1, []wire.Key{{ID: 1, Secret: []byte(strings.Repeat("k", wire.MinKeyLen))}})
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// TestValidateSafeDefaults (issue 17): a measurement with a peer off
// loopback needs the cluster key or Insecure; op page needs the key.
func TestValidateSafeDefaults(t *testing.T) {
	lo := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:3200"), netip.MustParseAddrPort("127.0.0.1:3201")}
	off := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:3200"), netip.MustParseAddrPort("10.0.0.2:3200")}
	kr := testKeyring(t)
	for _, tc := range []struct {
		name     string
		peers    []netip.AddrPort
		op       string
		key      *wire.Keyring
		insecure bool
		want     string // "" valid
	}{
		{"loopback, no key", lo, OpAllreduce, nil, false, ""},
		{"off loopback, no key", off, OpAllreduce, nil, false, "peers[0] 10.0.0.1:3200 is off loopback"},
		{"off loopback, insecure", off, OpAllreduce, nil, true, ""},
		{"off loopback, key", off, OpAllreduce, kr, false, ""},
		{"page without key", lo, OpPage, nil, true, "op page: needs the cluster key"},
		{"page with key", off, OpPage, kr, false, ""},
		{"a peer twice", []netip.AddrPort{lo[0], lo[0]}, OpBarrier, nil, false, "listed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Peers, c.Op, c.Keyring, c.Insecure = tc.peers, tc.op, tc.key, tc.insecure
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestNoAmplification (issue 17: a 22-byte request returned 8 KB, 373x):
// a node answers no request from an unknown or unauthenticated source,
// so no datagram sent to it brings back more bytes than it had; only an
// authenticated peer gets pages from the page server.
//
// On loopback: the datagrams and the addresses are the kernel's.
func TestNoAmplification(t *testing.T) {
	kr := testKeyring(t)
	getp := func(sender uint32, seq uint32) []byte {
		b, err := (&wire.Packet{Op: wire.OpGetPage, Sender: sender, Seq: seq, Page: wire.Page{Addr: 7}}).MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name     string
		op       string
		key      *wire.Keyring // the node's
		fromPeer bool          // sent from rank 1's address (else a stranger's)
		sender   uint32
		seal     bool
		answered bool
	}{
		{"no key: stranger", OpBarrier, nil, false, 9, false, false},
		{"no key: stranger claiming rank 1", OpBarrier, nil, false, 2, false, false},
		{"no key: from rank 1's address", OpBarrier, nil, true, 2, false, false},
		{"no key: unknown sender id", OpBarrier, nil, true, 9, false, false},
		{"key: unsealed from rank 1's address", OpPage, kr, true, 2, false, false},
		{"key: sealed by a stranger", OpPage, kr, false, 2, true, false},
		{"key: sealed by rank 1, op barrier", OpBarrier, kr, true, 2, true, false},
		{"key: sealed by rank 1, op page", OpPage, kr, true, 2, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := transport.ListenUDP("127.0.0.1:0", transport.UDPOptions{})
			if err != nil {
				t.Fatal(err)
			}
			peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			stranger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				t.Fatal(err)
			}
			defer stranger.Close()
			cfg := DefaultConfig()
			cfg.Op, cfg.Keyring, cfg.Rank = tc.op, tc.key, 0
			cfg.Peers = []netip.AddrPort{conn.LocalAddr(), peer.LocalAddr().(*net.UDPAddr).AddrPort()}
			cfg.SetupTimeout = 10 * time.Second
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { // rank 0 waits in its setup for rank 1's hello: its endpoint answers meanwhile
				_, err := Run(ctx, cfg, conn, Clocks{Global: fakeGlobal(0, 100)})
				done <- err
			}()
			defer func() { cancel(); <-done }()
			from := stranger
			if tc.fromPeer {
				from = peer
			}
			sent, got := 0, 0
			authSeq := uint64(1)
			buf := make([]byte, 65536)
			for seq := uint32(1); seq <= 5; seq++ {
				b := getp(tc.sender, seq)
				if tc.seal {
					authSeq++
					b = kr.Seal(b, 1, authSeq) // to rank 0, node id 1
				}
				if _, err := from.WriteToUDPAddrPort(b, conn.LocalAddr()); err != nil {
					t.Fatal(err)
				}
				sent += len(b)
				// What comes back within 300 ms. Rank 0's transport first
				// challenges a keyed peer (a nonce it must answer, sealed, before
				// its window is trusted): the key holder answers, as its
				// endpoint would; a challenge is no answer to the request (it
				// goes only to a configured peer's address, never to a sender's).
				deadline := time.Now().Add(300 * time.Millisecond)
				for {
					from.SetReadDeadline(deadline)
					n, src, err := from.ReadFromUDPAddrPort(buf)
					if err != nil {
						break
					}
					if pkt, _, err := kr.Open(buf[:n]); err == nil {
						var p wire.Packet
						if p.UnmarshalBinary(pkt) == nil && p.Op == wire.OpAuthChallenge {
							if tc.seal {
								resp := wire.Packet{Op: wire.OpAuthResponse, Sender: tc.sender, Seq: p.Seq, Nonce: p.Nonce}
								rb, _ := resp.MarshalBinary()
								authSeq++
								from.WriteToUDPAddrPort(kr.Seal(rb, 1, authSeq), src)
								// and the request again, now that the window is known
								authSeq++
								from.WriteToUDPAddrPort(kr.Seal(getp(tc.sender, seq), 1, authSeq), conn.LocalAddr())
							}
							continue
						}
					}
					got += n
				}
			}
			switch {
			case tc.answered && got < 5*transport.PageSize:
				t.Errorf("the authenticated peer got %d bytes for 5 page requests", got)
			case !tc.answered && got > 0:
				t.Errorf("%d bytes sent, %d bytes came back (%.0fx): want none", sent, got, float64(got)/float64(sent))
			}
		})
	}
}

// TestForgedMessagesBounded (issue 17: 12.8k forged messages grew a node
// from 23 to 140 MB, never freed): what a sender can queue at a node is
// bounded, the oldest evicted; messages asked for are delivered and
// accounted for; senders outside the peers are dropped.
func TestForgedMessagesBounded(t *testing.T) {
	peers := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2"), netip.MustParseAddrPort("127.0.0.1:3")}
	c := newComm(0, peers)
	put := func(sender uint32, tg uint64, size int) {
		c.HandleMessage(&transport.Incoming{Packet: &wire.Packet{Op: wire.OpPut, Sender: sender, Page: wire.Page{Addr: tg, Data: make([]byte, size)}}})
	}
	// A legitimate message first: it must survive a flood from another sender.
	put(3, tag(0, 0, phaseBarrierOp, 0), 8)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const forged = 12800
	for i := range forged {
		put(2, tag(i+1, 0, phaseReduce, 0), 8<<10)
	}
	put(99, 1, 8<<10) // not a peer
	put(0, 2, 8<<10)
	runtime.GC()
	runtime.ReadMemStats(&after)
	msgs, bytes, evicted := c.queued()
	if bytes > maxQueuedBytes+8 || msgs > maxQueued+1 {
		t.Errorf("after %d forged 8-KB messages: %d queued, %d bytes; bounds %d messages, %d bytes per sender", forged, msgs, bytes, maxQueued, maxQueuedBytes)
	}
	if evicted == 0 {
		t.Errorf("nothing evicted")
	}
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d forged 8-KB messages: %d queued (%d bytes), %d evicted; heap in use grew %.1f MB", forged, msgs, bytes, evicted, float64(grown)/1e6)
	if grown > 3*maxQueuedBytes {
		t.Errorf("heap in use grew %.1f MB for %d forged messages, want under %.1f MB", float64(grown)/1e6, forged, 3*float64(maxQueuedBytes)/1e6)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if m, err := c.recv(ctx, tag(0, 0, phaseBarrierOp, 0), 2); err != nil || len(m.data) != 8 {
		t.Fatalf("the legitimate message: %v", err)
	}
	if m, err := c.recv(ctx, tag(forged, 0, phaseReduce, 0), 1); err != nil || len(m.data) != 8<<10 {
		t.Fatalf("the newest forged message: %v", err)
	}
	// The oldest of rank 1's were evicted: waiting for one times out.
	short, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel2()
	if _, err := c.recv(short, tag(1, 0, phaseReduce, 0), 1); err == nil {
		t.Errorf("the oldest forged message is still queued")
	}
	m2, b2, _ := c.queued()
	if m2 != msgs-2 || b2 != bytes-8-(8<<10) {
		t.Errorf("after two deliveries: %d messages, %d bytes; want %d, %d", m2, b2, msgs-2, bytes-8-(8<<10))
	}
}

// TestLatencyRxBounded: the latency test's receiver stamps only the
// messages its peer is to send, each once, and keeps at most maxRx
// incomplete ones.
func TestLatencyRxBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Op, cfg.Count, cfg.Sizes, cfg.Rank = OpLatency, 3, []int{64, 65536}, 0
	cfg.Peers = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")}
	n := &node{cfg: cfg, clk: Clocks{Raw: func() int64 { return 1 }, Local: identity, Global: fakeGlobal(0, 10)},
		rx: map[int]*rxState{}, rxDone: map[int]bool{}}
	rx := func(sender uint32, e, chunks int) {
		n.latencyRx(&transport.Incoming{RecvUser: 5, Packet: &wire.Packet{Op: wire.OpPut, Sender: sender,
			Page: wire.Page{Addr: tag(e, 0, phaseLatency, chunks), Data: make([]byte, 64)}}})
	}
	// Messages 1, 3, 5 are rank 1's (64 B: one datagram); 7, 9, 11 (64 KB: two).
	rx(2, 1, 1)
	rx(2, 1, 1)                  // again: stamped once
	rx(2, 2, 1)                  // rank 0's own turn
	rx(2, 1000, 1)               // out of range
	rx(2, 3, 2)                  // wrong number of datagrams for 64 B
	for e := 0; e < 1<<16; e++ { // a flood of halves of 64-KB messages
		rx(2, 7+2*(e%3), 2)
	}
	rx(2, 5, 1)
	if len(n.stamps) != 5 {
		t.Errorf("%d stamps, want 5 (messages 1, 5, 7, 9, 11 once each)", len(n.stamps))
	}
	if len(n.rx) > maxRx {
		t.Errorf("%d messages in flight, bound %d", len(n.rx), maxRx)
	}
	for e := 0; e < 10*maxRx; e++ {
		rx(2, e, 2) // many incomplete, most invalid
	}
	if len(n.rx) > maxRx {
		t.Errorf("%d messages in flight, bound %d", len(n.rx), maxRx)
	}
}

// TestNodeMainKey: -key reads the daemons' key file (refusing one others
// can read, as the daemon does), and a node off loopback without -key or
// -insecure refuses to start.
func TestNodeMainKey(t *testing.T) {
	dir := t.TempDir()
	line, err := keyfile.NewLine(1)
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.key")
	loose := filepath.Join(dir, "loose.key")
	os.WriteFile(good, []byte(line), 0o600)
	os.WriteFile(loose, []byte(line), 0o644)
	os.Chmod(loose, 0o644)
	if kr, err := keyring(good, 1); err != nil || kr == nil {
		t.Errorf("good key: %v", err)
	}
	if _, err := keyring(loose, 1); err == nil || !strings.Contains(err.Error(), "mode 0644") {
		t.Errorf("a key others can read: %v, want a refusal naming the mode", err)
	}
	if _, err := keyring(good, 2); err == nil {
		t.Errorf("key id 2, not in the file: accepted")
	}
	var stderr strings.Builder
	err = NodeMain(context.Background(), []string{"-rank", "0", "-peers", "10.0.0.1:3200,10.0.0.2:3200", "-page", filepath.Join(dir, "none")}, false, "", &stderr)
	if err == nil || !strings.Contains(err.Error(), "off loopback") {
		t.Errorf("no key, peers off loopback: %v, want a refusal", err)
	}
}
