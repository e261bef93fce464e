package daemon

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon/statuspage"
)

func TestPeerPages(t *testing.T) {
	peers := []Peer{{ID: 1, Address: "10.1.0.1:3190"}, {ID: 2, Address: "[fd00::2]:3190"}, {ID: 3, Address: "node3:3190"}}
	for _, tc := range []struct {
		listen string
		peers  []Peer
		want   []statuspage.PeerPage
	}{
		{":9190", peers, []statuspage.PeerPage{{Node: 1, URL: "http://10.1.0.1:9190"}, {Node: 2, URL: "http://[fd00::2]:9190"}, {Node: 3, URL: "http://node3:9190"}}},
		{"0.0.0.0:9300", peers[:1], []statuspage.PeerPage{{Node: 1, URL: "http://10.1.0.1:9300"}}},
		{"", peers, nil},
		{"unix:/run/gclock.metrics", peers, nil},
		{"127.0.0.1:0", peers, nil},
		// Daemons on one host cannot share a port: no cluster view.
		{":9190", []Peer{{ID: 1, Address: "127.0.0.1:3190"}, {ID: 2, Address: "127.0.0.1:3191"}}, nil},
	} {
		c := DefaultConfig()
		c.Metrics.Listen, c.Peers = tc.listen, tc.peers
		if got := peerPages(c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("listen %q, peers %v: %v, want %v", tc.listen, tc.peers, got, tc.want)
		}
	}
}

func TestStatusSample(t *testing.T) {
	s := Snapshot{Node: 2, Reference: 1, Status: "synced", Offset: -3 * time.Millisecond, Width: 2500, FrequencyAdjustment: 12.5e-6,
		SelfPeriod: time.Second,
		Sources: []SourceStats{
			{ID: 1, Selected: true, GlobalPeriod: 4 * time.Second, Differences: 3, LastOffset: -120, RMSOffset: 90},
			{ID: 3, GlobalPeriod: 8 * time.Second, Differences: 2, LastOffset: 999, RMSOffset: 999},
		},
		Children: []ChildStats{{ID: 4, GlobalPeriod: 2 * time.Second}}}
	got := statusSample(s)
	want := statuspage.Sample{Node: 2, Reference: 1, Status: "synced", OffsetNs: -3_000_000, WidthNs: 2500, DriftPPM: 12.5,
		LastOffsetNs: -120, RMSOffsetNs: 90,
		Periods: []statuspage.Period{{Name: "self", Seconds: 1}, {Name: "source 1", Seconds: 4}, {Name: "source 3", Seconds: 8}, {Name: "child 4", Seconds: 2}}}
	if got.DriftPPM-want.DriftPPM > 1e-9 || want.DriftPPM-got.DriftPPM > 1e-9 {
		t.Errorf("drift %v ppm, want %v", got.DriftPPM, want.DriftPPM)
	}
	got.DriftPPM = want.DriftPPM
	if !reflect.DeepEqual(got, want) {
		t.Errorf("statusSample:\n got %+v\nwant %+v", got, want)
	}
}

// TestHealthEndpoints: /healthz answers 200 whatever the status; /readyz
// answers 200 only when synced, 503 otherwise (a Kubernetes readiness probe
// on /status.json saw 200 while unsynced).
func TestHealthEndpoints(t *testing.T) {
	for _, tt := range []struct {
		status      string
		healthz     int
		readyz      int
		readyzMatch string
	}{
		{"synced", 200, 200, "ready: synced"},
		{"unsynced", 200, 503, "status unsynced"},
		{"acquiring", 200, 503, "status acquiring"},
		{"degraded", 200, 503, "status degraded"},
		{"stale", 200, 503, "status stale"},
	} {
		t.Run(tt.status, func(t *testing.T) {
			mux := http.NewServeMux()
			mountHealth(mux, fixedSnapshot{Node: 2, Reference: 1, Status: tt.status, Width: 3 * time.Microsecond})
			for _, c := range []struct {
				path  string
				code  int
				match string
			}{{"/healthz", tt.healthz, "ok"}, {"/readyz", tt.readyz, tt.readyzMatch}} {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
				if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.match) {
					t.Errorf("%s: %d %q, want %d with %q", c.path, rec.Code, rec.Body.String(), c.code, c.match)
				}
			}
		})
	}
}
