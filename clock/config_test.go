package clock

import (
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/conf"
)

// wanderingConfig is an emulated clock with every term: offset, drift, a
// drift step, random walk and the sinusoidal wander, origin far from 0.
func wanderingConfig() EmulatedConfig {
	return EmulatedConfig{
		Offset: conf.Duration(3 * time.Millisecond), DriftPPM: 12.5,
		DriftSteps: []DriftStepConfig{{After: conf.Duration(20 * time.Second), DriftPPM: -4}},
		WanderPPM:  0.02, WanderStep: conf.Duration(time.Second),
		SinePPM: 1.5, SinePeriod: conf.Duration(60 * time.Second),
		Seed: 7, OriginRaw: 1_000_000_000_000,
	}
}

func TestEmulatedConfigParams(t *testing.T) {
	c := wanderingConfig()
	tests := []struct {
		name string
		cfg  EmulatedConfig
		want EmuParams
	}{
		{"zero", EmulatedConfig{}, EmuParams{}},
		{"every term", c, EmuParams{
			Origin: c.OriginRaw, Offset: 3_000_000, DriftPPM: 12.5,
			Steps:     []DriftStep{{At: c.OriginRaw + 20_000_000_000, DriftPPM: -4}},
			WanderPPM: 0.02, WanderStep: 1_000_000_000, SinePPM: 1.5, SinePeriod: 60_000_000_000, Seed: 7,
		}},
		{"granularity and jitter", EmulatedConfig{Granularity: 100, ReadJitter: 20, Seed: -1},
			EmuParams{Granularity: 100, JitterNs: 20, Seed: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cfg.Params()
			if got.Origin != tt.want.Origin || got.Offset != tt.want.Offset || got.DriftPPM != tt.want.DriftPPM ||
				got.WanderPPM != tt.want.WanderPPM || got.WanderStep != tt.want.WanderStep ||
				got.SinePPM != tt.want.SinePPM || got.SinePeriod != tt.want.SinePeriod ||
				got.Granularity != tt.want.Granularity || got.JitterNs != tt.want.JitterNs || got.Seed != tt.want.Seed ||
				len(got.Steps) != len(tt.want.Steps) {
				t.Fatalf("Params() = %+v, want %+v", got, tt.want)
			}
			for i := range got.Steps {
				if got.Steps[i] != tt.want.Steps[i] {
					t.Errorf("Steps[%d] = %+v, want %+v", i, got.Steps[i], tt.want.Steps[i])
				}
			}
		})
	}
}

// TestEmulatedConfigSineMatters checks that the sine term is large enough
// for the agreement tests of the daemon's and measure's clocks (which
// compare against New) to notice a copy that drops it: measure's own copy
// did, 0.5-3 us off after 30 s.
func TestEmulatedConfigSineMatters(t *testing.T) {
	c := wanderingConfig()
	with, err := c.New()
	if err != nil {
		t.Fatal(err)
	}
	c.SinePPM, c.SinePeriod = 0, 0
	without, err := c.New()
	if err != nil {
		t.Fatal(err)
	}
	at := c.OriginRaw + int64(30*time.Second)
	if d := with.Read(at) - without.Read(at); d > -100 && d < 100 {
		t.Errorf("sine term moves the clock by %d ns after 30 s, want >= 100 ns", d)
	}
}

func TestConfigCheck(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // "" ok, else a field named in the error
	}{
		{"raw", Config{Source: SourceRaw}, ""},
		{"emulated", Config{Source: SourceEmulated, Emulated: wanderingConfig()}, ""},
		{"unknown source", Config{Source: "sundial"}, "source"},
		{"raw with errors", Config{Source: SourceRaw, Emulated: EmulatedConfig{DriftPPM: 3}}, "emulated"},
		{"drift", Config{Source: SourceEmulated, Emulated: EmulatedConfig{DriftPPM: 2e5}}, "emulated.drift_ppm"},
		{"steps out of order", Config{Source: SourceEmulated, Emulated: EmulatedConfig{DriftSteps: []DriftStepConfig{{After: 5}, {After: 5}}}}, "emulated.drift_steps[1].after"},
		{"wander without step", Config{Source: SourceEmulated, Emulated: EmulatedConfig{WanderPPM: 1}}, "emulated.wander_step"},
		{"short sine", Config{Source: SourceEmulated, Emulated: EmulatedConfig{SinePPM: 1, WanderStep: conf.Duration(time.Second), SinePeriod: conf.Duration(time.Second)}}, "emulated.sine_period"},
		{"offset", Config{Source: SourceEmulated, Emulated: EmulatedConfig{Offset: conf.Duration(200 * 365 * 24 * time.Hour)}}, "emulated.offset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want+":")):
				t.Errorf("Validate() = %v, want an error on %s", err, tt.want)
			}
			if tt.want == "" && tt.cfg.Source == SourceEmulated {
				if _, err := tt.cfg.Emulated.New(); err != nil {
					t.Errorf("New() = %v after Validate passed", err)
				}
			}
		})
	}
}
