package sim

import (
	"strings"
	"testing"
	"time"
)

func TestProgressLine(t *testing.T) {
	got := progressLine(int64(150*time.Second), int64(600*time.Second), 3_000_000, 10*time.Second)
	for _, want := range []string{" 25.0%", "2m30s of 10m0s simulated", "wall 10s", "eta 30s", "3000000 events (3e+05/s)"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q lacks %q", got, want)
		}
	}
	if got := progressLine(0, int64(time.Minute), 0, time.Second); !strings.Contains(got, "eta ?") {
		t.Errorf("no progress yet: %q", got)
	}
}
