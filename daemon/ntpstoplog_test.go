package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/ntp"
)

// TestNTPStopLogJSON: the NTP server's stop line in a JSON log has its
// counters as fields (stats.answered a number), not a Go struct in a
// string. (issue 29)
func TestNTPStopLogJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a daemon for a second")
	}
	cfg := rtCluster(t, RealTimeReference)[0]
	cfg.Peers = cfg.Peers[:1]
	cfg.Reference.Order = []uint32{1}
	cfg.NTP.Listen = fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	var buf lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, slog.New(slog.NewJSONHandler(&buf, nil))) }()
	deadline := time.Now().Add(10 * time.Second)
	for answered := false; !answered; {
		qctx, qcancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := ntp.Query(qctx, cfg.NTP.Listen)
		qcancel()
		answered = err == nil
		if !answered && time.Now().After(deadline) {
			t.Fatalf("no NTP answer in 10 s: %v", err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var line struct {
			Msg   string         `json:"msg"`
			Stats map[string]any `json:"stats"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON line: %v: %s", err, sc.Bytes())
		}
		if line.Msg != "ntp server stopping" {
			continue
		}
		if n, ok := line.Stats["answered"].(float64); !ok || n < 1 {
			t.Errorf("stop line's stats.answered = %#v, want a number >= 1: %s", line.Stats["answered"], sc.Bytes())
		}
		return
	}
	t.Fatalf("no \"ntp server stopping\" line in the log:\n%s", buf.String())
}
