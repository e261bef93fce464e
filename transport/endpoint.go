package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/wire"
)

// Errors returned (wrapped) by Request and Send.
var (
	// ErrTimeout: no reply (or ACK) after Config.MaxAttempts transmissions.
	ErrTimeout = errors.New("no answer")
	// ErrClosed: the endpoint stopped (Run returned) before an answer came.
	ErrClosed = errors.New("endpoint closed")
	// ErrNotRequest: Request was given a packet whose op is not a request,
	// or Send one that is not one-way, or either got a nil packet or an
	// invalid address.
	ErrNotRequest = errors.New("invalid request")
)

// Config configures an Endpoint. Durations are wall time (they drive
// timers); timestamps come from Clock.
type Config struct {
	// ID is this node's id, written as the sender of every packet.
	ID uint32
	// Conn is the socket; the endpoint closes it when Run returns.
	Conn PacketConn
	// Handler answers requests and receives one-way messages; nil answers
	// nothing (requests time out at the peer) and drops messages.
	Handler Handler
	// Clock stamps sends and receives (user-space stamps). Default: the
	// CLOCK_MONOTONIC_RAW clock, the one UDPConn converts kernel stamps to.
	Clock clock.Clock
	// Logger receives debug and warning logs; nil discards them.
	Logger *slog.Logger

	// AckEvery is Mocha's baseline, kept for comparison: every message
	// (requests and replies included) carries the reliable flag, is
	// acknowledged by an ACK and retransmitted until acknowledged. False is
	// ACK omission: the reply acknowledges the request and only flagged
	// one-way messages are acknowledged.
	AckEvery bool

	// InitialRTO is the timeout before any round trip to a peer has been
	// measured.
	InitialRTO time.Duration
	// MinRTO and MaxRTO clamp the timeout derived from the measured round
	// trip; the timeout doubles per retransmission up to MaxRTO.
	MinRTO, MaxRTO time.Duration
	// MaxAttempts bounds the transmissions of one request or flagged
	// message (1 = never retransmit).
	MaxAttempts int
	// RecentTTL is how long a responder remembers a message (reply cache,
	// delivered one-way messages). It must exceed the longest time a peer
	// keeps retransmitting (MaxAttempts * MaxRTO) or a late copy could be
	// served twice.
	RecentTTL time.Duration
	// RecentSize bounds the remembered messages; when full the oldest are
	// forgotten early (counted in Stats.Evicted).
	RecentSize int
	// InitialSeq is the first sequence number. Zero picks one from the
	// clock, so a restarted endpoint does not reuse its previous numbers
	// within RecentTTL.
	InitialSeq uint32

	// Keyring, when set, seals every datagram written and drops every
	// datagram read without the right tag or with a replayed sequence
	// number, before it is decoded (auth.go).
	Keyring *wire.Keyring
	// Peers, when non-nil, binds sender ids to source addresses: a
	// datagram whose header names a peer must come from that peer's
	// address, and one from a sender outside Peers is dropped unless
	// Anonymous allows it (auth.go).
	Peers map[uint32]netip.AddrPort
	// Anonymous lists the request kinds (wire.OpStatusQuery, say) that a
	// sender outside Peers may send when it authenticates with the
	// Keyring. Without a Keyring it is not used: only peers are heard.
	Anonymous []wire.Op
}

// DefaultConfig returns the defaults: an initial timeout of 50 ms (Mocha's
// tuned value), a measured timeout clamped to [2 ms, 1 s], at most 8
// transmissions, 30 s of memory for 4096 messages.
func DefaultConfig() Config {
	return Config{
		InitialRTO:  50 * time.Millisecond,
		MinRTO:      2 * time.Millisecond,
		MaxRTO:      time.Second,
		MaxAttempts: 8,
		RecentTTL:   30 * time.Second,
		RecentSize:  4096,
	}
}

// Validate checks the configuration; errors name the field.
func (c *Config) Validate() error {
	switch {
	case c.Conn == nil:
		return errors.New("transport: config: Conn is nil")
	case c.InitialRTO <= 0:
		return fmt.Errorf("transport: config: InitialRTO %v must be > 0", c.InitialRTO)
	case c.MinRTO <= 0:
		return fmt.Errorf("transport: config: MinRTO %v must be > 0", c.MinRTO)
	case c.MaxRTO < c.MinRTO:
		return fmt.Errorf("transport: config: MaxRTO %v is below MinRTO %v", c.MaxRTO, c.MinRTO)
	case c.MaxAttempts < 1 || c.MaxAttempts > 64:
		return fmt.Errorf("transport: config: MaxAttempts %d must be in [1, 64]", c.MaxAttempts)
	case c.RecentSize < 1:
		return fmt.Errorf("transport: config: RecentSize %d must be >= 1", c.RecentSize)
	case c.RecentTTL < time.Duration(c.MaxAttempts)*c.MaxRTO:
		return fmt.Errorf("transport: config: RecentTTL %v must be at least MaxAttempts*MaxRTO = %v so that retransmissions are recognised",
			c.RecentTTL, time.Duration(c.MaxAttempts)*c.MaxRTO)
	}
	return nil
}

// Incoming is one received message handed to a Handler. Packet is reused
// by the receive loop: copy what must outlive the call.
type Incoming struct {
	From       netip.AddrPort
	Packet     *wire.Packet
	RecvUser   int64 // Clock when the datagram was read
	RecvKernel int64 // kernel receive stamp on Clock's time base; 0 if none
}

// Handler is the application side of an Endpoint. Both methods run on the
// receive loop: they must not block, and must not call Request or Send on
// the same endpoint synchronously (the answer would need the loop).
type Handler interface {
	// HandleRequest answers a request. reply comes with Op, Sender and Seq
	// set; fill the body (and set reply.Msg.From/Type for engine replies).
	// It is called once per distinct request: repeats within RecentTTL get
	// the same reply bytes again. An error sends no reply (the requester
	// retries) and is logged: at debug level if it wraps ErrNotReady,
	// otherwise as a warning, at most one per op a minute.
	HandleRequest(in *Incoming, reply *wire.Packet) error
	// HandleMessage receives a one-way message, at most once per (sender,
	// sequence number); a flagged message exactly once.
	HandleMessage(in *Incoming)
}

// ErrNotReady marks a request the handler refuses for a moment, as expected
// (a daemon still starting): the requester retries and the refusal is logged
// at debug level only.
var ErrNotReady = errors.New("not ready")

// refusalLogEvery is the least time between two warnings about refused
// requests of one op; the ones in between are counted and the count goes
// with the next warning.
const refusalLogEvery = time.Minute

// refusals rate-limits the warnings about refused requests, per op.
type refusals struct {
	mu   sync.Mutex
	last map[wire.Op]time.Time
	held map[wire.Op]int
}

// warn reports whether a refusal of op at now is to be logged as a warning,
// and how many were held back since the last one.
func (r *refusals) warn(op wire.Op, now time.Time) (bool, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last, r.held = map[wire.Op]time.Time{}, map[wire.Op]int{}
	}
	if t, ok := r.last[op]; ok && now.Sub(t) < refusalLogEvery {
		r.held[op]++
		return false, 0
	}
	n := r.held[op]
	r.last[op], r.held[op] = now, 0
	return true, n
}

// ReplyObserver is an optional extension of Handler: after the reply to a
// distinct request has been written, ReplySent gets the reply (as the
// handler filled it; valid only during the call) and the moment it left,
// on the user clock and (with a StampedConn) from the kernel's transmit
// stamp. A reply carries the responder's times as they were before the
// send; a follow-up message can carry these better ones (PTP's two-step
// idea).
type ReplyObserver interface {
	ReplySent(to netip.AddrPort, reply *wire.Packet, sendUser, sendKernel int64)
}

// Timing is what an exchange measured on the local clock. With
// retransmissions (Attempts > 1) the answer may belong to an earlier copy,
// so the round trip is ambiguous; time-sync callers should drop such
// samples.
type Timing struct {
	Attempts   int   // transmissions made (1 = answered at the first try)
	SendUser   int64 // Clock just before the last transmission
	SendKernel int64 // kernel transmit stamp of the last transmission; 0 if none
	RecvUser   int64 // Clock when the answer was read
	RecvKernel int64 // kernel receive stamp of the answer; 0 if none
}

// RTT is the user-space round trip RecvUser - SendUser.
func (t Timing) RTT() int64 { return t.RecvUser - t.SendUser }

// KernelRTT is the round trip between the kernel stamps, when both exist.
// After a retransmission (Attempts > 1) it may pair the last copy's send
// with the answer to an earlier one, even negative: judge it only when
// Attempts is 1.
func (t Timing) KernelRTT() (int64, bool) {
	if t.SendKernel == 0 || t.RecvKernel == 0 {
		return 0, false
	}
	return t.RecvKernel - t.SendKernel, true
}

// Stats counts what an endpoint did. All counts are datagrams.
type Stats struct {
	Sent          uint64 // datagrams written, every kind, retransmissions and ACKs included
	SentBytes     uint64 // bytes written
	SentAcks      uint64 // ACKs written
	Retransmits   uint64 // repeated transmissions of a request or flagged message
	Received      uint64 // datagrams read, admitted and decoded
	DecodeErrors  uint64 // datagrams that did not decode (dropped: DropMalformed)
	BadTag        uint64 // datagrams without the right authentication tag (dropped: DropBadTag)
	Replays       uint64 // authenticated datagrams with a sequence number seen before (dropped: DropReplay)
	UnknownSender uint64 // datagrams from a sender that is not a peer, or not at its address (dropped: DropUnknownSender)
	Misaddressed  uint64 // authenticated datagrams sealed for another node (dropped: DropMisaddressed)
	SeqJumps      uint64 // authenticated datagrams whose sequence number jumps beyond wire.MaxSeqJump (dropped: DropSeqJump)
	Unverified    uint64 // authenticated datagrams from a peer not yet verified by a challenge (dropped: DropUnverified)
	Challenges    uint64 // challenges sent to peers (auth.go)
	// ChallengesRefused counts peers' and tools' challenges not answered
	// (dropped: DropChallenge): replayed, at most one answered per
	// challengeEvery.
	ChallengesRefused uint64
	DupRequests       uint64 // repeated requests answered from the reply cache
	DupMessages       uint64 // repeated one-way messages not delivered again
	Stale             uint64 // replies and ACKs nobody waits for (late or duplicate)
	Timeouts          uint64 // requests and flagged sends that gave up
	Evicted           uint64 // remembered messages forgotten before RecentTTL (memory full)
}

type pendKey struct {
	peer netip.AddrPort
	seq  uint32
	op   wire.Op // request kind, or the kind of the flagged message
}

// answer is what the receive loop hands to a waiting sender.
type answer struct {
	pkt                  *wire.Packet // the reply (nil for an ACK)
	recvUser, recvKernel int64
}

type pending struct {
	reply chan answer // request: the reply
	ack   chan answer // flagged message (or request under AckEvery): the ACK
}

// Endpoint sends requests and one-way messages and serves a Handler over
// one PacketConn. Create it with New, start Run in a goroutine; Request and
// Send are safe for concurrent use.
type Endpoint struct {
	cfg    Config
	log    *slog.Logger
	clk    clock.Clock
	conn   PacketConn
	stamps StampedConn // nil when Conn gives no kernel stamps

	seq atomic.Uint32

	mu      sync.Mutex
	pending map[pendKey]*pending
	rto     map[netip.AddrPort]*rtoEstimator
	recent  *recent
	done    chan struct{}
	closed  bool

	bufPool  sync.Pool
	gate     *gate
	authSeqs authCounters              // per-destination trailer sequence numbers
	peerIDs  map[netip.AddrPort]uint32 // Peers reversed: the destination id of an address

	sent, sentBytes, sentAcks, retrans, received, decodeErrs atomic.Uint64
	dupReq, dupMsg, stale, timeouts                          atomic.Uint64
	dropTag, dropReplay, dropSender                          atomic.Uint64
	dropDest, dropJump, dropUnverified, challenges           atomic.Uint64
	dropChallenge                                            atomic.Uint64

	refused refusals
}

// New checks cfg (zero durations and sizes take DefaultConfig's values) and
// returns an endpoint ready for Run.
func New(cfg Config) (*Endpoint, error) {
	d := DefaultConfig()
	if cfg.InitialRTO == 0 {
		cfg.InitialRTO = d.InitialRTO
	}
	if cfg.MinRTO == 0 {
		cfg.MinRTO = d.MinRTO
	}
	if cfg.MaxRTO == 0 {
		cfg.MaxRTO = d.MaxRTO
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = d.MaxAttempts
	}
	if cfg.RecentTTL == 0 {
		cfg.RecentTTL = d.RecentTTL
	}
	if cfg.RecentSize == 0 {
		cfg.RecentSize = d.RecentSize
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Endpoint{
		cfg:     cfg,
		log:     cfg.Logger,
		clk:     cfg.Clock,
		conn:    cfg.Conn,
		pending: make(map[pendKey]*pending),
		rto:     make(map[netip.AddrPort]*rtoEstimator),
		recent:  newRecent(cfg.RecentTTL, cfg.RecentSize),
		done:    make(chan struct{}),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.clk == nil {
		e.clk = clock.Func(rawclock.Now)
	}
	if s, ok := cfg.Conn.(StampedConn); ok {
		e.stamps = s
	}
	seq := cfg.InitialSeq
	if seq == 0 {
		seq = uint32(time.Now().UnixNano()>>10) | 1
	}
	e.seq.Store(seq - 1)
	e.bufPool.New = func() any { b := make([]byte, wire.MaxPacket); return &b }
	e.gate = newGate(&e.cfg)
	e.authSeqs = newAuthCounters(cfg.Peers)
	e.peerIDs = make(map[netip.AddrPort]uint32, len(cfg.Peers))
	for id, a := range cfg.Peers {
		e.peerIDs[netip.AddrPortFrom(a.Addr().Unmap(), a.Port())] = id
	}
	return e, nil
}

// Stats returns a snapshot of the counters.
func (e *Endpoint) Stats() Stats {
	e.mu.Lock()
	evicted := e.recent.evicted
	e.mu.Unlock()
	return Stats{
		Sent: e.sent.Load(), SentBytes: e.sentBytes.Load(), SentAcks: e.sentAcks.Load(),
		Retransmits: e.retrans.Load(), Received: e.received.Load(), DecodeErrors: e.decodeErrs.Load(),
		DupRequests: e.dupReq.Load(), DupMessages: e.dupMsg.Load(), Stale: e.stale.Load(),
		Timeouts: e.timeouts.Load(), Evicted: evicted,
		BadTag: e.dropTag.Load(), Replays: e.dropReplay.Load(), UnknownSender: e.dropSender.Load(),
		Misaddressed: e.dropDest.Load(), SeqJumps: e.dropJump.Load(), Unverified: e.dropUnverified.Load(),
		Challenges: e.challenges.Load(), ChallengesRefused: e.dropChallenge.Load(),
	}
}

// RTT returns the smoothed round trip to peer, its variation and the
// current retransmission timeout (ok false before the first sample).
func (e *Endpoint) RTT(peer netip.AddrPort) (srtt, rttvar, rto time.Duration, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.rto[peer]
	if r == nil || r.samples == 0 {
		return 0, 0, e.cfg.InitialRTO, false
	}
	return r.srtt, r.rttvar, r.rto(1, e.cfg.InitialRTO, e.cfg.MinRTO, e.cfg.MaxRTO), true
}

// nextSeq returns a fresh sequence number.
func (e *Endpoint) nextSeq() uint32 { return e.seq.Add(1) }

// Run reads and dispatches datagrams until ctx is done or the connection
// fails; it then closes the connection, fails every waiting Request and
// Send with ErrClosed, and returns nil on cancellation or the read error.
func (e *Endpoint) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { e.conn.Close() })
	defer stop()
	defer e.shutdown()
	buf := make([]byte, wire.MaxPacket)
	var pkt wire.Packet
	if e.cfg.Keyring != nil {
		// Ask every peer for its sequence number now, so that its first
		// datagrams are not dropped as unverified (auth.go).
		now := time.Now()
		for id, addr := range e.gate.peers {
			if id != e.cfg.ID {
				e.gate.window(id)
				e.challenge(id, addr, now)
			}
		}
	}
	for {
		var (
			n        int
			from     netip.AddrPort
			kernelRx int64
			err      error
		)
		if e.stamps != nil {
			n, from, kernelRx, err = e.stamps.ReadFromStamped(buf)
		} else {
			n, from, err = e.conn.ReadFrom(buf)
		}
		recvUser := e.clk.Now()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("transport: read: %w", err)
		}
		now := time.Now()
		raw, v := e.gate.admit(buf[:n], from, now)
		if v.challenge != 0 {
			e.challenge(v.challenge, v.chalAddr, now)
		}
		if v.reason != "" {
			e.countDrop(v.reason)
			e.log.Debug("transport: dropped datagram", "from", from, "reason", v.reason)
			continue
		}
		if v.consumed { // an answered challenge: the window moved, nothing to hand on
			continue
		}
		if err := pkt.UnmarshalBinary(raw); err != nil {
			e.countDrop(DropMalformed)
			e.log.Debug("transport: dropped undecodable datagram", "from", from, "err", err)
			continue
		}
		e.received.Add(1)
		e.dispatch(ctx, &Incoming{From: from, Packet: &pkt, RecvUser: recvUser, RecvKernel: kernelRx}, raw)
	}
}

func (e *Endpoint) shutdown() {
	e.conn.Close()
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.done)
	}
	e.mu.Unlock()
}

// dispatch handles one decoded datagram on the receive loop.
func (e *Endpoint) dispatch(ctx context.Context, in *Incoming, raw []byte) {
	p := in.Packet
	if p.Op.Reliable() {
		// Acknowledge every copy: the previous ACK may be what was lost.
		e.sendAck(in.From, p)
	}
	switch p.Op.Class() {
	case wire.ClassAck:
		e.complete(pendKey{in.From, p.Seq, p.AckOp.Kind()}, false, in, nil)
	case wire.ClassReply:
		reqOp := requestOf(p.Op)
		if p.Op.Reliable() {
			// AckEvery: a flagged reply also acknowledges the request.
			e.mu.Lock()
			w := e.pending[pendKey{in.From, p.Seq, reqOp}]
			e.mu.Unlock()
			if w != nil && w.ack != nil {
				select {
				case w.ack <- answer{recvUser: in.RecvUser, recvKernel: in.RecvKernel}:
				default:
				}
			}
		}
		e.complete(pendKey{in.From, p.Seq, reqOp}, true, in, raw)
	case wire.ClassRequest:
		if p.Op.Kind() == wire.OpAuthChallenge {
			if e.cfg.Keyring != nil {
				e.answerChallenge(in)
			}
			return
		}
		e.serveRequest(ctx, in)
	case wire.ClassOneWay:
		k := msgKey{in.From, p.Sender, p.Seq}
		now := time.Now()
		e.mu.Lock()
		_, seen := e.recent.get(k, now)
		if !seen {
			e.recent.put(k, nil, now)
		}
		e.mu.Unlock()
		if seen {
			e.dupMsg.Add(1)
			return
		}
		if e.cfg.Handler != nil {
			e.cfg.Handler.HandleMessage(in)
		}
	}
}

func requestOf(reply wire.Op) wire.Op {
	switch reply.Kind() {
	case wire.OpProbeReply:
		return wire.OpProbe
	case wire.OpStatusReply:
		return wire.OpStatusQuery
	case wire.OpPageGrant:
		return wire.OpGetPage
	case wire.OpRealTimeInfo:
		return wire.OpRealTimeQuery
	}
	return 0
}

// complete hands an answer to whoever waits for it, or counts it as stale.
func (e *Endpoint) complete(k pendKey, isReply bool, in *Incoming, raw []byte) {
	e.mu.Lock()
	w := e.pending[k]
	e.mu.Unlock()
	var ch chan answer
	if w != nil {
		ch = w.ack
		if isReply {
			ch = w.reply
		}
	}
	if ch == nil {
		e.stale.Add(1)
		return
	}
	a := answer{recvUser: in.RecvUser, recvKernel: in.RecvKernel}
	if isReply {
		a.pkt = new(wire.Packet)
		if err := a.pkt.UnmarshalBinary(raw); err != nil { // decoded once already; cannot fail
			e.log.Warn("transport: re-decoding a reply failed", "err", err)
			return
		}
	}
	select {
	case ch <- a:
	default: // already answered: a duplicate
		e.stale.Add(1)
	}
}

// serveRequest answers a request from the reply cache or the handler.
func (e *Endpoint) serveRequest(ctx context.Context, in *Incoming) {
	p := in.Packet
	k := msgKey{in.From, p.Sender, p.Seq}
	now := time.Now()
	e.mu.Lock()
	ent, seen := e.recent.get(k, now)
	e.mu.Unlock()
	if seen {
		e.dupReq.Add(1)
		if !e.cfg.AckEvery && ent.reply != nil {
			// The reply is the ACK: the requester lost it, send it again.
			e.write(ent.reply, in.From, p.Sender, nil)
		}
		// Under AckEvery the reply is retransmitted on its own until acked.
		return
	}
	if e.cfg.Handler == nil {
		return
	}
	rop, _ := p.Op.ReplyOp()
	reply := wire.Packet{Op: rop.WithReliable(e.cfg.AckEvery), Sender: e.cfg.ID, Seq: p.Seq}
	if err := e.cfg.Handler.HandleRequest(in, &reply); err != nil {
		if errors.Is(err, ErrNotReady) {
			e.log.Debug("transport: request refused for now", "from", in.From, "op", p.Op, "seq", p.Seq, "err", err)
			return
		}
		if ok, held := e.refused.warn(p.Op.Kind(), now); ok {
			e.log.Warn("transport: handler refused a request", "from", in.From, "op", p.Op, "seq", p.Seq, "err", err,
				"refusals_not_logged", held)
		} else {
			e.log.Debug("transport: handler refused a request", "from", in.From, "op", p.Op, "seq", p.Seq, "err", err)
		}
		return
	}
	reply.Op = rop.WithReliable(e.cfg.AckEvery)
	reply.Sender, reply.Seq = e.cfg.ID, p.Seq
	b, err := reply.MarshalBinary()
	if err != nil {
		e.log.Warn("transport: cannot encode reply", "op", reply.Op, "err", err)
		return
	}
	e.mu.Lock()
	e.recent.put(k, b, now)
	e.mu.Unlock()
	if !e.cfg.AckEvery {
		obs, ok := e.cfg.Handler.(ReplyObserver)
		if !ok {
			e.write(b, in.From, p.Sender, nil)
			return
		}
		var kernelTx int64
		sendUser := e.clk.Now()
		e.write(b, in.From, p.Sender, &kernelTx)
		obs.ReplySent(in.From, &reply, sendUser, kernelTx)
		return
	}
	// The goroutine must not touch in or p: the receive loop reuses them.
	peer, dest, key := in.From, p.Sender, pendKey{in.From, p.Seq, rop}
	go func() {
		if _, err := e.reliable(ctx, peer, dest, b, key, true); err != nil {
			e.log.Debug("transport: reply never acknowledged", "to", peer, "seq", key.seq, "err", err)
		}
	}()
}

func (e *Endpoint) sendAck(to netip.AddrPort, p *wire.Packet) {
	ack := wire.Packet{Op: wire.OpAck, Sender: e.cfg.ID, Seq: p.Seq, AckOp: p.Op}
	var b [wire.HeaderLen + 1]byte
	n, err := ack.MarshalBinaryTo(b[:])
	if err != nil {
		e.log.Warn("transport: cannot encode ack", "err", err)
		return
	}
	e.sentAcks.Add(1)
	e.write(b[:n], to, p.Sender, nil)
}

// write seals and sends one datagram to node dest (0: unknown) at to and
// returns the kernel transmit stamp if any. Every call seals afresh: a
// retransmission or a repeated reply gets a new authentication sequence
// number.
func (e *Endpoint) write(b []byte, to netip.AddrPort, dest uint32, kernelTx *int64) {
	e.seal(b, dest, func(b []byte) {
		e.sent.Add(1)
		e.sentBytes.Add(uint64(len(b)))
		var err error
		if e.stamps != nil && kernelTx != nil {
			*kernelTx, err = e.stamps.WriteToStamped(b, to)
		} else {
			err = e.conn.WriteTo(b, to)
		}
		if err != nil {
			// A failed send is a lost datagram: the retransmission covers it.
			e.log.Debug("transport: write failed", "to", to, "err", err)
		}
	})
}

func (e *Endpoint) register(k pendKey, reply, ack bool) (*pending, error) {
	w := &pending{}
	if reply {
		w.reply = make(chan answer, 1)
	}
	if ack {
		w.ack = make(chan answer, 1)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, ErrClosed
	}
	if _, dup := e.pending[k]; dup {
		return nil, fmt.Errorf("transport: %v seq %d to %v already in flight: %w", k.op, k.seq, k.peer, ErrNotRequest)
	}
	e.pending[k] = w
	return w, nil
}

func (e *Endpoint) unregister(k pendKey) {
	e.mu.Lock()
	delete(e.pending, k)
	e.mu.Unlock()
}

func (e *Endpoint) timeout(peer netip.AddrPort, attempt int) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.rto[peer]
	if r == nil {
		r = &rtoEstimator{}
		e.rto[peer] = r
	}
	return r.rto(attempt, e.cfg.InitialRTO, e.cfg.MinRTO, e.cfg.MaxRTO)
}

func (e *Endpoint) sample(peer netip.AddrPort, rtt time.Duration) {
	e.mu.Lock()
	if r := e.rto[peer]; r != nil {
		r.add(rtt)
	}
	e.mu.Unlock()
}

// Request sends a request (OpProbe, OpStatusQuery, OpGetPage) to peer and
// waits for its reply, retransmitting the same bytes after a timeout derived
// from the measured round trip, at most MaxAttempts times. req.Sender and
// req.Seq are set by Request (a fresh sequence number); the reliable flag is
// set only under AckEvery. The reply is newly allocated and owned by the
// caller.
func (e *Endpoint) Request(ctx context.Context, peer netip.AddrPort, req *wire.Packet) (*wire.Packet, Timing, error) {
	var tm Timing
	if req == nil || !peer.IsValid() {
		return nil, tm, fmt.Errorf("transport: request to %v: nil packet or invalid address: %w", peer, ErrNotRequest)
	}
	if req.Op.Class() != wire.ClassRequest {
		return nil, tm, fmt.Errorf("transport: request: op %v is not a request: %w", req.Op, ErrNotRequest)
	}
	req.Sender = e.cfg.ID
	req.Seq = e.nextSeq()
	req.Op = req.Op.WithReliable(e.cfg.AckEvery)
	bp := e.bufPool.Get().(*[]byte)
	defer e.bufPool.Put(bp)
	n, err := req.MarshalBinaryTo(*bp)
	if err != nil {
		return nil, tm, fmt.Errorf("transport: request %v to %v: %w", req.Op, peer, err)
	}
	b := (*bp)[:n]
	dest := e.peerID(peer)
	k := pendKey{peer, req.Seq, req.Op.Kind()}
	w, err := e.register(k, true, e.cfg.AckEvery)
	if err != nil {
		return nil, tm, err
	}
	defer e.unregister(k)
	acked := false // AckEvery: the ACK of the request came
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if tm.Attempts == e.cfg.MaxAttempts {
			e.timeouts.Add(1)
			return nil, tm, fmt.Errorf("transport: request %v seq %d to %v: %d attempts: %w", req.Op, req.Seq, peer, tm.Attempts, ErrTimeout)
		}
		if tm.Attempts > 0 {
			e.retrans.Add(1)
		}
		tm.Attempts++
		timer.Reset(e.timeout(peer, tm.Attempts))
		tm.SendUser = e.clk.Now()
		tm.SendKernel = 0
		e.write(b, peer, dest, &tm.SendKernel)
		for wait := true; wait; {
			select {
			case a := <-w.reply:
				tm.RecvUser, tm.RecvKernel = a.recvUser, a.recvKernel
				if tm.Attempts == 1 {
					e.sample(peer, time.Duration(tm.RTT()))
				}
				return a.pkt, tm, nil
			case a := <-w.ack:
				// AckEvery: the request arrived; the reply follows on its
				// own reliable transmission, so stop retransmitting.
				if tm.Attempts == 1 {
					e.sample(peer, time.Duration(a.recvUser-tm.SendUser))
				}
				acked = true
				timer.Reset(time.Duration(e.cfg.MaxAttempts) * e.cfg.MaxRTO)
			case <-timer.C:
				if acked {
					e.timeouts.Add(1)
					return nil, tm, fmt.Errorf("transport: request %v seq %d to %v: acknowledged but no reply: %w", req.Op, req.Seq, peer, ErrTimeout)
				}
				wait = false
			case <-ctx.Done():
				return nil, tm, fmt.Errorf("transport: request %v seq %d to %v: %w", req.Op, req.Seq, peer, ctx.Err())
			case <-e.done:
				return nil, tm, fmt.Errorf("transport: request %v seq %d to %v: %w", req.Op, req.Seq, peer, ErrClosed)
			}
		}
	}
}

// Send sends a one-way message (OpTimeDiff, OpErrReport). Unflagged, it is
// sent once and Send returns at once. Flagged (msg.Op has
// wire.ReliableFlag, or the endpoint runs AckEvery), it is retransmitted
// until the peer's ACK arrives, at most MaxAttempts times, and Send returns
// when it is acknowledged. msg.Sender and msg.Seq are set by Send.
func (e *Endpoint) Send(ctx context.Context, peer netip.AddrPort, msg *wire.Packet) (Timing, error) {
	if msg == nil || !peer.IsValid() {
		return Timing{}, fmt.Errorf("transport: send to %v: nil packet or invalid address: %w", peer, ErrNotRequest)
	}
	if msg.Op.Class() != wire.ClassOneWay {
		return Timing{}, fmt.Errorf("transport: send: op %v is not a one-way message: %w", msg.Op, ErrNotRequest)
	}
	msg.Sender = e.cfg.ID
	msg.Seq = e.nextSeq()
	if e.cfg.AckEvery {
		msg.Op |= wire.ReliableFlag
	}
	b, err := msg.MarshalBinary()
	if err != nil {
		return Timing{}, fmt.Errorf("transport: send %v to %v: %w", msg.Op, peer, err)
	}
	if !msg.Op.Reliable() {
		tm := Timing{Attempts: 1, SendUser: e.clk.Now()}
		e.write(b, peer, e.peerID(peer), &tm.SendKernel)
		return tm, nil
	}
	return e.reliable(ctx, peer, e.peerID(peer), b, pendKey{peer, msg.Seq, msg.Op.Kind()}, true)
}

// reliable transmits b to node dest at peer until the ACK for k arrives.
func (e *Endpoint) reliable(ctx context.Context, peer netip.AddrPort, dest uint32, b []byte, k pendKey, measure bool) (Timing, error) {
	var tm Timing
	w, err := e.register(k, false, true)
	if err != nil {
		return tm, err
	}
	defer e.unregister(k)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if tm.Attempts == e.cfg.MaxAttempts {
			e.timeouts.Add(1)
			return tm, fmt.Errorf("transport: send %v seq %d to %v: %d attempts without ack: %w", k.op, k.seq, peer, tm.Attempts, ErrTimeout)
		}
		if tm.Attempts > 0 {
			e.retrans.Add(1)
		}
		tm.Attempts++
		timer.Reset(e.timeout(peer, tm.Attempts))
		tm.SendUser = e.clk.Now()
		tm.SendKernel = 0
		e.write(b, peer, dest, &tm.SendKernel)
		select {
		case a := <-w.ack:
			tm.RecvUser, tm.RecvKernel = a.recvUser, a.recvKernel
			if measure && tm.Attempts == 1 {
				e.sample(peer, time.Duration(tm.RTT()))
			}
			return tm, nil
		case <-timer.C:
		case <-ctx.Done():
			return tm, fmt.Errorf("transport: send %v seq %d to %v: %w", k.op, k.seq, peer, ctx.Err())
		case <-e.done:
			return tm, fmt.Errorf("transport: send %v seq %d to %v: %w", k.op, k.seq, peer, ErrClosed)
		}
	}
}
