package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/memnet"
	"github.com/gclock/gclock/ntp"
)

// TestUpstreamFromKernel: adjtimex's state as the upstream of served UTC.
func TestUpstreamFromKernel(t *testing.T) {
	for _, tt := range []struct {
		name string
		k    kernelTimex
		want realtime.Upstream
	}{
		{"chronyd tracking (TIME_OK, STA_PLL|STA_NANO)", kernelTimex{State: 0, Status: 0x2001, MaxErrUs: 1500, EstErrUs: 20},
			realtime.Upstream{Known: true, Synced: true, MaxErr: 1_500_000, EstErr: 20_000}},
		{"this VM: TIME_ERROR, STA_UNSYNC, 16 s", kernelTimex{State: 5, Status: 0x6041, MaxErrUs: 16_000_000, EstErrUs: 16_000_000},
			realtime.Upstream{Known: true, MaxErr: 16e9, EstErr: 16e9}},
		{"TIME_ERROR alone (STA_CLOCKERR)", kernelTimex{State: 5, Status: 0x1000, MaxErrUs: 10},
			realtime.Upstream{Known: true, MaxErr: 10_000}},
		{"STA_UNSYNC alone", kernelTimex{State: 0, Status: 0x40, MaxErrUs: 10},
			realtime.Upstream{Known: true, MaxErr: 10_000}},
		{"leap insert (TIME_INS, STA_INS)", kernelTimex{State: 1, Status: 0x2011, MaxErrUs: 900},
			realtime.Upstream{Known: true, Synced: true, MaxErr: 900_000, Leap: realtime.LeapInsert}},
		{"leap delete (TIME_DEL, STA_DEL)", kernelTimex{State: 2, Status: 0x2021, MaxErrUs: 900},
			realtime.Upstream{Known: true, Synced: true, MaxErr: 900_000, Leap: realtime.LeapDelete}},
		{"STA_INS and STA_DEL: none", kernelTimex{State: 0, Status: 0x31, MaxErrUs: 900},
			realtime.Upstream{Known: true, Synced: true, MaxErr: 900_000}},
		{"negative maxerror", kernelTimex{MaxErrUs: -1},
			realtime.Upstream{Known: true}},
		{"absurd esterror", kernelTimex{MaxErrUs: 5, EstErrUs: 1 << 50},
			realtime.Upstream{Known: true, MaxErr: 5000, EstErr: kernelMaxErrUs * 1000}},
	} {
		got := upstreamFromKernel(tt.k)
		if got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
		if err := got.Check(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

// TestUpstreamKernel runs three daemons serving UTC on this machine's
// real kernel clock state (real_time.upstream kernel): when the kernel
// says CLOCK_REALTIME is unsynchronised (this VM: TIME_ERROR, STA_UNSYNC,
// maxerror 16 s), no page may say synced, every page must come to say why
// (the upstream flag), and every NTP answer must be leap 3, stratum 16,
// never the stratum 1 and 229 us root dispersion gclock used to answer.
// Skipped when the kernel says synchronised.
func TestUpstreamKernel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons for a few seconds")
	}
	k, err := adjtimex()
	if err != nil {
		t.Fatal(err)
	}
	if up := upstreamFromKernel(k); up.Synced {
		t.Skipf("the kernel says CLOCK_REALTIME is synchronised (state %d, status %#x, maxerror %d us): nothing to check", k.State, k.Status, k.MaxErrUs)
	}
	t.Logf("kernel: state %d, status %#x, maxerror %d us, esterror %d us", k.State, k.Status, k.MaxErrUs, k.EstErrUs)
	cfgs := rtCluster(t, RealTimeReference)
	ports := freePorts(t, 3)
	for i := range cfgs {
		cfgs[i].RealTime.Upstream = UpstreamKernel
		cfgs[i].NTP.Listen = fmt.Sprintf("127.0.0.1:%d", ports[i])
		cfgs[i].NTP.RateLimit = NTPRateLimitConfig{} // 10 queries a second
	}
	cfgs[0].Metrics.Listen = "unix:" + filepath.Join(t.TempDir(), "metrics.sock")
	readers, stop := startCluster(t, cfgs)
	defer stop()
	flagged := make([]bool, len(cfgs))
	answers := make([]int, len(cfgs))
	// At least 5 s: the engines sync within about 2 s (TestRunNTP), so a
	// daemon that ignored its kernel would be caught saying synced.
	start := time.Now()
	deadline := start.Add(20 * time.Second)
	for time.Now().Before(deadline) {
		done := true
		for i, r := range readers {
			tm, err := r.Now()
			if err != nil {
				t.Fatal(err)
			}
			if tm.Status == gtime.StatusSynced {
				t.Fatalf("node %d: page synced %+v on an unsynchronised kernel clock", i+1, tm)
			}
			in, err := r.Info()
			if err != nil {
				t.Fatal(err)
			}
			flagged[i] = flagged[i] || in.UpstreamUnsynced
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			res, err := ntp.Query(ctx, cfgs[i].NTP.Listen)
			cancel()
			if err != nil && res.Reply.Mode != ntp.ModeServer {
				t.Fatalf("node %d: %v", i+1, err) // no answer at all
			}
			if p := res.Reply; p.Leap != ntp.LeapUnsync || p.Stratum != ntp.MaxStratum {
				t.Fatalf("node %d: NTP answered leap %d stratum %d refid %#x root dispersion %d ns on an unsynchronised kernel clock",
					i+1, p.Leap, p.Stratum, p.RefID, ntp.ShortNs(p.RootDispersion))
			}
			answers[i]++
			done = done && flagged[i] && answers[i] >= 5
		}
		if done && time.Since(start) > 5*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range cfgs {
		if !flagged[i] || answers[i] < 5 {
			t.Errorf("node %d: page flagged upstream-unsynchronised %v, %d NTP answers", i+1, flagged[i], answers[i])
		}
	}
	m := scrapeUnix(t, strings.TrimPrefix(cfgs[0].Metrics.Listen, "unix:"))
	if m["gclock_realtime_upstream_synced"] != 0 || m["gclock_realtime_upstream_max_error_seconds"] < float64(k.MaxErrUs)/1e6 ||
		m["gclock_realtime_upstream_max_error_seconds"] > 16 || // the kernel grows it to NTP_PHASE_LIMIT
		m[`gclock_ntp_unsynchronised_replies_total`] < 5 {
		t.Errorf("reference metrics: upstream synced %v, max error %v s, unsynchronised NTP replies %v; want 0, %v..16, >= 5",
			m["gclock_realtime_upstream_synced"], m["gclock_realtime_upstream_max_error_seconds"], m[`gclock_ntp_unsynchronised_replies_total`], float64(k.MaxErrUs)/1e6)
	}
	// Readiness follows the served UTC (the reference node 1 holds global
	// time by definition): not ready, saying why; global time alone is.
	for _, c := range []struct {
		path  string
		code  int
		match string
	}{
		{"/readyz", http.StatusServiceUnavailable, "not ready: UTC (realtime) unsynced: upstream-unsynchronised"},
		{"/readyz?scale=global", http.StatusOK, "ready: global time synced"},
	} {
		code, body := getUnix(t, strings.TrimPrefix(cfgs[0].Metrics.Listen, "unix:"), c.path)
		if code != c.code || !strings.Contains(body, c.match) {
			t.Errorf("node 1 %s: %d %q, want %d with %q", c.path, code, body, c.code, c.match)
		}
	}
	var out strings.Builder
	for i, f := range flagged {
		fmt.Fprintf(&out, " node %d flagged %v, %d answers (leap 3, stratum 16);", i+1, f, answers[i])
	}
	t.Log(out.String())
}

// TestNTPSelfUpstream: what the NTP server says about itself follows the
// upstream the model carries: chronyd's stratum + 1 on the reference (+2
// on a node), its reference id on the reference, the leap and the root
// delay; with no upstream read (upstream none), ntp.stratum and GCLK; an
// unsynchronised upstream is never announced as synced.
func TestNTPSelfUpstream(t *testing.T) {
	for _, tt := range []struct {
		name        string
		id          uint32
		up          realtime.Upstream
		wantStratum uint8
		wantRef     uint32
	}{
		{"reference, chronyd stratum 2", 1, realtime.Upstream{Known: true, Synced: true, MaxErr: 1e6, Stratum: 2, RefID: 0x0a000001, Leap: realtime.LeapInsert, RootDelay: 4e6}, 3, 0x0a000001},
		{"node, chronyd stratum 2", 2, realtime.Upstream{Known: true, Synced: true, MaxErr: 1e6, Stratum: 2, RefID: 0x0a000001, Leap: realtime.LeapInsert, RootDelay: 4e6}, 4, 0x0a000001},
		{"reference, kernel only", 1, realtime.Upstream{Known: true, Synced: true, MaxErr: 1e6}, 2, ntp.RefIDString("GCLK")},
		{"reference, upstream none", 1, realtime.Upstream{}, 1, ntp.RefIDString("GCLK")},
		{"reference, unsynchronised", 1, realtime.Upstream{Known: true, MaxErr: 16e9}, 2, ntp.RefIDString("GCLK")},
	} {
		cfg := fuzzCluster(tt.id)
		cfg.RealTime.Mode = RealTimeReference
		conn, err := memnet.New(1).Listen(netip.MustParseAddrPort(cfg.Peers[tt.id-1].Address))
		if err != nil {
			t.Fatal(err)
		}
		n := bareNode(t, context.Background(), cfg, conn, nil)
		if n.rt == nil {
			t.Fatal("no real-time scale")
		}
		n.ref.Store(1) // node 1 is the reference
		// The model: two samples on the reference's Scale; a node gets it
		// as the reference's answer.
		ref := n.rt.sc
		if tt.id != 1 {
			var err error
			if ref, err = realtime.New(realtime.Config{Mode: realtime.ModeReference, ID: 1, Reference: 1, Poll: 1e9, MaxSlew: 5e-4, MaxDrift: 1e-4}, nil); err != nil {
				t.Fatal(err)
			}
		}
		for g := int64(1e9); g <= 2e9; g += 1e9 {
			ref.Tick(g, realtime.Inputs{})
			ref.Ready()
			ref.SetUpstream(tt.up)
			ref.Sample(g, 1.7e18, 100)
		}
		if tt.id != 1 {
			r, err := ref.Answer(realtime.Message{Type: realtime.MsgQuery, From: 2, To: 1}, 2e9)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.rt.sc.Step(r, 2e9); err != nil {
				t.Fatal(err)
			}
		}
		src := &ntpSource{n: n, precision: -20}
		srv := src.Self()
		wantRef := tt.wantRef
		if tt.id != 1 {
			wantRef = 0x0a000001 // the node's source: the reference's address
		}
		if srv.Stratum != tt.wantStratum || srv.RefID != wantRef || srv.Leap != tt.up.Leap || srv.RootDelay != tt.up.RootDelay {
			t.Errorf("%s: stratum %d refid %#x leap %d root delay %d; want %d %#x %d %d", tt.name, srv.Stratum, srv.RefID, srv.Leap, srv.RootDelay,
				tt.wantStratum, wantRef, tt.up.Leap, tt.up.RootDelay)
		}
		if tt.up.Known && !tt.up.Synced && srv.Synced {
			t.Errorf("%s: announced synced", tt.name)
		}
	}
}

// getUnix GETs path from a daemon's metrics server on a Unix socket.
func getUnix(t *testing.T, sock, path string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://gclock" + path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}
