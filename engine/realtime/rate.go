package realtime

import (
	"math"

	"github.com/gclock/gclock/engine"
)

// Rate is a node's clock rate against global time (d local / d global) and
// a bound on its error, from its engine's guaranteed bounds: estimate reads
// the engine at a local time without side effects (engine.Node.Estimate),
// maxWander is the engine's MaxWander (per ns, per ns).
//
// The bounds at local and at local-D bound the mean rate over D:
// [(E(now)-L(now-D))/D, (L(now)-E(now-D))/D], plus maxWander*D/2 for how
// far the present rate may be from that mean. Spans D = 1 s, 2 s, ... 128 s
// are intersected (each one is a valid bound; the estimator's bounds in the
// past are those of its samples, so the long spans give the tight ones);
// the estimate is the line's slope over the longest span, clamped into the
// intersection. False: the engine has no bounded reading.
func Rate(estimate func(local int64) engine.Time, local int64, maxWander float64) (rate, rateErr float64, ok bool) {
	bounded := func(t engine.Time) bool {
		return t.Status != engine.StatusUnsynced && t.Earliest != math.MinInt64 && t.Latest != math.MaxInt64
	}
	tb := estimate(local)
	if !bounded(tb) {
		return 0, 0, false
	}
	lo, hi, sl := 0.0, math.Inf(1), 0.0
	const second = int64(1e9)
	for d := second; d <= 128*second; d *= 2 {
		ta := estimate(local - d)
		if !bounded(ta) {
			break
		}
		fd := float64(d)
		w := maxWander * fd / 2
		lo = max(lo, float64(tb.Earliest-ta.Latest)/fd-w)
		hi = min(hi, float64(tb.Latest-ta.Earliest)/fd+w)
		sl = float64(tb.Est-ta.Est) / fd // d global / d local
	}
	if lo <= 0 || math.IsInf(hi, 1) || hi < lo {
		return 0, 0, false
	}
	sl = min(max(sl, lo), hi)
	r := 1 / sl
	return r, max(1/lo-r, r-1/hi), true
}
