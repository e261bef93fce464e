package measure

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/clock"
)

// TestLocalClockIsTheDaemons checks that the node's clock, rebuilt from a
// daemon config, is the clock the config describes (clock.EmulatedConfig,
// which the daemon builds too), the sinusoidal wander included: measure's
// own copy once dropped it and was 0.5-3 us off after 30 s.
func TestLocalClockIsTheDaemons(t *testing.T) {
	const origin = 1_000_000_000_000
	file := filepath.Join(t.TempDir(), "gclock.yaml")
	yaml := `sync:
  estimator: hull
clock:
  source: emulated
  emulated:
    offset: 3ms
    drift_ppm: 12.5
    drift_steps: [{after: 20s, drift_ppm: -4}]
    wander_ppm: 0.02
    wander_step: 1s
    sine_ppm: 1.5
    sine_period: 60s
    seed: 7
    origin_raw: 1000000000000
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	local, err := localClock(file)
	if err != nil {
		t.Fatal(err)
	}
	want, err := clock.EmulatedConfig{
		Offset: 3_000_000, DriftPPM: 12.5, DriftSteps: []clock.DriftStepConfig{{After: 20_000_000_000, DriftPPM: -4}},
		WanderPPM: 0.02, WanderStep: 1_000_000_000, SinePPM: 1.5, SinePeriod: 60_000_000_000, Seed: 7, OriginRaw: origin,
	}.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{0, time.Second, 30 * time.Second, 90 * time.Second, 300 * time.Second} {
		r := origin + int64(after)
		if got, w := local(r), want.Read(r); got != w {
			t.Errorf("after %v: node clock %d, daemon's %d (%+d ns)", after, got, w, got-w)
		}
	}
}

func TestClockSectionErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, yaml, want string
	}{
		{"no clock section", "sync: {estimator: hull}\n", ""},
		{"raw", "clock: {source: raw}\n", ""},
		{"unknown source", "node: {id: 1}\nclock:\n  source: atomic\n", "line 3: clock.source"},
		{"unknown key", "clock:\n  source: emulated\n  emulated: {drift: 3}\n", "line 3: clock.emulated.drift"},
		{"no origin", "clock:\n  source: emulated\n  emulated: {drift_ppm: 3}\n", "origin_raw is 0"},
		{"syntax", "clock: [\n", "gclock.yaml"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, "gclock.yaml")
			if err := os.WriteFile(file, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := localClock(file)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("localClock: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("localClock: %v, want an error with %q", err, tt.want)
			}
		})
	}
}
