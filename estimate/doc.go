// Package estimate turns two-way exchanges between a node (local clock x)
// and its source (clock y) into a Mapping y = f(x) with bounds. Estimators
// read no clock: timestamps come in as arguments (Sample), rounds go in with
// AddRound, the estimate comes out with Mapping.
//
// Four estimators, one per paper:
//
//   - Hull (Jezequel, RR-1177 section 4): the exact convex-hull bounds.
//     Every feasible line lies below UP = (LocSend, SrcRecv) and above
//     LOW = (LocRecv, SrcSend); the hull keeps both convex hulls
//     incrementally and gives guaranteed [lo, hi] at any x (Bounds), the
//     guaranteed skew range (SkewBounds), and their middle as the estimate.
//     Granularity and jitter are absorbed by Shift (the paper's nu), slow
//     frequency wander by MaxWander. This is what the engine always runs
//     for the bounds.
//   - MinRTT (Cristian; Liao et al.): the shortest exchange of a round, the
//     offset at its midpoint within RTT/2, the drift from successive rounds.
//     Shortest and RepeatRound are the engine's helpers for Liao's round
//     (NETWORK_LATENCY_ERROR_THRESH).
//   - Regression (Intel): least squares through the midpoints after
//     dropping the 10% highest RTT; FitLine does it for a trace's sync
//     sessions. Its W0 is an estimate, not a bound.
//   - Spline (Intel VT_timesync): one condensed point per session
//     (Condense) and a C1 monotone cubic through them (NewSpline, Map).
//
// Typical use:
//
//	h, err := estimate.NewHull(estimate.HullConfig{Window: 256, Shift: granularity})
//	...
//	if err := h.AddRound(round); errors.Is(err, estimate.ErrInconsistent) {
//		// drift change or step: the window restarted from this round
//	}
//	lo, hi, ok := h.Bounds(localNow)   // guaranteed source time
//	m := h.Mapping()                    // for composition and extrapolation
//	est, lo, hi := m.At(localNow)
//
// Mappings compose (mapping.go): Compose chains a node's mapping onto its
// source's (Jezequel's A3, how the engine carries global time one hop
// further), MapInterval maps a bounded interval through a mapping,
// Reanchor moves a mapping's anchor without narrowing its bound, and
// Intersect meets two bounds.
//
// Absolute timestamps never enter float64: the hull works in int64 and
// 128-bit products relative to an origin, the others in float64 relative to
// a nearby origin. See docs/estimators.md for measured accuracy and cost.
package estimate
