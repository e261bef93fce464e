package engine

import (
	"time"

	"github.com/gclock/gclock/estimate"
)

// Transmit and receive stamps. The engine's own times of an exchange are
// the times of the calls: a probe leaves at the Tick or Step that produced
// it, a probe arrives at the Step that delivers it, a reply leaves at that
// same Step. A driver often knows better times, some only after the fact
// (a kernel transmit stamp, SO_TIMESTAMPING, is read from the socket's
// error queue after the write). It hands them to the engine:
//
//   - a probe's receive time: Message.T2 of the MsgProbe given to Step;
//   - a reply's receive time: Message.T4 of the MsgProbeReply;
//   - a probe's or a reply's transmit time: TxStamp, after the send.
//
// Every stamp is checked against what the engine knows, and a stamp that
// does not fit is ignored, never used: bounds stay guaranteed when a
// receive stamp is late and a send stamp is early (estimate.Sample), and a
// kernel stamp is both (it is taken after the frame arrived, before it
// leaves), so the checks only keep a wrong stamp out:
//
//   - T1 (probe sent) within [the engine's own send time, T4];
//   - T2 (probe received) within [Step's time - MaxSampleRTT, Step's time];
//   - T3 (reply sent) within [T2, the Step of the time diff that brings the
//     sample back]; a T3 before the engine's own keeps the engine's;
//   - T4 (reply received) within [the engine's send time, Step's time].
//
// A reply's transmit stamp is needed on the child, where the sample comes
// back in the source's time diff a round later: the engine keeps each
// reply it sent, and its stamp, until then, at most MaxPendingStamps of
// them and for at most StampTTL (expired on Tick).

const (
	// MaxPendingStamps bounds the replies the engine keeps for their
	// transmit stamps: a round's few replies per source, each waiting at
	// most a global period; 4096 is generous for any tree's fan-in.
	MaxPendingStamps = 4096
	// StampTTL is how long a reply waits for its time diff: the longest
	// global period (MaxGlobalPeriod, minutes) and then some; a reply
	// whose round never comes back is forgotten after it.
	StampTTL = int64(10 * time.Minute)
)

// StampSnapshot counts where the exchanges' transmit times came from and
// what became of the stamps a driver gave (TxStamp).
type StampSnapshot struct {
	ProbeStamped uint64 // exchanges whose T1 is the probe's transmit stamp
	ProbeOwn     uint64 // exchanges whose T1 is the engine's own send time
	Resent       uint64 // replies to probes the driver sent more than once, kept as no exchange (Message.Resent)
	ReplyStamped uint64 // samples (in time diffs) whose T3 is the reply's transmit stamp
	ReplyOwn     uint64 // samples whose T3 is the engine's own reply time
	Rejected     uint64 // stamps out of range (see the package comment on stamps)
	Unknown      uint64 // TxStamps for no probe in flight or reply kept (late, or after a restart)
	Duplicates   uint64 // a second TxStamp for the same probe or reply
	Expired      uint64 // replies forgotten before their sample came back (StampTTL, or no room)
}

// replyKey names a reply this node sent by the probe it answers.
type replyKey struct {
	to  NodeID
	seq uint32
}

// t3Key names a reply by the T3 it carried, as the sample in the time diff
// that brings it back does.
type t3Key struct {
	to NodeID
	t3 int64
}

// sentReply is a reply kept for its transmit stamp.
type sentReply struct {
	t2, t3 int64 // the times the reply carried (t3: when it was kept)
	tx     int64 // its transmit stamp; 0 until TxStamp
}

// replyStamps is the child side's record of the replies it sent.
type replyStamps struct {
	byKey map[replyKey]sentReply
	byT3  map[t3Key]replyKey
	// scanAt is when Tick next looks for replies older than StampTTL: every
	// StampTTL/4, so a reply lives at most 1.25 StampTTL and Tick does not
	// scan the map each time.
	scanAt int64
}

// TxStamp tells the engine when a message it produced really left: the
// transmit stamp local (the node's local clock) of the probe (t = MsgProbe,
// to = the child) or of the reply (t = MsgProbeReply, to = the source) with
// sequence number seq. A probe's stamp must come before its reply is
// stepped; a reply's before the time diff that brings its sample back. A
// stamp that does not fit (see the package comment on stamps) is ignored
// and counted (Snapshot().Stamps).
func (n *Node) TxStamp(t MsgType, to NodeID, seq uint32, local int64) {
	switch t {
	case MsgProbe:
		i, ok := n.childIndex[to]
		if !ok {
			n.stamps.Unknown++
			return
		}
		c := n.children[i]
		if c.checkSeq != 0 && c.checkSeq == seq {
			if c.checkTx == 0 && local >= c.checkSent {
				c.checkTx = local
			}
			return
		}
		switch {
		case c.state != probing || c.seq != seq:
			n.stamps.Unknown++
		case c.probeTx != 0:
			n.stamps.Duplicates++
		case local < c.probeSent:
			n.stamps.Rejected++
		default:
			c.probeTx = local
		}
	case MsgProbeReply:
		k := replyKey{to, seq}
		r, ok := n.replies.byKey[k]
		switch {
		case !ok:
			n.stamps.Unknown++
		case r.tx != 0:
			n.stamps.Duplicates++
		case local < r.t2:
			n.stamps.Rejected++
		default:
			r.tx = local
			n.replies.byKey[k] = r
		}
	default:
		n.stamps.Unknown++
	}
}

// probeRecv is the receive time of probe m stepped at now: its T2 when the
// driver gave one that fits, else now.
func (n *Node) probeRecv(m Message, now int64) int64 {
	if m.T2 == 0 || m.T2 > now || now-m.T2 > MaxSampleRTT {
		if m.T2 != 0 {
			n.stamps.Rejected++
		}
		return now
	}
	return m.T2
}

// keepReply records a reply sent to source to, for its transmit stamp.
func (n *Node) keepReply(to NodeID, seq uint32, t2, t3 int64) {
	rs := &n.replies
	k := replyKey{to, seq}
	if _, ok := rs.byKey[k]; ok {
		return // a duplicated probe: the first reply's times are kept
	}
	if len(rs.byKey) >= MaxPendingStamps {
		n.stamps.Expired++
		return
	}
	if rs.byKey == nil {
		rs.byKey, rs.byT3 = map[replyKey]sentReply{}, map[t3Key]replyKey{}
		rs.scanAt = t3 + StampTTL/4
	}
	rs.byKey[k] = sentReply{t2: t2, t3: t3}
	rs.byT3[t3Key{to, t3}] = k
}

// expireReplies drops the replies older than StampTTL (Tick).
func (n *Node) expireReplies(now int64) {
	rs := &n.replies
	if len(rs.byKey) == 0 || now < rs.scanAt {
		return
	}
	for k, r := range rs.byKey {
		if now-r.t3 > StampTTL {
			n.dropReply(k, r)
			n.stamps.Expired++
		}
	}
	rs.scanAt = now + StampTTL/4
}

func (n *Node) dropReply(k replyKey, r sentReply) {
	delete(n.replies.byKey, k)
	if n.replies.byT3[t3Key{k.to, r.t3}] == k {
		delete(n.replies.byT3, t3Key{k.to, r.t3})
	}
}

// replySent gives a sample from source src's time diff, received at now,
// its reply's transmit stamp as T3 (LocSend) when the engine kept one that
// fits, and forgets the reply.
func (n *Node) replySent(src NodeID, x *estimate.Sample, now int64) {
	tk := t3Key{src, x.LocSend}
	k, ok := n.replies.byT3[tk]
	if !ok {
		n.stamps.ReplyOwn++
		return
	}
	r := n.replies.byKey[k]
	n.dropReply(k, r)
	switch {
	case r.tx == 0 || r.tx <= x.LocSend:
		n.stamps.ReplyOwn++
	case r.tx < x.LocRecv || r.tx > now:
		n.stamps.Rejected++
		n.stamps.ReplyOwn++
	default:
		x.LocSend = r.tx
		n.stamps.ReplyStamped++
	}
}
