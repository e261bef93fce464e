package transport

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
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
//  3. With a Keyring, the trailer's sequence number must be new for that
//     sender: above the replay window or inside it and unseen
//     (DropReplay, RFC 4303's window of wire.ReplayWindowSize).
//  4. Then the datagram is decoded; one that does not decode, or decodes
//     to values no sender produces, is dropped (DropMalformed).
//
// Every datagram written is sealed (wire.Keyring.Seal) with a sequence
// number that is new for every transmission, retransmissions and repeated
// cached replies included, so that a receiver never mistakes one for a
// replay.

// Drop reasons, the label values of the daemon's
// gclock_packets_dropped_total{reason}.
const (
	DropBadTag        = "bad_tag"        // no trailer, an unknown key id, or a tag that does not match
	DropReplay        = "replay"         // a sequence number already seen, or below the replay window
	DropUnknownSender = "unknown_sender" // a sender id that is not a peer, or a peer's id from another address
	DropMalformed     = "malformed"      // does not decode, or decodes to values no sender produces
)

// DropReasons lists the transport's drop reasons in a fixed order.
var DropReasons = []string{DropBadTag, DropReplay, DropUnknownSender, DropMalformed}

// ErrTooLong is logged when a sealed datagram would exceed wire.MaxPacket.
var ErrTooLong = errors.New("sealed datagram larger than the largest UDP payload")

// gate is the receive side's admission state; only the receive loop
// touches it.
type gate struct {
	keys      *wire.Keyring
	peers     map[uint32]netip.AddrPort
	anonymous []wire.Op
	windows   map[uint32]*wire.ReplayWindow
}

func newGate(c *Config) *gate {
	g := &gate{keys: c.Keyring, anonymous: c.Anonymous, windows: map[uint32]*wire.ReplayWindow{}}
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

// admit checks a raw datagram from `from` and returns the bytes to decode
// (without the trailer), or the drop reason.
func (g *gate) admit(b []byte, from netip.AddrPort) (pkt []byte, reason string) {
	pkt = b
	var seq uint64
	if g.keys != nil {
		var err error
		if pkt, _, seq, err = g.keys.Open(b); err != nil {
			return nil, DropBadTag
		}
	}
	if len(pkt) < wire.HeaderLen {
		return nil, DropMalformed
	}
	sender := binary.BigEndian.Uint32(pkt[4:])
	if g.peers != nil {
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		if want, ok := g.peers[sender]; ok {
			if want != from {
				return nil, DropUnknownSender
			}
		} else if g.keys == nil || !slices.Contains(g.anonymous, wire.Op(pkt[3]).Kind()) {
			return nil, DropUnknownSender
		}
	}
	if g.keys != nil {
		w := g.windows[sender]
		if w == nil {
			if _, peer := g.peers[sender]; !peer && len(g.windows) >= maxWindows+len(g.peers) {
				for id := range g.windows {
					if _, p := g.peers[id]; !p {
						delete(g.windows, id)
					}
				}
			}
			w = &wire.ReplayWindow{}
			g.windows[sender] = w
		}
		if !w.Check(seq) {
			return nil, DropReplay
		}
		// Updated after the tag and the sender check, as IPsec does: a
		// forged datagram cannot move the window.
		w.Accept(seq)
	}
	return pkt, ""
}

// initialAuthSeq is the first trailer sequence number of a new endpoint:
// the wall clock in ns, so that a restarted sender starts above every
// number it used before (it would have had to send more than one datagram
// per ns). A sender whose wall clock went back across a restart is taken
// for a replayer until it catches up (docs/daemon.md, "Security").
func initialAuthSeq() uint64 { return uint64(time.Now().UnixNano()) }

// seal appends the trailer to b in a pooled buffer and calls send with the
// sealed bytes; without a Keyring it calls send(b).
func (e *Endpoint) seal(b []byte, send func([]byte)) {
	if e.cfg.Keyring == nil {
		send(b)
		return
	}
	if len(b)+wire.AuthLen > wire.MaxPacket {
		e.log.Warn("transport: cannot send", "len", len(b), "err", ErrTooLong)
		return
	}
	bp := e.bufPool.Get().(*[]byte)
	defer e.bufPool.Put(bp)
	n := copy(*bp, b)
	send(e.cfg.Keyring.Seal((*bp)[:n], e.authSeq.Add(1)))
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
	}
}

// Drops returns the datagrams dropped so far by reason (DropReasons).
func (s Stats) Drops() map[string]uint64 {
	return map[string]uint64{
		DropBadTag: s.BadTag, DropReplay: s.Replays, DropUnknownSender: s.UnknownSender, DropMalformed: s.DecodeErrors,
	}
}
