package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/engine/realtime"
)

type snap daemon.Snapshot

func (s snap) Snapshot() daemon.Snapshot { return daemon.Snapshot(s) }

// viewServer serves a daemon's view of a follower (node 2, source 1
// selected, source 3 silent, child 4) as the daemon's metrics server does.
func viewServer() http.Handler {
	s := snap{Node: 2, Reference: 1, ReferenceChanges: 1, Status: "synced",
		Offset: 1_234_567_890_123_456_789, EstimatedError: 1500 * time.Nanosecond, Width: 3 * time.Microsecond,
		FrequencyAdjustment: 12.5e-6, SelfPeriod: time.Second,
		Sources: []daemon.SourceStats{
			{ID: 3, Silent: true, LastRoundAge: -1, ShortestRTT: -1, SmoothedRTT: -1},
			{ID: 1, Selected: true, Rounds: 42, Samples: 8, Frequency: 12.5e-6, Skew: 0.02e-6,
				GlobalPeriod: 16 * time.Second, LastRoundAge: 3200 * time.Millisecond, LastOffset: -12, RMSOffset: 34,
				Differences: 5, ShortestRTT: 180 * time.Microsecond, SmoothedRTT: 210 * time.Microsecond,
				Line: "blend", BodyLine: "midpoints", BodyWeight: 0.62, ShapesDiffer: true, DelaySpreadUp: 9800 * time.Nanosecond, DelaySpreadDown: 10200 * time.Nanosecond,
				BodyMemory: 12 * time.Second, FloorMemory: 3 * time.Second, Span: 0.25, BodyStretch: 1.8, Wander: 0.0077, KalmanWeight: 0.62},
		},
		Children: []daemon.ChildStats{{ID: 4, GlobalPeriod: 8 * time.Second, Rounds: 7, ShortestRTT: 150 * time.Microsecond, RoundPings: 480, ExchangePace: 310 * time.Microsecond}},
	}
	sec := func() daemon.SecuritySnapshot {
		return daemon.SecuritySnapshot{Node: 2, Drops: map[string]uint64{"replay": 3, "bad_mac": 2}}
	}
	mux := http.NewServeMux()
	mux.Handle(daemon.ControlPath, daemon.ViewHandler(s, sec))
	return mux
}

// TestViewCommands: gclock tracking, sources and sourcestats print the
// daemon's view as chronyc does, over TCP and a Unix socket, and -json
// keeps the offset beyond 2^53 exact.
func TestViewCommands(t *testing.T) {
	tcp := httptest.NewServer(viewServer())
	defer tcp.Close()
	sock := filepath.Join(t.TempDir(), "metrics.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	usrv := &http.Server{Handler: viewServer()}
	go usrv.Serve(l)
	defer usrv.Close()

	for _, server := range []string{strings.TrimPrefix(tcp.URL, "http://"), "unix:" + sock} {
		for _, tt := range []struct {
			cmd  string
			want []string
		}{
			{"tracking", []string{"Reference       : node 1 (1 reference changes)", "Status          : synced",
				"Bound           : +-1.5µs (width 3µs", "Frequency       : +12.500 ppm", "Source          : node 1",
				"Last offset     : -12ns", "Last exchange   : 3.2s ago", "Update interval : 16s", "Dropped packets : 5"}},
			{"sources", []string{"* 1 ok 42 3.2s", "3 silent 0 -", "180µs", "210µs", "-12ns", "4             7", "8s 480 310µs"}},
			{"sourcestats", []string{"1         8        0      +12.500      0.020         -12ns         34ns  blend 62% body midpoints, shapes differ, memory 12s, newest 0.25 of the window, body memory x1.80 (wander 0.0077 ppm/sqrt(s)), Kalman 62% (9.8µs/10.2µs)", "3         0        0       +0.000          -"}},
		} {
			var out, errOut bytes.Buffer
			if err := runView(tt.cmd, []string{"-server", server}, &out, &errOut); err != nil {
				t.Fatalf("%s -server %s: %v (%s)", tt.cmd, server, err, errOut.String())
			}
			norm := func(s string) string { // columns: compare words, not padding
				var lines []string
				for _, l := range strings.Split(s, "\n") {
					lines = append(lines, strings.Join(strings.Fields(l), " "))
				}
				return strings.Join(lines, "\n")
			}
			for _, w := range tt.want {
				if !strings.Contains(norm(out.String()), norm(w)) {
					t.Errorf("%s -server %s: output lacks %q:\n%s", tt.cmd, server, w, out.String())
				}
			}
		}
		var out bytes.Buffer
		if err := runView("tracking", []string{"-server", server, "-json"}, &out, &out); err != nil {
			t.Fatal(err)
		}
		var v daemon.View
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("-json: %v\n%s", err, out.String())
		}
		if v.OffsetNs != 1_234_567_890_123_456_789 || !strings.Contains(out.String(), `"offset_ns": "1234567890123456789"`) {
			t.Errorf("-json offset %d, want 1234567890123456789 as a string:\n%s", v.OffsetNs, out.String())
		}
		if len(v.Sources) != 2 || v.Sources[0].ID != 1 || v.Drops["replay"] != 3 {
			t.Errorf("-json view %+v", v)
		}
	}
}

// TestViewErrors: no daemon, a wrong server and bad flags say what and where.
func TestViewErrors(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	for _, tt := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{[]string{"-server", "127.0.0.1:1"}, false, "asking the daemon at 127.0.0.1:1"},
		{[]string{"-server", strings.TrimPrefix(notFound.URL, "http://")}, false, "404"},
		{[]string{"-server", "nocolon"}, true, `-server "nocolon"`},
		{[]string{"-timeout", "0s"}, true, "-timeout 0s"},
		{[]string{"extra"}, true, `unexpected argument "extra"`},
		{[]string{"-config", "/nonexistent/gclock.yaml"}, false, "/nonexistent/gclock.yaml"},
	} {
		var out bytes.Buffer
		err := runView("tracking", tt.args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err %v, want %q in it", tt.args, err, tt.want)
			continue
		}
		if isUsage, _ := usageIs(err); isUsage != tt.usage {
			t.Errorf("%v: usage error %v, want %v", tt.args, isUsage, tt.usage)
		}
	}
}

func usageIs(err error) (bool, bool) { return usage.Is(err) }

// TestTrackingUTC: with real_time, gclock tracking leads with the served
// UTC's block (status and why, leap, stratum, reference, root delay and
// dispersion, bounds) as chronyc tracking does, and global time's status
// comes after it: a node whose global time is synced but whose UTC is not
// says unsynced first.
func TestTrackingUTC(t *testing.T) {
	for _, tt := range []struct {
		name string
		s    snap
		want []string
	}{
		{"unsynchronised upstream", snap{Node: 1, Reference: 1, Status: "synced", Served: "realtime", ServedStatus: "unsynced",
			ServedReason: "upstream-unsynchronised", HaveUpstream: true, Upstream: realtime.Upstream{Known: true, MaxErr: 16e9}},
			[]string{"UTC             : realtime: unsynced (upstream-unsynchronised)", "UTC bound       : none (not synced)",
				"Leap status     : Not synchronised", "Global time     : synced"}},
		{"chronyd upstream", snap{Node: 2, Reference: 1, Status: "synced", Served: "realtime", ServedStatus: "synced",
			ServedMaxError: 27 * time.Microsecond, HaveUpstream: true, Upstream: realtime.Upstream{Known: true, Synced: true, MaxErr: 20_000,
				Stratum: 2, RefID: 0xC0A80001, RootDelay: 30_000, RootDisp: 5_000, Leap: realtime.LeapInsert}},
			[]string{"UTC             : realtime: synced", "UTC bound       : +-27µs", "Leap status     : Insert second",
				"Stratum         : 2", "UTC reference   : C0A80001", "Root delay      : 30µs", "Root dispersion : 5µs",
				"Upstream bound  : +-20µs", "Global time     : synced"}},
	} {
		var b bytes.Buffer
		mux := http.NewServeMux()
		mux.Handle(daemon.ControlPath, daemon.ViewHandler(tt.s, func() daemon.SecuritySnapshot { return daemon.SecuritySnapshot{} }))
		srv := httptest.NewServer(mux)
		v, _, err := fetchView(strings.TrimPrefix(srv.URL, "http://"), time.Second)
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		printTracking(&b, v)
		for _, w := range tt.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: no %q in\n%s", tt.name, w, b.String())
			}
		}
	}
}
