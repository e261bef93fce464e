package clock

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gclock/gclock/internal/conf"
)

// Clock sources of a Config.
const (
	SourceRaw      = "raw"      // CLOCK_MONOTONIC_RAW
	SourceEmulated = "emulated" // CLOCK_MONOTONIC_RAW seen through an Emulated (the lab)
)

// Config is a daemon's local clock as written in YAML (its clock:
// section): the raw clock, or an emulated one.
type Config struct {
	Source   string         `yaml:"source"` // raw | emulated
	Emulated EmulatedConfig `yaml:"emulated"`
}

// EmulatedConfig is an emulated clock's errors as written in YAML, the
// one section from which the daemon builds its clock and the evaluators
// (the lab's, measure's node) rebuild the same one: Params is the one
// conversion. Only an evaluator may know them; the engine never sees them.
type EmulatedConfig struct {
	Offset     conf.Duration     `yaml:"offset"`
	DriftPPM   float64           `yaml:"drift_ppm"`
	DriftSteps []DriftStepConfig `yaml:"drift_steps,omitempty"`
	WanderPPM  float64           `yaml:"wander_ppm"` // std dev of the random-walk frequency change per wander_step
	WanderStep conf.Duration     `yaml:"wander_step"`
	// SinePPM and SinePeriod add a sinusoidal frequency change (a room's
	// temperature cycle), sampled every wander_step (EmuParams).
	SinePPM     float64       `yaml:"sine_ppm,omitempty"`
	SinePeriod  conf.Duration `yaml:"sine_period,omitempty"`
	Granularity conf.Duration `yaml:"granularity"`
	ReadJitter  conf.Duration `yaml:"read_jitter"`
	Seed        int64         `yaml:"seed"`
	// OriginRaw is the CLOCK_MONOTONIC_RAW reading (ns) at which the
	// emulated clock reads origin_raw + offset, so that an evaluator can
	// rebuild the same clock; 0 means the moment the daemon starts.
	OriginRaw int64 `yaml:"origin_raw"`
}

// DriftStepConfig changes the emulated drift After the clock's origin.
type DriftStepConfig struct {
	After    conf.Duration `yaml:"after"`
	DriftPPM float64       `yaml:"drift_ppm"`
}

// Params converts c into an Emulated's parameters, with the origin at
// c.OriginRaw (drift steps counted from it). It is the one conversion:
// the daemon, the lab's evaluator and measure's node all build their
// clock with it, so they agree to the nanosecond.
func (c EmulatedConfig) Params() EmuParams {
	p := EmuParams{
		Origin: c.OriginRaw, Offset: int64(c.Offset), DriftPPM: c.DriftPPM,
		WanderPPM: c.WanderPPM, WanderStep: int64(c.WanderStep),
		SinePPM: c.SinePPM, SinePeriod: int64(c.SinePeriod),
		Granularity: int64(c.Granularity), JitterNs: int64(c.ReadJitter), Seed: c.Seed,
	}
	for _, s := range c.DriftSteps {
		p.Steps = append(p.Steps, DriftStep{At: c.OriginRaw + int64(s.After), DriftPPM: s.DriftPPM})
	}
	return p
}

// New builds the emulated clock of c (NewEmulated(c.Params())).
func (c EmulatedConfig) New() (*Emulated, error) { return NewEmulated(c.Params()) }

// Check reports every bad field of c through add, with the field path
// relative to the section (emulated.drift_ppm).
func (c *Config) Check(add func(field, format string, args ...any)) {
	m := c.Emulated
	switch c.Source {
	case SourceRaw:
		if m.Offset != 0 || m.DriftPPM != 0 || len(m.DriftSteps) > 0 || m.WanderPPM != 0 || m.SinePPM != 0 || m.Granularity != 0 || m.ReadJitter != 0 {
			add("emulated", "set, but source is %q (use emulated)", c.Source)
		}
		return
	case SourceEmulated:
	default:
		add("source", "unknown source %q (raw, emulated)", c.Source)
		return
	}
	ppm := func(field string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > MaxDriftPPM {
			add(field, "%v: must be finite, |v| <= %g", v, float64(MaxDriftPPM))
		}
	}
	ppm("emulated.drift_ppm", m.DriftPPM)
	var prev conf.Duration = -1
	for i, s := range m.DriftSteps {
		f := fmt.Sprintf("emulated.drift_steps[%d]", i)
		if s.After <= prev || s.After < 0 {
			add(f+".after", "%v: must be >= 0 and strictly increasing", s.After)
		}
		prev = s.After
		ppm(f+".drift_ppm", s.DriftPPM)
	}
	if math.IsNaN(m.WanderPPM) || m.WanderPPM < 0 || m.WanderPPM > MaxDriftPPM {
		add("emulated.wander_ppm", "%v: must be in [0, %g]", m.WanderPPM, float64(MaxDriftPPM))
	}
	if m.WanderStep < 0 || ((m.WanderPPM > 0 || m.SinePPM > 0) && m.WanderStep == 0) {
		add("emulated.wander_step", "%v: must be > 0 when wander_ppm or sine_ppm > 0", m.WanderStep)
	}
	if math.IsNaN(m.SinePPM) || m.SinePPM < 0 || m.SinePPM > MaxDriftPPM {
		add("emulated.sine_ppm", "%v: must be in [0, %g]", m.SinePPM, float64(MaxDriftPPM))
	}
	if m.SinePPM > 0 && m.SinePeriod < 2*m.WanderStep {
		add("emulated.sine_period", "%v: must be at least two wander_steps when sine_ppm > 0", m.SinePeriod)
	}
	if m.Granularity < 0 {
		add("emulated.granularity", "%v, must be >= 0", m.Granularity)
	}
	if m.ReadJitter < 0 {
		add("emulated.read_jitter", "%v, must be >= 0", m.ReadJitter)
	}
	if m.Offset.D() > 100*365*24*time.Hour || m.Offset.D() < -100*365*24*time.Hour {
		add("emulated.offset", "%v: must be within 100 years", m.Offset)
	}
}

// Validate checks the section alone and returns every problem found
// (joined), each naming its field relative to the section (source,
// emulated.drift_ppm).
func (c *Config) Validate() error {
	var list []error
	c.Check(func(field, format string, args ...any) {
		list = append(list, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	})
	return errors.Join(list...)
}
