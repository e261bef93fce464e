package realtime

import (
	"math"

	"github.com/gclock/gclock/engine"
)

// Reference failover (engine.Member) changes the node whose CLOCK_REALTIME
// reference-realtime serves. Retarget points a Scale at the new reference:
// a node asks it, the new reference samples its own CLOCK_REALTIME (its own
// chrony or kernel upstream). Until the new reference's first model arrives
// the old one is served, its bounds growing as they always do; then served
// time moves to the new model without a jump beyond what both bounds
// allow (handover) and slews the rest at MaxSlew, the bounds widened to
// hold the served value meanwhile. A model of another node's CLOCK_REALTIME
// older than Config.MaxAge is not served at all: no UTC source is left.

// eagerPolls: after Retarget a node polls this many times per Poll until
// the new reference has a model (its first answers may say it has none
// yet).
const eagerPolls = 8

// Retarget makes ref the reference from local on. On the node that becomes
// the reference, local is global time from now on (the driver's clock for
// the Scale changes with the role). The model served so far stays until
// one of ref's CLOCK_REALTIME replaces it; a query in flight is forgotten.
func (s *Scale) Retarget(ref engine.NodeID, local int64) {
	if ref == s.cfg.Reference {
		return
	}
	s.cfg.Reference = ref
	s.isRef = ref == s.cfg.ID
	s.pending = false
	s.failStreak, s.refusing = 0, false
	s.haveLast = false // the reference's own samples start again
	s.started = true
	s.nextPoll = local
	s.eager = true
	// The new reference measures its slope over growing spans (ramp);
	// a node keeps asking for the better models for one Poll.
	s.ramp, s.eagerUntil = s.isRef, 0
	if !s.isRef {
		s.eagerUntil = satAdd(local, s.cfg.Poll)
	}
	s.st.Retargets++
}

// eagerEvery is the time between polls (or samples) while the new
// reference's model is awaited.
func (s *Scale) eagerEvery() int64 {
	if s.isRef {
		return max(s.cfg.SampleEvery, 1)
	}
	return max(s.cfg.Poll/eagerPolls, 1e6)
}

// slew is the rate at which served time moves to a new model.
func (s *Scale) slew() float64 {
	if s.cfg.MaxSlew > 0 {
		return s.cfg.MaxSlew
	}
	return 500e-6
}

// tooOld: the model served at g is another node's and older than MaxAge.
func (s *Scale) tooOld(g int64) bool {
	if s.cfg.MaxAge == 0 || s.off.Ref == s.cfg.ID {
		return false
	}
	d, ok := span(g, s.off.At)
	return !ok || d > s.cfg.MaxAge
}

// Unserved says why served time at global time g is not UTC ("" when
// Apply may serve it): no model yet, the upstream's problem, or no UTC
// source left. A fixed set of strings (a metric's label).
func (s *Scale) Unserved(g int64) string {
	switch {
	case s.cfg.Mode == ModeMeanDrift && len(s.segs) == 0, s.cfg.Mode == ModeReference && !s.haveOff:
		return ReasonNoModel
	case s.cfg.Mode == ModeMeanDrift:
		return ""
	case s.off.Up.Problem() != "":
		return s.off.Up.Problem()
	case s.tooOld(g):
		return ReasonNoSource
	}
	return ""
}

// Reasons Unserved gives besides Upstream.Problem.
const (
	ReasonNoModel  = "no model of UTC yet"
	ReasonNoSource = "no UTC source: the reference serves none"
)

// setModel makes m the model served. A model of another node's
// CLOCK_REALTIME than the one served (a failover) starts a handover at g0.
func (s *Scale) setModel(m offModel, g0 int64) {
	if s.haveOff && s.off.Ref != m.Ref {
		s.ho = s.handoverTo(m, g0)
	}
	if m.Ref == s.cfg.Reference {
		s.eager = false
	}
	s.off, s.haveOff = m, true
}

// handover is what served time adds to the model from At on: r, shrinking
// to 0 at the slew rate.
type handover struct {
	At, R int64
}

// residual is the handover's correction at g.
func (h handover) residual(g int64, slew float64) int64 {
	if h.R == 0 {
		return 0
	}
	d := 0.0
	if g > h.At {
		d = slew * float64(g-h.At)
	}
	if math.Abs(float64(h.R)) <= d {
		return 0
	}
	if h.R > 0 {
		return h.R - int64(d)
	}
	return h.R + int64(d)
}

// handoverTo starts at g0 from the value served on the old model, moved
// into the intersection of the old and the new model's bounds when they
// meet (a jump no reader can tell from the truth), else kept: the rest
// slews.
func (s *Scale) handoverTo(m offModel, g0 int64) handover {
	if s.off.Up.Problem() != "" || s.tooOld(g0) {
		return handover{} // nothing was served: start on the new model
	}
	bounds := func(o offModel) (e, l, h int64, ok bool) {
		v, err, ok1 := o.at(g0)
		ue, ok2 := o.Up.errAt(g0, o.At)
		e = satAdd(g0, v)
		return e, satAdd(e, -(err + ue)), satAdd(e, err+ue), ok1 && ok2
	}
	oe, ol, oh, ok1 := bounds(s.off)
	ne, nl, nh, ok2 := bounds(m)
	if !ok1 || !ok2 {
		return handover{}
	}
	if r := s.ho.residual(g0, s.slew()); r != 0 {
		oe = satAdd(oe, r)
		ol, oh = min(ol, oe), max(oh, oe)
	}
	v := oe
	if lo, hi := max(ol, nl), min(oh, nh); lo <= hi {
		v = min(max(oe, lo), hi)
	}
	return handover{At: g0, R: v - ne}
}
