package engine

import (
	"fmt"
	"math"
)

// Evidence for a newer term (docs/daemon.md, "Security"). A member that
// followed every higher term it heard of could be steered by one message:
// a term near the end of the counter (no next term, no failover), a term
// naming the sender (a reference without a vote), or a term naming the
// current reference again (its Node rebuilt, the follower stale). So a
// newer term is adopted only on evidence that it was won:
//
//   - its reference says so itself (a heartbeat or plain status query
//     from Order[t mod n], or a status reply in which it names itself),
//     at most len(Order) terms ahead (one walk of the order: what one
//     failover can add), and only when this member could have voted for
//     it: it did (a grant), or its own reference has been silent for the
//     vote's silence (3/4 failover_after), or it is a reference without
//     its lease; or
//   - a majority of the cluster's other nodes each say, over their own
//     links, that t is their current term (a quorum of claims): at least
//     one of them followed the rules above. This is how a member that
//     missed several elections catches up.
//
// Engine messages never raise a term: one of a newer term is refused
// (RejectTerm). Vote requests and resignations name a term nobody leads
// and make nobody follow (as before). Terms above MaxTerm are refused
// everywhere, so the counter never wraps.

// MaxTerm is the highest term a member adopts, stands for or votes for:
// 2^31, half the counter, so that term arithmetic (t + len(Order)) never
// wraps. A cluster moves at most len(Order) terms per election, and an
// election needs the reference silent for 3/4 failover_after: at one
// election a second with an order of 16, 2^31 terms last 4 years of
// elections without a pause; at failover_after 1 s and three nodes, 17.
const MaxTerm = uint32(1) << 31

// RejectTerm is the reason of a RejectError for an engine message of a
// newer term than the member's (it raises no term: the sender's term
// must first be proven by its reference or a quorum), and the reason the
// daemon counts status messages whose newer term was not adopted.
const RejectTerm = "unproven_term"

// TermRefused counts the messages that named a newer term this member did
// not adopt (no evidence it was won, or beyond MaxTerm).
func (m *Member) TermRefused() uint64 { return m.unproven }

// claimOf returns the term msg says its sender is in, and whether the
// sender says it leads that term. Only status messages claim: a vote
// request or a resignation names a term the sender does not lead yet (or
// any more), and engine messages never raise a term.
func claimOf(msg Message) (term uint32, leads, ok bool) {
	switch msg.Type {
	case MsgStatusQuery:
		if msg.Flags&(FlagVote|FlagResign) != 0 {
			return 0, false, false
		}
		return msg.Term, true, true // a query in term t from Order[t mod n] is its reference's
	case MsgStatusReply:
		return msg.Term, msg.Reference == msg.From, true
	}
	return 0, false, false
}

// newer handles msg of a term above the member's: it reports whether the
// member adopted the term (or, not yet started or discovering, noted the
// claim); false on an engine message means drop it.
func (m *Member) newer(msg Message, local int64) {
	t, leads, ok := claimOf(msg)
	if !ok {
		if msg.Type == MsgStatusQuery {
			return // a vote request or a resignation: decided in statusQuery
		}
		m.unproven++
		return
	}
	if t > MaxTerm {
		m.unproven++
		return
	}
	m.claims[msg.From] = t
	leads = leads && msg.From == m.refOf(t)
	if !m.started || m.discovering {
		if leads {
			m.discLeads[t] = true
		}
		return
	}
	if m.proven(t, leads, local) {
		m.adopt(t, local)
		return
	}
	m.unproven++
	m.log.Debug("newer term not adopted: no evidence it was won", "term", t, "from", msg.From, "current", m.term)
}

// proven reports whether t, claimed by its own reference (leads) or not,
// is proven to this member (see the top of this file).
func (m *Member) proven(t uint32, leads bool, local int64) bool {
	if t <= m.term || t > MaxTerm {
		return false
	}
	if m.quorum(t) {
		return true
	}
	return leads && m.step(t) && (m.grants[t] || m.couldVote(local))
}

// step: t is at most one walk of the order ahead of the current term.
func (m *Member) step(t uint32) bool {
	return uint64(t) <= uint64(m.term)+uint64(len(m.cfg.Order))
}

// couldVote reports whether a majority could have voted for a newer term
// as far as this member knows: its reference has been silent for the
// vote's silence, or it is a reference that no majority acknowledged for
// as long (a starting reference is not leased yet, but leads).
func (m *Member) couldVote(local int64) bool {
	if m.Reference() == m.self {
		last := m.refSince
		if m.lease > 0 && m.lease != math.MaxInt64 {
			last = max(last, m.lease-m.leaseRef())
		}
		return local-last >= m.voteSilence()
	}
	return local-m.heard >= m.voteSilence()
}

// quorumNeed is how many other nodes must claim a term for a quorum: a
// majority of the cluster (one honest node among them at least while
// fewer than a majority are faulty), but no more than there are others.
func (m *Member) quorumNeed() int { return min(m.majority(), len(m.cfg.Cluster)-1) }

// quorum reports whether enough other nodes claim t as their current term.
func (m *Member) quorum(t uint32) bool {
	n := 0
	for id, c := range m.claims {
		if c == t && id != m.self {
			n++
		}
	}
	return n >= m.quorumNeed()
}

// discoveredTerm is the term discovery ends on: the highest term a quorum
// claims or its own reference claims within a step of the member's term,
// else the term all answers agree on (the only nodes alive may be fewer
// than a quorum, or their reference dead: a restart must find the
// cluster's term without a quorum), else none.
// So a faulty node that is the only one to answer a restarting member can
// make it follow a term of its choice (docs/daemon.md, "Security").
func (m *Member) discoveredTerm() (uint32, bool) {
	var best uint32
	found := false
	for t := range m.discLeads {
		if t > m.term && t <= MaxTerm && (m.quorum(t) || m.step(t)) && (!found || t > best) {
			best, found = t, true
		}
	}
	for _, t := range m.claims {
		if t > m.term && t <= MaxTerm && m.quorum(t) && (!found || t > best) {
			best, found = t, true
		}
	}
	if found {
		return best, true
	}
	agree, n := uint32(0), 0
	for _, t := range m.claims {
		if t <= m.term {
			continue // a starting node's query says nothing of the cluster's term
		}
		if n > 0 && t != agree {
			return 0, false
		}
		agree, n = t, n+1
	}
	if n > 0 && agree > m.term && agree <= MaxTerm && !m.outvoted(agree) {
		return agree, true
	}
	return 0, false
}

// outvoted reports whether more answers to discovery named this member's
// own term than t: those nodes still follow the term it had (a reference
// restarted before they noticed names itself in their answers), so t,
// named by fewer, is not the cluster's. FuzzMemberElection found a
// restarted node 1 that took term 2 from node 2's answer alone (node 2 had
// followed a faulty node 3's claim, node 3 was silent since) while nodes 4
// and 5 answered term 0 naming node 1: node 1, with no global time, could
// win no vote, node 2 waited for it, and nodes 4 and 5 refused term 4,
// more than one walk from theirs. Continuing term 0, node 1 leads the
// majority that still follows it, and node 2 comes back to the older term
// (olderLeader).
func (m *Member) outvoted(t uint32) bool {
	var mine, theirs int
	for _, a := range m.discTerms {
		switch a {
		case m.term:
			mine++
		case t:
			theirs++
		}
	}
	return mine > theirs
}

// checkTerm is CheckMessage's term check for an engine message.
func (m *Member) checkTerm(msg Message) error {
	if !m.failover() || msg.Term <= m.term {
		return nil
	}
	return &RejectError{Reason: RejectTerm, Field: "term", Value: fmt.Sprintf("%d, current %d", msg.Term, m.term)}
}
