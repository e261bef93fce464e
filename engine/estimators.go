package engine

import (
	"fmt"
	"math"

	"github.com/gclock/gclock/estimate"
)

// DefaultEstimators builds the estimators of package estimate for one
// source: always a Hull (guaranteed bounds: Window samples, shifted by
// Granularity - HullMinDelay as Jezequel's nu, widened by MaxWander, over
// HullMaxSpan) and the one named by cfg.Estimator for the point estimate:
// "hull" shares the Hull (the middle of its bounds), "center" is the
// centre line (estimate.Hull.Center) of a second Hull over the whole Window
// (the span that keeps the bounds tight is too short for the best line when
// the drifts are steady; it shares the first when no span limit applies),
// "minrtt" is Liao's shortest exchange (Granularity, MaxDrift before the
// first drift measurement), "regression" is Intel's fit with its default
// window.
func DefaultEstimators(cfg Config) (hull, selected estimate.Estimator, err error) {
	hc := estimate.HullConfig{
		Window:    cfg.Window,
		Shift:     int64(cfg.Granularity - cfg.HullMinDelay),
		MaxWander: cfg.MaxWander,
		MaxStep:   cfg.MaxFreqStep,
		MaxSpan:   max(int64(cfg.HullMaxSpan), 0),

		CenterMemory:    cfg.CenterMemory,
		CenterFloorOnly: cfg.CenterFloorOnly,
	}
	spanLimited := cfg.HullMaxSpan > 0 || (cfg.HullMaxSpan == 0 && (cfg.MaxWander > 0 || cfg.MaxFreqStep > 0))
	if cfg.Estimator == "center" && !spanLimited {
		hc.Center = true
	}
	h, err := estimate.NewHull(hc)
	if err != nil {
		return nil, nil, fmt.Errorf("hull: %w", err)
	}
	if cfg.Estimator == "center" && spanLimited {
		hc.MaxSpan, hc.Center, hc.CenterAdapt, hc.CenterBreaks = 0, true, true, !cfg.CenterNoBreaks
		c, err := estimate.NewHull(hc)
		if err != nil {
			return nil, nil, fmt.Errorf("center hull: %w", err)
		}
		return h, c, nil
	}
	switch cfg.Estimator {
	case "hull", "center":
		return h, h, nil
	case "minrtt":
		mc := estimate.DefaultMinRTTConfig()
		mc.Granularity = int64(cfg.Granularity)
		mc.MaxDrift = min(cfg.MaxDrift, 0.1)
		// Liao's smoothing per round of the longest period; shorter
		// periods' noisier drift measurements weigh proportionally less.
		mc.SmoothingSpan = int64(cfg.MaxGlobalPeriod)
		m, err := estimate.NewMinRTT(mc)
		if err != nil {
			return nil, nil, fmt.Errorf("minrtt: %w", err)
		}
		return h, m, nil
	case "regression":
		r, err := estimate.NewRegression(estimate.DefaultRegressionConfig())
		if err != nil {
			return nil, nil, fmt.Errorf("regression: %w", err)
		}
		return h, r, nil
	}
	return nil, nil, fmt.Errorf("unknown estimator %q: %w", cfg.Estimator, ErrConfig)
}

// minSpanPeriods is the shortest span HullSpan chooses, in periods: the
// window then always holds the previous round, which the skew needs.
const minSpanPeriods = 1.5

// HullSpan is the span of samples HullMaxSpan = 0 keeps (ns; 0: no limit),
// for exchanges whose point sets are delta apart vertically (half the best
// round trip, less HullMinDelay, plus the granularity: ns), rounds every
// period ns, a wander of maxWander per ns and frequency steps up to
// maxStep. Over a span T the Hull's sets are widened by
// maxStep*T + maxWander*T^2/2 and its skew is known within about
// 2(delta + maxStep*T + maxWander*T^2/2)/T, so its bound one period after
// the newest sample is about
// (delta + maxStep*T + maxWander*T^2/2)(1 + 2 period/T) + maxStep*period:
// the model's change wants a short span, the skew a long one. The span
// minimising it is found on a grid of ratios 2^(1/8) apart (at most 1% off
// the minimum's bound) from minSpanPeriods periods up; without wander or
// steps (or a period) it is 0: the whole Window is best.
func HullSpan(delta, period int64, maxWander, maxStep float64) int64 {
	if (maxWander <= 0 && maxStep <= 0) || period <= 0 || delta <= 0 {
		return 0
	}
	w, s, p, d := maxWander, maxStep, float64(period), float64(delta)
	bound := func(t float64) float64 { return (d + s*t + w*t*t/2) * (1 + 2*p/t) }
	best := minSpanPeriods * p
	bb := bound(best)
	for t := best; t < 1e15; t *= 1.0905 { // 2^(1/8)
		if b := bound(t); b < bb {
			best, bb = t, b
		} else if b > 4*bb {
			break // convex in t: past the minimum
		}
	}
	if best >= math.MaxInt64/2 {
		return 0
	}
	return int64(math.Ceil(best))
}

// setHullSpan gives the source's Hull the span chosen for the round about
// to be fed (HullMaxSpan 0): HullSpan of the round's best exchange and the
// time since the previous round, or the source's announced period after a
// round less than a quarter of it since the previous: a round a report
// brought forward (followBreak), after which the next comes a whole period
// later; the span chosen for the short gap widened the bounds of that
// period 2x in the simulator. A fixed
// HullMaxSpan was set when the Hull was built.
func (n *Node) setHullSpan(s *source, best estimate.Sample, now int64) {
	sp, ok := s.hull.(interface{ SetMaxSpan(ns int64) })
	if !ok || n.cfg.HullMaxSpan != 0 || s.stats.Rounds == 0 {
		return
	}
	delta := max(best.RTT()/2-int64(n.cfg.HullMinDelay), 0) + int64(n.cfg.Granularity)
	gap := now - s.lastAt
	if gap < s.period/earlyDiv*2 {
		gap = s.period // a round brought forward: the next comes a period on
	}
	sp.SetMaxSpan(HullSpan(max(delta, 1), gap, n.cfg.MaxWander, n.cfg.MaxFreqStep))
}
