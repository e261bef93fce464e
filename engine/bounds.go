package engine

import (
	"math"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
)

// What the node knows of global time through its sources: each source's
// line and bounds on the local clock, mapped through the source's own
// mapping (Jezequel A3), the tightest source, and the mapping sent on to
// the children.

// lineMapping is the source's point-estimate line: the selected estimator,
// else the Hull, else the last exchange alone.
func (n *Node) lineMapping(s *source) (estimate.Mapping, bool) {
	if m := s.sel.Mapping(); m.Valid {
		return m, true
	}
	if m := s.hull.Mapping(); m.Valid {
		return m, true
	}
	if s.haveBest {
		return n.fallback(s), true
	}
	return estimate.Mapping{}, false
}

// It widens at MaxDrift, or faster when the Hull's data allow a larger
// skew: a clock drifting beyond the stated limit is caught (ContraDrift)
// only once the Hull's whole skew range lies beyond it, and until then
// the bound must not rest on the limit the data put in doubt.
func (n *Node) fallback(s *source) estimate.Mapping {
	md := n.cfg.MaxDrift
	if m := s.hull.Mapping(); m.Valid {
		md = max(md, min(math.Abs(m.Skew)+m.SkewErr, 0.5))
	}
	return sampleMapping(s.best, md, n.cfg.MaxWander, int64(n.cfg.Granularity), int64(n.cfg.HullMinDelay))
}

// sampleMapping is the bound one exchange gives on its own, before any
// drift is known: the source time at the local midpoint lies within half
// the RTT (plus granularity and the drift over the hold time), and it moves
// away at most at maxDrift and maxWander. It is valid for any estimator and
// never tighter than the exchange proves under those assumptions.
//
// With a known minimum one-way delay mu (Jezequel's 4.3) each direction is
// at least mu long, which takes mu off the half-width.
func sampleMapping(s estimate.Sample, maxDrift, maxWander float64, gran, mu int64) estimate.Mapping {
	x, y := s.Mid()
	hold := float64(s.LocSend - s.LocRecv)
	w := max(float64(s.RTT())/2-float64(mu), 0) + float64(gran) + maxDrift*hold + 1
	return estimate.Mapping{
		X0:      x,
		Y0:      y,
		W0:      estimate.CeilWidth(w),
		SkewErr: maxDrift,
		Wander:  maxWander,
		Valid:   true,
	}
}

// sourceOffset is the source-minus-local offset the node projects at x
// with the drift it measured (Liao's Tdiff-projected, "the T_diff
// extrapolated locally").
func (n *Node) sourceOffset(s *source, x int64) (int64, bool) {
	m, ok := n.lineMapping(s)
	if !ok {
		return 0, false
	}
	est, _, _ := m.At(x)
	return est - x, true
}

// bounder is implemented by estimators that give exact bounds at any x
// (estimate.Hull); the Mapping form is a looser linear-quadratic envelope.
type bounder interface {
	Bounds(x int64) (lo, hi int64, ok bool)
}

// localBoundsChecked is what the node knows of its source's clock at x:
// the intersection of the Hull's guaranteed bounds and the last exchange's
// own bound, and the point estimate clamped into them; consistent says
// whether the two agreed: when they do not, some assumption of the clock
// model is wrong and the union is returned.
func (n *Node) localBoundsChecked(s *source, x int64) (est, lo, hi int64, ok, consistent bool) {
	consistent = true
	lo, hi = math.MinInt64, math.MaxInt64
	have := false
	if b, isB := s.hull.(bounder); isB {
		// The exact bounds (Jezequel's polygon), tighter than the Mapping.
		lo, hi, have = b.Bounds(x)
	} else if m := s.hull.Mapping(); m.Valid {
		_, lo, hi = m.At(x)
		have = true
	}
	if s.haveBest {
		_, flo, fhi := n.fallback(s).At(x)
		if have {
			l, h, ok := estimate.Intersect(lo, hi, flo, fhi)
			if !ok {
				// Contradiction: some assumption (MaxDrift, MaxWander, the
				// Hull's model) is wrong. Claim only the union.
				n.logger.Debug("hull and exchange bounds disagree", "source", s.id, "local", x)
				l, h = min(lo, flo), max(hi, fhi)
				consistent = false
			}
			lo, hi = l, h
		} else {
			lo, hi = flo, fhi
		}
		have = true
	}
	if !have {
		return 0, 0, 0, false, false
	}
	m, _ := n.lineMapping(s)
	est, _, _ = m.At(x)
	return clamp(est, lo, hi), lo, hi, true, consistent
}

// viaSource is global time at x through source s: estimate and bounds.
func (n *Node) viaSource(s *source, x int64) (est, lo, hi int64, ok bool) {
	est, lo, hi, ok, _ = n.viaSourceChecked(s, x)
	return est, lo, hi, ok
}

// viaSourceChecked is viaSource with localBoundsChecked's consistency.
func (n *Node) viaSourceChecked(s *source, x int64) (est, lo, hi int64, ok, consistent bool) {
	if !s.g.Valid {
		return 0, 0, 0, false, false
	}
	le, llo, lhi, ok, consistent := n.localBoundsChecked(s, x)
	if !ok {
		return 0, 0, 0, false, false
	}
	est, lo, hi, ok = estimate.MapInterval(s.g, le, llo, lhi)
	return est, lo, hi, ok, consistent
}

// bestSource returns the source giving the narrowest global bounds at x.
func (n *Node) bestSource(x int64) (*source, int64, int64, int64, bool) {
	var bs *source
	var be, bl, bh int64
	for _, s := range n.sources {
		e, l, h, ok := n.viaSource(s, x)
		if !ok {
			continue
		}
		if bs == nil || h-l < bh-bl {
			bs, be, bl, bh = s, e, l, h
		}
	}
	return bs, be, bl, bh, bs != nil
}

// line returns the continuous global estimate at x and the node's skew
// against global time (the "drift rate" of Liao).
func (n *Node) line(x int64) (est int64, skew float64, ok bool) {
	if n.IsReference() {
		return x, 0, true
	}
	s, e, _, _, ok := n.bestSource(x)
	if !ok {
		return 0, 0, false
	}
	m, _ := n.lineMapping(s)
	return e, m.Skew + s.g.Skew + m.Skew*s.g.Skew, true
}

// offsetAt is global minus local at x, continuous.
func (n *Node) offsetAt(x int64) (int64, bool) {
	e, _, ok := n.line(x)
	return e - x, ok
}

// globalMapping is the node's local->global mapping sent to its children:
// the reference's identity, or the tightest source's mapping composed with
// the node's own (Jezequel A3, step 3). Its line is the selected estimate,
// its width covers the guaranteed bounds.
//
// The child uses it until its next round, so among the bounds the one that
// is tightest one period ahead is chosen: the last exchange's bound is the
// tightest now but grows at MaxDrift, the Hull's grows at its SkewErr.
func (n *Node) globalMapping(now, period int64) estimate.Mapping {
	if n.IsReference() {
		return estimate.Identity(now)
	}
	s, _, _, _, ok := n.bestSource(now)
	if !ok {
		return estimate.Mapping{}
	}
	line, _ := n.lineMapping(s)
	bound := n.fallback(s)
	if h := s.hull.Mapping(); h.Valid && h.HalfWidth(now+period) <= bound.HalfWidth(now+period) {
		bound = h
	}
	l := estimate.Reanchor(line, now)
	b := estimate.Reanchor(bound, now)
	// The line may sit off the bound's centre: widen by the gap, which
	// grows at most with the skew difference.
	inner := estimate.Mapping{
		X0:      now,
		Y0:      l.Y0,
		Skew:    l.Skew,
		W0:      min(satmath.Add(b.W0, satmath.AbsDiff(l.Y0, b.Y0)), estimate.MaxWidth),
		SkewErr: b.SkewErr + math.Abs(l.Skew-b.Skew),
		Wander:  b.Wander,
		Valid:   true,
	}
	return sendable(estimate.Compose(s.g, inner, now))
}

// sendable brings a mapping within what InvalidFields lets through: early
// in a hull's life its skew range is wide and its middle can lie beyond
// MaxMsgSkew. The skew is clamped into ±MaxMsgSkew and SkewErr widened by
// the shift, so the bounds stay outside the old ones; a mapping whose
// bounds are wider than any message may carry is sent as not valid (the
// child keeps the last valid one).
func sendable(m estimate.Mapping) estimate.Mapping {
	if !m.Valid {
		return m
	}
	if c := max(-MaxMsgSkew, min(MaxMsgSkew, m.Skew)); c != m.Skew {
		m.SkewErr += math.Abs(m.Skew - c)
		m.Skew = c
	}
	if f, _ := InvalidFields(&Message{Mapping: m}, MsgTimeDiff); f != "" {
		return estimate.Mapping{}
	}
	return m
}
