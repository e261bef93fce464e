package engine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gclock/gclock/estimate"
)

// ErrConfig is wrapped by every Config.Validate error.
var ErrConfig = errors.New("invalid engine config")

// DefaultConfig returns the configuration used when a scenario says nothing:
// Liao's three pings and adaptive periods, with thresholds sized for a
// cluster network of a few microseconds' latency. ID, Sources and Children
// are left empty: fill them from package topology.
func DefaultConfig() Config {
	return Config{
		Estimator:     "minrtt",
		Adaptive:      true,
		PingsPerRound: 3, // Liao, Figure 1: for (i = 0; i < 3; i++)
		// A round whose best RTT is 20 us above the best ever met queueing
		// or a loaded host on every ping: worth one more try.
		NetworkLatencyErrorThresh: 20 * time.Microsecond,
		// Liao's Table 1 errors are ~1 us; a 2 us surprise is a real error.
		DifferenceThresh: 2 * time.Microsecond,
		ErrorThresh:      4,
		SuccessThresh:    4,
		MinGlobalPeriod:  250 * time.Millisecond,
		MaxGlobalPeriod:  16 * time.Second,
		// Liao: global resyncs are rare; the self resync fills the gaps.
		InitialGlobalPeriod: 2 * time.Second,
		MinSelfPeriod:       10 * time.Millisecond,
		MaxSelfPeriod:       time.Second,
		LargeDrift:          20e-6,
		// Mocha retries request/reply traffic after 50 ms.
		ProbeTimeout: 50 * time.Millisecond,
		StaleAfter:   2 * time.Minute,
		// 500 ppm is the kernel's adjtime slew limit.
		MaxSlewRate: 500e-6,
		// Two quartz of +-100 ppm differ by at most 200 ppm.
		MaxDrift: 200e-6,
		// The clock model of a commodity crystal (docs/daemon.md, "The
		// clock model"): its frequency changes smoothly by at most 0.01 ppm
		// per second (temperature: an AT-cut crystal moves up to about
		// 0.5 ppm per degree away from its turnover point, and a room or a
		// board warms by well under a degree a minute), per ns; and by at
		// most 2 ppm at once (a sudden load change heating the board by a
		// few degrees within seconds), so a step that size stays inside
		// the bounds and a larger one is caught as a contradiction.
		MaxWander:   1e-8 / 1e9,
		MaxFreqStep: 2e-6,
		// The fastest exchanges of a path spread over a few us with
		// software stamps on a loaded host (the lab: 148-153 us at p0-p1 of
		// the round trip); a stamp gone wrong under load was 20-120 us off.
		FloorSlack:          2 * time.Microsecond,
		Granularity:         1,
		Window:              256,
		MaxConcurrentRounds: 1,
		RetryRTTs:           4,
		MaxProbeRetries:     8,
		SilentPeriods:       3,
	}
}

// FloorConfig is the floor filter the engine runs before each source's
// estimators when FloorSlack > 0 (estimate.FloorFilter), and the one
// `gclock lab replay` runs on logged exchanges to replay what the daemon
// did.
func (c Config) FloorConfig() estimate.FloorConfig {
	return estimate.FloorConfig{Slack: int64(c.FloorSlack), MaxSkew: c.MaxDrift, Granularity: int64(c.Granularity)}
}

// Validate checks every field (Check) and names the first bad one.
func (c Config) Validate() error {
	var err error
	c.Check(func(field, format string, args ...any) {
		if err == nil {
			err = fmt.Errorf("engine config: node %d: %s: %s: %w", c.ID, field, fmt.Sprintf(format, args...), ErrConfig)
		}
	})
	return err
}

// Field names a Config field in a Check message that is about another
// field than the bad one ("MinGlobalPeriod: 8s above MaxGlobalPeriod 4s").
type Field string

// MaxPingsPerRound bounds Config.PingsPerRound and RampPingsPerRound: a
// round repeated once (Liao's NETWORK_LATENCY_ERROR_THRESH) holds twice as
// many exchanges (MaxMsgSamples, which is the wire's MaxSamples), and its
// TimeDiff carries them all in one datagram: 2000 of 32 bytes, below the
// largest UDP payload with authentication (wire's tests check it).
const MaxPingsPerRound = 1000

// Check is the one validation of a Config: it calls bad once per bad
// field, in field order, with the field's name ("PingsPerRound") and what
// is wrong with it. Every number among args is in the bad field's own
// unit, and another field the message names is passed as a Field, so that
// a caller that writes the fields under other names and units (package
// engineconf: pings_per_round, ppm) can say it in its own words without
// a second copy of the ranges.
func (c Config) Check(bad func(field, format string, args ...any)) {
	seen := make(map[NodeID]string, len(c.Sources)+len(c.Children))
	for _, list := range []struct {
		name string
		ids  []NodeID
	}{{"Sources", c.Sources}, {"Children", c.Children}} {
		for _, id := range list.ids {
			if id == c.ID {
				bad(list.name, "lists the node itself (%d)", id)
			} else if prev, dup := seen[id]; dup {
				bad(list.name, "node %d already listed in %s", id, Field(prev))
			}
			seen[id] = list.name
		}
	}
	switch c.Estimator {
	case "minrtt", "regression", "hull", "center":
	default:
		bad("Estimator", "unknown estimator %q (minrtt, regression, hull, center)", c.Estimator)
	}
	if c.PingsPerRound < 1 || c.PingsPerRound > MaxPingsPerRound {
		bad("PingsPerRound", "%d outside [1, %d]", c.PingsPerRound, MaxPingsPerRound)
	}
	if c.RampPingsPerRound < 0 || c.RampPingsPerRound > MaxPingsPerRound {
		bad("RampPingsPerRound", "%d outside [0, %d] (0: PingsPerRound)", c.RampPingsPerRound, MaxPingsPerRound)
	}
	for _, p := range []struct {
		name string
		d    time.Duration
	}{
		{"NetworkLatencyErrorThresh", c.NetworkLatencyErrorThresh},
		{"DifferenceThresh", c.DifferenceThresh},
		{"MinGlobalPeriod", c.MinGlobalPeriod},
		{"MaxGlobalPeriod", c.MaxGlobalPeriod},
		{"InitialGlobalPeriod", c.InitialGlobalPeriod},
		{"MinSelfPeriod", c.MinSelfPeriod},
		{"MaxSelfPeriod", c.MaxSelfPeriod},
		{"ProbeTimeout", c.ProbeTimeout},
		{"StaleAfter", c.StaleAfter},
	} {
		if p.d <= 0 && p.name != "NetworkLatencyErrorThresh" {
			bad(p.name, "%v, must be > 0", p.d)
		} else if p.d < 0 {
			bad(p.name, "%v, must be >= 0", p.d)
		}
	}
	if c.FloorSlack < 0 {
		bad("FloorSlack", "%v, must be >= 0 (0: off)", c.FloorSlack)
	}
	if c.HullMinDelay < 0 {
		bad("HullMinDelay", "%v, must be >= 0", c.HullMinDelay)
	}
	if c.Granularity < 0 {
		bad("Granularity", "%v, must be >= 0", c.Granularity)
	}
	if c.MinGlobalPeriod > c.MaxGlobalPeriod {
		bad("MinGlobalPeriod", "%v above %s %v", c.MinGlobalPeriod, Field("MaxGlobalPeriod"), c.MaxGlobalPeriod)
	}
	if c.InitialGlobalPeriod > c.MaxGlobalPeriod {
		bad("InitialGlobalPeriod", "%v above %s %v", c.InitialGlobalPeriod, Field("MaxGlobalPeriod"), c.MaxGlobalPeriod)
	}
	if c.MinSelfPeriod > c.MaxSelfPeriod {
		bad("MinSelfPeriod", "%v above %s %v", c.MinSelfPeriod, Field("MaxSelfPeriod"), c.MaxSelfPeriod)
	}
	for _, f := range []struct {
		name   string
		v      float64
		lo, hi float64
		loOpen bool
	}{
		{"ErrorThresh", c.ErrorThresh, 0, math.MaxFloat64, true},
		{"LargeDrift", c.LargeDrift, 0, 0.5, false},
		{"MaxSlewRate", c.MaxSlewRate, 0, 0.5, true},
		{"MaxDrift", c.MaxDrift, 0, 0.5, false},
		{"MaxWander", c.MaxWander, 0, 1e-6, false},
		{"MaxFreqStep", c.MaxFreqStep, 0, 1e-3, false},
		{"RetryRTTs", c.RetryRTTs, 1, 1e6, false},
		{"CenterMemory", c.CenterMemory, 0, 1e6, false},
		{"SilentPeriods", c.SilentPeriods, 0, 1e6, false},
	} {
		if math.IsNaN(f.v) || f.v < f.lo || f.v > f.hi || (f.loOpen && f.v == f.lo) {
			open := "["
			if f.loOpen {
				open = "("
			}
			bad(f.name, "%g outside "+open+"%g, %g]", f.v, f.lo, f.hi)
		}
	}
	if c.SuccessThresh < 1 {
		bad("SuccessThresh", "%d, must be >= 1", c.SuccessThresh)
	}
	if c.Window < 2 || c.Window > 1<<16 {
		bad("Window", "%d outside [2, 65536]", c.Window)
	}
	if c.RoundBudget < 0 {
		bad("RoundBudget", "%v, must be >= 0 (0: no budget)", c.RoundBudget)
	}
	if c.MaxConcurrentRounds < 0 {
		bad("MaxConcurrentRounds", "%d, must be >= 0 (0: no limit)", c.MaxConcurrentRounds)
	}
	if c.AcquireRounds < 0 || c.AcquireRounds > 1000 {
		bad("AcquireRounds", "%d outside [0, 1000] (0: 3)", c.AcquireRounds)
	}
	if c.ChecksPerPeriod < 0 || c.ChecksPerPeriod > 128 {
		bad("ChecksPerPeriod", "%d outside [0, 128]", c.ChecksPerPeriod)
	}
	if c.MaxProbeRetries < 0 || c.MaxProbeRetries > 1000 {
		bad("MaxProbeRetries", "%d outside [0, 1000]", c.MaxProbeRetries)
	}
}
