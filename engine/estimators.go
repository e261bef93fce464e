package engine

import (
	"fmt"

	"github.com/gclock/gclock/estimate"
)

// DefaultEstimators builds the estimators of package estimate for one
// source: always a Hull (guaranteed bounds: Window samples, shifted by
// Granularity - HullMinDelay as Jezequel's nu, widened by MaxWander) and the one named by
// cfg.Estimator for the point estimate: "hull" shares the Hull (the
// middle of its bounds), "center" shares it too with the centre line
// (estimate.Hull.Center) as the estimate, "minrtt"
// is Liao's shortest exchange (Granularity, MaxDrift before the first drift
// measurement), "regression" is Intel's fit with its default window.
func DefaultEstimators(cfg Config) (hull, selected estimate.Estimator, err error) {
	h, err := estimate.NewHull(estimate.HullConfig{
		Window:    cfg.Window,
		Shift:     int64(cfg.Granularity - cfg.HullMinDelay),
		MaxWander: cfg.MaxWander,
		Center:    cfg.Estimator == "center",
	})
	if err != nil {
		return nil, nil, fmt.Errorf("hull: %w", err)
	}
	switch cfg.Estimator {
	case "hull", "center":
		return h, h, nil
	case "minrtt":
		mc := estimate.DefaultMinRTTConfig()
		mc.Granularity = int64(cfg.Granularity)
		mc.MaxDrift = min(cfg.MaxDrift, 0.1)
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
