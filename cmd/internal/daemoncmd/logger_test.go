package daemoncmd

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon"
)

func TestNewLogger(t *testing.T) {
	for _, tc := range []struct {
		format string
		json   bool
	}{{"", false}, {daemon.LogText, false}, {daemon.LogJSON, true}} {
		var buf bytes.Buffer
		l := NewLogger(&buf, tc.format, slog.LevelInfo)
		l.Debug("hidden")
		l.Info("daemon started", "node", 2)
		out := strings.TrimSpace(buf.String())
		if strings.Contains(out, "hidden") || strings.Count(out, "\n") != 0 {
			t.Errorf("format %q: want one line at info level, got %q", tc.format, out)
		}
		var m map[string]any
		err := json.Unmarshal([]byte(out), &m)
		if tc.json {
			if err != nil || m["msg"] != "daemon started" || m["node"] != 2.0 || m["level"] != "INFO" {
				t.Errorf("format json: %q (%v)", out, err)
			}
		} else if err == nil || !strings.Contains(out, `msg="daemon started" node=2`) {
			t.Errorf("format %q: want a key=value line, got %q", tc.format, out)
		}
	}
}

func TestWarnTimescale(t *testing.T) {
	for _, tc := range []struct {
		clock, mode string
		want        []string
	}{
		{daemon.ClockRaw, daemon.RealTimeReference, nil},
		{daemon.ClockRaw, daemon.RealTimeNone, []string{"level=INFO", "not UTC"}},
		{daemon.ClockEmulated, daemon.RealTimeReference, []string{"level=WARN", "clock.source is emulated"}},
	} {
		var buf bytes.Buffer
		c := daemon.DefaultConfig()
		c.Clock.Source, c.RealTime.Mode = tc.clock, tc.mode
		warnTimescale(slog.New(slog.NewTextHandler(&buf, nil)), c)
		if tc.want == nil && buf.Len() > 0 {
			t.Errorf("%s/%s: %q, want nothing", tc.clock, tc.mode, buf.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("%s/%s: %q lacks %q", tc.clock, tc.mode, buf.String(), w)
			}
		}
	}
}

type testStatus int

type nodeID uint32 // as engine.NodeID

func (s testStatus) String() string { return [...]string{"unsynced", "synced"}[s] }

// TestLoggerReadable: each key once per line (the engine adds node=ID to a
// logger that has it), enums by name and durations as "1.5s" in both formats
// (issue 19: JSON lines repeated "node", printed "from":0,"to":1 and raw ns).
func TestLoggerReadable(t *testing.T) {
	for _, format := range []string{daemon.LogText, daemon.LogJSON} {
		var buf bytes.Buffer
		l := NewLogger(&buf, format, slog.LevelInfo).With("node", 2)
		l = l.With("node", nodeID(2)) // the engine's With (a named type) on the daemon's logger
		l.Info("status changed", "node", 2, "from", testStatus(0), "to", testStatus(1), "after", 1500*time.Millisecond, "peer", 3)
		out := strings.TrimSpace(buf.String())
		if n := strings.Count(out, "node"); n != 1 {
			t.Errorf("%s: node %d times in %q, want once", format, n, out)
		}
		if format == daemon.LogJSON {
			var m map[string]any
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			if m["from"] != "unsynced" || m["to"] != "synced" || m["after"] != "1.5s" || m["node"] != 2.0 || m["peer"] != 3.0 {
				t.Errorf("json: %q", out)
			}
		} else if !strings.Contains(out, "from=unsynced to=synced after=1.5s") {
			t.Errorf("text: %q", out)
		}
	}
	// Another value for the same key is not the same fact: kept.
	var buf bytes.Buffer
	NewLogger(&buf, daemon.LogText, slog.LevelInfo).With("node", 2).Info("m", "node", 5)
	if !strings.Contains(buf.String(), "node=2 node=5") {
		t.Errorf("a different value was dropped: %q", buf.String())
	}
}
