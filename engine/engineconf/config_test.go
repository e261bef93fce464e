package engineconf

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
)

func TestDefaultIsTheEngines(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default invalid: %v", err)
	}
	got, err := c.ToEngine()
	if err != nil {
		t.Fatal(err)
	}
	if want := engine.DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default().ToEngine() =\n%+v\nwant engine.DefaultConfig\n%+v", got, want)
	}
}

func TestToEngineUnits(t *testing.T) {
	c := Default()
	c.LargeDriftPPM, c.MaxDriftPPM, c.MaxSlewPPM, c.MaxFreqStepPPM = 30, 150, 100, 3
	c.MaxWanderPPMPerS = 0.5
	c.HullMinDelay, c.HullMaxSpan = Duration(3*time.Microsecond), -1
	c.Window, c.MaxConcurrentRounds, c.RetryRTTs, c.MaxProbeRetries = 0, 0, 2, 5
	e, err := c.ToEngine()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"LargeDrift", e.LargeDrift, 30e-6}, {"MaxDrift", e.MaxDrift, 150e-6},
		{"MaxSlewRate", e.MaxSlewRate, 100e-6}, {"MaxFreqStep", e.MaxFreqStep, 3e-6},
		{"MaxWander (per ns, per ns)", e.MaxWander, 0.5e-6 / 1e9}, {"RetryRTTs", e.RetryRTTs, 2},
	} {
		if d := f.got - f.want; d > 1e-12*f.want || d < -1e-12*f.want {
			t.Errorf("%s = %g, want %g", f.name, f.got, f.want)
		}
	}
	if e.HullMinDelay != 3*time.Microsecond || e.HullMaxSpan != -1 {
		t.Errorf("hull: min delay %v, max span %v", e.HullMinDelay, e.HullMaxSpan)
	}
	if e.Window != engine.DefaultConfig().Window || e.MaxConcurrentRounds != 0 || e.MaxProbeRetries != 5 {
		t.Errorf("window %d (0: the engine's), max concurrent %d (0: no limit), retries %d", e.Window, e.MaxConcurrentRounds, e.MaxProbeRetries)
	}
}

func TestCheckNamesTheKey(t *testing.T) {
	for _, tt := range []struct {
		key string
		set func(*Config)
	}{
		{"estimator", func(c *Config) { c.Estimator = "kalman" }},
		{"pings_per_round", func(c *Config) { c.PingsPerRound = 0 }},
		{"pings_per_round", func(c *Config) { c.PingsPerRound = 1001 }},
		{"difference_thresh", func(c *Config) { c.DifferenceThresh = 0 }},
		{"probe_timeout", func(c *Config) { c.ProbeTimeout = -1 }},
		{"stale_after", func(c *Config) { c.StaleAfter = 0 }},
		{"network_latency_error_thresh", func(c *Config) { c.NetworkLatencyErrorThresh = -1 }},
		{"granularity", func(c *Config) { c.Granularity = -1 }},
		{"hull_min_delay", func(c *Config) { c.HullMinDelay = -1 }},
		{"min_global_period", func(c *Config) { c.MinGlobalPeriod = c.MaxGlobalPeriod + 1 }},
		{"initial_global_period", func(c *Config) { c.InitialGlobalPeriod = c.MaxGlobalPeriod + 1 }},
		{"min_self_period", func(c *Config) { c.MinSelfPeriod = c.MaxSelfPeriod + 1 }},
		{"error_thresh", func(c *Config) { c.ErrorThresh = 0 }},
		{"max_slew_ppm", func(c *Config) { c.MaxSlewPPM = 0 }},
		{"max_drift_ppm", func(c *Config) { c.MaxDriftPPM = -1 }},
		{"max_wander_ppm_per_s", func(c *Config) { c.MaxWanderPPMPerS = 2e9 }},
		{"max_freq_step_ppm", func(c *Config) { c.MaxFreqStepPPM = 1001 }},
		{"large_drift_ppm", func(c *Config) { c.LargeDriftPPM = nan() }},
		{"retry_rtts", func(c *Config) { c.RetryRTTs = 0.5 }},
		{"success_thresh", func(c *Config) { c.SuccessThresh = 0 }},
		{"acquire_rounds", func(c *Config) { c.AcquireRounds = 1001 }},
		{"window", func(c *Config) { c.Window = 1 }},
		{"window", func(c *Config) { c.Window = 1<<16 + 1 }},
		{"max_concurrent_rounds", func(c *Config) { c.MaxConcurrentRounds = -1 }},
		{"max_probe_retries", func(c *Config) { c.MaxProbeRetries = -1 }},
		{"round_budget", func(c *Config) { c.RoundBudget = -1 }},
	} {
		t.Run(tt.key, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			err := c.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.key || !errors.Is(err, ErrConfig) {
				t.Fatalf("Validate = %v, want a FieldError on %s wrapping ErrConfig", err, tt.key)
			}
			if _, err := c.ToEngine(); err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Errorf("ToEngine = %v, want an error naming %s", err, tt.key)
			}
		})
	}
}

func nan() float64 { z := 0.0; return z / z }

// TestCheckSpeaksTheFilesWords: the engine's rules (engine.Config.Check)
// come back in the file's words: the key, the key's unit (ppm, not a
// fraction), the other key a rule compares with, the meaning of 0.
func TestCheckSpeaksTheFilesWords(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"ppm", func(c *Config) { c.LargeDriftPPM = 600000 }, "large_drift_ppm: 600000 outside [0, 500000]"},
		{"ppm per s", func(c *Config) { c.MaxWanderPPMPerS = 2e9 }, "max_wander_ppm_per_s: 2e+09 outside [0, 1e+09]"},
		{"open range", func(c *Config) { c.MaxSlewPPM = 0 }, "max_slew_ppm: 0 outside (0, 500000]"},
		{"other key", func(c *Config) { c.MinGlobalPeriod = Duration(20 * time.Second) }, "min_global_period: 20s above max_global_period 16s"},
		{"zero default", func(c *Config) { c.Window = 1 }, "window: 1 outside [2, 65536] (0: the engine's default)"},
		{"duration", func(c *Config) { c.ProbeTimeout = 0 }, "probe_timeout: 0s, must be > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			err := c.Validate()
			if err == nil || err.Error() != tt.want {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestEveryEngineFieldBound: every key of the section names its
// engine.Config field (engine tag), no field is bound twice, and every
// engine.Config field is a key unless it is listed here with the reason.
func TestEveryEngineFieldBound(t *testing.T) {
	notKeys := map[string]string{
		"ID": "the topology", "Sources": "the topology", "Children": "the topology",
		"FloorSlack":      "the engine's own tuning of the floor estimator",
		"ReadUncertainty": "the daemon's measured clock reads",
		"SilentPeriods":   "the engine's own silence rule",
	}
	ct, et := reflect.TypeFor[Config](), reflect.TypeFor[engine.Config]()
	bound := map[string]string{}
	for i := range ct.NumField() {
		f := ct.Field(i)
		tag, ok := f.Tag.Lookup("engine")
		if f.Name == "Profile" {
			// Not a setting: the name of the settings read first (profile.go).
			if ok {
				t.Errorf("Config.Profile has an engine tag")
			}
			continue
		}
		if !ok {
			t.Errorf("Config.%s (yaml %q) has no engine tag: bind it to its engine.Config field", f.Name, f.Tag.Get("yaml"))
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if prev, dup := bound[name]; dup {
			t.Errorf("engine.Config.%s bound by both Config.%s and Config.%s", name, prev, f.Name)
		}
		bound[name] = f.Name
	}
	for i := range et.NumField() {
		name := et.Field(i).Name
		_, isKey := bound[name]
		_, listed := notKeys[name]
		switch {
		case isKey && listed:
			t.Errorf("engine.Config.%s is a key and listed as not one", name)
		case !isKey && !listed:
			t.Errorf("engine.Config.%s is no key of the section: add a tagged field to Config, or list it in notKeys with the reason", name)
		}
	}
	if len(bindings) != len(bound) {
		t.Errorf("%d bindings for %d tagged fields", len(bindings), len(bound))
	}
}

// TestDefaultRoundTrips: every key set to a value other than its default
// reaches its engine field with the unit applied, and Default read back
// from engine.DefaultConfig gives the YAML units.
func TestDefaultRoundTrips(t *testing.T) {
	d := Default()
	for _, tt := range []struct {
		key  string
		got  float64
		want float64
	}{
		{"large_drift_ppm", d.LargeDriftPPM, 20}, {"max_slew_ppm", d.MaxSlewPPM, 500},
		{"max_drift_ppm", d.MaxDriftPPM, 200}, {"max_wander_ppm_per_s", d.MaxWanderPPMPerS, 0.01},
		{"max_freq_step_ppm", d.MaxFreqStepPPM, 2},
	} {
		if diff := tt.got - tt.want; diff > 1e-9*tt.want || diff < -1e-9*tt.want {
			t.Errorf("Default %s = %g, want %g", tt.key, tt.got, tt.want)
		}
	}
	if d.DifferenceThresh.D() != 2*time.Microsecond || d.Estimator != "minrtt" || d.Window != 256 {
		t.Errorf("Default: difference_thresh %v, estimator %q, window %d", d.DifferenceThresh, d.Estimator, d.Window)
	}
}
