package transport

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/wire"
)

// Who may talk to an Endpoint (docs/daemon.md, "Security").
//
// Every datagram read goes through admit before anything of it is decoded
// beyond its header:
//
//  1. With a Keyring, the trailer's tag is checked over the raw bytes
//     (wire.Keyring.Open); a datagram without the right tag is dropped
//     (DropBadTag).
//  2. With Peers, the header's sender id must be a peer and the datagram
//     must come from that peer's address; a sender outside Peers is
//     admitted only for the requests listed in Anonymous, and only with a
//     Keyring (an authenticated tool, not a forged source address)
//     (DropUnknownSender).
//  3. With a Keyring, the trailer's destination must be this node's id
//     (or 0, "unknown", from a sender outside Peers only): a datagram
//     captured on its way to another node is not heard here
//     (DropMisaddressed).
//  4. With a Keyring, the trailer's sequence number must be new for that
//     sender: above the replay window by at most wire.MaxSeqJump, or
//     inside it and unseen (DropReplay, RFC 4303's window of
//     wire.ReplayWindowSize; DropSeqJump).
//  5. Then the datagram is decoded; one that does not decode, or decodes
//     to values no sender produces, is dropped (DropMalformed).
//
// A peer's window starts unverified: after this endpoint starts, nothing
// from a peer is accepted (DropUnverified) until the peer has answered a
// challenge (sent to every peer when Run starts, and again to a peer that
// sends anything, a challenge included, before it is verified) (wire.OpAuthChallenge, a random nonce) with its current
// sequence number, sealed to this node (wire.OpAuthResponse). The window
// is rebased to that number, so a datagram captured before a restart is
// never accepted after it (the windows need not be persisted). A
// datagram refused as a jump or as older than the window triggers a
// challenge too (at most one per challengeEvery per peer): the peer's
// answer rebases the window, up after the peer restarted or was cut off
// for long, down after a key holder's forged number moved it up. No single
// datagram can so wedge a window for longer than a round trip.
//
// A challenge is answered at once, without the handler, when its sequence
// number is fresh in the sender's window (which it then moves, as any
// datagram does); one whose number is not (a replay, or a peer not verified
// yet) is answered at most once per challengeEvery per sender and
// otherwise dropped (DropChallenge), so that replaying one captured
// challenge buys at most ten answers a second, to the peer's own address
// (admitChallenge).
//
// Every datagram written is sealed (wire.Keyring.Seal) for its
// destination with a sequence number from that destination's counter, new
// for every transmission, retransmissions and repeated cached replies
// included, so that a receiver never mistakes one for a replay.

// Drop reasons, the label values of the daemon's
// gclock_packets_dropped_total{reason}.
const (
	DropBadTag        = "bad_tag"        // no trailer, an unknown key id, or a tag that does not match
	DropReplay        = "replay"         // a sequence number already seen, below the replay window, or an unasked challenge response
	DropUnknownSender = "unknown_sender" // a sender id that is not a peer, or a peer's id from another address
	DropMalformed     = "malformed"      // does not decode, or decodes to values no sender produces
	DropMisaddressed  = "misaddressed"   // sealed for another node (the trailer's destination)
	DropSeqJump       = "seq_jump"       // a sequence number more than wire.MaxSeqJump above the window
	DropUnverified    = "unverified"     // from a peer that has not yet answered a challenge since this endpoint started
	DropChallenge     = "challenge"      // a challenge not answered: its sequence number not fresh (a replay) and one answered less than challengeEvery ago
)

// DropReasons lists the transport's drop reasons in a fixed order.
var DropReasons = []string{DropBadTag, DropReplay, DropUnknownSender, DropMalformed, DropMisaddressed, DropSeqJump, DropUnverified, DropChallenge}

// ErrTooLong is logged when a sealed datagram would exceed wire.MaxPacket.
var ErrTooLong = errors.New("sealed datagram larger than the largest UDP payload")

// challengeEvery is the least time between two challenges to one peer
// (or the peer's retransmission timeout, when longer): a replayer of old
// datagrams makes this node send at most ten small challenges a second
// per peer, and a lost challenge is repeated at the next refused
// datagram after it.
const challengeEvery = 100 * time.Millisecond

// peerWindow is the replay state of one sender.
type peerWindow struct {
	w wire.ReplayWindow
	// verified: the window's top came from an answered challenge (peers
	// only; a tool's window is never challenged).
	verified bool
	nonces   [2]uint64 // the last two challenges' nonces (0: none)
	lastChal time.Time // when this node last challenged the sender
	// lastAnswer is when this node last answered a challenge of the
	// sender's (admitChallenge).
	lastAnswer time.Time
}

// gate is the receive side's admission state; only the receive loop
// touches it.
type gate struct {
	self      uint32
	keys      *wire.Keyring
	peers     map[uint32]netip.AddrPort
	anonymous []wire.Op
	windows   map[uint32]*peerWindow
}

func newGate(c *Config) *gate {
	g := &gate{self: c.ID, keys: c.Keyring, anonymous: c.Anonymous, windows: map[uint32]*peerWindow{}}
	if c.Peers != nil {
		g.peers = make(map[uint32]netip.AddrPort, len(c.Peers))
		for id, a := range c.Peers {
			g.peers[id] = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		}
	}
	return g
}

// maxWindows bounds the replay windows kept for senders outside Peers
// (authenticated tools): past it they are all forgotten, which lets such a
// tool's old requests be replayed once more; a replayed query only gets
// another read-only answer.
const maxWindows = 4096

// verdict is admit's answer besides the bytes.
type verdict struct {
	reason    string // drop reason, "" to accept
	challenge uint32 // a peer to challenge (0: none; peer ids are never 0 in a challenge)
	chalAddr  netip.AddrPort
	consumed  bool // an answered challenge: accepted, nothing to dispatch
}

// admit checks a raw datagram from `from` read at now and returns the
// bytes to decode (without the trailer) and the verdict.
func (g *gate) admit(b []byte, from netip.AddrPort, now time.Time) (pkt []byte, v verdict) {
	pkt = b
	var tr wire.Trailer
	if g.keys != nil {
		var err error
		if pkt, tr, err = g.keys.Open(b); err != nil {
			return nil, verdict{reason: DropBadTag}
		}
	}
	if len(pkt) < wire.HeaderLen {
		return nil, verdict{reason: DropMalformed}
	}
	sender := binary.BigEndian.Uint32(pkt[4:])
	op := wire.Op(pkt[3]).Kind()
	_, isPeer := g.peers[sender]
	if g.peers != nil {
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		if want, ok := g.peers[sender]; ok {
			if want != from {
				return nil, verdict{reason: DropUnknownSender}
			}
		} else if g.keys == nil || (!slices.Contains(g.anonymous, op) && op != wire.OpAuthChallenge) {
			return nil, verdict{reason: DropUnknownSender}
		}
	}
	if g.keys == nil {
		return pkt, verdict{}
	}
	if tr.Dest != g.self && (tr.Dest != 0 || isPeer) {
		return nil, verdict{reason: DropMisaddressed}
	}
	w := g.window(sender)
	seq := tr.Seq
	if op == wire.OpAuthChallenge {
		return g.admitChallenge(pkt, w, sender, seq, isPeer, now)
	}
	if !isPeer {
		// A tool: its replayed requests get read-only answers again, so
		// neither challenges nor the jump limit (a tool restarts often
		// with the same id).
		if w.w.Check(seq) == wire.Fresh || w.w.Check(seq) == wire.Jump {
			w.w.Accept(seq)
			return pkt, verdict{}
		}
		return nil, verdict{reason: DropReplay}
	}
	if op == wire.OpAuthResponse {
		nonce, ok := responseNonce(pkt)
		if !ok || nonce == 0 || (nonce != w.nonces[0] && nonce != w.nonces[1]) {
			return nil, verdict{reason: DropReplay} // no challenge of ours: a replay or a late copy
		}
		w.nonces = [2]uint64{}
		if w.verified && w.w.Check(seq) == wire.Fresh {
			w.w.Accept(seq)
		} else {
			w.w.Rebase(seq)
		}
		w.verified = true
		return pkt, verdict{consumed: true}
	}
	var reason string
	switch {
	case !w.verified:
		reason = DropUnverified
	default:
		switch w.w.Check(seq) {
		case wire.Fresh:
			// Updated after the tag and the sender check, as IPsec does: a
			// forged datagram cannot move the window.
			w.w.Accept(seq)
			return pkt, verdict{}
		case wire.Seen, wire.Old:
			// A duplicate (the network's), a replay, or a real datagram
			// under a window a key holder moved up: the challenge tells.
			reason = DropReplay
		case wire.Jump:
			reason = DropSeqJump
		}
	}
	v = verdict{reason: reason}
	if w.lastChal.IsZero() || now.Sub(w.lastChal) >= challengeEvery {
		v.challenge, v.chalAddr = sender, g.peers[sender]
	}
	return nil, v
}

// admitChallenge decides on a challenge from sender (window w, trailer
// sequence seq) read at now: answered when its number is fresh, as any
// datagram's (and then it moves the window); otherwise at most once per
// challengeEvery per sender, counting the fresh ones (DropChallenge).
//
// A challenge's answer goes out at once and costs a seal and a send; were
// every copy answered, a replayer of one captured challenge would make this
// node answer at the rate it replays, and every answer moves this node's
// counter toward the challenger: more than wire.MaxSeqJump answers between
// two datagrams the challenger accepts make the next one a jump it refuses
// (the follower lost its source for ~10 s). A number not fresh is
// still answered now and then, not never, because two peers whose windows
// for each other are both wrong (one restarted with its wall clock back,
// or a key holder moved both up) must still be able to verify each other;
// and such a peer is challenged back, so that its next challenge is fresh.
// A tool (not a peer) is never challenged, so a number of its that is not
// fresh is refused like its replayed requests.
func (g *gate) admitChallenge(pkt []byte, w *peerWindow, sender uint32, seq uint64, isPeer bool, now time.Time) ([]byte, verdict) {
	check := w.w.Check(seq)
	fresh := check == wire.Fresh && (w.verified || !isPeer) || check == wire.Jump && !isPeer
	due := w.lastAnswer.IsZero() || now.Sub(w.lastAnswer) >= challengeEvery
	var v verdict
	if isPeer && (!w.verified || check == wire.Old || check == wire.Jump) && (w.lastChal.IsZero() || now.Sub(w.lastChal) >= challengeEvery) {
		// A peer not verified yet (it restarted, or this node did), or one
		// whose number is below or far above the window: ask for its
		// number, so that the two verify each other in one round trip. (A
		// number seen already is a copy: the window is right.)
		v.challenge, v.chalAddr = sender, g.peers[sender]
	}
	if !fresh && (!isPeer || !due) {
		v.reason = DropChallenge
		return nil, v
	}
	if fresh {
		w.w.Accept(seq)
	}
	w.lastAnswer = now
	return pkt, v
}

// challengeFor starts a challenge to peer id at now unless one went out
// less than every ago, and returns its nonce (ok false: none to send).
// The window then accepts an answer to this challenge or the one before.
func (g *gate) challengeFor(id uint32, now time.Time, every time.Duration) (nonce uint64, ok bool) {
	w := g.windows[id]
	if w == nil || (!w.lastChal.IsZero() && now.Sub(w.lastChal) < every) {
		return 0, false
	}
	var nb [8]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return 0, false
	}
	nonce = binary.BigEndian.Uint64(nb[:]) | 1 // never 0, the "none" of nonces
	w.nonces[1], w.nonces[0] = w.nonces[0], nonce
	w.lastChal = now
	return nonce, true
}

// window returns the replay window of sender, a new (unverified) one
// if there is none yet.
func (g *gate) window(sender uint32) *peerWindow {
	w := g.windows[sender]
	if w == nil {
		if _, isPeer := g.peers[sender]; !isPeer && len(g.windows) >= maxWindows+len(g.peers) {
			for id := range g.windows {
				if _, p := g.peers[id]; !p {
					delete(g.windows, id)
				}
			}
		}
		w = &peerWindow{}
		g.windows[sender] = w
	}
	return w
}

// responseNonce is the nonce of an OpAuthResponse datagram (header and
// body, no trailer), read before the datagram is decoded.
func responseNonce(pkt []byte) (uint64, bool) {
	if len(pkt) != wire.HeaderLen+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(pkt[wire.HeaderLen:]), true
}

// challenge sends peer id (at addr) a fresh challenge and remembers its
// nonce; called on the receive loop after admit asked for it.
func (e *Endpoint) challenge(id uint32, addr netip.AddrPort, now time.Time) {
	nonce, ok := e.gate.challengeFor(id, now, max(challengeEvery, e.timeout(addr, 1)))
	if !ok {
		return
	}
	p := wire.Packet{Op: wire.OpAuthChallenge, Sender: e.cfg.ID, Seq: e.nextSeq(), Nonce: nonce}
	var b [wire.HeaderLen + 8]byte
	n, err := p.MarshalBinaryTo(b[:])
	if err != nil {
		e.log.Warn("transport: cannot encode a challenge", "err", err)
		return
	}
	e.challenges.Add(1)
	e.log.Debug("transport: challenging a peer for a fresh sequence number", "peer", id, "addr", addr)
	e.write(b[:n], addr, id, nil)
}

// answerChallenge answers a decoded OpAuthChallenge from in, at once and
// without the handler: the answer's trailer carries this node's current
// sequence number toward the challenger.
func (e *Endpoint) answerChallenge(in *Incoming) {
	p := wire.Packet{Op: wire.OpAuthResponse, Sender: e.cfg.ID, Seq: in.Packet.Seq, Nonce: in.Packet.Nonce}
	var b [wire.HeaderLen + 8]byte
	n, err := p.MarshalBinaryTo(b[:])
	if err != nil {
		e.log.Warn("transport: cannot encode a challenge response", "err", err)
		return
	}
	e.write(b[:n], in.From, in.Packet.Sender, nil)
}

// initialAuthSeq is the first trailer sequence number of a new endpoint:
// the wall clock in ns, so that a restarted sender usually starts above
// every number it used before. A receiver takes the jump for a restart and
// asks for the new number with a challenge; one whose wall clock went
// back is rebased the same way.
func initialAuthSeq() uint64 { return uint64(time.Now().UnixNano()) }

// authCounters are the per-destination trailer sequence counters: one per
// peer, and one (key 0) for every other destination.
type authCounters map[uint32]*atomic.Uint64

func newAuthCounters(peers map[uint32]netip.AddrPort) authCounters {
	c := authCounters{0: new(atomic.Uint64)}
	for id := range peers {
		c[id] = new(atomic.Uint64)
	}
	start := initialAuthSeq()
	for _, v := range c {
		v.Store(start)
	}
	return c
}

func (c authCounters) next(dest uint32) uint64 {
	v := c[dest]
	if v == nil {
		v = c[0]
	}
	return v.Add(1)
}

// peerID returns the id of the peer at addr, 0 if addr is no peer's.
func (e *Endpoint) peerID(addr netip.AddrPort) uint32 {
	return e.peerIDs[netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())]
}

// seal appends the trailer for destination dest to b in a pooled buffer
// and calls send with the sealed bytes; without a Keyring it calls
// send(b).
func (e *Endpoint) seal(b []byte, dest uint32, send func([]byte)) {
	if e.cfg.Keyring == nil {
		send(b)
		return
	}
	if len(b)+wire.AuthLen > wire.MaxPacket {
		e.log.Warn("transport: cannot send", "len", len(b), "err", ErrTooLong)
		return
	}
	if !e.cfg.Keyring.CanSeal(dest) {
		// Link keys only, and none with dest (a tool without one).
		e.log.Debug("transport: no key to seal a datagram for this destination", "dest", dest)
		return
	}
	bp := e.bufPool.Get().(*[]byte)
	defer e.bufPool.Put(bp)
	n := copy(*bp, b)
	send(e.cfg.Keyring.Seal((*bp)[:n], dest, e.authSeqs.next(dest)))
}

// countDrop counts a datagram dropped for reason.
func (e *Endpoint) countDrop(reason string) {
	switch reason {
	case DropBadTag:
		e.dropTag.Add(1)
	case DropReplay:
		e.dropReplay.Add(1)
	case DropUnknownSender:
		e.dropSender.Add(1)
	case DropMalformed:
		e.decodeErrs.Add(1)
	case DropMisaddressed:
		e.dropDest.Add(1)
	case DropSeqJump:
		e.dropJump.Add(1)
	case DropUnverified:
		e.dropUnverified.Add(1)
	case DropChallenge:
		e.dropChallenge.Add(1)
	}
}

// Drops returns the datagrams dropped so far by reason (DropReasons).
func (s Stats) Drops() map[string]uint64 {
	return map[string]uint64{
		DropBadTag: s.BadTag, DropReplay: s.Replays, DropUnknownSender: s.UnknownSender, DropMalformed: s.DecodeErrors,
		DropMisaddressed: s.Misaddressed, DropSeqJump: s.SeqJumps, DropUnverified: s.Unverified,
		DropChallenge: s.ChallengesRefused,
	}
}
