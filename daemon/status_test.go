package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon/internal/statuspage"
)

func TestPeerPages(t *testing.T) {
	peers := []Peer{{ID: 1, Address: "10.1.0.1:3190"}, {ID: 2, Address: "[fd00::2]:3190"}, {ID: 3, Address: "node3:3190"}}
	for _, tc := range []struct {
		listen string
		peers  []Peer
		want   []statuspage.PeerPage
	}{
		{"0.0.0.0:9190", peers, []statuspage.PeerPage{{Node: 1, URL: "http://10.1.0.1:9190"}, {Node: 2, URL: "http://[fd00::2]:9190"}, {Node: 3, URL: "http://node3:9190"}}},
		{"0.0.0.0:9300", peers[:1], []statuspage.PeerPage{{Node: 1, URL: "http://10.1.0.1:9300"}}},
		// A port alone is 127.0.0.1 (metricsBind): no other host reaches it.
		{":9190", peers, nil},
		{"127.0.0.1:9190", peers, nil},
		{"", peers, nil},
		{"unix:/run/gclock.metrics", peers, nil},
		{"127.0.0.1:0", peers, nil},
		// Daemons on one host cannot share a port: no cluster view.
		{"[::]:9190", []Peer{{ID: 1, Address: "127.0.0.1:3190"}, {ID: 2, Address: "127.0.0.1:3191"}}, nil},
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

// TestMetricsBind (issue 17, safe defaults): a metrics.listen without a
// host binds 127.0.0.1, not every interface; explicit addresses and Unix
// sockets are kept.
func TestMetricsBind(t *testing.T) {
	for _, tc := range []struct{ listen, want string }{
		{":9190", "127.0.0.1:9190"},
		{":0", "127.0.0.1:0"},
		{"0.0.0.0:9190", "0.0.0.0:9190"},
		{"[::]:9190", "[::]:9190"},
		{"10.1.0.1:9190", "10.1.0.1:9190"},
		{"localhost:9190", "localhost:9190"},
		{"unix:/run/gclock/metrics.sock", "unix:/run/gclock/metrics.sock"},
		{"", ""},
	} {
		if got := metricsBind(tc.listen); got != tc.want {
			t.Errorf("metricsBind(%q) = %q, want %q", tc.listen, got, tc.want)
		}
	}
}

// TestRunMetricsOnLoopback: a daemon with metrics.listen ":PORT" answers
// on 127.0.0.1 and on none of the host's other addresses.
//
// On the kernel: which addresses a socket is bound to is the kernel's.
func TestRunMetricsOnLoopback(t *testing.T) {
	var others []netip.Addr
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(p.IP); ok && !ip.Unmap().IsLoopback() && ip.Unmap().Is4() {
					others = append(others, ip.Unmap())
				}
			}
		}
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := testCluster(t, 1)[0]
	c.Metrics.Listen = fmt.Sprintf(":%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d/status.json", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(others) == 0 {
		t.Log("no non-loopback IPv4 address on this host: only the loopback half is checked")
	}
	for _, a := range others {
		conn, err := net.DialTimeout("tcp", netip.AddrPortFrom(a, uint16(port)).String(), time.Second)
		if err == nil {
			conn.Close()
			t.Errorf("metrics reachable at %v:%d: listening beyond loopback", a, port)
		}
	}
}

// TestHealthEndpoints: /healthz answers 200 whatever the status; /readyz
// answers 200 only when the time served is synced, 503 otherwise (a
// Kubernetes readiness probe on /status.json saw 200 while unsynced). With
// UTC served, /readyz follows UTC's status (issue 17: it said ready on a
// reference whose CLOCK_REALTIME was unsynchronised), /readyz?scale=global
// global time's.
func TestHealthEndpoints(t *testing.T) {
	for _, tt := range []struct {
		name                         string
		status                       string
		served, servedStatus, reason string
		path                         string
		healthz                      int
		readyz                       int
		readyzMatch                  string
	}{
		{"synced", "synced", "", "", "", "/readyz", 200, 200, "ready: global time synced"},
		{"unsynced", "unsynced", "", "", "", "/readyz", 200, 503, "global time unsynced"},
		{"acquiring", "acquiring", "", "", "", "/readyz", 200, 503, "global time acquiring"},
		{"degraded", "degraded", "", "", "", "/readyz", 200, 503, "global time degraded"},
		{"stale", "stale", "", "", "", "/readyz", 200, 503, "global time stale"},
		{"global served", "synced", "reference", "synced", "", "/readyz?scale=served", 200, 200, "ready: global time synced"},
		{"utc synced", "synced", "realtime", "synced", "", "/readyz", 200, 200, "ready: UTC (realtime) synced"},
		{"upstream unsynced", "synced", "realtime", "unsynced", "upstream-unsynchronised", "/readyz", 200, 503,
			"not ready: UTC (realtime) unsynced: upstream-unsynchronised (global time synced"},
		{"upstream unsynced, global asked", "synced", "realtime", "unsynced", "upstream-unsynchronised", "/readyz?scale=global", 200, 200,
			"ready: global time synced"},
		{"utc stale", "stale", "mean-drift", "stale", "", "/readyz", 200, 503, "UTC (mean-drift) stale"},
		{"unknown scale", "synced", "", "", "", "/readyz?scale=utc", 200, 400, `scale "utc"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mountHealth(mux, fixedSnapshot{Node: 2, Reference: 1, Status: tt.status, Width: 3 * time.Microsecond,
				Served: tt.served, ServedStatus: tt.servedStatus, ServedReason: tt.reason})
			for _, c := range []struct {
				path  string
				code  int
				match string
			}{{"/healthz", tt.healthz, "ok"}, {tt.path, tt.readyz, tt.readyzMatch}} {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest("GET", c.path, nil))
				if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.match) {
					t.Errorf("%s: %d %q, want %d with %q", c.path, rec.Code, rec.Body.String(), c.code, c.match)
				}
			}
		})
	}
}
