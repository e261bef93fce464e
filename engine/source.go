package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/gclock/gclock/estimate"
)

// The child side (Liao, Figure 1, "On other Nodes"): one source's state,
// and the time diff that feeds its estimators.

// source is a child's view of one of its sources.
type source struct {
	id       NodeID
	hull     estimate.Estimator
	sel      estimate.Estimator
	floor    *estimate.FloorFilter // nil: Config.FloorSlack is 0
	g        estimate.Mapping      // the source's local->global mapping
	best     estimate.Sample       // best exchange of the last accepted round
	haveBest bool
	round    uint32
	haveRnd  bool
	lastAt   int64
	prevAt   int64
	minRTT   int64 // shortest exchange ever received from this source (0: none yet)

	// Liveness: the source's announced global period (MsgPeriodChange),
	// the last change seen, when anything last came from it, and whether
	// it is silent (see Config.SilentPeriods).
	period    int64
	periodSeq uint32
	heardAt   int64
	silent    bool

	// Trust (trust.go): what reads through this source may promise, the
	// rounds in a row without a contradiction, and whether the source said
	// its own mapping was not synced (Message.Unsure).
	trust    trust
	good     int
	upUnsure bool
	warnedAt int64 // local time of the last contradiction warning

	// A round that contradicts the bounds already held (or the restored
	// prior) is held, not used, until the next round says whether the
	// data moved (it contradicts them too) or the held one was an outlier
	// (trust.go, hold): one forged datagram must not throw away what the
	// node knows.
	haveHeld  bool
	heldTrust trust
	heldGood  int

	// Check exchanges about the round last taken (checks.go): the run of
	// those beyond the line, and whether a CheckErr report was sent.
	checks        estimate.CheckTally
	checkReported bool
	// checkRecv: the local receive time of the newest exchange taken or
	// check judged from the source; a check must have been answered after
	// it (validate_msg.go: a replayed check is stale).
	checkRecv int64

	stats SourceSnapshot
	line  string // what the centre line rested on at the last round (CenterShape.Kind, and whether shapes differ)
}

// noteLine logs when what the source's centre line rests on changes: the
// fastest exchanges, the body of the delays, a blend, or the floor alone
// because the two directions' delays differ in shape.
func (n *Node) noteLine(s *source) {
	sh, ok := centerShape(s.sel)
	kind := sh.Kind()
	if sh.Body != "" && sh.BodyWeight > 0 {
		kind += " (" + sh.Body + ")"
	}
	if sh.Asymmetric {
		kind += ", shapes differ"
	}
	if sh.Memory > 0 && sh.BodyWeight > 0 {
		kind += ", memory shortened" // the rounds curve: the clocks' frequency moves (estimate's bodyCurve)
	}
	if sh.Span > 0 && sh.Span < 1 {
		kind += fmt.Sprintf(", newest %g of the window", sh.Span) // the adaptive span chose a part (estimate's span.go)
	}
	if !ok || kind == s.line {
		return
	}
	s.line = kind
	n.logger.Info("centre line", "source", s.id, "rests_on", sh.Kind(), "body_line", sh.Body, "shapes_differ", sh.Asymmetric, "body_weight", sh.BodyWeight,
		"floor_sd_ns", int64(sh.FloorSD), "body_sd_ns", int64(sh.BodySD),
		"spread_up_ns", int64(sh.SpreadUp), "spread_down_ns", int64(sh.SpreadDown), "disagree_sd", sh.Disagree,
		"body_memory_s", sh.Memory/1e9, "floor_memory_s", sh.FloorMemory/1e9, "span", sh.Span,
		"body_stretch", sh.Stretch, "wander_ppm_per_sqrt_s", sh.Wander, "kalman_weight", sh.Kalman)
}

// report sends source s the error report e about round (a round's own
// error, CheckErr, BrokeErr), counted and as an EvErrReport event.
func (n *Node) report(s *source, round uint32, e float64, now int64) {
	s.stats.Reports++
	n.send(Message{Type: MsgErrReport, From: n.cfg.ID, To: s.id, Round: round, Err: e})
	n.event(now, EvErrReport, s.id, e)
}

func (n *Node) timeDiff(s *source, m Message, now int64) {
	if s.haveRnd && m.Round <= s.round {
		s.stats.Ignored++
		n.ignore(m, "late or duplicate time diff")
		return
	}
	prevG, prevRound, prevHaveRnd := s.g, s.round, s.haveRnd
	s.round, s.haveRnd = m.Round, true
	s.checks.Reset()
	s.checkReported = false
	if m.Mapping.Valid {
		s.g = m.Mapping
	}
	s.upUnsure = m.Unsure
	samples := make([]estimate.Sample, 0, len(m.Samples))
	for _, x := range m.Samples {
		n.replySent(s.id, &x, now) // the reply's transmit stamp (stamps.go)
		if !usable(x, now) {
			s.stats.Ignored++
			s.stats.Corrupt++
			n.logger.Warn("time diff sample rejected", "source", s.id, "round", m.Round, "sample", x)
			continue
		}
		samples = append(samples, x)
	}
	if len(samples) == 0 {
		return
	}
	// Ready.Rounds has every exchange with a consistent order (the
	// measurements log), the rejected ones below included.
	n.out.Rounds = append(n.out.Rounds, RoundSamples{Source: s.id, Round: m.Round, Samples: samples})
	if s.floor != nil {
		kept, rejected, oneWay := s.floor.Filter(make([]estimate.Sample, 0, len(samples)), samples, s.sel.Mapping())
		if rejected+oneWay > 0 {
			floor, _ := s.floor.Floor()
			long, _ := s.floor.LongFloor()
			s.stats.BelowFloor += uint64(rejected)
			s.stats.OneWayBelowFloor += uint64(oneWay)
			n.logger.Info("exchanges faster than the path's floor rejected", "source", s.id, "round", m.Round,
				"rejected", rejected+oneWay, "one_way", oneWay, "of", len(samples), "floor_rtt", floor, "long_floor_rtt", long)
		}
		samples = kept
	}
	if len(samples) == 0 {
		return
	}
	best := samples[0]
	for _, x := range samples[1:] {
		if x.RTT() < best.RTT() {
			best = x
		}
	}
	// Liao: err = |Tdiff-from-source - Tdiff-projected|, the projection
	// being the offset extrapolated with the drift measured before this
	// round (at the exchange's own time, not the value held since the last
	// self resync: the held sawtooth is the self period's business, and
	// reporting it would halve the global period for an error a shorter
	// global period cannot remove).
	bx, _ := best.Mid()
	projected, haveProj := n.sourceOffset(s, bx)
	contra := 0
	if n.outsideClaim(s, samples) || n.outsidePrior(s, samples) {
		contra = ContraOutside
	}
	if n.hold(s, samples, contra, now) { // trust.go
		s.g, s.round, s.haveRnd = prevG, prevRound, prevHaveRnd // nothing of it is taken
		return
	}
	for _, x := range samples {
		s.checkRecv = max(s.checkRecv, x.LocRecv)
	}
	n.setHullSpan(s, best, now)
	before := centerCounts(s.sel)
	hullErr := n.feed(s, s.hull, samples, now)
	if s.sel != s.hull {
		n.feed(s, s.sel, samples, now)
	}
	after := centerCounts(s.sel)
	if after.drops > before.drops {
		n.logger.Info("the round the check exchanges asked for came in a load burst: left out of the centre line", "source", s.id, "round", m.Round)
	}
	suspect := after.suspects > before.suspects
	if sh, ok := s.sel.(interface {
		Suspect() (miss, serve, tilt float64, ok bool)
		SuspectLocated() bool
	}); ok && suspect {
		if miss, serve, tilt, ok := sh.Suspect(); ok {
			by := "miss" // its shrunk miss beyond the line
			if sh.SuspectLocated() {
				by = "location" // its midpoints' median, the checks having asked
			}
			n.logger.Info("suspect of a frequency break: the centre line holds the round back until the next", "source", s.id, "round", m.Round,
				"by", by, "miss_ns", int64(miss), "served_shift_ns", int64(serve), "served_tilt_ppb", int64(tilt*1e9))
		}
	}
	if after.breaks > before.breaks {
		s.stats.Breaks++
		n.logger.Info("frequency break: the centre line rests on the rounds since the break", "source", s.id, "round", m.Round)
		// The source brings the next rounds forward to measure the new
		// frequency over more than the break's two rounds (followBroke).
		n.report(s, m.Round, BrokeErr, now)
	}
	n.judge(s, samples, contra, hullErr, now)
	s.best, s.haveBest = best, true
	s.prevAt, s.lastAt = s.lastAt, now
	s.stats.Rounds++
	if r := best.RTT(); s.minRTT == 0 || r < s.minRTT {
		s.minRTT = max(1, r)
	}
	diff := float64(best.Offset() - projected)
	if haveProj {
		sig := math.Abs(diff)
		if n.cfg.DiscountDelay {
			// The best exchange's offset is off by at most half its
			// round trip's excess over the shortest one ever (when the
			// shortest delays are symmetric): only what is left is evidence
			// that the projection was wrong.
			sig = max(0, sig-float64(best.RTT()-s.minRTT)/2)
		}
		if e := sig / float64(n.cfg.DifferenceThresh); e > 1 || suspect {
			if suspect {
				// A round the centre line missed as a frequency break
				// would (estimate's CenterBreaks) asks the source for the
				// next round soon (its followBreak), to confirm the break
				// and measure the new frequency: the report says at least
				// BreakErr.
				e = max(e, BreakErr)
			}
			n.report(s, m.Round, e, now)
		}
	} else {
		diff = 0
	}
	n.event(now, EvGlobalResync, s.id, diff)
	n.noteLine(s)
	// Liao: calculate drift rate; if too large, reduce the self period.
	// Too large: above LargeDrift, or so large that the offset held between
	// two self resyncs drifts by more than DIFFERENCE_THRESH/2 (the self
	// resync must be "frequent enough to keep the synchronized clock
	// accurate", and DIFFERENCE_THRESH is what the engine calls accurate).
	if _, skew, ok := n.line(now); ok && (math.Abs(skew) > n.cfg.LargeDrift || math.Abs(skew)*float64(n.selfPeriod) > float64(n.cfg.DifferenceThresh)/2) && n.selfPeriod > int64(n.cfg.MinSelfPeriod) {
		n.selfPeriod = max(n.selfPeriod/2, int64(n.cfg.MinSelfPeriod))
		n.event(now, EvSelfPeriodChange, s.id, float64(n.selfPeriod))
	}
	n.selfAnchor, n.selfSet = now, true
	if !n.cfg.ContinuousDrift {
		n.selfNext = now + n.selfPeriod
		n.lastOffset, _ = n.offsetAt(now)
	}
}

// usable: an exchange of a time diff (its reply's transmit stamp applied)
// whose times are in order and whose reply left by now.
func usable(x estimate.Sample, now int64) bool {
	return x.LocSend >= x.LocRecv && x.SrcRecv >= x.SrcSend && x.RTT() >= 0 && x.LocSend <= now
}

func (n *Node) feed(s *source, e estimate.Estimator, samples []estimate.Sample, now int64) error {
	err := e.AddRound(samples)
	switch {
	case err == nil:
	case errors.Is(err, estimate.ErrInconsistent):
		s.stats.Restarts++
		n.event(now, EvEstimatorRestart, s.id, 0)
		n.logger.Info("estimator restarted", "source", s.id, "err", err)
	default:
		s.stats.Rejected++
		n.logger.Warn("estimator rejected a round", "source", s.id, "err", err)
	}
	return err
}
