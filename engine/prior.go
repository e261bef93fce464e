package engine

import (
	"fmt"
	"math"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
)

// Prior is what a node knew of global time at one instant, kept across a
// restart of its driver (the daemon's state file, docs/daemon.md
// "Restarts and state"): its local->global mapping (the line with the
// drift it learned, and a width covering its guaranteed bounds, as sent to
// its children) at local time Saved.
//
// A prior is only as good as the local clock's continuity: the driver
// must give it back to a node on the same clock (CLOCK_MONOTONIC_RAW of
// the same boot, or the same emulated clock), at a local time after Saved.
type Prior struct {
	Saved   int64            // local time it was taken
	Mapping estimate.Mapping // local -> global, anchored at Saved
}

// Prior returns the node's prior at local time now: ok only on a node
// with sources whose global time at now is StatusSynced (a prior is a
// promise that was kept; the reference needs none).
func (n *Node) Prior(now int64) (Prior, bool) {
	if n.IsReference() {
		return Prior{}, false
	}
	if t := n.Estimate(now); t.Status != StatusSynced {
		return Prior{}, false
	}
	// The bound tightest a minute ahead: a restart takes seconds to
	// minutes, and the last exchange's own bound (tightest now) grows
	// at MaxDrift.
	m := n.globalMapping(now, int64(priorHorizon))
	if !m.Valid || m.W0 >= estimate.MaxWidth {
		return Prior{}, false
	}
	return Prior{Saved: now, Mapping: estimate.Reanchor(m, now)}, true
}

// CheckPrior reports what is wrong with p, naming the field: every value
// within the limits of a time diff's mapping (InvalidFields) and anchored
// at Saved.
func CheckPrior(p Prior) error {
	m := p.Mapping
	fin := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case p.Saved <= -MaxMsgTime || p.Saved >= MaxMsgTime:
		return fmt.Errorf("saved %d: outside +-2^62 ns: %w", p.Saved, ErrConfig)
	case !m.Valid:
		return fmt.Errorf("mapping: not valid: %w", ErrConfig)
	case m.X0 != p.Saved:
		return fmt.Errorf("mapping.x0 %d: want the saved time %d: %w", m.X0, p.Saved, ErrConfig)
	case m.Y0 <= -MaxMsgTime || m.Y0 >= MaxMsgTime:
		return fmt.Errorf("mapping.y0 %d: outside +-2^62 ns: %w", m.Y0, ErrConfig)
	case !fin(m.Skew) || math.Abs(m.Skew) > MaxMsgSkew:
		return fmt.Errorf("mapping.skew %v: want |skew| <= %g: %w", m.Skew, MaxMsgSkew, ErrConfig)
	case m.W0 < 0 || m.W0 >= MaxMsgWidth:
		return fmt.Errorf("mapping.w0 %d: want [0, %d): %w", m.W0, MaxMsgWidth, ErrConfig)
	case !fin(m.SkewErr) || m.SkewErr < 0 || m.SkewErr > MaxMsgSkewErr:
		return fmt.Errorf("mapping.skew_err %v: want [0, %g]: %w", m.SkewErr, MaxMsgSkewErr, ErrConfig)
	case !fin(m.Wander) || m.Wander < 0 || m.Wander > MaxMsgWander:
		return fmt.Errorf("mapping.wander %v: want [0, %g]: %w", m.Wander, MaxMsgWander, ErrConfig)
	}
	return nil
}

// Restore seeds a node that has not been started (no Tick or Step yet)
// with a prior. Until one of its sources is trusted (AcquireRounds rounds
// agree with the clock model, trust.go) reads are bounded by the prior,
// intersected with whatever fresh data the sources already give, with
// StatusStale: the bounds come from old data and widen; they are never
// StatusSynced on the prior's word. The prior's bound at x > Saved is the
// narrower of
//
//   - its own width (the learned drift's error and MaxWander) plus
//     MaxFreqStep per ns since Saved: the clock model the engine's bounds
//     rest on, and
//   - its width at Saved plus (|Skew| + MaxDrift) per ns since Saved: any
//     drift within the worst case,
//
// both centred on its line; after estimate.ComposeHorizon only the
// second. Once a source is trusted the prior is dropped; it is dropped too
// when fresh bounds exclude it (the model did not hold across the gap),
// and reads then say what the sources say. A node that is a reference
// ignores it.
func (n *Node) Restore(p Prior) error {
	if n.started || n.haveLocal {
		return fmt.Errorf("engine: node %d: restore after the node started: %w", n.cfg.ID, ErrConfig)
	}
	if err := CheckPrior(p); err != nil {
		return fmt.Errorf("engine: node %d: prior: %w", n.cfg.ID, err)
	}
	if n.IsReference() {
		return nil
	}
	n.prior, n.havePrior = p, true
	return nil
}

// HasPrior reports whether reads still use a restored prior.
func (n *Node) HasPrior() bool { return n.havePrior }

// priorBounds is the restored prior's estimate and bounds at x (see
// Restore), before the read's own uncertainty.
func (n *Node) priorBounds(x int64) (est, lo, hi int64, skew float64) {
	m := n.prior.Mapping
	est, _, _ = m.At(x)
	dx := math.Abs(float64(x - n.prior.Saved))
	drift := float64(m.W0) + (math.Abs(m.Skew)+n.cfg.MaxDrift)*dx
	w := drift
	if dx <= float64(estimate.ComposeHorizon) {
		w = min(w, m.HalfWidth(x)+n.cfg.MaxFreqStep*dx)
	}
	iw := estimate.CeilWidth(w) + 1 // the line's rounding
	return est, satmath.Sub(est, iw), satmath.Add(est, iw), m.Skew
}

// withPrior applies the restored prior to a read computed from the
// sources (t, before widenRead): it returns the read to use and whether
// the prior contradicts the sources' bounds.
func (n *Node) withPrior(x int64, t Time, skew float64) (Time, float64, bool) {
	if !n.havePrior || n.IsReference() {
		return t, skew, false
	}
	if t.Status == StatusSynced || t.Status == StatusStale {
		return t, skew, false // a trusted source: the prior is not needed
	}
	pe, plo, phi, psk := n.priorBounds(x)
	if t.Earliest == math.MinInt64 && t.Latest == math.MaxInt64 {
		return Time{Est: pe, Earliest: plo, Latest: phi, Status: StatusStale}, psk, false
	}
	lo, hi, ok := estimate.Intersect(t.Earliest, t.Latest, plo, phi)
	if !ok {
		return t, skew, true
	}
	st := StatusStale // acquiring: fresh bounds, not yet trusted
	if t.Status == StatusDegraded {
		st = StatusDegraded
	}
	return Time{Est: clamp(t.Est, lo, hi), Earliest: lo, Latest: hi, Status: st}, skew, false
}

// outsidePrior reports whether an exchange of the round contradicts the
// restored prior, as outsideClaim does for the sources' bounds: the
// source's send (on global time through the source's mapping, at its
// earliest) after the prior's latest at the local receive, or its receive
// (at its latest) before the prior's earliest at the local send.
func (n *Node) outsidePrior(s *source, samples []estimate.Sample) bool {
	if !n.havePrior || !s.g.Valid {
		return false
	}
	g := int64(n.cfg.Granularity)
	for _, x := range samples {
		_, sendLo, _ := s.g.At(x.SrcSend)
		_, _, phi, _ := n.priorBounds(x.LocRecv)
		if phi < math.MaxInt64-g && sendLo > phi+g {
			return true
		}
		_, _, recvHi := s.g.At(x.SrcRecv)
		_, plo, _, _ := n.priorBounds(x.LocSend)
		if plo > math.MinInt64+g && recvHi < plo-g {
			return true
		}
	}
	return false
}

// settlePrior drops the prior once a source is trusted or the sources'
// bounds exclude it. Called at the end of Tick and Step.
func (n *Node) settlePrior(now int64) {
	if !n.havePrior {
		return
	}
	lo, hi, _, st, have := n.sourceBounds(now)
	if have && st == StatusSynced {
		n.havePrior = false
		n.logger.Info("restored prior dropped: a source is trusted")
		return
	}
	if !have {
		return
	}
	_, plo, phi, _ := n.priorBounds(now)
	if _, _, ok := estimate.Intersect(lo, hi, plo, phi); !ok {
		n.havePrior = false
		n.logger.Warn("restored prior dropped: fresh bounds exclude it (the clock model did not hold across the restart)",
			"local", now, "prior_lo", plo, "prior_hi", phi, "lo", lo, "hi", hi)
	}
}

// priorHorizon is how far ahead Prior chooses the tightest bound.
const priorHorizon = 60e9
