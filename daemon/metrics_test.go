package daemon

import (
	"flag"
	"io"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

type fixedSnapshot Snapshot

func (f fixedSnapshot) Snapshot() Snapshot { return Snapshot(f) }

// TestMetricsGolden scrapes the handler end to end and diffs the exposition
// against testdata/metrics.golden (go test ./daemon -run Golden -update).
func TestMetricsGolden(t *testing.T) {
	snap := fixedSnapshot{
		Node: 2, Reference: 1, Status: "synced",
		Offset:              -1234*time.Second - 567890123,
		EstimatedError:      1500 * time.Nanosecond,
		FrequencyAdjustment: 12.5e-6,
		Sources:             []SourceStats{{ID: 1, Rounds: 42, EstimatorRestarts: 1}},
		Children: []ChildStats{{ID: 4, GlobalPeriod: 4 * time.Second, Rounds: 17, RoundsRepeated: 3, ProbeRetries: 2, ShortestRTT: 48 * time.Microsecond},
			{ID: 5, GlobalPeriod: 2 * time.Second, ShortestRTT: -1}},
		Messages: []MessageCount{
			{Type: "probe", Direction: "received", Count: 126},
			{Type: "probe_reply", Direction: "sent", Count: 126},
			{Type: "err_report", Direction: "retransmitted", Count: 1},
		},
	}
	h, err := MetricsHandler(snap)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	got, _ := io.ReadAll(rec.Body)
	const golden = "testdata/metrics.golden"
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("metrics differ from %s (rerun with -update if intended):\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}

// A snapshot with a repeated series is reported as a scrape error, never a panic.
func TestMetricsDuplicateSeries(t *testing.T) {
	snap := fixedSnapshot{Node: 1, Status: "bogus", Messages: []MessageCount{
		{Type: "probe", Direction: "sent", Count: 1}, {Type: "probe", Direction: "sent", Count: 2}}}
	h, err := MetricsHandler(snap)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 500 {
		t.Errorf("duplicate series: status %d, want 500; body:\n%s", rec.Code, rec.Body)
	}
}
