package daemon

import (
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gclock/gclock/clock"
)

// TestLocalClockIsTheConfigs checks that the daemon's emulated clock is
// the one clock.EmulatedConfig builds, which the lab's evaluator and
// measure's node rebuild (measure.TestLocalClockIsTheDaemons), including a
// zero origin_raw taken from the raw clock at start.
func TestLocalClockIsTheConfigs(t *testing.T) {
	const origin = 1_000_000_000_000
	emu := clock.EmulatedConfig{
		Offset: Duration(3 * time.Millisecond), DriftPPM: 12.5,
		DriftSteps: []DriftStep{{After: Duration(20 * time.Second), DriftPPM: -4}},
		WanderPPM:  0.02, WanderStep: Duration(time.Second), SinePPM: 1.5, SinePeriod: Duration(time.Minute), Seed: 7,
	}
	for _, given := range []int64{0, origin} {
		raw := int64(origin)
		cfg := emu
		cfg.OriginRaw = given
		lc, err := newLocalClock(ClockConfig{Source: ClockEmulated, Emulated: cfg}, func() int64 { return raw })
		if err != nil {
			t.Fatal(err)
		}
		cfg.OriginRaw = origin
		want, err := cfg.New()
		if err != nil {
			t.Fatal(err)
		}
		for _, after := range []time.Duration{0, time.Second, 30 * time.Second, 90 * time.Second} {
			raw = origin + int64(after)
			if got, w := lc.now(), want.Read(raw); got != w {
				t.Errorf("origin_raw %d, after %v: daemon's clock %d, the config's %d (%+d ns)", given, after, got, w, got-w)
			}
		}
	}
}

// TestEmulatedClockYAMLRoundTrip checks that a clock section written as
// YAML (as the lab writes each daemon's config) and loaded again builds
// the same clock: no term is lost on the way.
func TestEmulatedClockYAMLRoundTrip(t *testing.T) {
	c := DefaultConfig()
	c.Clock = ClockConfig{Source: ClockEmulated, Emulated: clock.EmulatedConfig{
		Offset: Duration(-7 * time.Millisecond), DriftPPM: -30,
		DriftSteps: []DriftStep{{After: Duration(10 * time.Second), DriftPPM: 5}},
		WanderPPM:  0.01, WanderStep: Duration(2 * time.Second), SinePPM: 2, SinePeriod: Duration(40 * time.Second),
		Granularity: 10, Seed: 11, OriginRaw: 5_000_000_000,
	}}
	b, err := yaml.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.Clock.Emulated.New()
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.Clock.Emulated.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{0, 15 * time.Second, 70 * time.Second} {
		r := int64(5_000_000_000) + int64(after)
		if g, w := got.Read(r), want.Read(r); g != w {
			t.Errorf("after %v: loaded clock %d, written %d", after, g, w)
		}
	}
}
