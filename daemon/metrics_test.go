package daemon

import (
	"context"
	"flag"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/internal/memnet"
	"github.com/prometheus/client_golang/prometheus"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

type fixedSnapshot Snapshot

func (f fixedSnapshot) Snapshot() Snapshot { return Snapshot(f) }

// goldenSnapshot is the fixed state the golden file shows: node 2 follows
// source 1 (selected) and source 3 (no round yet), and drives children 4
// and 5.
func goldenSnapshot() fixedSnapshot {
	return fixedSnapshot{
		Node: 2, Reference: 1, Status: "synced", Served: "realtime", ServedStatus: "synced", ServedMaxError: 27 * time.Microsecond, TakenAt: time.Date(2026, 11, 27, 12, 0, 0, 500_000_000, time.UTC),
		Offset:              -1234*time.Second - 567890123,
		EstimatedError:      1500 * time.Nanosecond,
		FrequencyAdjustment: 12.5e-6,
		SelfPeriod:          500 * time.Millisecond,
		Sources: []SourceStats{
			{ID: 1, Rounds: 42, EstimatorRestarts: 1, FrequencyBreaks: 1, RejectedCorrupt: 1, RejectedBelowFloor: 3, RejectedOneWayBelowFloor: 2, Selected: true, Samples: 24, Frequency: 12.25e-6, Skew: 0.03e-6,
				GlobalPeriod: 8 * time.Second, LastRoundAge: 2500 * time.Millisecond, LastOffset: -180 * time.Nanosecond,
				RMSOffset: 250 * time.Nanosecond, Differences: 41, ShortestRTT: 46 * time.Microsecond, SmoothedRTT: 52 * time.Microsecond,
				Line: "floor", ShapesDiffer: true, DelaySpreadUp: 3 * time.Microsecond, DelaySpreadDown: 12 * time.Microsecond,
				FloorMemory: 4500 * time.Millisecond, Span: 0.5, BodyStretch: 1.8, Wander: 0.0077, KalmanWeight: 0.4},
			{ID: 3, Silent: true, GlobalPeriod: time.Second, LastRoundAge: -1, ShortestRTT: -1, SmoothedRTT: -1},
		},
		Children: []ChildStats{{ID: 4, GlobalPeriod: 4 * time.Second, Rounds: 17, RoundsRepeated: 3, RoundsEarly: 1, RoundsCut: 5, ProbeRetries: 2, ProbesResent: 6, ShortestRTT: 48 * time.Microsecond, RoundPings: 480, ExchangePace: 310 * time.Microsecond},
			{ID: 5, GlobalPeriod: 2 * time.Second, ShortestRTT: -1}},
		Messages: []MessageCount{
			{Type: "probe", Direction: "received", Count: 126},
			{Type: "probe_reply", Direction: "sent", Count: 126},
			{Type: "err_report", Direction: "retransmitted", Count: 1},
		},
	}
}

// goldenSecurity: a node under a spoofer's attack (bad tags and replays),
// with a few engine rejections, that went unsynced -> synced -> degraded
// -> synced.
func goldenSecurity() SecuritySnapshot {
	return SecuritySnapshot{Node: 2,
		Drops:         map[string]uint64{"bad_tag": 120000, "replay": 3400, "stale_round": 2, "rejected_sample": 1},
		StatusChanges: map[string]uint64{"unsynced": 1, "synced": 2, "degraded": 1}}
}

// fixedBuild pins gclock_build_info for the golden file.
func fixedBuild(t *testing.T) {
	old := currentBuild
	currentBuild = func() buildLabels {
		return buildLabels{Version: "v0.0.0-test", Revision: "0123abc", GoVersion: "go1.26"}
	}
	t.Cleanup(func() { currentBuild = old })
}

// TestMetricsGolden scrapes the handler end to end and diffs the exposition
// (names, types, help, labels and values) against testdata/metrics.golden,
// as node_exporter's end-to-end test does (go test ./daemon -run
// MetricsGolden -update rewrites it).
func TestMetricsGolden(t *testing.T) {
	fixedBuild(t)
	h, err := metricsHandler(goldenSnapshot(), newSecurityCollector(goldenSecurity))
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
	h, err := metricsHandler(snap)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 500 {
		t.Errorf("duplicate series: status %d, want 500; body:\n%s", rec.Code, rec.Body)
	}
}

// The tracker's RMS is over the last rmsRounds differences, the last offset
// is the newest, and the smoothed RTT moves 1/8 of the way per round.
func TestMetricsRoundTracker(t *testing.T) {
	var rt roundTracker
	rtts := fakeRTT{1: 1000}
	ev := func(v float64) []engine.Event {
		return []engine.Event{{Kind: engine.EvSourcePeriod, Peer: 1, Value: 9}, {Kind: engine.EvGlobalResync, Peer: 1, Value: v}}
	}
	// 10 old rounds of 1000 ns pushed out by rmsRounds rounds of +-30 ns.
	for range 10 {
		rt.note(rtts, ev(1000))
	}
	for i := range rmsRounds {
		if i == 0 {
			rtts[1] = 1800
		}
		v := 30.0
		if i%2 == 1 {
			v = -30
		}
		rt.note(rtts, ev(v))
	}
	ss := SourceStats{ID: 1}
	rt.fill(&ss)
	if ss.Differences != rmsRounds || ss.RMSOffset != 30 || ss.LastOffset != -30 {
		t.Errorf("differences %d, rms %v, last %v; want %d, 30ns, -30ns", ss.Differences, ss.RMSOffset, ss.LastOffset, rmsRounds)
	}
	// SRTT: 1000 for 10 rounds, then rmsRounds rounds of 1800.
	want := 1800 - 800*math.Pow(1-srttGain, rmsRounds)
	if d := math.Abs(float64(ss.SmoothedRTT) - want); d > 1 {
		t.Errorf("smoothed RTT %v, want %.0f ns", ss.SmoothedRTT, want)
	}
	none := SourceStats{ID: 7}
	rt.fill(&none)
	if none.Differences != 0 || none.SmoothedRTT != -1 {
		t.Errorf("unknown source: %+v, want no differences and SmoothedRTT -1", none)
	}
}

type fakeRTT map[engine.NodeID]int64

func (f fakeRTT) LastRTT(id engine.NodeID) (int64, bool) { v, ok := f[id]; return v, ok }

// TestMetricsLive scrapes a follower of a two-daemon cluster: the chronyc
// tracking figures are there and plausible. The daemons run on
// internal/memnet in a testing/synctest bubble; the follower's metrics are
// called as a handler (fakeMetrics), with no socket.
func TestMetricsLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { metricsLive(t) })
}

func metricsLive(t *testing.T) {
	mn := memnet.New(1)
	mn.SetLink(memLink)
	var metrics fakeMetrics
	cfgs := memCluster(t, 2)
	cfgs[1].Metrics.Listen = "10.0.0.2:9100"
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, len(cfgs))
	for _, c := range cfgs {
		go func() { errs <- run(ctx, c, nil, fakeSys(mn, &metrics)) }()
	}
	defer func() {
		cancel()
		for range cfgs {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}()
	want := []string{
		`gclock_status{node="2",reference="1",status="synced"} 1`,
		`gclock_source_selected{node="2",source="1"} 1`,
		`gclock_reference_id{node="2"} 1`,
		"go_goroutines ",              // the Go collector
		"process_start_time_seconds ", // the process collector (Linux)
	}
	var body string
	deadline := time.Now().Add(15 * time.Second)
	for {
		body = ""
		metrics.mu.Lock()
		served := metrics.h[cfgs[1].Metrics.Listen] != nil
		metrics.mu.Unlock()
		if served {
			body = metrics.get(t, cfgs[1].Metrics.Listen, "/metrics")
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
			}
		}
		// Three rounds: the RMS has differences, the SRTT round trips.
		if missing == "" && metricValue(body, "gclock_source_rounds_total") >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2's metrics lack %q or 3 rounds after 15 s:\n%s", missing, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	now := unixSeconds(time.Now()) // the bubble's clock, the daemon's too
	for _, c := range []struct {
		name   string
		lo, hi float64
	}{
		{"gclock_last_update_timestamp_seconds", now - 5, now},
		{"gclock_rms_offset_seconds", 0, 1e-3},
		{"gclock_update_interval_seconds", 0.01, 10},
		{"gclock_residual_frequency_ratio", -1e-3, 1e-3},
		{"gclock_skew_ratio", 0, 1e-3},
		{"gclock_source_samples", 1, 1e6},
		{"gclock_source_shortest_rtt_seconds", 1e-7, 0.1},
		{"gclock_source_smoothed_rtt_seconds", 1e-7, 0.1},
		{"gclock_self_period_seconds", 1e-3, 100},
	} {
		v := metricValue(body, c.name)
		if math.IsNaN(v) || v < c.lo || v > c.hi {
			t.Errorf("%s = %v, want in [%g, %g]", c.name, v, c.lo, c.hi)
		}
	}
	if s, sm := metricValue(body, "gclock_source_shortest_rtt_seconds"), metricValue(body, "gclock_source_smoothed_rtt_seconds"); sm < s {
		t.Errorf("smoothed RTT %v below the shortest %v", sm, s)
	}
}

// metricValue is the value of the first series of name in an exposition,
// NaN if there is none.
func metricValue(body, name string) float64 {
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) {
			f := strings.Fields(rest)
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
				return v
			}
		}
	}
	return math.NaN()
}

// TestMetricsNodeLabel: the collectors that do not know the node (the NTP
// server's, real time's: extras) get the node label from metricsHandler.
func TestMetricsNodeLabel(t *testing.T) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "gclock_ntp_test", Help: "a test gauge"})
	h, err := metricsHandler(fixedSnapshot{Node: 7, Status: "synced"}, nodeLabelled{g, 7})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{`gclock_ntp_test{node="7"} 0`, `gclock_served_status{node="7",reason="",status="synced",timescale="reference"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
	if strings.Contains(body, "gclock_served_max_error_seconds") != true {
		t.Errorf("no gclock_served_max_error_seconds while synced")
	}
}

// withoutNodeLabel is a series name with its node label taken out.
func withoutNodeLabel(series string) string {
	i := strings.Index(series, `node="`)
	if i < 0 {
		return series
	}
	j := strings.IndexByte(series[i+6:], '"')
	if j < 0 {
		return series
	}
	out := series[:i] + series[i+6+j+1:]
	out = strings.Replace(out, "{,", "{", 1)
	out = strings.Replace(out, ",,", ",", 1)
	out = strings.Replace(out, ",}", "}", 1)
	return strings.TrimSuffix(out, "{}")
}
