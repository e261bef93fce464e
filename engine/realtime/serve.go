package realtime

import (
	"math"

	"github.com/gclock/gclock/engine"
)

// meanAt is served time at global time g on the mean-drift scale and how
// far it may be from the reference's chain there.
func (s *Scale) meanAt(g int64) (v, ext int64, ok bool) {
	i := -1
	for j, sg := range s.segs {
		if sg.At <= g {
			i = j
		}
	}
	if i < 0 {
		sg := s.segs[0]
		if v, ok = sg.at(g); !ok {
			return 0, 0, false
		}
		if !s.first {
			ext = int64(math.Ceil(4 * s.cfg.MaxDrift * float64(sg.At-g)))
		}
		return v, ext, true
	}
	if v, ok = s.segs[i].at(g); !ok {
		return 0, 0, false
	}
	if s.horizon == math.MinInt64 {
		return 0, 0, false
	}
	if g > s.horizon {
		d, ok := span(g, s.horizon)
		if !ok {
			return 0, 0, false
		}
		ext = int64(math.Ceil(4 * s.cfg.MaxDrift * float64(d)))
	}
	return v, ext, true
}

// Map is served time at global time g as this Scale knows it, without
// bounds (an evaluator's truth, read on the reference). False: no model
// yet, or g beyond what the model can evaluate.
func (s *Scale) Map(g int64) (int64, bool) {
	if s.cfg.Mode == ModeReference {
		if !s.haveOff {
			return 0, false
		}
		o, _, ok := s.off.at(g)
		return satAdd(satAdd(g, o), s.ho.residual(g, s.slew())), ok
	}
	if len(s.segs) == 0 {
		return 0, false
	}
	v, _, ok := s.meanAt(g)
	return v, ok
}

// Apply turns the engine's readings (global time on the reference's clock)
// into served time, bounds included: g + O(g) and the chain both increase
// with g, so the bounds stay bounds. False: no model yet, or a reading the
// models cannot map, or (reference-realtime) an upstream that is not
// synchronised (Upstream says why), or a model of another node's
// CLOCK_REALTIME older than MaxAge at ts[0] (Unserved says why); the
// reading must then not be served as synced. The upstream's error bound, grown since it was read, widens
// both bounds.
func (s *Scale) Apply(ts []engine.Time) bool {
	for i := range ts {
		t := &ts[i]
		if t.Status == engine.StatusUnsynced || t.Earliest == math.MinInt64 || t.Latest == math.MaxInt64 {
			return false
		}
		var e, l, h, xl, xh int64
		var ok1, ok2, ok3 bool
		if s.cfg.Mode == ModeReference {
			if !s.haveOff {
				return false
			}
			// g + O(g) increases with g (|slope| << 1), and so do its
			// bounds: the lower bound is reached at Earliest.
			// The upstream's own error (CLOCK_REALTIME - UTC) widens both
			// bounds; an unsynchronised upstream serves no UTC at all.
			// The age is judged at the first reading (now): the others
			// are a page's look-ahead of the same read.
			if s.off.Up.Problem() != "" || (i == 0 && s.tooOld(t.Est)) {
				return false
			}
			var oe, ol, oh, ul, uh int64
			var ok4, ok5 bool
			oe, _, ok1 = s.off.at(t.Est)
			ol, xl, ok2 = s.off.at(t.Earliest)
			oh, xh, ok3 = s.off.at(t.Latest)
			ul, ok4 = s.off.Up.errAt(t.Earliest, s.off.At)
			uh, ok5 = s.off.Up.errAt(t.Latest, s.off.At)
			ok2, ok3 = ok2 && ok4, ok3 && ok5
			xl, xh = xl+ul, xh+uh
			e, l, h = t.Est+oe, t.Earliest+ol, t.Latest+oh
		} else {
			if len(s.segs) == 0 {
				return false
			}
			e, _, ok1 = s.meanAt(t.Est)
			l, xl, ok2 = s.meanAt(t.Earliest)
			h, xh, ok3 = s.meanAt(t.Latest)
		}
		if !ok1 || !ok2 || !ok3 || l-xl > h+xh {
			return false
		}
		t.Earliest, t.Latest = l-xl, h+xh
		if s.cfg.Mode == ModeReference {
			// Slewing from the old reference's model (failover.go): the
			// bounds widen to hold the served value, the truth stays in
			// the new model's.
			if r := s.ho.residual(t.Est, s.slew()); r != 0 {
				e = satAdd(e, r)
				t.Earliest, t.Latest = min(t.Earliest, e), max(t.Latest, e)
			}
		}
		t.Est = min(max(e, t.Earliest), t.Latest)
		t.Mono = t.Est
	}
	return true
}
