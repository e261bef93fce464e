package daemoncmd

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

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
