package engine

// Status messages (MsgStatusQuery, MsgStatusReply): heartbeats, vote
// requests and plain questions (discovery, liveness, the failover walk),
// and their answers.

// statusQuery answers a status query: a heartbeat, a vote request or a
// plain question (discovery, liveness, the failover walk).
func (m *Member) statusQuery(q Message, local int64) {
	if m.discovering || !m.started {
		// Not knowing the reference yet, it would name the default one:
		// the asker decides without this answer. An asker this member
		// waits for is starting too: it will name nobody either.
		if _, ok := m.discWait[q.From]; ok && m.discovering {
			delete(m.discWait, q.From)
			m.discoveryAnswered(local)
		}
		return
	}
	r := Message{Type: MsgStatusReply, From: m.self, To: q.From, Seq: q.Seq, Reference: m.Reference()}
	if m.Reference() == m.self && m.Leased(local) {
		r.Flags |= FlagLease
	}
	switch {
	case q.Flags&FlagResign != 0:
		if m.refOf(q.Term) == q.From && m.grants[q.Term] {
			delete(m.grants, q.Term)
			m.bind()
		}
		return // no answer
	case q.Flags&FlagVote != 0:
		if m.grant(q, local) {
			r.Flags |= FlagVote
		}
	case q.Flags&FlagBeat != 0:
		if q.Term == m.term && q.From == m.Reference() && q.From != m.self && q.Term >= m.voted {
			r.Flags |= FlagBeat
			m.heardRef(local)
			m.qEnd = 0
			if q.Flags&FlagLease != 0 && m.fresh(q.Sent, local) {
				m.fLease = max(m.fLease, local+m.leaseFollow())
			}
		}
	case q.Term < m.term:
		// A node of an older term asks: the answer's term tells it.
	}
	if q.Flags&(FlagVote|FlagBeat) == 0 && m.Reference() == m.self && q.From != m.self {
		// A plain query (of any term): the asker is starting (a restart)
		// or hears nothing from the reference. A child of this reference
		// gets its rounds again at once, at the initial period, instead of
		// waiting out the long period its old state had earned (a
		// restarted follower took 22-32 s to be synced again at 16 s).
		m.view.cur.ChildReturned(q.From, m.view.in(local))
		m.drain(local)
	}
	r.Term = m.term
	m.out.Messages = append(m.out.Messages, r)
}

func (m *Member) statusReply(r Message, local int64) {
	if r.Term < m.term && !m.discovering {
		if m.olderLeader(r, local) {
			m.fallBack(r, local)
		}
		return // from an older term: nothing else to learn
	}
	switch {
	case m.discovering:
		if _, ok := m.discWait[r.From]; !ok || !m.discoveryReply(r.Seq) {
			return
		}
		m.discTerms[r.From] = r.Term
		delete(m.discWait, r.From)
		m.discoveryAnswered(local)
	case m.cand && r.Seq != 0 && r.Seq == m.candSeqs[r.From] && r.Flags&FlagVote != 0:
		m.votes[r.From] = true
		m.tally(local)
	case r.Flags&FlagBeat != 0 && m.Reference() == m.self && r.Term == m.term:
		if at, ok := m.beats[r.Seq]; ok {
			m.acked[r.From] = max(m.acked[r.From], at)
			m.renew()
		}
	case m.walking && r.From == m.cfg.Order[m.walk] && r.Seq == m.walkSeq:
		// It answers: it will stand for the next term (or it already
		// leads one, which its answer's term made this member follow).
		m.stuck = false
		m.log.Info("reference silent: the next in order answers, waiting for its term", "old", m.Reference(), "next", r.From)
		m.walking = false
		m.nextWalk = local + m.after/2
	case r.From == m.Reference() && m.Reference() != m.self && r.Flags&FlagLease != 0:
		// Alive and leading: a reference without its lease counts as
		// silent, so that the cluster can elect one that leads.
		m.heardRef(local)
		m.qEnd = 0
	}
}

// olderLeader reports whether r, a reply of an older term than the
// member's, comes from that term's reference naming itself while the
// member's own reference has been silent for failover_after (and its
// promise to it, fLease, is over): the member took its term from its
// reference's word alone (terms.go) or lost it, and the others went on in
// the older term. Without it the member followed the silent reference for
// good: no answer of an older term moved it, and nobody stood for a newer
// one. FuzzMemberElection found two: a faulty node 3 claimed term 2 to
// node 4 while node 1 was down and node 2 took term 1; and, with no faulty
// message, node 2 paused after taking term 1, node 3 won term 2 with nodes
// 4 and 5, then fell silent while node 2 resumed: nodes 4 and 5 followed
// the silent node 3, nodes 1 and 2 term 1, and no side had a majority.
// A faulty order member can so lure a member whose reference is silent
// into an older term it names itself the reference of, as it can into a
// newer one (docs/daemon.md, "Security").
func (m *Member) olderLeader(r Message, local int64) bool {
	return m.failover() && m.started && !m.cand && m.Reference() != m.self && local-m.heard >= m.after &&
		local >= m.fLease && r.Reference == r.From && m.refOf(r.Term) == r.From && r.From != m.self
}

// fallBack follows r's older term and its reference (olderLeader). The
// votes stand: the member never votes again in a term up to the newest it
// was bound to.
func (m *Member) fallBack(r Message, local int64) {
	voted := m.voted
	m.log.Warn("the reference of this node's term is silent and an older term's reference answers: following it",
		"term", r.Term, "old_term", m.term, "old", m.Reference(), "reference", r.From)
	m.term = r.Term
	m.bind()
	m.voted = max(m.voted, voted)
	m.walking, m.stuck, m.qEnd = false, false, 0
	m.rebuild(int(r.Term%uint32(len(m.cfg.Order))), false, local)
	m.heard = local
}
