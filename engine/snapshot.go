package engine

import "github.com/gclock/gclock/estimate"

// Snapshot is a copy of a node's counters and per-peer state, for metrics
// and tests. Durations are local nanoseconds.
type Snapshot struct {
	ID         NodeID
	Reference  bool
	SelfPeriod int64  // current self-resync period
	Ignored    uint64 // messages ignored (misaddressed, unknown peer, late, duplicate, corrupt)
	Sources    []SourceSnapshot
	Children   []ChildSnapshot
	Stamps     StampSnapshot // transmit and receive stamps (stamps.go)
}

// SourceSnapshot is the node's view of one source.
type SourceSnapshot struct {
	Source     NodeID
	Rounds     uint64  // rounds accepted
	Skew       float64 // estimated d(source)/d(local) - 1
	SkewErr    float64 // the Hull's bound on |true skew - its skew|, 0 before it has one
	BoundWidth int64   // Latest-Earliest of global time through this source at LastRound; -1 if none
	Period     int64   // local time between the last two rounds; 0 before the second
	LastRound  int64   // local time of the last accepted round
	Reports    uint64  // error reports sent
	Restarts   uint64  // estimator windows restarted (inconsistent samples)
	Breaks     uint64  // frequency breaks: two rounds in a row the centre line missed far beyond its usual misses, on one side; it then rests on the rounds since
	Rejected   uint64  // rounds an estimator refused
	// Checks: check exchanges judged against the centre line
	// (Config.ChecksPerPeriod); CheckBreaks: times they missed it
	// (estimate.CheckTally, or their trend: estimate.Hull.CheckTrend) and
	// the node asked for a round (CheckErr); CheckTrends: those of
	// CheckBreaks that the trend found (the tally had not).
	Checks, CheckBreaks, CheckTrends uint64
	Ignored                          uint64 // late or duplicate time diffs and corrupt samples
	// Exchanges kept out of the estimators, by reason: Corrupt ones had
	// timestamps out of order (also in Ignored); BelowFloor ones a round
	// trip impossibly far below the path's recent floor (Config.FloorSlack);
	// OneWayBelowFloor ones a round trip that fits but one direction's delay
	// impossibly far below the rest of its round's (estimate.FloorFilter).
	Corrupt, BelowFloor, OneWayBelowFloor uint64
	// Contradictions counts rounds the clock model could not explain
	// (EvContradiction); Trust is "acquiring", "synced" or "degraded".
	Contradictions uint64
	Trust          string
	// Outliers counts contradicting rounds the next round did not
	// confirm: held back and discarded (trust.go, hold).
	Outliers uint64

	// Liveness (Config.SilentPeriods).
	GlobalPeriod int64  // the global period the source announced (MsgPeriodChange), InitialGlobalPeriod before
	LastHeard    int64  // local time anything last came from the source (the first Tick before)
	Silent       bool   // nothing from the source for too long
	Silences     uint64 // times the source went silent

	// Line is what the centre line rests on (the fastest exchanges or the
	// body of the delays, and why: estimate.CenterShape); HasLine is false
	// for another estimator or before the body was first weighed.
	Line    estimate.CenterShape
	HasLine bool
}

// ChildSnapshot is the node's view of one child (Liao's per-node variables
// on node 0).
type ChildSnapshot struct {
	Child       NodeID
	Period      int64   // global resync period
	ErrSum      float64 // accumulated err/DIFFERENCE_THRESH
	Successes   int     // quiet rounds since the last period change or report
	Rounds      uint64  // rounds completed (TimeDiff sent)
	Repeats     uint64  // rounds repeated (NETWORK_LATENCY_ERROR_THRESH)
	Retries     uint64  // probes retried after a timeout
	Abandoned   uint64  // rounds ended because retries ran out
	Cut         uint64  // rounds ended by Config.RoundBudget before their PingsPerRound exchanges
	Reports     uint64  // error reports received
	Early       uint64  // rounds brought forward by a report saying BreakErr (a clock whose frequency jumped: followBreak)
	Checks      uint64  // check exchanges answered and sent to the child (Config.ChecksPerPeriod)
	CheckRounds uint64  // rounds started at once on a report saying CheckErr (the child's checks missed its line: followCheck)
	Ignored     uint64  // late or duplicate replies and reports
	Resent      uint64  // replies to probes the driver sent more than once: acknowledged, no sample kept (Message.Resent)
	ShortestRTT int64   // shortest exchange RTT ever, -1 before the first round
	SRTT        int64   // smoothed raw round trip, drives the retry timeout
	Pings       int     // exchanges the last round started asked for (Config.PingsPerRound, RampPingsPerRound, or fewer when the slots are short: sharedPings)
	Pace        int64   // ns of the source's time an exchange of this child's rounds takes, smoothed over rounds (0: none ended)
}

// Snapshot returns the node's current counters. It allocates; it is meant
// for metrics scrapes, not for every event.
func (n *Node) Snapshot() Snapshot {
	s := Snapshot{
		ID:         n.cfg.ID,
		Reference:  n.IsReference(),
		SelfPeriod: n.selfPeriod,
		Ignored:    n.ignored,
		Stamps:     n.stamps,
	}
	for _, src := range n.sources {
		ss := src.stats
		if m, ok := n.lineMapping(src); ok {
			ss.Skew = m.Skew
		}
		if h := src.hull.Mapping(); h.Valid {
			ss.SkewErr = h.SkewErr
		}
		ss.BoundWidth = -1
		ss.GlobalPeriod, ss.LastHeard, ss.Silent = src.period, src.heardAt, src.silent
		ss.Trust = src.trust.String()
		ss.Line, ss.HasLine = centerShape(src.sel)
		if src.haveBest {
			if _, lo, hi, ok := n.viaSource(src, src.lastAt); ok {
				ss.BoundWidth = hi - lo
			}
			ss.LastRound = src.lastAt
			if src.stats.Rounds >= 2 {
				ss.Period = src.lastAt - src.prevAt
			}
		}
		s.Sources = append(s.Sources, ss)
	}
	for _, c := range n.children {
		cs := c.stats
		cs.Period = c.period
		cs.ErrSum = c.errSum
		cs.Successes = c.successes
		cs.ShortestRTT = c.shortestEver
		cs.SRTT = c.srtt
		s.Children = append(s.Children, cs)
	}
	return s
}

// lineCounts are a centre line's counters (a hull with
// HullConfig.CenterBreaks; zero for the others): the rounds it found
// suspect, the frequency breaks that cut its window, and the rounds the
// check exchanges asked for that it left out as a load burst's
// (estimate.Hull.BurstDrops). The engine reads them before and after a
// round to tell what the round did.
type lineCounts struct{ suspects, breaks, drops uint64 }

func centerCounts(e estimate.Estimator) lineCounts {
	if b, ok := e.(interface {
		Suspects() uint64
		Breaks() uint64
		BurstDrops() uint64
	}); ok {
		return lineCounts{b.Suspects(), b.Breaks(), b.BurstDrops()}
	}
	return lineCounts{}
}

// centerShape is what a centre-line estimator's line rests on.
func centerShape(e estimate.Estimator) (estimate.CenterShape, bool) {
	if c, ok := e.(interface {
		CenterShape() (estimate.CenterShape, bool)
	}); ok {
		return c.CenterShape()
	}
	return estimate.CenterShape{}, false
}
