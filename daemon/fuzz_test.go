package daemon

import (
	"context"
	"encoding/binary"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// The daemon's packet handlers end to end: bytes from the network, through
// the transport's gate (tag, sender binding, replay window) and decoder,
// into the daemon's handlers and its engine. A fake socket hands the
// receive loop one datagram at a time and records what the daemon writes.

type fuzzDatagram struct {
	b    []byte
	from netip.AddrPort
}

// fuzzConn is a PacketConn whose reads come from in; idle gets a token
// each time the receive loop asks for the next datagram, i.e. once the
// previous one has been handled (the loop is sequential).
type fuzzConn struct {
	in     chan fuzzDatagram
	idle   chan struct{}
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	writes map[netip.AddrPort]int // bytes written per destination
	// With kr: the last challenge written to each address (the transport
	// verifies a peer's window before it accepts anything from it).
	kr   *wire.Keyring
	chal map[netip.AddrPort]wire.Packet
}

func newFuzzConn() *fuzzConn {
	return &fuzzConn{in: make(chan fuzzDatagram), idle: make(chan struct{}, 1), closed: make(chan struct{}), writes: map[netip.AddrPort]int{}}
}

func (c *fuzzConn) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	select {
	case c.idle <- struct{}{}:
	default:
	}
	select {
	case d := <-c.in:
		return copy(b, d.b), d.from, nil
	case <-c.closed:
		return 0, netip.AddrPort{}, net.ErrClosed
	}
}

func (c *fuzzConn) WriteTo(b []byte, to netip.AddrPort) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes[to] += len(b)
	if c.kr != nil {
		var p wire.Packet
		if pkt, _, err := c.kr.Open(b); err == nil && p.UnmarshalBinary(pkt) == nil && p.Op.Kind() == wire.OpAuthChallenge {
			c.chal[to] = p
		}
	}
	return nil
}

func (c *fuzzConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// deliver hands one datagram to the receive loop and waits until it has
// been handled.
func (c *fuzzConn) deliver(t *testing.T, d fuzzDatagram) {
	t.Helper()
	<-c.idle
	c.in <- d
	select {
	case <-c.idle:
		c.idle <- struct{}{} // keep the token for the next deliver
	case <-time.After(10 * time.Second):
		t.Fatal("the receive loop did not come back for 10 s")
	}
}

// bareNode builds the daemon's node as Run does, over conn, without a
// page, metrics or the reference discovery; it stops with ctx.
func bareNode(t *testing.T, ctx context.Context, cfg Config, conn transport.PacketConn, kr *wire.Keyring) *node {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	mem, err := cfg.newMember(log)
	if err != nil {
		t.Fatal(err)
	}
	clk, err := newLocalClock(cfg.Clock, gtime.RawNow)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{cfg: cfg, engCfg: cfg.EngineConfig(nil, nil), sys: realSys, log: log, clk: clk, eng: mem, wake: make(chan struct{}, 1),
		pub: make(chan struct{}, 1), peers: map[engine.NodeID]netip.AddrPort{}, ctx: ctx}
	tc := transport.DefaultConfig()
	tc.ID, tc.Conn, tc.Handler, tc.Logger, tc.Clock = cfg.Node.ID, conn, n, log, clock.Func(gtime.RawNow)
	tc.Keyring, tc.Peers, tc.Anonymous = kr, map[uint32]netip.AddrPort{}, anonymousOps
	for _, p := range cfg.Peers {
		ap := netip.MustParseAddrPort(p.Address)
		n.peers[engine.NodeID(p.ID)] = ap
		tc.Peers[p.ID] = ap
	}
	if cfg.RealTime.Mode != RealTimeNone {
		if n.rt, err = newRealTime(n, engine.NodeID(cfg.ReferenceID())); err != nil {
			t.Fatal(err)
		}
	}
	if n.ep, err = transport.New(tc); err != nil {
		t.Fatal(err)
	}
	go n.ep.Run(ctx)
	return n
}

func fuzzCluster(self uint32) Config {
	c := DefaultConfig()
	c.Peers = []Peer{{1, "10.0.0.1:3190"}, {2, "10.0.0.2:3190"}, {3, "10.0.0.3:3190"}}
	c.Node.ID = self
	c.Reference.Order = []uint32{1, 2, 3}
	c.Transport.KernelTimestamps = false
	c.GlobalTime.ShmPath = ""
	c.RealTime.Mode = RealTimeMeanDrift // the real-time handlers too
	c.Auth.Insecure = true              // in memory: nobody else sends
	return c
}

var fuzzStranger = netip.MustParseAddrPort("10.0.0.99:3190")

// fuzzPeerID is the id of n's peer at addr, 0 for none.
func fuzzPeerID(n *node, addr netip.AddrPort) uint32 {
	for id, a := range n.peers {
		if a == addr {
			return uint32(id)
		}
	}
	return 0
}

func FuzzDaemonPackets(f *testing.F) {
	// Seeds: the packets, as a peer would send them.
	td := wire.Packet{Op: wire.OpTimeDiff, Sender: 1, Seq: 9, Msg: engine.Message{Type: engine.MsgTimeDiff, From: 1, To: 2, Round: 1 << 31,
		Samples: nil}}
	tdb, _ := td.MarshalBinary()
	probe := wire.Packet{Op: wire.OpProbe, Sender: 1, Seq: 10, Msg: engine.Message{Type: engine.MsgProbe, From: 1, To: 2, Round: 3}}
	pb, _ := probe.MarshalBinary()
	rtq := wire.Packet{Op: wire.OpRealTimeQuery, Sender: 1234, Seq: 11, RealTime: wire.RealTime{Rate: 1.0003, RateErr: 1e-9}}
	rb, _ := rtq.MarshalBinary()
	sq := wire.Packet{Op: wire.OpStatusQuery, Sender: 77, Seq: 12}
	sb, _ := sq.MarshalBinary()
	for _, b := range [][]byte{tdb, pb, rb, sb} {
		for _, mode := range []byte{0x00, 0x10, 0x20, 0x30} {
			for _, ctl := range []byte{0x00, 0x03, 0x08, 0x0b} {
				f.Add(append([]byte{mode, ctl, byte(len(b) >> 8), byte(len(b))}, b...))
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 1 {
			return
		}
		// data[0]: bit 4 the node under test is 1 (the reference) instead
		// of 2, bit 5 the cluster has a key. Then records: a control byte
		// (bits 0-1 the source address: peer 1, 2, 3 or a stranger; bit
		// 3 seal with the cluster key), a 2-byte length, the bytes.
		self, keyed := uint32(2), data[0]&0x20 != 0
		if data[0]&0x10 != 0 {
			self = 1
		}
		cfg := fuzzCluster(self)
		var kr *wire.Keyring
		if keyed {
			kr, _ = wire.NewKeyring(1, []wire.Key{{ID: 1, Secret: make([]byte, wire.MinKeyLen)}})
		}
		ctx, cancel := context.WithCancel(context.Background())
		conn := newFuzzConn()
		conn.kr, conn.chal = kr, map[netip.AddrPort]wire.Packet{}
		n := bareNode(t, ctx, cfg, conn, kr)
		defer func() {
			cancel()
			n.sendMu.Lock()
			n.stopping = true
			n.sendMu.Unlock()
			n.wg.Wait()
		}()
		peers := []netip.AddrPort{n.peers[1], n.peers[2], n.peers[3], fuzzStranger}
		delivered, fromStranger := 0, 0
		authSeq := uint64(1)
		for rest := data[1:]; len(rest) >= 3 && delivered < 32; {
			ctl, l := rest[0], int(binary.BigEndian.Uint16(rest[1:]))
			rest = rest[3:]
			l = min(l, len(rest))
			b := append([]byte(nil), rest[:l]...)
			rest = rest[l:]
			from := peers[ctl&3]
			if kr != nil && ctl&8 != 0 {
				authSeq++
				b = kr.Seal(b, self, authSeq) // a key holder's bytes: anything at all
			}
			if from == fuzzStranger {
				fromStranger += len(b)
			}
			conn.deliver(t, fuzzDatagram{b: b, from: from})
			delivered++
			// The peers answer the node's challenges, as their daemons
			// would (not counted: an answer is neither received nor
			// dropped).
			conn.mu.Lock()
			chal := conn.chal
			conn.chal = map[netip.AddrPort]wire.Packet{}
			conn.mu.Unlock()
			for to, c := range chal {
				if id := fuzzPeerID(n, to); id != 0 {
					r := wire.Packet{Op: wire.OpAuthResponse, Sender: id, Seq: c.Seq, Nonce: c.Nonce}
					rb, _ := r.MarshalBinary()
					authSeq++
					conn.deliver(t, fuzzDatagram{b: kr.Seal(rb, self, authSeq), from: to})
				}
			}
			now := n.clk.now()
			n.mu.Lock()
			tm := n.eng.Estimate(now)
			n.mu.Unlock()
			if tm.Status != engine.StatusUnsynced && !(tm.Earliest <= tm.Est && tm.Est <= tm.Latest) {
				t.Fatalf("after datagram %d: global time %+v out of order", delivered, tm)
			}
		}
		st := n.ep.Stats()
		dropped := st.BadTag + st.Replays + st.UnknownSender + st.DecodeErrors + st.Misaddressed + st.SeqJumps + st.Unverified
		if int(st.Received+dropped) != delivered {
			t.Fatalf("%d datagrams in, %d received + %d dropped (%+v)", delivered, st.Received, dropped, st)
		}
		conn.mu.Lock()
		toStranger := conn.writes[fuzzStranger]
		conn.mu.Unlock()
		// A stranger is answered only with the key (a tool), and never with
		// more bytes than it sent.
		if toStranger > 0 && (kr == nil || toStranger > fromStranger) {
			t.Fatalf("the stranger sent %d bytes and got %d (key %v)", fromStranger, toStranger, kr != nil)
		}
		// Rate reports counted only from peers: the stranger's never.
		if n.rt != nil {
			n.rt.mu.Lock()
			for _, id := range n.rt.sc.Reporters() {
				if !n.isPeer(uint32(id)) {
					t.Errorf("rate report from non-peer %d counted", id)
				}
			}
			n.rt.mu.Unlock()
		}
	})
}

// TestEngineRejectionsCounted: what the engine refuses is dropped by
// reason, not counted as received, and logged nowhere above debug.
func TestEngineRejectionsCounted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conn := newFuzzConn()
	n := bareNode(t, ctx, fuzzCluster(2), conn, nil)
	from := n.peers[1]
	seq := uint32(0)
	send := func(p wire.Packet, patch func([]byte)) {
		t.Helper()
		seq++
		p.Seq = seq // distinct, or the transport takes a repeat for a duplicate
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if patch != nil {
			patch(b)
		}
		conn.deliver(t, fuzzDatagram{b: b, from: from})
	}
	now := n.clk.now()
	td := func(round uint32, samples int) wire.Packet {
		m := engine.Message{Type: engine.MsgTimeDiff, From: 1, To: 2, Round: round}
		for i := range samples {
			x := now - int64(time.Millisecond) + int64(i)*1000
			m.Samples = append(m.Samples, estimate.Sample{SrcSend: x - 500, LocRecv: x, LocSend: x + 100, SrcRecv: x + 700})
		}
		return wire.Packet{Op: wire.OpTimeDiff, Sender: 1, Msg: m}
	}
	send(td(5, 0), nil)    // a round without exchanges: rejected_sample
	send(td(5, 3), nil)    // accepted
	send(td(9000, 3), nil) // 8995 rounds on: stale_round
	er := wire.Packet{Op: wire.OpErrReport, Sender: 1, Msg: engine.Message{Type: engine.MsgErrReport, From: 1, To: 2, Err: 1}}
	send(er, func(b []byte) { binary.BigEndian.PutUint64(b[len(b)-8:], math.Float64bits(math.NaN())) }) // malformed
	d := n.SecuritySnapshot().Drops
	for reason, want := range map[string]uint64{"rejected_sample": 1, "stale_round": 1, "malformed": 1} {
		if d[reason] != want {
			t.Errorf("%s: %d, want %d (%v)", reason, d[reason], want, d)
		}
	}
	if got := n.msgs[engine.MsgTimeDiff][dirReceived].Load(); got != 1 {
		t.Errorf("time diffs counted received: %d, want the accepted one only", got)
	}
}
