package engineconf

import (
	"fmt"
	"math"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/internal/conf"
)

// Config is the engine's parameters as written in YAML: Liao's constants
// in their paper's names in lower case, the clock model, the estimators'
// windows and the hull's options (engine.Config's fields, units in the
// names: _ppm, _ppm_per_s; durations with their unit). The simulator's
// scenario embeds it as engine:, the daemon's configuration as sync:.
//
// Where 0 says "choose for me", the embedding chooses: the simulator
// derives max_drift_ppm, max_wander_ppm_per_s, max_freq_step_ppm and
// granularity from its clock model when they are 0; the daemon passes them
// to the engine as written.
type Config struct {
	Estimator string `yaml:"estimator" json:"estimator"` // minrtt | regression | hull | center
	// Adaptive: Liao's adaptive periods; false keeps the periods fixed
	// (the paper's baseline).
	Adaptive                  bool     `yaml:"adaptive" json:"adaptive"`
	PingsPerRound             int      `yaml:"pings_per_round" json:"pings_per_round"`
	NetworkLatencyErrorThresh Duration `yaml:"network_latency_error_thresh" json:"network_latency_error_thresh"`
	DifferenceThresh          Duration `yaml:"difference_thresh" json:"difference_thresh"`
	// ErrorThresh is the accumulated err/difference_thresh that halves a
	// period.
	ErrorThresh         float64  `yaml:"error_thresh" json:"error_thresh"`
	SuccessThresh       int      `yaml:"success_thresh" json:"success_thresh"`
	MinGlobalPeriod     Duration `yaml:"min_global_period" json:"min_global_period"`
	MaxGlobalPeriod     Duration `yaml:"max_global_period" json:"max_global_period"`
	InitialGlobalPeriod Duration `yaml:"initial_global_period" json:"initial_global_period"`
	MinSelfPeriod       Duration `yaml:"min_self_period" json:"min_self_period"`
	MaxSelfPeriod       Duration `yaml:"max_self_period" json:"max_self_period"`
	LargeDriftPPM       float64  `yaml:"large_drift_ppm" json:"large_drift_ppm"`
	ProbeTimeout        Duration `yaml:"probe_timeout" json:"probe_timeout"`
	StaleAfter          Duration `yaml:"stale_after" json:"stale_after"`
	MaxSlewPPM          float64  `yaml:"max_slew_ppm" json:"max_slew_ppm"`
	// MaxDriftPPM and MaxWanderPPMPerS are what the engine assumes of the
	// clocks (engine.Config.MaxDrift, MaxWander).
	MaxDriftPPM      float64 `yaml:"max_drift_ppm" json:"max_drift_ppm"`
	MaxWanderPPMPerS float64 `yaml:"max_wander_ppm_per_s" json:"max_wander_ppm_per_s"`
	// MaxFreqStepPPM is the largest instant change of the frequency
	// between a node and its source that the bounds allow for
	// (engine.Config.MaxFreqStep); with max_wander_ppm_per_s it is the
	// clock model's stated limit on frequency change (docs/daemon.md,
	// "The clock model").
	MaxFreqStepPPM float64 `yaml:"max_freq_step_ppm" json:"max_freq_step_ppm"`
	// AcquireRounds is how many rounds in a row must agree with the clock
	// model before reads say synced (engine.Config.AcquireRounds; 0: the
	// engine's default).
	AcquireRounds int `yaml:"acquire_rounds" json:"acquire_rounds,omitempty"`
	// HullMinDelay is Jezequel's mu (4.3): a known lower bound on every
	// one-way delay (engine.Config.HullMinDelay). The hull's point sets are
	// brought together by it, which tightens the offset and drift bounds
	// from about the round trip to about the granularity. 0: causality
	// only.
	HullMinDelay Duration `yaml:"hull_min_delay,omitempty" json:"hull_min_delay,omitempty"`
	// HullMaxSpan limits the time span of the hull's samples
	// (engine.Config.HullMaxSpan): 0 chooses it after every round from the
	// round trip, the period and max_wander_ppm_per_s; negative keeps the
	// whole window.
	HullMaxSpan Duration `yaml:"hull_max_span,omitempty" json:"hull_max_span,omitempty"`
	// Granularity is the clock read granularity the hull assumes.
	Granularity Duration `yaml:"granularity" json:"granularity"`
	// Window is the rounds each estimator keeps (0: the engine's default).
	Window int `yaml:"window" json:"window,omitempty"`
	// ContinuousDrift applies the drift continuously instead of once per
	// self period.
	ContinuousDrift bool `yaml:"continuous_drift" json:"continuous_drift,omitempty"`
	// MaxConcurrentRounds is how many children a node syncs at once
	// (1 by default, Liao's node 0; 0: no limit).
	MaxConcurrentRounds int `yaml:"max_concurrent_rounds" json:"max_concurrent_rounds,omitempty"`
	// RetryRTTs and MaxProbeRetries: a probe whose reply has not come
	// after this many round trips (at least probe_timeout) is sent again,
	// up to max_probe_retries times.
	RetryRTTs       float64 `yaml:"retry_rtts" json:"retry_rtts"`
	MaxProbeRetries int     `yaml:"max_probe_retries" json:"max_probe_retries"`
	// DiscountDelay: an error report counts only the part of a projection
	// error that the exchange's queueing cannot explain
	// (engine.Config.DiscountDelay).
	DiscountDelay bool `yaml:"discount_delay" json:"discount_delay,omitempty"`
}

// Default is engine.DefaultConfig in YAML units, so that a file that says
// nothing runs the engine as its owner tuned it.
func Default() Config {
	e := engine.DefaultConfig()
	return Config{
		Estimator: e.Estimator, Adaptive: e.Adaptive, PingsPerRound: e.PingsPerRound,
		NetworkLatencyErrorThresh: Duration(e.NetworkLatencyErrorThresh),
		DifferenceThresh:          Duration(e.DifferenceThresh),
		ErrorThresh:               e.ErrorThresh, SuccessThresh: e.SuccessThresh,
		MinGlobalPeriod: Duration(e.MinGlobalPeriod), MaxGlobalPeriod: Duration(e.MaxGlobalPeriod),
		InitialGlobalPeriod: Duration(e.InitialGlobalPeriod),
		MinSelfPeriod:       Duration(e.MinSelfPeriod), MaxSelfPeriod: Duration(e.MaxSelfPeriod),
		LargeDriftPPM: e.LargeDrift * 1e6, ProbeTimeout: Duration(e.ProbeTimeout),
		StaleAfter: Duration(e.StaleAfter), MaxSlewPPM: e.MaxSlewRate * 1e6,
		MaxDriftPPM: e.MaxDrift * 1e6, MaxWanderPPMPerS: e.MaxWander * 1e15,
		MaxFreqStepPPM: e.MaxFreqStep * 1e6, AcquireRounds: e.AcquireRounds,
		HullMinDelay: Duration(e.HullMinDelay), HullMaxSpan: Duration(e.HullMaxSpan),
		Granularity: Duration(e.Granularity), Window: e.Window, ContinuousDrift: e.ContinuousDrift,
		MaxConcurrentRounds: e.MaxConcurrentRounds, RetryRTTs: e.RetryRTTs, MaxProbeRetries: e.MaxProbeRetries,
		DiscountDelay: e.DiscountDelay,
	}
}

// ErrConfig is wrapped by every error of Validate and ToEngine: the one
// configuration error, conf.ErrConfig.
var ErrConfig = conf.ErrConfig

// Check calls bad once per bad field, with the field's YAML key
// ("pings_per_round") and what is wrong with it; the caller prefixes the
// section ("sync.", "engine.") and collects.
func (c *Config) Check(bad func(field, format string, args ...any)) {
	switch c.Estimator {
	case "minrtt", "regression", "hull", "center":
	default:
		bad("estimator", "unknown estimator %q (minrtt, regression, hull, center)", c.Estimator)
	}
	if c.PingsPerRound < 1 || c.PingsPerRound > 256 {
		bad("pings_per_round", "%d outside [1, 256]", c.PingsPerRound)
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{
		{"difference_thresh", c.DifferenceThresh}, {"min_global_period", c.MinGlobalPeriod},
		{"max_global_period", c.MaxGlobalPeriod}, {"initial_global_period", c.InitialGlobalPeriod},
		{"min_self_period", c.MinSelfPeriod}, {"max_self_period", c.MaxSelfPeriod},
		{"probe_timeout", c.ProbeTimeout}, {"stale_after", c.StaleAfter},
	} {
		if d.v <= 0 {
			bad(d.name, "%v, must be > 0", d.v)
		}
	}
	for _, d := range []struct {
		name string
		v    Duration
	}{
		{"network_latency_error_thresh", c.NetworkLatencyErrorThresh},
		{"granularity", c.Granularity}, {"hull_min_delay", c.HullMinDelay},
	} {
		if d.v < 0 {
			bad(d.name, "%v, must be >= 0", d.v)
		}
	}
	if c.MinGlobalPeriod > c.MaxGlobalPeriod {
		bad("min_global_period", "%v above max_global_period %v", c.MinGlobalPeriod, c.MaxGlobalPeriod)
	} else if c.InitialGlobalPeriod > c.MaxGlobalPeriod {
		bad("initial_global_period", "%v above max_global_period %v", c.InitialGlobalPeriod, c.MaxGlobalPeriod)
	}
	if c.MinSelfPeriod > c.MaxSelfPeriod {
		bad("min_self_period", "%v above max_self_period %v", c.MinSelfPeriod, c.MaxSelfPeriod)
	}
	for _, f := range []struct {
		name      string
		v, lo, hi float64
		openLo    bool
	}{
		{"error_thresh", c.ErrorThresh, 0, 1e9, true},
		{"large_drift_ppm", c.LargeDriftPPM, 0, 5e5, false},
		{"max_slew_ppm", c.MaxSlewPPM, 0, 5e5, true},
		{"max_drift_ppm", c.MaxDriftPPM, 0, 5e5, false},
		{"max_wander_ppm_per_s", c.MaxWanderPPMPerS, 0, 1e9, false},
		{"max_freq_step_ppm", c.MaxFreqStepPPM, 0, 1000, false},
		{"retry_rtts", c.RetryRTTs, 1, 1e6, false},
	} {
		if math.IsNaN(f.v) || f.v < f.lo || f.v > f.hi || (f.openLo && f.v == f.lo) {
			b := "["
			if f.openLo {
				b = "("
			}
			bad(f.name, "%g outside %s%g, %g]", f.v, b, f.lo, f.hi)
		}
	}
	if c.SuccessThresh < 1 {
		bad("success_thresh", "%d, must be >= 1", c.SuccessThresh)
	}
	if c.AcquireRounds < 0 || c.AcquireRounds > 1000 {
		bad("acquire_rounds", "%d outside [0, 1000] (0: the engine's default)", c.AcquireRounds)
	}
	if c.Window != 0 && (c.Window < 2 || c.Window > 1<<16) {
		bad("window", "%d outside [2, 65536] (0: the engine's default)", c.Window)
	}
	if c.MaxConcurrentRounds < 0 {
		bad("max_concurrent_rounds", "%d, must be >= 0 (0: no limit)", c.MaxConcurrentRounds)
	}
	if c.MaxProbeRetries < 0 || c.MaxProbeRetries > 1000 {
		bad("max_probe_retries", "%d outside [0, 1000]", c.MaxProbeRetries)
	}
}

// FieldError is one bad key of Validate (conf.FieldError, the field
// without its section: pings_per_round).
type FieldError = conf.FieldError

// Validate checks every key and returns all problems (joined), each a
// *FieldError naming the key.
func (c *Config) Validate() error {
	var e conf.Errors
	c.Check(e.Add)
	return e.Err()
}

// ToEngine converts c into an engine.Config (engine.DefaultConfig with c's
// values; ID, Sources and Children left for the caller to fill from the
// topology) and checks it: c's keys (Validate), then the engine's own rules.
// The conversion is returned even when the error is not nil.
func (c Config) ToEngine() (engine.Config, error) {
	e := engine.DefaultConfig()
	e.Estimator, e.Adaptive, e.PingsPerRound = c.Estimator, c.Adaptive, c.PingsPerRound
	e.NetworkLatencyErrorThresh = c.NetworkLatencyErrorThresh.D()
	e.DifferenceThresh = c.DifferenceThresh.D()
	e.ErrorThresh, e.SuccessThresh = c.ErrorThresh, c.SuccessThresh
	e.MinGlobalPeriod, e.MaxGlobalPeriod = c.MinGlobalPeriod.D(), c.MaxGlobalPeriod.D()
	e.InitialGlobalPeriod = c.InitialGlobalPeriod.D()
	e.MinSelfPeriod, e.MaxSelfPeriod = c.MinSelfPeriod.D(), c.MaxSelfPeriod.D()
	e.LargeDrift = c.LargeDriftPPM / 1e6
	e.ProbeTimeout, e.StaleAfter = c.ProbeTimeout.D(), c.StaleAfter.D()
	e.MaxSlewRate = c.MaxSlewPPM / 1e6
	e.MaxDrift = c.MaxDriftPPM / 1e6
	e.MaxWander = c.MaxWanderPPMPerS / 1e15 // per ns, per ns
	e.MaxFreqStep = c.MaxFreqStepPPM / 1e6
	e.AcquireRounds = c.AcquireRounds
	e.HullMinDelay, e.HullMaxSpan = c.HullMinDelay.D(), c.HullMaxSpan.D()
	e.Granularity = c.Granularity.D()
	if c.Window != 0 {
		e.Window = c.Window
	}
	e.ContinuousDrift = c.ContinuousDrift
	e.MaxConcurrentRounds = c.MaxConcurrentRounds
	e.RetryRTTs, e.MaxProbeRetries = c.RetryRTTs, c.MaxProbeRetries
	e.DiscountDelay = c.DiscountDelay
	if err := c.Validate(); err != nil {
		return e, err
	}
	if err := e.Validate(); err != nil {
		return e, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return e, nil
}
