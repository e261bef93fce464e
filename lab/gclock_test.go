package lab

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/gtime"
)

// daemonEnv makes the test binary run `gclock daemon -config FILE` instead
// of the tests, so RunGclock can start daemons without a gclock binary.
const daemonEnv = "GCLAB_TEST_DAEMON"

func TestMain(m *testing.M) {
	if os.Getenv(daemonEnv) == "1" {
		os.Exit(runTestDaemon(os.Args[1:]))
	}
	if os.Getenv(spoofEnv) == "1" { // spoof_test.go
		os.Exit(runTestSpoofer(os.Args[1:]))
	}
	setParallel()
	code := m.Run()
	releaseHeld() // helpers_test.go
	os.Exit(code)
}

func runTestDaemon(args []string) int {
	if len(args) != 2 || args[0] != "-config" {
		slog.Error("test daemon: want -config FILE", "args", args)
		return 2
	}
	cfg, err := daemon.Load(args[1])
	if err != nil {
		slog.Error("test daemon", "err", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := daemon.Run(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		slog.Error("test daemon", "err", err)
		return 1
	}
	return 0
}

// TestRunGclock runs a short lab with a daemon per host and checks what
// the issue guarantees whatever the machine's load: every evaluation has
// the truth inside [earliest, latest], every host synchronised, and the
// traffic was counted. Accuracy is measured by `gclock lab` (docs/lab.md).
func TestRunGclock(t *testing.T) {
	l, gc := gclockLab(t, 3)
	gc.Duration, gc.Warmup = 20*time.Second, 8*time.Second
	gc.Trace, gc.Measurements = true, true
	res, err := l.RunGclock(context.Background(), gc)
	if err != nil {
		t.Fatalf("RunGclock: %v", err)
	}
	s := res.Summary
	t.Logf("median %d ns p99 %d ns max %d ns coverage %.4f width %.0f ns; rounds/s %.2f then %.2f; exchanges/s %.1f then %.1f",
		s.ErrorP50Ns, s.ErrorP99Ns, s.ErrorMaxNs, s.BoundCoverage, s.BoundWidthMeanNs,
		s.ConvergenceRoundsPerNodePerS, s.RoundsPerNodePerS, s.ConvergenceExchangesPerNodePerS, s.ExchangesPerNodePerS)
	if len(res.Nodes) != 3 || len(res.Clocks) != 3 {
		t.Fatalf("%d nodes, %d clocks, want 3", len(res.Nodes), len(res.Clocks))
	}
	for _, n := range res.Nodes {
		if n.BoundCoverage != 1 {
			t.Errorf("host %d: truth inside the bounds in %.4f of evaluations, want all", n.ID, n.BoundCoverage)
		}
		if n.UnsyncedShare != 0 || n.Evaluations == 0 {
			t.Errorf("host %d: %d synced evaluations, unsynced share %.3f after the warm-up", n.ID, n.Evaluations, n.UnsyncedShare)
		}
	}
	// A synchronised host is within its bounds, and the bounds are about a
	// round trip (~200 us here): an error of a millisecond would be a bug,
	// not a slow machine.
	if s.ErrorMaxNs > 1e6 {
		t.Errorf("max |error| %d ns after the warm-up", s.ErrorMaxNs)
	}
	if s.RoundsPerNodePerS <= 0 || s.ExchangesPerNodePerS <= 0 || s.ConvergenceRoundsPerNodePerS <= 0 {
		t.Errorf("traffic not counted: %+v", s)
	}
	// The clocks were emulated with the configured spread.
	for _, c := range res.Clocks {
		if !c.Emulated || c.DriftPPM < -gc.MaxDriftPPM || c.DriftPPM > gc.MaxDriftPPM {
			t.Errorf("clock %+v: want emulated within +-%v ppm", c, gc.MaxDriftPPM)
		}
	}
	if len(res.Series) == 0 {
		t.Error("no series with Trace set")
	}
	// The logged exchanges were replayed against the emulated clocks'
	// truth (limit.go): the replayed centre line lands near the live
	// daemons' figure (a wrong truth would be milliseconds off) and the
	// limit comes out beside it.
	if res.LimitError != "" || s.Limit == nil {
		t.Fatalf("no limit: %q", res.LimitError)
	}
	for _, n := range res.Nodes[1:] {
		f := n.Limit
		if f == nil {
			t.Errorf("host %d: no limit", n.ID)
			continue
		}
		t.Logf("host %d: live median %d ns, replayed %d ns; limit %.0f ns (%s), oracle %.0f ns", n.ID, n.ErrorP50Ns, f.ReplayP50Ns, f.LimitNs, f.LimitName, f.OracleNs)
		if f.Evaluations == 0 || f.ReplayP50Ns > 5000 || !(f.LimitNs > 0 && f.LimitNs < 50000) {
			t.Errorf("host %d: replayed median %d ns over %d evaluations, limit %.0f ns: want under 5 us and (0, 50 us)", n.ID, f.ReplayP50Ns, f.Evaluations, f.LimitNs)
		}
	}
	// The daemons' logs say they used kernel stamps.
	logs, err := os.ReadFile(res.Logs + "/h1.log")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "t3_kernel=") {
		t.Errorf("host 1 log has no stamp counts:\n%s", logs)
	}
}

func TestParseTraffic(t *testing.T) {
	const text = `# TYPE gclock_sync_messages_total counter
gclock_sync_messages_total{direction="sent",node="1",type="probe"} 90
gclock_sync_messages_total{direction="received",node="1",type="probe_reply"} 88
gclock_sync_messages_total{direction="sent",node="1",type="time_diff"} 3
# TYPE gclock_child_rounds_total counter
gclock_child_rounds_total{child="2",node="1"} 2
gclock_child_rounds_total{child="3",node="1"} 1
# TYPE gclock_child_rounds_cut_total counter
gclock_child_rounds_cut_total{child="2",node="1"} 1
gclock_child_rounds_cut_total{child="3",node="1"} 0
`
	tr, err := parseTraffic(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if !tr.ok || tr.messages != 93 || tr.exchanges != 90 || tr.rounds != 3 || tr.cut != 1 {
		t.Errorf("parseTraffic = %+v, want 93 messages, 90 exchanges, 3 rounds, 1 cut", tr)
	}
	if _, err := parseTraffic(strings.NewReader("gclock_x{ 1\n")); err == nil {
		t.Error("malformed metrics parsed without error")
	}
}

func TestEvaluator(t *testing.T) {
	gc := DefaultGclockConfig()
	e := newEvaluator(2, gc)
	truth := int64(1_000_000)
	// Host 1: three synced readings, one outside its bounds, one unsynced.
	e.add(1, 0, false, gtime.Time{Est: truth + 999, Earliest: truth, Latest: truth + 2000, Status: gtime.StatusSynced}, truth, true)
	e.add(1, 1, true, gtime.Time{Est: truth + 100, Earliest: truth - 50, Latest: truth + 250, Status: gtime.StatusSynced}, truth, true)
	e.add(1, 2, true, gtime.Time{Est: truth - 300, Earliest: truth - 400, Latest: truth - 10, Status: gtime.StatusSynced}, truth, true)
	e.add(1, 3, true, gtime.Time{Est: truth, Earliest: truth - 100, Latest: truth + 100, Status: gtime.StatusStale}, truth, true)
	e.add(1, 4, true, gtime.Time{Est: 0, Earliest: -1 << 62, Latest: 1 << 62, Status: gtime.StatusUnsynced}, truth, true)
	e.add(0, 4, true, gtime.Time{Est: truth, Earliest: truth, Latest: truth, Status: gtime.StatusSynced}, truth, true)
	// A synced read of a term whose scale is unknown is not judged.
	e.add(0, 5, true, gtime.Time{Est: truth, Earliest: truth + 5, Latest: truth + 9, Status: gtime.StatusSynced}, truth, false)
	w := []traffic{{ok: true, exchanges: 10, rounds: 1, messages: 21}, {ok: true}}
	f := []traffic{{ok: true, exchanges: 40, rounds: 3, messages: 81}, {ok: true, messages: 2}}
	r := e.result(w, f, 10, 20)
	s := r.Summary
	if r.SyncedOutside != 1 || r.SyncedUnjudged != 1 {
		t.Errorf("synced outside %d, unjudged %d: want 1 and 1", r.SyncedOutside, r.SyncedUnjudged)
	}
	if s.Evaluations != 3 || s.ErrorMaxNs != 300 || s.ErrorP50Ns != 100 {
		t.Errorf("summary %+v: want 3 evaluations, max 300, p50 100", s)
	}
	// Coverage is of the synced reads (one of two held the truth); over
	// every read with an estimate (package eval's definition, the
	// simulator's), the stale one held it too: 2 of 3. The unsynced read
	// has no estimate, and its unbounded bounds prove nothing.
	if s.BoundCoverage != 0.5 || s.BoundCoverageAll != 2.0/3 || s.UnsyncedShare != 0.25 {
		t.Errorf("coverage %v (all %v) unsynced %v, want 0.5 (2/3) and 0.25", s.BoundCoverage, s.BoundCoverageAll, s.UnsyncedShare)
	}
	if sh := s.StatusShare; sh["synced"] != 0.5 || sh["stale"] != 0.25 || sh["unsynced"] != 0.25 {
		t.Errorf("status shares %v, want synced 0.5, stale 0.25, unsynced 0.25", sh)
	}
	// Not synced from at = 3 to at = 4 (ns), plus the evaluation interval.
	if want := float64(1+gc.EvalEvery.Nanoseconds()) / 1e9; s.LongestNotSyncedS != want {
		t.Errorf("longest not synced %v s, want %v", s.LongestNotSyncedS, want)
	}
	if s.ExchangesPerNodePerS != 30.0/1/20 || s.ConvergenceExchangesPerNodePerS != 10.0/10 || s.RoundsPerNodePerS != 2.0/20 {
		t.Errorf("rates %+v", s)
	}
	if s.MessagesPerNodePerS != 62.0/2/20 {
		t.Errorf("messages/node/s %v, want %v", s.MessagesPerNodePerS, 62.0/2/20)
	}
}

// Each read is judged against the scale of the term it claims, as that
// term's reference defines it on its own clock.
func TestTermScales(t *testing.T) {
	offset := func(ns int64) *hostClock {
		c, err := (daemon.EmulatedClockConfig{Offset: daemon.Duration(ns), OriginRaw: 1}).New()
		if err != nil {
			t.Fatal(err)
		}
		return &hostClock{emu: c}
	}
	clocks := []*hostClock{offset(0), offset(3_000_000), offset(-2_000_000)}
	ts := newTermScales()
	const raw = int64(10_000_000_000)
	if g, ok := ts.truth(0, raw, clocks); ok || g != raw {
		t.Errorf("nothing seen: %d, %v; want host 0's clock %d, not known", g, ok, raw)
	}
	ts.learn(1, gtime.Scale{Term: 0})       // a follower's page defines nothing
	ts.learn(0, gtime.Scale{Defined: true}) // term 0: host 0's clock
	// Term 4: host 1 froze its estimate of host 0's clock at its local
	// time raw+3 ms, 2 ppm fast.
	frozen := gtime.Scale{Term: 4, Defined: true, X0: raw + 3_000_000, Y0: raw + 150, Skew: 2e-6}
	ts.learn(1, frozen)
	tests := []struct {
		term uint32
		at   int64
		want int64
		ok   bool
	}{
		{0, raw + 1e9, raw + 1e9, true},
		{4, raw, raw + 150, true},
		{4, raw + 1e9, raw + 1e9 + 150 + 2000, true},
		{3, raw, raw + 150, false}, // unknown: the newest known term's scale
	}
	for _, tt := range tests {
		if g, ok := ts.truth(tt.term, tt.at, clocks); g != tt.want || ok != tt.ok {
			t.Errorf("term %d at %d: %d (%v), want %d (%v)", tt.term, tt.at, g, ok, tt.want, tt.ok)
		}
	}
	ts.learn(1, frozen)
	if ts.redefined != 0 {
		t.Errorf("the same definition again counted as %d redefinitions", ts.redefined)
	}
	ts.learn(1, gtime.Scale{Term: 4, Defined: true}) // restarted within term 4: its clock
	if g, _ := ts.truth(4, raw, clocks); ts.redefined != 1 || g != raw+3_000_000 {
		t.Errorf("after a redefinition: %d (%d redefinitions), want host 1's clock %d and 1", g, ts.redefined, raw+3_000_000)
	}
}

// The frugal configuration keeps the budget in single probe/reply
// exchanges by construction: one exchange per resync, never repeated, at
// most one resync a second and, once the period has grown, one per 5 s.
func TestFrugalConfig(t *testing.T) {
	c, err := daemon.Load("testdata/frugal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sync
	if s.PingsPerRound != 1 {
		t.Errorf("pings_per_round %d, want 1", s.PingsPerRound)
	}
	if s.NetworkLatencyErrorThresh < daemon.Duration(time.Second) {
		t.Errorf("network_latency_error_thresh %v: rounds may be repeated (a second exchange)", s.NetworkLatencyErrorThresh)
	}
	if s.InitialGlobalPeriod < daemon.Duration(time.Second) {
		t.Errorf("initial_global_period %v: more than one resync a second", s.InitialGlobalPeriod)
	}
	// Halvings never go below min_global_period once the period has
	// reached it (engine: an initial period below the minimum).
	if s.MinGlobalPeriod < daemon.Duration(5*time.Second) {
		t.Errorf("min_global_period %v: more than 0.2 resyncs a second once converged", s.MinGlobalPeriod)
	}
	if s.Estimator != "center" {
		t.Errorf("estimator %q, want center (the lab's)", s.Estimator)
	}
}
