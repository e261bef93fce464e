package ntp

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

// TestStatsLogValue: the server's counters log as JSON numbers, one key
// each, not as a Go struct in a string. (issue 29: the daemon's stop line
// was "stats":"{Received:3 Answered:3 ...}".)
func TestStatsLogValue(t *testing.T) {
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("stop", "stats", Stats{Received: 3, Answered: 2, KernelStamps: 1, WriteErrors: 4, KoD: 5})
	var line struct {
		Stats map[string]any `json:"stats"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	want := map[string]float64{"received": 3, "answered": 2, "refused": 0, "kernel_stamps": 1, "write_errors": 4, "kod": 5, "limited": 0}
	for k, v := range want {
		if got, ok := line.Stats[k].(float64); !ok || got != v {
			t.Errorf("stats.%s = %#v, want %v (line %s)", k, line.Stats[k], v, buf.Bytes())
		}
	}
}
