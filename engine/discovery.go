package engine

import (
	"math"
	"time"
)

// Discovery (see member.go): a member that starts asks the others for
// their term before it serves.

// discoverTimeout is how long discovery waits for answers.
func (m *Member) discoverTimeout() int64 {
	return min(max(m.after/2, int64(50*time.Millisecond)), int64(time.Second))
}

// Discovering reports whether the member is still asking who the
// reference is (it answers no status query meanwhile).
func (m *Member) Discovering() bool { return m.discovering }

// discoverRetries is how many times discovery asks a node that has not
// answered within its timeout: a restarted node's first datagrams are
// refused by its peers until they have verified its new sequence numbers
// (a challenge, one round trip; transport/auth.go), so a query sent once
// went unanswered, and a restarted reference that heard nothing else in
// time took term 0 as if the cluster were starting, beside the reference
// the others had elected (TestRunFailoverUDP, once under CI's load).
const discoverRetries = 4

func (m *Member) startDiscovery(local int64) {
	m.discovering = true
	m.discEnd = local + m.discoverTimeout()
	m.discWait = map[NodeID]bool{}
	m.discTerms = map[NodeID]uint32{}
	m.discFrom = m.seq
	for _, id := range m.cfg.Cluster {
		if id != m.self {
			m.discWait[id] = true
			m.query(id, local)
		}
	}
	m.discRetry = local + m.discoverTimeout()/discoverRetries
}

// retryDiscovery asks again every node that has not answered, at most
// discoverRetries times in the discovery's timeout.
func (m *Member) retryDiscovery(local int64) {
	if local < m.discRetry {
		return
	}
	for _, id := range m.cfg.Cluster { // in order: the same queries every run
		if m.discWait[id] {
			m.query(id, local)
		}
	}
	m.discRetry = local + m.discoverTimeout()/discoverRetries
}

// discoveryReply reports whether seq answers one of the queries discovery
// sent to a node: any of them counts (the first may be answered after a
// retry went out).
func (m *Member) discoveryReply(seq uint32) bool {
	return seq != 0 && seq-m.discFrom-1 < m.seq-m.discFrom
}

// discoveryAnswered ends discovery once every node asked has answered.
func (m *Member) discoveryAnswered(local int64) {
	if len(m.discWait) > 0 {
		return
	}
	m.endDiscovery(local)
	m.watch(local)
	m.view.cur.Tick(m.view.in(local))
	m.drain(local)
}

// endDiscovery follows the reference of the highest term anyone named.
// With nobody answering (the cluster is starting), term 0: the first of
// the order is the reference.
func (m *Member) endDiscovery(local int64) {
	m.discovering = false
	m.discWait = nil
	m.heard = local
	t, ok := m.discoveredTerm()
	m.discLeads = map[uint32]bool{}
	if !ok {
		return
	}
	m.term = t
	m.bind()
	best := int(t % uint32(len(m.cfg.Order)))
	if m.cfg.Order[best] == m.self {
		// The others still follow this node: it restarted before they
		// noticed. With the scale it defined for this term (its state
		// file), it continues it; without, global time restarts from its
		// clock (docs/daemon.md).
		if m.haveRestored && m.restoredTerm == t {
			m.log.Info("restarted while still the reference: continuing the term's scale", "term", t,
				"x0", m.restored.X0, "y0", m.restored.Y0, "skew", m.restored.Skew)
			fm := m.restored
			m.continueScale = &fm
		} else {
			m.log.Warn("restarted while still the reference: global time restarts from this node's clock", "term", t)
		}
	} else {
		m.log.Info("joining the current reference", "reference", m.cfg.Order[best], "term", t)
	}
	m.rebuild(best, false, local)
	// The view before discovery followed the default reference, a guess:
	// it must not serve while the new one acquires (for a returning
	// reference it is its own clock, not the cluster's time scale).
	m.view.prev = nil
}

// looking hides the default reference's reading while the member has not
// yet asked who the reference is: a returning reference would otherwise
// serve its own clock as synced, zero wide, while the cluster runs on
// another node's time scale. A restored prior (stale, bounded) stays.
func (m *Member) looking(t Time) Time {
	if (m.started && !m.discovering) || !m.failover() || m.cfg.NoDiscovery || t.Status != StatusSynced {
		return t
	}
	return Time{Est: t.Est, Earliest: math.MinInt64, Latest: math.MaxInt64, Status: StatusUnsynced}
}
