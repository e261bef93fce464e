package engine

import (
	"math"
	"slices"
)

// Leases (see member.go): the reference's heartbeats, the majority that
// acknowledged them, and whether the member may promise time.

// The election's times, as fractions of failover_after (see the comment
// at the top of member.go): the sum of the two leases and the largest age of a
// heartbeat that renews a follower's must stay below voteSilence.
func (m *Member) beatEvery() int64   { return max(m.after/12, 1) }
func (m *Member) leaseRef() int64    { return m.after / 4 }
func (m *Member) leaseFollow() int64 { return m.after / 4 }
func (m *Member) maxBeatAge() int64  { return m.after / 16 }
func (m *Member) voteSilence() int64 { return m.after * 3 / 4 }

// Leased reports whether the member may promise time at local: it is the
// reference and a majority acknowledged it recently, or it follows one
// whose lease it heard of recently. Always true without failover.
func (m *Member) Leased(local int64) bool {
	if !m.failover() {
		return true
	}
	if m.Reference() == m.self {
		return !m.discovering && m.started && local < m.lease
	}
	return local < m.fLease
}

// LeaseEnd is the local time at which the member's lease ends (see
// Leased): a driver that publishes time for later reads (the daemon's
// page) must not let them say synced beyond it. math.MaxInt64 without
// failover.
func (m *Member) LeaseEnd() int64 {
	switch {
	case !m.failover():
		return math.MaxInt64
	case m.Reference() == m.self:
		if m.discovering || !m.started {
			return 0
		}
		return m.lease
	}
	return m.fLease
}

// promise keeps StatusSynced only under a lease (Leased): a reference cut
// off from the majority, or a follower that no longer hears its leased
// heartbeats, may be on a time scale a newer term has replaced.
func (m *Member) promise(t Time, local int64) Time {
	if t.Status == StatusSynced && !m.Leased(local) {
		t.Status = StatusStale
	}
	return t
}

// beat sends the reference's heartbeats when due.
func (m *Member) beat(local int64) {
	if local < m.beatNext {
		return
	}
	m.beatNext = local + m.beatEvery()
	if m.quiet(local) {
		return
	}
	for s, at := range m.beats {
		if local-at > m.leaseRef() {
			delete(m.beats, s)
		}
	}
	var flags uint8 = FlagBeat
	if local < m.lease {
		flags |= FlagLease
	}
	sent := m.view.in(local)
	for _, id := range m.cfg.Cluster {
		if id != m.self {
			s := m.send(Message{Type: MsgStatusQuery, To: id, Term: m.term, Flags: flags, Sent: sent})
			m.beats[s] = local
		}
	}
	m.renew()
}

// renew recomputes the reference's lease from the acknowledgements: the
// send time of the newest heartbeat a majority (this node included)
// acknowledged, plus leaseRef.
func (m *Member) renew() {
	need := m.majority() - 1
	if need <= 0 {
		m.lease = math.MaxInt64
		return
	}
	var at []int64
	for _, t := range m.acked {
		at = append(at, t)
	}
	if len(at) < need {
		return
	}
	slices.Sort(at)
	m.lease = max(m.lease, at[len(at)-need]+m.leaseRef())
}

// quiet reports whether this node, the reference, has gone without a
// lease for failover_after: it sends nothing more (no heartbeat, no
// round), so that the followers that still hear it but cannot answer
// fail over to a node that can lead.
func (m *Member) quiet(local int64) bool {
	return m.failover() && m.Reference() == m.self && m.started && !m.discovering &&
		local-max(m.lease, m.refSince) >= m.after
}

// fresh reports whether a heartbeat sent at global time sent is at most
// maxBeatAge old by this member's bounds (a late packet, or one queued
// while this process was stopped, renews no lease).
func (m *Member) fresh(sent, local int64) bool {
	t := m.view.estimate(local)
	if !bounded(t) || t.Status == StatusUnsynced {
		return false
	}
	return t.Latest-sent <= m.maxBeatAge() && sent <= t.Latest
}
