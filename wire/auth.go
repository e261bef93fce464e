package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"
)

// Packet authentication (docs/daemon.md, "Security").
//
// With a cluster key every datagram ends with a 32-byte trailer:
//
//	key id (4) | destination (4) | auth sequence (8) | tag (16)
//
// The tag is HMAC-SHA256 under the key named by the key id, over
// authDomain and every byte before the tag (header, body, key id,
// destination and sequence), truncated to its first 16 bytes. The
// destination is the node id the datagram is meant for (0: a destination
// whose id the sender does not know, a tool's request), so a datagram
// captured on its way to one node is not accepted by another. The
// sequence number counts per destination (the transport keeps one counter
// per peer). The header's body length does not count the trailer: Open
// strips it before the packet is parsed.

// AuthTagLen is the length of the truncated HMAC-SHA256 tag: 16 bytes =
// 128 bits. NIST SP 800-107 (section 5.3.4) allows truncating an HMAC to
// 64 bits or more for authentication; 128 bits leaves an attacker, who
// must forge online (every guess is one datagram the receiver checks), a
// chance of 2^-128 per datagram: at 10^9 datagrams a second for a century
// the expected number of forgeries is below 10^-20.
const AuthTagLen = 16

// AuthLen is the size of the trailer: key id, destination, sequence and
// tag.
const AuthLen = 4 + 4 + 8 + AuthTagLen

// authTagAt is the offset of the tag in the trailer.
const authTagAt = AuthLen - AuthTagLen

// MinKeyLen is the shortest key accepted: 32 bytes, the output size of
// SHA-256 (RFC 2104 section 3: shorter keys weaken the MAC; longer ones
// add nothing).
const MinKeyLen = 32

// authDomain separates gclock's MAC inputs from any other use of the key.
// v3: the trailer carries the destination.
const authDomain = "gclock packet v3\x00"

// Sentinel errors of Open, wrapped in an *AuthError.
var (
	ErrBadTag     = errors.New("bad authentication tag")
	ErrUnknownKey = errors.New("unknown key id")
)

// AuthError says why a datagram failed authentication.
type AuthError struct {
	KeyID uint32
	Err   error // ErrShort, ErrUnknownKey or ErrBadTag
}

// Error formats "wire: authenticate: ERR (key id N)".
func (e *AuthError) Error() string {
	return fmt.Sprintf("wire: authenticate: %v (key id %d)", e.Err, e.KeyID)
}

// Unwrap returns the sentinel error.
func (e *AuthError) Unwrap() error { return e.Err }

// Key is one cluster key, or one link key (Link): the key of the link
// between this node and node Peer only, derived from a cluster key with
// LinkKey. A node that holds link keys and not the cluster key they came
// from cannot seal a datagram that another node takes for a third's.
type Key struct {
	ID     uint32
	Secret []byte // at least MinKeyLen bytes
	Link   bool   // a link key with node Peer (not a cluster key)
	Peer   uint32
}

// linkDomain separates link-key derivation from every other use of a
// cluster key.
const linkDomain = "gclock link v1\x00"

// LinkKey derives the key of the link between nodes a and b from the
// cluster key master: HMAC-SHA256 under master's secret of linkDomain, the
// key id and the two node ids, smaller first, so that both ends derive the
// same key. The result is a's key toward b (Link, Peer b), under master's
// id. Whoever holds master can derive every link key: keep it off the
// nodes that are given link keys (docs/daemon.md, "Security").
func LinkKey(master Key, a, b uint32) Key {
	lo, hi := min(a, b), max(a, b)
	h := hmac.New(sha256.New, master.Secret)
	h.Write([]byte(linkDomain))
	var ids [12]byte
	binary.BigEndian.PutUint32(ids[0:], master.ID)
	binary.BigEndian.PutUint32(ids[4:], lo)
	binary.BigEndian.PutUint32(ids[8:], hi)
	h.Write(ids[:])
	return Key{ID: master.ID, Secret: h.Sum(nil), Link: true, Peer: b}
}

type macKey struct {
	id   uint32
	pool sync.Pool // of hash.Hash (HMAC-SHA256 under the key)
}

func newMacKey(k Key) *macKey {
	secret := append([]byte(nil), k.Secret...)
	m := &macKey{id: k.ID}
	m.pool.New = func() any { return hmac.New(sha256.New, secret) }
	return m
}

// tag writes the truncated tag of b into out.
func (m *macKey) tag(out *[AuthTagLen]byte, b []byte) {
	h := m.pool.Get().(hash.Hash)
	h.Reset()
	h.Write([]byte(authDomain))
	h.Write(b)
	var sum [sha256.Size]byte
	copy(out[:], h.Sum(sum[:0]))
	m.pool.Put(h)
}

// linkRef names a link key: its key id and the node at the other end.
type linkRef struct{ id, peer uint32 }

// Keyring holds the keys packets are sent with and every key they are
// accepted with (during a rotation, the old and the new): cluster keys by
// id, and link keys by id and peer. A datagram to or from a node the
// keyring has a link key for (under the key id in use) is sealed and
// opened with that link key only; others with the cluster key. It is safe
// for concurrent use.
type Keyring struct {
	sendID uint32
	send   *macKey // the cluster key sendID; nil with link keys only
	accept map[uint32]*macKey
	links  map[linkRef]*macKey
}

// NewKeyring returns a keyring that sends with the key (cluster or link
// keys) whose id is sendID and accepts every key of keys. Cluster keys
// must have distinct ids, link keys distinct ids and peers, and every key
// at least MinKeyLen bytes.
func NewKeyring(sendID uint32, keys []Key) (*Keyring, error) {
	r := &Keyring{sendID: sendID, accept: map[uint32]*macKey{}, links: map[linkRef]*macKey{}}
	sends := false
	for _, k := range keys {
		if len(k.Secret) < MinKeyLen {
			return nil, fmt.Errorf("wire: key id %d: %d bytes, need at least %d", k.ID, len(k.Secret), MinKeyLen)
		}
		if k.Link {
			ref := linkRef{k.ID, k.Peer}
			if _, dup := r.links[ref]; dup {
				return nil, fmt.Errorf("wire: key id %d for peer %d given twice", k.ID, k.Peer)
			}
			r.links[ref] = newMacKey(k)
		} else {
			if _, dup := r.accept[k.ID]; dup {
				return nil, fmt.Errorf("wire: key id %d given twice", k.ID)
			}
			r.accept[k.ID] = newMacKey(k)
		}
		sends = sends || k.ID == sendID
	}
	r.send = r.accept[sendID]
	if !sends {
		return nil, fmt.Errorf("wire: key id %d to send with is not among the keys", sendID)
	}
	return r, nil
}

// SendID is the id of the key packets are sealed with.
func (r *Keyring) SendID() uint32 { return r.sendID }

// CanSeal reports whether the keyring holds a key to seal datagrams for
// node dest with: the link key with dest, or the cluster key.
func (r *Keyring) CanSeal(dest uint32) bool {
	return r.send != nil || r.links[linkRef{r.sendID, dest}] != nil
}

// Trailer is what Open read from a datagram's authenticated trailer.
type Trailer struct {
	KeyID uint32
	Dest  uint32 // the node id the sender meant the datagram for (0: unknown)
	Seq   uint64 // the sender's auth sequence number toward Dest
}

// Seal appends the trailer for the datagram pkt (header and body), meant
// for node dest, with sequence number seq and returns the extended slice,
// sealed with the link key with dest if the keyring has one, else with the
// cluster key; nil if it has neither (see CanSeal). dst may be pkt itself
// when its capacity allows (pkt[:len(pkt)+AuthLen]).
func (r *Keyring) Seal(pkt []byte, dest uint32, seq uint64) []byte {
	k := r.links[linkRef{r.sendID, dest}]
	if k == nil {
		k = r.send
	}
	if k == nil {
		return nil
	}
	n := len(pkt)
	out := append(pkt, make([]byte, AuthLen)...)
	binary.BigEndian.PutUint32(out[n:], r.sendID)
	binary.BigEndian.PutUint32(out[n+4:], dest)
	binary.BigEndian.PutUint64(out[n+8:], seq)
	var t [AuthTagLen]byte
	k.tag(&t, out[:n+authTagAt])
	copy(out[n+authTagAt:], t[:])
	return out
}

// Open checks the trailer of a datagram over its raw bytes, before
// anything else of it is decoded, and returns the datagram without the
// trailer and the trailer's fields. The key is the link key with the
// header's sender under the trailer's key id if the keyring has one (then
// no other key is accepted for that sender), else the cluster key of that
// id. It checks neither the destination (the caller knows its own id) nor
// the sequence for replays (see ReplayWindow).
func (r *Keyring) Open(b []byte) (pkt []byte, tr Trailer, err error) {
	if len(b) < HeaderLen+AuthLen {
		return nil, tr, &AuthError{Err: ErrShort}
	}
	n := len(b) - AuthLen
	tr.KeyID = binary.BigEndian.Uint32(b[n:])
	k := r.links[linkRef{tr.KeyID, binary.BigEndian.Uint32(b[4:])}]
	if k == nil {
		k = r.accept[tr.KeyID]
	}
	if k == nil {
		return nil, tr, &AuthError{KeyID: tr.KeyID, Err: ErrUnknownKey}
	}
	var t [AuthTagLen]byte
	k.tag(&t, b[:n+authTagAt])
	if !hmac.Equal(t[:], b[n+authTagAt:]) {
		return nil, Trailer{KeyID: tr.KeyID}, &AuthError{KeyID: tr.KeyID, Err: ErrBadTag}
	}
	tr.Dest = binary.BigEndian.Uint32(b[n+4:])
	tr.Seq = binary.BigEndian.Uint64(b[n+8:])
	return b[:n], tr, nil
}

// ReplayWindowSize is the number of sequence numbers below the highest
// one seen that a ReplayWindow still tells apart: 64, IPsec's minimum and
// default (RFC 4303 section 3.4.3). A sender's datagrams are numbered in
// the order they are written; more than 64 datagrams overtaking another
// on the way does not happen on a cluster's network, and a datagram that
// late is dropped as a replay (the transport retransmits).
const ReplayWindowSize = 64

// MaxSeqJump is how far above the top of a ReplayWindow a sequence
// number may be and still be taken as the sender's next: 2^16 datagrams
// to one destination lost in a row (a minute at a thousand a second, ten
// minutes of a busy daemon's traffic to one peer). A number further up is
// no sender's (the transport's counters are per destination and count one
// per datagram) unless the sender restarted or was cut off that long;
// the transport refuses it (a key holder's sealed 2^63 would otherwise
// move the window past every real datagram for good) and asks the sender
// for a fresh number with a challenge (transport, "auth.go").
const MaxSeqJump = 1 << 16

// Verdict is what a ReplayWindow says of a sequence number.
type Verdict uint8

// Verdicts of ReplayWindow.Check.
const (
	Fresh Verdict = iota // new: accept it
	Seen                 // inside the window and already accepted: a duplicate or a replay
	Old                  // below the window: a replay, or a sender whose counter went back
	Jump                 // more than MaxSeqJump above the top: forged, or a restarted sender
)

// String names the verdict.
func (v Verdict) String() string {
	switch v {
	case Fresh:
		return "fresh"
	case Seen:
		return "seen"
	case Old:
		return "old"
	case Jump:
		return "jump"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// ReplayWindow is RFC 4303's anti-replay window for one sender: the
// highest sequence number accepted and a bitmap of the 64 below it. The
// zero value accepts any first number.
type ReplayWindow struct {
	top  uint64
	bits uint64 // bit i: top-i was accepted
	set  bool
}

// Check reports whether seq is new: above the window's top by at most
// MaxSeqJump, or inside the window and not seen yet. It changes nothing
// (call Accept once the datagram has been accepted, as IPsec updates the
// window only after the integrity check).
func (w *ReplayWindow) Check(seq uint64) Verdict {
	if !w.set {
		return Fresh
	}
	if seq > w.top {
		if seq-w.top > MaxSeqJump {
			return Jump
		}
		return Fresh
	}
	d := w.top - seq
	switch {
	case d >= ReplayWindowSize:
		return Old
	case w.bits&(1<<d) != 0:
		return Seen
	}
	return Fresh
}

// Accept records seq as seen; call it only after Check(seq) said Fresh.
func (w *ReplayWindow) Accept(seq uint64) {
	if !w.set {
		w.top, w.bits, w.set = seq, 1, true
		return
	}
	if seq > w.top {
		d := seq - w.top
		if d >= ReplayWindowSize {
			w.bits = 1
		} else {
			w.bits = w.bits<<d | 1
		}
		w.top = seq
		return
	}
	w.bits |= 1 << (w.top - seq)
}

// Rebase makes seq the window's top, with every number below it taken as
// seen, whatever the window held: for a sequence number known to be the
// sender's current one (the answer to a challenge), above which every
// datagram still to come lies and below which only replays (or copies
// already delivered) can be.
func (w *ReplayWindow) Rebase(seq uint64) {
	w.top, w.bits, w.set = seq, ^uint64(0), true
}

// Set reports whether the window has accepted a number.
func (w *ReplayWindow) Set() bool { return w.set }

// Top is the highest sequence number accepted (0 before the first).
func (w *ReplayWindow) Top() uint64 { return w.top }
