package sim

import (
	"log/slog"
	"sort"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/engine"
)

// defaultNewNode builds the real engine.
func defaultNewNode(cfg engine.Config, logger *slog.Logger) (Node, error) {
	n, err := engine.New(cfg, logger)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// wanderStep is the truth interval between the emulated clocks' frequency
// changes: one second, so that the scenario's ppm per sqrt(s) is the
// standard deviation of one step.
const wanderStep = int64(time.Second)

// defaultNewClock builds a clock.Emulated from the drawn parameters; drift
// changes add up into the clock's absolute drift steps.
func defaultNewClock(p ClockParams) (Clock, error) {
	ch := append([]DriftChange(nil), p.Steps...)
	sort.SliceStable(ch, func(i, j int) bool { return ch[i].At < ch[j].At })
	ep := clock.EmuParams{
		Origin:      p.Origin,
		Offset:      p.Offset,
		DriftPPM:    p.DriftPPM,
		Granularity: p.Granularity,
		JitterNs:    p.Jitter,
		Seed:        int64(p.Seed),
	}
	if p.WanderPPMPerSqrtS > 0 || p.SinePPM > 0 {
		ep.WanderPPM, ep.WanderStep = p.WanderPPMPerSqrtS, wanderStep
		ep.SinePPM, ep.SinePeriod = p.SinePPM, p.SinePeriod
	}
	drift := p.DriftPPM
	for _, c := range ch {
		drift += c.DeltaPPM
		if n := len(ep.Steps); n > 0 && ep.Steps[n-1].At == c.At {
			ep.Steps[n-1].DriftPPM = drift
			continue
		}
		ep.Steps = append(ep.Steps, clock.DriftStep{At: max(c.At, p.Origin), DriftPPM: drift})
	}
	e, err := clock.NewEmulated(ep)
	if err != nil {
		return nil, err
	}
	return e, nil
}
