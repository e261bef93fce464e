package engine

import (
	"log/slog"
	"time"
)

// Terms and votes (see member.go): a member follows the reference of the
// newest term it hears of, stands for the next term when the failover walk
// reaches it, and takes over when a majority grants its term.

// majority is the number of nodes, this one included, that make a
// reference.
func (m *Member) majority() int { return len(m.cfg.Cluster)/2 + 1 }

// refOf is the reference of term t.
func (m *Member) refOf(t uint32) NodeID { return m.cfg.Order[int(t%uint32(len(m.cfg.Order)))] }

// termFor is the first term after the current one whose reference is
// Order[j].
func (m *Member) termFor(j int) uint32 {
	n := uint32(len(m.cfg.Order))
	t := m.term + 1
	return t + (uint32(j)+n-t%n)%n
}

// adopt follows the reference of term t, newer than the current one: a
// reference steps down, a candidate gives up.
func (m *Member) adopt(t uint32, local int64) {
	old := m.Reference()
	j := int(t % uint32(len(m.cfg.Order)))
	m.log.Info("newer term: following its reference", "term", t, "old_term", m.term, "old", old, "reference", m.cfg.Order[j])
	if m.cand && m.candTerm <= t {
		m.cand = false
	}
	m.term = t
	m.bind()
	if m.cfg.Order[j] == m.self {
		// This node stood for t and lost its state since (a restart), or
		// won it without hearing so: it leads t, continuing global time
		// from its own estimate as a takeover does (its clock if it has
		// none, logged), under a lease a majority must still grant.
		m.log.Warn("a newer term names this node: leading it, global time continues from this node's estimate", "term", t)
		m.lease, m.acked = 0, map[NodeID]int64{}
		m.rebuild(j, true, local)
		m.fLease = 0
		return
	}
	m.rebuild(j, false, local)
	m.fLease = 0
}

// stand asks every node for its vote for the next term naming Order[j],
// this node.
func (m *Member) stand(j int, local int64) {
	t := m.termFor(j)
	if t > MaxTerm {
		m.logIf(!m.stuck, slog.LevelError, "the election's terms are used up: no more failover (restart the whole cluster)", "term", m.term)
		m.stuck = true
		m.nextWalk = local + m.after/2
		return
	}
	m.log.Info("reference silent: standing for the next term", "old", m.Reference(), "term", t, "silent_for", time.Duration(local-m.heard))
	m.cand, m.candTerm, m.candIdx, m.candSent, m.candEnd = true, t, j, local, local+m.queryTimeout()
	m.grants[t] = true
	m.bind()
	m.candSeqs = map[NodeID]uint32{}
	m.votes = map[NodeID]bool{}
	flags := FlagVote
	if m.knowsScale(local) {
		flags |= FlagScale
	}
	for _, id := range m.cfg.Cluster {
		if id != m.self {
			m.candSeqs[id] = m.send(Message{Type: MsgStatusQuery, To: id, Term: t, Flags: flags})
		}
	}
	m.tally(local)
}

// tally takes over once a majority voted.
func (m *Member) tally(local int64) {
	if !m.cand || len(m.votes)+1 < m.majority() {
		return
	}
	m.cand = false
	m.stuck = false
	old := m.Reference()
	m.log.Warn("reference silent: taking over", "old", old, "term", m.candTerm, "votes", len(m.votes)+1)
	m.term = m.candTerm
	m.bind()
	m.rebuild(m.candIdx, true, local)
	// The votes acknowledge the request as a heartbeat would.
	m.acked = map[NodeID]int64{}
	for id := range m.votes {
		m.acked[id] = m.candSent
	}
	m.lease = 0
	m.renew()
	m.beatNext = local
	m.beat(local)
}

// grant decides on a vote request for term t from its reference.
func (m *Member) grant(q Message, local int64) bool {
	t := q.Term
	switch {
	case t <= m.term || t < m.voted || m.refOf(t) != q.From:
		return false
	case t > MaxTerm || !m.step(t):
		m.unproven++
		return false // a jump no failover makes: it would use up the terms
	case m.Reference() == m.self:
		if m.Leased(local) {
			return false // alive with a majority: no need of another
		}
	case local-m.heard < m.voteSilence():
		return false // heard the reference recently
	}
	if q.Flags&FlagScale == 0 && m.knowsScale(local) {
		return false // it would restart global time; this node could continue it
	}
	if m.cand && m.candTerm < t {
		m.lose(local)
	}
	m.grants[t] = true
	m.bind()
	return true
}

// knowsScale reports whether the member holds bounded global time at
// local (synced, stale or degraded, or a restored prior): a takeover by it
// continues the scale.
func (m *Member) knowsScale(local int64) bool {
	t := m.view.estimate(local)
	return t.Status != StatusUnsynced && bounded(t)
}

// lose ends this member's candidacy: its own vote no longer binds it, and
// the nodes that voted for it are told (FlagResign).
func (m *Member) lose(local int64) {
	m.cand = false
	delete(m.grants, m.candTerm)
	m.bind()
	for _, id := range m.cfg.Cluster { // in order: the same messages every run
		if m.votes[id] {
			m.send(Message{Type: MsgStatusQuery, To: id, Term: m.candTerm, Flags: FlagResign})
		}
	}
}

// bind recomputes voted from the term and the votes given above it.
func (m *Member) bind() {
	m.voted = m.term
	for t := range m.grants {
		if t <= m.term {
			delete(m.grants, t)
		} else {
			m.voted = max(m.voted, t)
		}
	}
}
