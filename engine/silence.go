package engine

import "math"

// A source's liveness: the period it announces (MsgPeriodChange), when
// it was last heard, and the silence rule.

// maxAnnouncedPeriod bounds an announced period so that the silence
// deadline cannot overflow (about 3.6 years).
const maxAnnouncedPeriod = int64(1) << 56

// periodChange keeps the source's newest announced period.
func (n *Node) periodChange(s *source, m Message, now int64) {
	if m.Seq <= s.periodSeq {
		s.stats.Ignored++
		n.ignore(m, "late or duplicate period change")
		return
	}
	if m.Period <= 0 || m.Period > maxAnnouncedPeriod {
		s.stats.Ignored++
		n.ignore(m, "period change with an invalid period")
		return
	}
	s.period, s.periodSeq = m.Period, m.Seq
	n.event(now, EvSourcePeriod, s.id, float64(m.Period))
}

// heard notes that something came from s at now: a silent source is alive
// again.
// signOfLife reports whether m, from a source, shows that the source runs:
// a probe only if it is of a round after the last taken that a time diff
// would be accepted for (inWindow: the round under way, or a later one
// when time diffs were lost) or a check about the last round taken (or no
// round was taken yet). A probe of any other round is
// answered but is no sign of life: with check exchanges a stopped
// reference's sequence numbers fell within reach of an insider's sealed
// probes of random rounds (lab TestSpoofInsider), which kept it heard and
// failover waited. Any other message, or one not from a source: true.
func (n *Node) signOfLife(m Message) bool {
	i, ok := n.sourceIndex[m.From]
	if !ok || m.Type != MsgProbe {
		return true
	}
	s := n.sources[i]
	return !s.haveRnd || m.Round == s.round || inWindow(s.round, m.Round)
}

func (n *Node) heard(s *source, now int64) {
	if s.silent {
		s.silent = false
		n.event(now, EvSourceAlive, s.id, float64(now-s.heardAt))
		n.logger.Info("source heard again", "source", s.id, "silent_for", now-s.heardAt)
	}
	s.heardAt = now
}

// silentAt is the local time at which s becomes silent if nothing comes
// from it: SilentPeriods announced periods (or the last interval between
// rounds, if longer; at up to MaxDrift faster on this clock) plus a
// round's worth of probe retries.
func (n *Node) silentAt(s *source) int64 {
	wait := n.silenceWait(s)
	if wait >= float64(math.MaxInt64)/2 || (s.heardAt > 0 && int64(wait) > math.MaxInt64-s.heardAt) {
		return math.MaxInt64
	}
	return s.heardAt + int64(wait)
}

// silenceWait is the engine's silence rule, the one wait (ns, on this
// clock) after which a source is silent: SilentPeriods of its period (the
// announced one, or the last interval between rounds if longer) at up to
// MaxDrift faster, plus a round's worth of probe retries. silentAt counts
// it from anything heard, renumberable from the last accepted round.
func (n *Node) silenceWait(s *source) float64 {
	k := n.cfg.SilentPeriods
	if k == 0 {
		k = 3
	}
	p := s.period
	if s.stats.Rounds >= 2 && s.lastAt-s.prevAt > p {
		// The last rounds came further apart than announced: a lost
		// announcement of a longer period, or a source busy with other
		// children. Wait by what was seen.
		p = s.lastAt - s.prevAt
	}
	return math.Ceil(k*float64(p)*(1+n.cfg.MaxDrift)) +
		float64(n.cfg.ProbeTimeout)*float64(n.cfg.MaxProbeRetries+1)
}

// checkSilence marks the sources not heard from in time. Like the self
// resync, it asks for no timer of its own: so that a simulator pays no
// extra wake-up per node, silence is noticed at the next Tick or Step at
// or after the deadline (a driver that must know sooner ticks the engine
// at the pace it needs; the daemon ticks at least every second).
func (n *Node) checkSilence(now int64) {
	if !n.started {
		return
	}
	for _, s := range n.sources {
		if !s.silent && now >= n.silentAt(s) {
			s.silent = true
			s.stats.Silences++
			n.event(now, EvSourceSilent, s.id, float64(now-s.heardAt))
			n.logger.Info("source silent", "source", s.id, "last_heard", s.heardAt, "period", s.period)
		}
	}
}

// SourceSilent reports whether source id has been silent (see
// Config.SilentPeriods) as of the last Tick; false for a node that is not
// a source.
func (n *Node) SourceSilent(id NodeID) bool {
	i, ok := n.sourceIndex[id]
	return ok && n.sources[i].silent
}
