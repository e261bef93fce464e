package engine

import (
	"context"
	"errors"
	"log/slog"
	"math"

	"github.com/gclock/gclock/estimate"
)

// trust is what a node vouches for about one source's bounds.
//
// A source starts acquiring: its bounds are computed but not promised.
// After AcquireRounds rounds in a row that the data do not contradict, the
// source is trusted and reads through it are StatusSynced. Anything the
// data contradict moves it at once to degraded: its estimators restart from
// the newest round (so its bounds fall back to what that round alone makes
// certain, growing at MaxDrift), reads through it say StatusDegraded, and
// it must again go AcquireRounds rounds without a contradiction.
type trust uint8

const (
	trustAcquiring trust = iota
	trustSynced
	trustDegraded
)

func (t trust) String() string {
	switch t {
	case trustSynced:
		return "synced"
	case trustDegraded:
		return "degraded"
	default:
		return "acquiring"
	}
}

// Contradiction causes, the Value of EvContradiction.
const (
	// ContraOutside: an exchange fell outside the bounds the node claimed
	// for its instant.
	ContraOutside = 1
	// ContraHull: no line separates the hull's point sets any more.
	ContraHull = 2
	// ContraDrift: the hull's skew range lies beyond ±MaxDrift.
	ContraDrift = 3
)

// contraLogEvery is the shortest interval (local ns) between two warnings
// of contradictions from one source.
const contraLogEvery = int64(60e9)

// contraName names a contradiction cause for logs and metrics.
func contraName(c int) string {
	switch c {
	case ContraOutside:
		return "exchange_outside_bounds"
	case ContraHull:
		return "hull_empty"
	case ContraDrift:
		return "drift_beyond_model"
	}
	return "unknown"
}

// acquireRounds is Config.AcquireRounds with its default.
func (n *Node) acquireRounds() int {
	if n.cfg.AcquireRounds > 0 {
		return n.cfg.AcquireRounds
	}
	return 3
}

// outsideClaim reports whether an exchange of the round contradicts the
// bounds the node claimed through s at the exchange's own instants: the
// source's send must not be after the latest it allowed at the local
// receive, and the source's receive not before the earliest it allowed at
// the local send. Granularity is the slack of one reading on each side.
func (n *Node) outsideClaim(s *source, samples []estimate.Sample) bool {
	if !s.haveBest {
		return false
	}
	g := int64(n.cfg.Granularity)
	for _, x := range samples {
		if _, _, hi, ok, _ := n.localBoundsChecked(s, x.LocRecv); ok && hi < math.MaxInt64-g && x.SrcSend > hi+g {
			return true
		}
		if _, lo, _, ok, _ := n.localBoundsChecked(s, x.LocSend); ok && lo > math.MinInt64+g && x.SrcRecv < lo-g {
			return true
		}
	}
	return false
}

// hold decides what a round whose exchanges contradict the bounds held
// through s (contra, ContraOutside) does, and reports whether the round
// is held back (not used). A lone contradicting round is held: reads
// through s say degraded (nothing is promised while it is open), but the
// estimators, the source's mapping and the restored prior are kept. The
// next round decides: if it contradicts them too, the data moved (a
// frequency step, a wrong prior) and the source re-acquires from it, as
// without the hold; if it agrees with them, the held round was an outlier
// (one forged datagram, a glitch): it is discarded and the source's trust
// is what it was. So one datagram costs at most a round of degraded reads,
// never a re-acquisition (issue 17: after a restart, one forged round
// kept a node out of sync for three more rounds, 75 s at 16-s periods,
// and threw its restored prior away).
func (n *Node) hold(s *source, samples []estimate.Sample, contra int, now int64) bool {
	if s.haveHeld {
		s.haveHeld = false
		if contra != 0 {
			n.logger.Info("the next round confirms the held one: the data moved", "source", s.id)
			return false // judge re-acquires from this round
		}
		s.stats.Outliers++
		n.logger.Warn("a round that contradicted the bounds was not confirmed by the next one: discarded", "source", s.id,
			"outliers", s.stats.Outliers)
		if s.trust != s.heldTrust {
			n.event(now, EvTrustChange, s.id, float64(s.heldTrust))
		}
		s.trust, s.good = s.heldTrust, s.heldGood
		return false
	}
	if contra == 0 {
		return false
	}
	s.haveHeld, s.heldTrust, s.heldGood = true, s.trust, s.good
	s.stats.Contradictions++
	n.event(now, EvContradiction, s.id, float64(contra))
	if s.trust != trustDegraded {
		n.logger.Warn("a round contradicts the bounds: held until the next round confirms it or not, reads degraded meanwhile",
			"source", s.id, "cause", contraName(contra), "was", s.trust.String(), "samples", len(samples))
		n.event(now, EvTrustChange, s.id, float64(trustDegraded))
	}
	s.trust = trustDegraded
	return true
}

// driftBeyondModel reports whether the hull's whole skew range lies beyond
// ±MaxDrift: the clock runs faster or slower than the model allows.
func (n *Node) driftBeyondModel(s *source) bool {
	m := s.hull.Mapping()
	if !m.Valid {
		return false
	}
	return m.Skew-m.SkewErr > n.cfg.MaxDrift || m.Skew+m.SkewErr < -n.cfg.MaxDrift
}

// judge updates s's trust after a round: contradicted says why (0: not),
// feedErr is what the Hull said of the round.
func (n *Node) judge(s *source, samples []estimate.Sample, contradicted int, feedErr error, now int64) {
	if contradicted == 0 && errors.Is(feedErr, estimate.ErrInconsistent) {
		contradicted = ContraHull
	}
	if contradicted == 0 && n.driftBeyondModel(s) {
		contradicted = ContraDrift
	}
	if contradicted != 0 {
		s.stats.Contradictions++
		n.event(now, EvContradiction, s.id, float64(contradicted))
		if s.trust != trustDegraded {
			// Warn once a minute per source at most: a clock that keeps
			// breaking the model (drifting beyond MaxDrift) cycles between
			// acquiring and degraded, and the log must not repeat forever.
			lvl := slog.LevelWarn
			if s.warnedAt != 0 && now-s.warnedAt < contraLogEvery {
				lvl = slog.LevelDebug
			} else {
				s.warnedAt = now
			}
			n.logger.Log(context.Background(), lvl, "the data contradict the clock model: bounds widened, re-acquiring",
				"source", s.id, "cause", contraName(contradicted), "was", s.trust.String(), "contradictions", s.stats.Contradictions)
			n.event(now, EvTrustChange, s.id, float64(trustDegraded))
		}
		s.trust, s.good = trustDegraded, 0
		// Forget what the contradicted model built: the next bounds come
		// from this round alone (and the last exchange's MaxDrift envelope).
		s.hull.Reset()
		_ = s.hull.AddRound(samples)
		if s.sel != s.hull {
			s.sel.Reset()
			_ = s.sel.AddRound(samples)
		}
		return
	}
	s.good++
	if s.trust != trustSynced && s.good >= n.acquireRounds() && s.hull.Mapping().Valid {
		lvl := slog.LevelInfo
		if s.warnedAt != 0 && now-s.warnedAt < contraLogEvery {
			lvl = slog.LevelDebug
		}
		n.logger.Log(context.Background(), lvl, "source trusted", "source", s.id, "after_rounds", s.good, "was", s.trust.String())
		s.trust = trustSynced
		n.event(now, EvTrustChange, s.id, float64(trustSynced))
	}
}

// srcStatus is the status a read through s may claim: synced only when s
// is trusted, its own source vouched for its mapping and the bounds at x
// agree with each other.
func (s *source) status(consistent bool) Status {
	switch {
	case s.trust == trustDegraded || s.upUnsure || !consistent:
		if s.trust == trustAcquiring && !s.upUnsure {
			return StatusUnsynced
		}
		return StatusDegraded
	case s.trust == trustAcquiring:
		return StatusUnsynced
	}
	return StatusSynced
}

// SourceTrust returns the trust of source id ("acquiring", "synced" or
// "degraded"; "" for a node that is not a source).
func (n *Node) SourceTrust(id NodeID) string {
	i, ok := n.sourceIndex[id]
	if !ok {
		return ""
	}
	return n.sources[i].trust.String()
}

// sourceBounds is global time's bounds at x and the status they may claim:
// the intersection over the sources whose reads are synced, if any (two
// trusted sources that disagree make it degraded); else over the others,
// degraded if any of them is, unsynced (acquiring) if not. newest is the
// local time of the newest round among the sources used.
func (n *Node) sourceBounds(x int64) (lo, hi, newest int64, st Status, have bool) {
	for pass := 0; pass < 2 && !have; pass++ {
		lo, hi = math.MinInt64, math.MaxInt64
		st = StatusSynced
		if pass == 1 {
			st = StatusUnsynced
		}
		for _, s := range n.sources {
			_, l, h, ok, cons := n.viaSourceChecked(s, x)
			if !ok {
				continue
			}
			ss := s.status(cons)
			if pass == 0 && ss != StatusSynced {
				continue
			}
			if pass == 1 && ss == StatusDegraded {
				st = StatusDegraded
			}
			if !have || s.lastAt > newest {
				newest = s.lastAt
			}
			nl, nh, ok := estimate.Intersect(lo, hi, l, h)
			if !ok {
				nl, nh = min(lo, l), max(hi, h)
				st = StatusDegraded
			}
			lo, hi, have = nl, nh, true
		}
	}
	return lo, hi, newest, st, have
}

// unsure reports whether the node's own global time at now is not synced,
// so that its children do not vouch for time composed through it.
func (n *Node) unsure(now int64) bool {
	if n.IsReference() {
		return false
	}
	_, _, _, st, have := n.sourceBounds(now)
	return !have || st != StatusSynced
}
