package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// Reference failover (docs/daemon.md, "Reference failover") is engine
// logic: engine.Member watches the reference, sends status queries, fails
// over, freezes the line on a takeover and reads the previous view until
// the new one is synced. The daemon carries the status messages: a
// MsgStatusQuery is a transport request (wire.OpStatusQuery) whose answer
// (wire.OpStatusReply) goes back to the Member as a MsgStatusReply.

// reference is the node's current reference.
func (n *node) reference() engine.NodeID { return engine.NodeID(n.ref.Load()) }

// noteMember copies the Member's reference and change count where readers
// without mu find them. Called with mu held.
func (n *node) noteMember() {
	n.ref.Store(uint32(n.eng.Reference()))
	n.changes.Store(n.eng.Changes())
	n.term.Store(n.eng.Term())
	n.stale.Store(n.eng.StaleTerm())
	n.unproven.Store(n.eng.TermRefused())
}

// statusReply answers a status query with the Member's reply: global time
// now and the reference. A Member still discovering the reference answers
// nothing.
func (n *node) statusReply(in *transport.Incoming, reply *wire.Packet) error {
	from := engine.NodeID(in.Packet.Sender)
	st := &in.Packet.Status
	if !n.isPeer(in.Packet.Sender) {
		// A tool (gclock status) or anyone else holding the cluster key
		// from outside the peer list: answered from a snapshot, never
		// stepped into the Member, so that no term, vote or heartbeat of
		// its can move the election (issue 29).
		now := n.clk.now()
		n.mu.Lock()
		if n.eng.Discovering() {
			n.mu.Unlock()
			return fmt.Errorf("status query while looking for the current reference: %w", transport.ErrNotReady)
		}
		t := n.eng.Estimate(n.lockedLocal(now))
		reply.Status.Reference, reply.Status.Term = uint32(n.eng.Reference()), n.eng.Term()
		if n.eng.Reference() == engine.NodeID(n.cfg.Node.ID) && n.eng.Leased(n.lockedLocal(now)) {
			reply.Status.Flags = engine.FlagLease
		}
		n.mu.Unlock()
		reply.Status.Local, reply.Status.Time = now, t
		return nil
	}
	q := engine.Message{Type: engine.MsgStatusQuery, From: from, To: engine.NodeID(n.cfg.Node.ID), Seq: in.Packet.Seq,
		Term: st.Term, Flags: st.Flags, Sent: st.Sent}
	now := n.clk.now()
	r := n.step(q, now)
	o, found := takeReply(&r, engine.MsgStatusReply, from, q.Seq)
	if found {
		reply.Status.Reference = uint32(o.Reference)
		reply.Status.Term, reply.Status.Flags = o.Term, o.Flags
	}
	n.dispatch(r)
	if !found && q.Flags&engine.FlagResign != 0 {
		return fmt.Errorf("resignation from node %d for term %d: needs no answer: %w", from, q.Term, transport.ErrNotReady)
	}
	if !found {
		// Every daemon of a cluster started together asks the others at
		// once: expected, the asker decides without this answer (logged at
		// debug level only).
		return fmt.Errorf("status query while looking for the current reference: %w", transport.ErrNotReady)
	}
	n.mu.Lock()
	t := n.eng.Estimate(n.lockedLocal(now))
	n.mu.Unlock()
	reply.Status.Local, reply.Status.Time = now, t
	return nil
}

// statusQuery sends the Member's status query as a transport request and
// gives it the answer; an unanswered query is the Member's timeout.
func (n *node) statusQuery(ctx context.Context, addr netip.AddrPort, m engine.Message) {
	after := n.cfg.Reference.FailoverAfter.D()
	ctx, cancel := context.WithTimeout(ctx, min(max(after/2, 50*time.Millisecond), time.Second))
	defer cancel()
	reply, _, err := n.ep.Request(ctx, addr, &wire.Packet{Op: wire.OpStatusQuery, Sender: n.cfg.Node.ID, Seq: m.Seq,
		Status: wire.Status{Term: m.Term, Flags: m.Flags, Sent: m.Sent}})
	if err != nil {
		n.log.Debug("status query failed", "to", m.To, "err", err)
		return
	}
	if reply.Op.Kind() != wire.OpStatusReply {
		n.log.Debug("status query answered with another op", "to", m.To, "op", reply.Op)
		return
	}
	rm := engine.Message{Type: engine.MsgStatusReply, From: engine.NodeID(reply.Sender), To: m.From, Seq: m.Seq,
		Reference: engine.NodeID(reply.Status.Reference), Term: reply.Status.Term, Flags: reply.Status.Flags}
	n.dispatch(n.step(rm, n.clk.now()))
}
