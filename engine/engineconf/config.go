package engineconf

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/internal/conf"
)

// Config is the engine's parameters as written in YAML: Liao's constants
// in their paper's names in lower case, the clock model, the estimators'
// windows and the hull's options (units in the names: _ppm, _ppm_per_s;
// durations with their unit). Each field's engine tag names the
// engine.Config field it sets and the unit between the two (binding):
// engine.Config is the source of truth for the defaults and the meaning,
// Config only says how a key is written. The simulator's scenario embeds it
// as engine:, the daemon's configuration as sync:.
//
// Where 0 says "choose for me", the embedding chooses: the simulator
// derives max_drift_ppm, max_wander_ppm_per_s, max_freq_step_ppm and
// granularity from its clock model when they are 0; the daemon passes them
// to the engine as written.
type Config struct {
	// Profile names the shipped profile (deploy/profiles/NAME.yaml) the
	// section starts from: its keys are read first, and the keys written
	// beside profile override them (profile.go). Not in JSON: a result
	// carries the keys the profile set.
	Profile   string `yaml:"profile,omitempty" json:"-"`
	Estimator string `yaml:"estimator" json:"estimator" engine:"Estimator"` // minrtt | regression | hull | center
	// Adaptive: Liao's adaptive periods; false keeps the periods fixed
	// (the paper's baseline).
	Adaptive      bool `yaml:"adaptive" json:"adaptive" engine:"Adaptive"`
	PingsPerRound int  `yaml:"pings_per_round" json:"pings_per_round" engine:"PingsPerRound"`
	// RampPingsPerRound: exchanges a round while the period is below
	// min_global_period (the convergence ramp), and the least a round
	// shrinks to when the node's round slots are short; 0: pings_per_round
	// always.
	RampPingsPerRound         int      `yaml:"ramp_pings_per_round" json:"ramp_pings_per_round,omitempty" engine:"RampPingsPerRound"`
	NetworkLatencyErrorThresh Duration `yaml:"network_latency_error_thresh" json:"network_latency_error_thresh" engine:"NetworkLatencyErrorThresh"`
	DifferenceThresh          Duration `yaml:"difference_thresh" json:"difference_thresh" engine:"DifferenceThresh"`
	// ErrorThresh is the accumulated err/difference_thresh that halves a
	// period.
	ErrorThresh         float64  `yaml:"error_thresh" json:"error_thresh" engine:"ErrorThresh"`
	SuccessThresh       int      `yaml:"success_thresh" json:"success_thresh" engine:"SuccessThresh"`
	MinGlobalPeriod     Duration `yaml:"min_global_period" json:"min_global_period" engine:"MinGlobalPeriod"`
	MaxGlobalPeriod     Duration `yaml:"max_global_period" json:"max_global_period" engine:"MaxGlobalPeriod"`
	InitialGlobalPeriod Duration `yaml:"initial_global_period" json:"initial_global_period" engine:"InitialGlobalPeriod"`
	MinSelfPeriod       Duration `yaml:"min_self_period" json:"min_self_period" engine:"MinSelfPeriod"`
	MaxSelfPeriod       Duration `yaml:"max_self_period" json:"max_self_period" engine:"MaxSelfPeriod"`
	LargeDriftPPM       float64  `yaml:"large_drift_ppm" json:"large_drift_ppm" engine:"LargeDrift,ppm"`
	ProbeTimeout        Duration `yaml:"probe_timeout" json:"probe_timeout" engine:"ProbeTimeout"`
	StaleAfter          Duration `yaml:"stale_after" json:"stale_after" engine:"StaleAfter"`
	MaxSlewPPM          float64  `yaml:"max_slew_ppm" json:"max_slew_ppm" engine:"MaxSlewRate,ppm"`
	// MaxDriftPPM and MaxWanderPPMPerS are what the engine assumes of the
	// clocks (engine.Config.MaxDrift, MaxWander).
	MaxDriftPPM      float64 `yaml:"max_drift_ppm" json:"max_drift_ppm" engine:"MaxDrift,ppm"`
	MaxWanderPPMPerS float64 `yaml:"max_wander_ppm_per_s" json:"max_wander_ppm_per_s" engine:"MaxWander,ppm_per_s"`
	// MaxFreqStepPPM is the largest instant change of the frequency
	// between a node and its source that the bounds allow for
	// (engine.Config.MaxFreqStep); with max_wander_ppm_per_s it is the
	// clock model's stated limit on frequency change (docs/daemon.md,
	// "The clock model").
	MaxFreqStepPPM float64 `yaml:"max_freq_step_ppm" json:"max_freq_step_ppm" engine:"MaxFreqStep,ppm"`
	// AcquireRounds is how many rounds in a row must agree with the clock
	// model before reads say synced (engine.Config.AcquireRounds; 0: the
	// engine's default).
	AcquireRounds int `yaml:"acquire_rounds" json:"acquire_rounds,omitempty" engine:"AcquireRounds"`
	// HullMinDelay is Jezequel's mu (4.3): a known lower bound on every
	// one-way delay (engine.Config.HullMinDelay). The hull's point sets are
	// brought together by it, which tightens the offset and drift bounds
	// from about the round trip to about the granularity. 0: causality
	// only.
	HullMinDelay Duration `yaml:"hull_min_delay,omitempty" json:"hull_min_delay,omitempty" engine:"HullMinDelay"`
	// HullMaxSpan limits the time span of the hull's samples
	// (engine.Config.HullMaxSpan): 0 chooses it after every round from the
	// round trip, the period and max_wander_ppm_per_s; negative keeps the
	// whole window.
	HullMaxSpan Duration `yaml:"hull_max_span,omitempty" json:"hull_max_span,omitempty" engine:"HullMaxSpan"`
	// Granularity is the clock read granularity the hull assumes.
	Granularity Duration `yaml:"granularity" json:"granularity" engine:"Granularity"`
	// Window is the rounds each estimator keeps (0: the engine's default).
	Window int `yaml:"window" json:"window,omitempty" engine:"Window,zero_default"`
	// ContinuousDrift applies the drift continuously instead of once per
	// self period.
	ContinuousDrift bool `yaml:"continuous_drift" json:"continuous_drift,omitempty" engine:"ContinuousDrift"`
	// MaxConcurrentRounds is how many children a node syncs at once
	// (1 by default, Liao's node 0; 0: no limit).
	MaxConcurrentRounds int `yaml:"max_concurrent_rounds" json:"max_concurrent_rounds,omitempty" engine:"MaxConcurrentRounds"`
	// RetryRTTs and MaxProbeRetries: a probe whose reply has not come
	// after this many round trips (at least probe_timeout) is sent again,
	// up to max_probe_retries times.
	RetryRTTs       float64 `yaml:"retry_rtts" json:"retry_rtts" engine:"RetryRTTs"`
	MaxProbeRetries int     `yaml:"max_probe_retries" json:"max_probe_retries" engine:"MaxProbeRetries"`
	// RoundBudget: a round that has probed this long ends with the
	// exchanges it has (engine.Config.RoundBudget); 0: no budget.
	RoundBudget Duration `yaml:"round_budget,omitempty" json:"round_budget,omitempty" engine:"RoundBudget"`
	// DiscountDelay: an error report counts only the part of a projection
	// error that the exchange's queueing cannot explain
	// (engine.Config.DiscountDelay).
	DiscountDelay bool `yaml:"discount_delay" json:"discount_delay,omitempty" engine:"DiscountDelay"`
	// CenterMemory (rounds): the centre line's memory
	// (engine.Config.CenterMemory); 0 weighs the whole window the same.
	CenterMemory float64 `yaml:"center_memory,omitempty" json:"center_memory,omitempty" engine:"CenterMemory"`
	// CenterFloorOnly: the centre line on the fastest exchanges alone
	// (engine.Config.CenterFloorOnly), for comparisons.
	CenterFloorOnly bool `yaml:"center_floor_only,omitempty" json:"center_floor_only,omitempty" engine:"CenterFloorOnly"`
	// CenterNoBreaks: the centre line does not follow frequency breaks
	// (engine.Config.CenterNoBreaks), for comparisons.
	CenterNoBreaks bool `yaml:"center_no_breaks,omitempty" json:"center_no_breaks,omitempty" engine:"CenterNoBreaks"`
	// ChecksPerPeriod: check exchanges between rounds, per global period
	// (engine.Config.ChecksPerPeriod); 0: none.
	ChecksPerPeriod int `yaml:"checks_per_period" json:"checks_per_period,omitempty" engine:"ChecksPerPeriod"`
}

// Default is engine.DefaultConfig in YAML units, so that a file that says
// nothing runs the engine as its owner tuned it.
func Default() Config {
	var c Config
	e := engine.DefaultConfig()
	cv, ev := reflect.ValueOf(&c).Elem(), reflect.ValueOf(&e).Elem()
	for _, b := range bindings {
		sec, eng := cv.Field(b.sec), ev.Field(b.eng)
		if b.scale != 0 {
			sec.SetFloat(eng.Float() * b.scale)
		} else {
			sec.Set(eng.Convert(sec.Type()))
		}
	}
	return c
}

// ErrConfig is wrapped by every error of Validate and ToEngine: the one
// configuration error, conf.ErrConfig.
var ErrConfig = conf.ErrConfig

// Check calls bad once per bad field, with the field's YAML key
// ("pings_per_round") and what is wrong with it; the caller prefixes the
// section ("sync.", "engine.") and collects. The rules are the engine's
// own (engine.Config.Check, on the conversion): Check only says them in
// the file's words, the key for the engine's field name and the key's
// unit for the engine's.
func (c *Config) Check(bad func(field, format string, args ...any)) {
	e := c.convert()
	e.Check(func(field, format string, args ...any) {
		b, ok := byEngine[field]
		key := field
		if ok {
			key = b.key
			if b.zeroDefault {
				format += " (0: the engine's default)"
			}
		}
		out := make([]any, len(args))
		for i, a := range args {
			switch v := a.(type) {
			case engine.Field:
				if o, ok := byEngine[string(v)]; ok {
					a = o.key
				}
			case float64:
				if ok && b.scale != 0 {
					a = v * b.scale
				}
			}
			out[i] = a
		}
		bad(key, format, out...)
	})
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
// topology) and checks it (Validate). The conversion is returned even when
// the error is not nil.
func (c Config) ToEngine() (engine.Config, error) {
	return c.convert(), c.Validate()
}

// convert is engine.DefaultConfig with c's values, unchecked.
func (c Config) convert() engine.Config {
	e := engine.DefaultConfig()
	cv, ev := reflect.ValueOf(&c).Elem(), reflect.ValueOf(&e).Elem()
	for _, b := range bindings {
		sec, eng := cv.Field(b.sec), ev.Field(b.eng)
		switch {
		case b.zeroDefault && sec.IsZero():
			// 0 in the file: keep the engine's default.
		case b.scale != 0:
			eng.SetFloat(sec.Float() / b.scale)
		default:
			eng.Set(sec.Convert(eng.Type()))
		}
	}
	return e
}

// binding is one key of Config bound to its engine.Config field by the
// field's engine tag: "Name" (the same value; a Duration becomes a
// time.Duration), "Name,ppm" (ppm in the file, a fraction in the engine),
// "Name,ppm_per_s" (ppm per second in the file, per ns per ns in the
// engine), and ",zero_default" (0 in the file keeps the engine's default).
// The tags are the one place a key meets its engine field: Default and
// ToEngine both walk them, so a new key is a field of engine.Config and a
// tagged field here (TestEveryEngineFieldBound keeps the two in step).
type binding struct {
	key         string  // the YAML key
	sec, eng    int     // field indexes in Config and engine.Config
	scale       float64 // file value = engine value * scale; 0: the same value
	zeroDefault bool
}

// bindings are Config's engine tags, read once; byEngine the same by
// engine.Config field name.
var bindings = bind()

var byEngine = func() map[string]binding {
	m := make(map[string]binding, len(bindings))
	et := reflect.TypeFor[engine.Config]()
	for _, b := range bindings {
		m[et.Field(b.eng).Name] = b
	}
	return m
}()

func bind() []binding {
	var out []binding
	ct, et := reflect.TypeFor[Config](), reflect.TypeFor[engine.Config]()
	for i := range ct.NumField() {
		tag, ok := ct.Field(i).Tag.Lookup("engine")
		if !ok {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		f, ok := et.FieldByName(name)
		if !ok || len(f.Index) != 1 {
			panic(fmt.Sprintf("engineconf: %s's engine tag names %q, not a field of engine.Config", ct.Field(i).Name, name))
		}
		key, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ",")
		b := binding{key: key, sec: i, eng: f.Index[0]}
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "":
			case "ppm":
				b.scale = 1e6
			case "ppm_per_s":
				b.scale = 1e15 // ppm per second = 1e-6 / 1e9 per ns per ns
			case "zero_default":
				b.zeroDefault = true
			default:
				panic(fmt.Sprintf("engineconf: %s's engine tag: unknown option %q", ct.Field(i).Name, o))
			}
		}
		if b.scale == 0 && !ct.Field(i).Type.ConvertibleTo(f.Type) || b.scale != 0 && (ct.Field(i).Type.Kind() != reflect.Float64 || f.Type.Kind() != reflect.Float64) {
			panic(fmt.Sprintf("engineconf: %s (%s) cannot hold engine.Config.%s (%s)", ct.Field(i).Name, ct.Field(i).Type, name, f.Type))
		}
		out = append(out, b)
	}
	return out
}
