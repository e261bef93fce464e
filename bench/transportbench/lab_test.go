package transportbench

import (
	"context"
	"testing"
	"time"

	"github.com/gclock/gclock/bench/workload"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/transport"
)

// needLab skips the test, saying why, when this process cannot build a lab
// (as the lab's own tests do).
func needLab(t *testing.T) {
	t.Helper()
	if why := netlab.SkipReason(); why != "" {
		t.Skip(why)
	}
}

// TestLab runs the page experiment briefly: both modes, one
// loss rate, every page delivered, and ACK omission writes fewer datagrams.
func TestLab(t *testing.T) {
	needLab(t)
	// Concurrent: beside other packages' concurrent labs under `go test
	// ./...` (what it checks holds under load). Up may still wait for the
	// lab package's measurements (about a minute), so the limit covers
	// that wait and the minute this run takes.
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cfg := transport.DefaultConfig()
	cfg.MinRTO = 2 * time.Millisecond
	rows, err := Lab(ctx, LabConfig{
		Losses: []float64{0.02}, Delay: 50 * time.Microsecond, Warmup: 20, Endpoint: cfg, Seed: 3,
		Client:     workload.PageClientConfig{Requests: 200, Concurrency: 1, PageSize: transport.PageSize},
		Concurrent: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Mode != "ack-per-message" || rows[1].Mode != "ack-omission" {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		t.Logf("%+v", r)
		if r.Requests != 200 || r.Failed != 0 {
			t.Errorf("%s: %d completed, %d failed", r.Mode, r.Requests, r.Failed)
		}
		if r.Dropped == 0 || r.Frames < 200*6 {
			t.Errorf("%s: switch saw %d frames, dropped %d: the traffic did not cross the lossy switch", r.Mode, r.Frames, r.Dropped)
		}
	}
	if rows[1].Acks != 0 || rows[0].Acks < 400 {
		t.Errorf("ACKs: %d with ACK omission (want 0), %d with one per message (want >= 400)", rows[1].Acks, rows[0].Acks)
	}
	if rows[1].Messages >= rows[0].Messages {
		t.Errorf("ACK omission wrote %d datagrams, ACK per message %d: want fewer", rows[1].Messages, rows[0].Messages)
	}
}
