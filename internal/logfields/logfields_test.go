package logfields

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"KernelStamps", "kernel_stamps"}, {"DupRequests", "dup_requests"}, {"KoD", "kod"},
		{"Sent", "sent"}, {"ChallengesRefused", "challenges_refused"}, {"RTT", "rtt"},
	} {
		if got := SnakeCase(tt.in); got != tt.want {
			t.Errorf("SnakeCase(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	type stats struct {
		Received, KoD uint64
		hidden        int
	}
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).Info("stop", "stats", Of(stats{Received: 7, KoD: 2, hidden: 1}))
	var line map[string]any
	if err := json.Unmarshal(b.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	got, _ := line["stats"].(map[string]any)
	if got["received"] != 7.0 || got["kod"] != 2.0 || len(got) != 2 {
		t.Errorf("stats logged as %v, want received 7 and kod 2 as numbers, nothing hidden", line["stats"])
	}
}
