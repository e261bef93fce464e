package lab

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/ntp"
	"github.com/gclock/gclock/transport"
)

func TestParseNTPClients(t *testing.T) {
	dig := `ntpdig: querying 10.77.0.1 (10.77.0.1)
org t1: eeb13c7e.deb19800 rec t2: eeb13c7e.df9930b5
xmt t3: eeb13c7e.df9f63d1 dst t4: eeb13c7e.def72000
org t1: 1795603966.869897 rec t2: 1795603966.873431
xmt t3: 1795603966.873526 dst t4: 1795603966.870958
rec-org t21: 0.003534  xmt-dst t34: 0.002567
2026-11-25 10:52:46.873525 (+0000) +0.003051 +/- 0.000484 10.77.0.1 s1 no-leap
`
	off, delay, err := ParseNtpdigDebug(dig)
	if err != nil || off != 3_051_000 || delay != 966_000 {
		t.Errorf("ParseNtpdigDebug = %d, %d, %v; want 3051000, 966000", off, delay, err)
	}
	off, pm, err := ParseNtpdigLine(dig)
	if err != nil || off != 3_051_000 || pm != 484_000 {
		t.Errorf("ParseNtpdigLine = %d, %d, %v", off, pm, err)
	}
	if off, _, err := ParseNtpdigLine("2026-11-25 10:52:46.976870 (+0000) -0.000012 +/- 0.000103 10.77.0.2 s2 no-leap\n"); err != nil || off != -12_000 {
		t.Errorf("negative offset: %d, %v", off, err)
	}
	if off, err := ParseChronydQ("2026-11-25T10:52:40Z System clock wrong by -0.002996 seconds (ignored)\n"); err != nil || off != -2_996_000 {
		t.Errorf("ParseChronydQ = %d, %v", off, err)
	}
	meas := `========================================================================================================================================
   Date (UTC) Time     IP Address   L St 123 567 ABCD  LP RP Score    Offset  Peer del. Peer disp.  Root del. Root disp. Refid     MTxRx
========================================================================================================================================
2026-11-25 10:53:28 127.88.0.1      N  1 111 111 1111   6  6 0.00  2.995e-03  1.300e-05  1.156e-06  0.000e+00  2.594e-04 47434C4B 4B K K
`
	ms, err := ParseChronyMeasurements(meas)
	if err != nil || len(ms) != 1 || ms[0].OffsetNs != 2_995_000 || ms[0].DelayNs != 13_000 || ms[0].RootDispNs != 259_400 ||
		ms[0].Stratum != 1 || ms[0].Leap != "N" || ms[0].Tests != "111 111 1111" || ms[0].RefID != "47434C4B" {
		t.Errorf("ParseChronyMeasurements = %+v, %v", ms, err)
	}
	for _, bad := range []string{"", "ntpdig: no eligible servers\n", "org t1: 1.0 rec t2: x.5\nxmt t3: 1.0 dst t4: 1.0\n",
		"org t1: 1.0 rec t2: 2.0\n"} {
		if _, _, err := ParseNtpdigDebug(bad); err == nil {
			t.Errorf("ParseNtpdigDebug(%q): no error", bad)
		}
		if _, _, err := ParseNtpdigLine(bad); err == nil {
			t.Errorf("ParseNtpdigLine(%q): no error", bad)
		}
		if _, err := ParseChronydQ(bad); err == nil {
			t.Errorf("ParseChronydQ(%q): no error", bad)
		}
		if _, err := ParseChronyMeasurements(bad); err == nil {
			t.Errorf("ParseChronyMeasurements(%q): no error", bad)
		}
	}
}

// FuzzParseNTPClients: no client output makes a parser panic.
func FuzzParseNTPClients(f *testing.F) {
	f.Add("org t1: 1795603966.869897 rec t2: 1795603966.873431\nxmt t3: 1795603966.873526 dst t4: 1795603966.870958\n")
	f.Add("2026-11-25 10:52:46.976870 (+0000) +0.002956 +/- 0.000103 10.77.0.1 s1 no-leap\n")
	f.Add("System clock wrong by 0.002996 seconds (ignored)")
	f.Add("2026-11-25 10:53:28 127.88.0.1      N  1 111 111 1111   6  6 0.00  2.995e-03  1.300e-05  1.156e-06  0.000e+00  2.594e-04 47434C4B 4B K K")
	f.Fuzz(func(t *testing.T, s string) {
		ParseNtpdigDebug(s)
		ParseNtpdigLine(s)
		ParseChronydQ(s)
		ParseChronyMeasurements(s)
		parseSeconds(s)
	})
}

// offsetSource serves CLOCK_REALTIME + 3 ms with a 250 us bound.
type offsetSource struct{ asked atomic.Int64 }

func (s *offsetSource) At(raw int64) ntp.Reading {
	s.asked.Add(1)
	off, _ := transport.RealtimeOffset()
	return ntp.Reading{Time: raw + off + 3_000_000, MaxErr: 250_000, OK: true}
}

func (s *offsetSource) Self() ntp.Server {
	return ntp.Server{Synced: true, Stratum: 1, RefID: ntp.RefIDString("GCLK"), Precision: -20}
}

// TestStockNTPClients queries ntp.Responder, serving CLOCK_REALTIME + 3 ms
// with a 250 us bound, with the stock Debian clients (on 127.88.0.1:123 of
// this namespace: ntpdig takes no port): each must report +3 ms within
// half its round trip, and chronyd must read the 250 us root dispersion.
// This pins interoperability and the sign of every client's offset
// without the lab; TestLabNTP queries the daemons.
func TestStockNTPClients(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (port 123, chronyd)")
	}
	for _, c := range NTPClients {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not installed (ci/deps.sh installs ntpsec-ntpdig, ntpsec-ntpdate and chrony)", c)
		}
	}
	conn, err := transport.ListenUDP("127.88.0.1:123", transport.UDPOptions{Timestamps: true})
	if err != nil {
		t.Skipf("cannot bind 127.88.0.1:123: %v", err)
	}
	r := ntp.NewResponder(conn, &offsetSource{}, gtime.RawNow, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	_ = os.MkdirAll("/var/run/chrony", 0o750)
	for _, c := range NTPClients {
		qctx, qcancel := context.WithTimeout(ctx, 30*time.Second)
		m, err := QueryNTP(qctx, LocalRunner, c, "127.88.0.1", t.TempDir())
		qcancel()
		if err != nil {
			t.Errorf("%s: %v", c, err)
			continue
		}
		t.Logf("%s: offset %d ns, delay %d ns, root dispersion %d ns", c, m.OffsetNs, m.DelayNs, m.RootDispNs)
		if e := m.OffsetNs - 3_000_000; e > m.DelayNs/2+2000 || -e > m.DelayNs/2+2000 {
			t.Errorf("%s: offset %d ns, want 3000000 within half the delay %d ns (+2 us of printing)\n%s", c, m.OffsetNs, m.DelayNs, m.Output)
		}
		if c == ClientChronyd && (m.RootDispNs < 250_000 || m.RootDispNs > 250_000+20_000) {
			t.Errorf("chronyd read a root dispersion of %d ns, want the served 250 us (rounded up to 1/65536 s)", m.RootDispNs)
		}
	}
	if st := r.Stats(); st.Answered < 3 || st.Refused != 0 {
		t.Errorf("responder stats %+v", st)
	}
}

// TestLabNTP runs a gclock daemon per lab host serving UTC
// (reference-realtime) over NTP on port 123, with emulated clocks (up to
// +-5 ms, +-30 ppm) that only the evaluator knows, and:
//
//   - queries every host from the next one with ntpdig, ntpdate -q and
//     chronyd -Q: the truth is the machine's CLOCK_REALTIME, which every
//     namespace shares, so the offset a client reports is its error; it
//     must be within the server's bound (its page's width, which covers
//     the root dispersion it serves; for chronyd also the root dispersion
//     it read) plus half the round trip the client measured;
//   - runs chronyd -x with `refclock SOCK` on hosts 1 and 2, fed by their
//     daemons: `chronyc tracking` must find the system clock within the
//     host's bound width of gclock's time (again the truth is 0).
//
// The bounds are a few hundred us at most (the test checks it), far below
// the clocks' emulated offsets, so a daemon serving its own clock would
// fail.
func TestLabNTP(t *testing.T) {
	needLab(t)
	for _, c := range NTPClients {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not installed (ci/deps.sh installs ntpsec-ntpdig, ntpsec-ntpdate and chrony)", c)
		}
	}
	cfg := DefaultConfig()
	cfg.Hosts, cfg.RunDir, cfg.Realtime = 3, t.TempDir(), true
	l, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	defer l.Down()
	chronys := map[int]*ChronyRefclock{}
	for _, h := range []int{1, 2} {
		c, err := l.StartChronyRefclock(h)
		if err != nil {
			t.Fatal(err)
		}
		chronys[h] = c
	}
	base := LabDaemonConfig()
	base.RealTime = daemon.RealTimeConfig{Mode: daemon.RealTimeReference, PollEvery: daemon.Duration(200 * time.Millisecond), MaxSlewPPM: 500}
	base.NTP.Listen = ":123"
	gc := DefaultGclockConfig()
	gc.Command = []string{os.Args[0]}
	gc.Env = []string{daemonEnv + "=1"}
	gc.Duration, gc.Warmup = 50*time.Second, 10*time.Second
	gc.Base = &base
	gc.Tweak = func(host int, c *daemon.Config) {
		if ch, ok := chronys[host]; ok {
			c.Refclock = daemon.RefclockConfig{Sock: ch.Sock, Every: daemon.Duration(250 * time.Millisecond)}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		res GclockResult
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		r, err := l.RunGclock(ctx, gc)
		done <- result{r, err}
	}()
	// The pages, for the bounds.
	readers := make([]*gtime.Reader, cfg.Hosts)
	for i := range readers {
		path := filepath.Join(cfg.RunDir, "gclock", fmt.Sprintf("page-h%d", i))
		for {
			r, err := gtime.Open(path)
			if err == nil {
				readers[i] = r
				defer r.Close()
				break
			}
			if time.Since(start) > 15*time.Second {
				t.Fatalf("host %d: no page: %v", i, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	width := func(i int) int64 {
		tm, err := readers[i].Now()
		if err != nil {
			t.Fatalf("host %d page: %v", i, err)
		}
		if tm.Status != gtime.StatusSynced {
			return -1
		}
		return tm.Width()
	}
	time.Sleep(time.Until(start.Add(gc.Warmup)))

	errs := map[string][]int64{}
	var widths []int64
	qdir := t.TempDir()
	query := func(server int, client string) {
		from := (server + 1) % cfg.Hosts
		w0 := width(server)
		qctx, qcancel := context.WithTimeout(ctx, 30*time.Second)
		m, err := QueryNTP(qctx, l.HostRunner(from), client, HostAddr(server).String(), qdir)
		qcancel()
		w1 := width(server)
		if err != nil {
			t.Errorf("host %d -> %d: %v", from, server, err)
			return
		}
		if w0 < 0 || w1 < 0 {
			t.Errorf("host %d: page not synced around the query", server)
			return
		}
		w := max(w0, w1)
		widths = append(widths, w)
		if w > int64(time.Millisecond) {
			t.Errorf("host %d: bound width %d ns: too wide to tell a wrong time scale", server, w)
		}
		bound := m.Bound(w)
		if client == ClientChronyd {
			bound = min(bound, m.Bound(-1)) // both must hold: check the tighter
		}
		if m.OffsetNs > bound || -m.OffsetNs > bound {
			t.Errorf("%s in host %d -> host %d: offset %d ns beyond the bound %d ns (width %d, delay %d, root dispersion %d)\n%s",
				client, from, server, m.OffsetNs, bound, w, m.DelayNs, m.RootDispNs, m.Output)
		}
		errs[client] = append(errs[client], max(m.OffsetNs, -m.OffsetNs))
	}
	for round := range 4 {
		for s := range cfg.Hosts {
			for _, c := range NTPClients {
				if c == ClientChronyd && round > 0 {
					continue // 4-8 s each: once per server
				}
				query(s, c)
			}
		}
	}
	// chronyd fed by the refclock: its idea of the system clock's offset.
	var chronyErrs []int64
	for _, h := range []int{1, 2} {
		off, ok, out, err := chronys[h].Tracking(ctx)
		w := width(h)
		if err != nil || !ok {
			t.Errorf("host %d chronyd: no estimate from the refclock (%v):\n%s", h, err, out)
			continue
		}
		if off > w+2000 || -off > w+2000 {
			t.Errorf("host %d chronyd: system clock %d ns from gclock's time, beyond the bound width %d ns:\n%s", h, off, w, out)
		}
		chronyErrs = append(chronyErrs, max(off, -off))
		t.Logf("host %d chronyd (refclock SOCK): system time %d ns of gclock time (truth 0), bound width %d ns", h, off, w)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("RunGclock: %v", r.err)
	}
	for _, n := range r.res.Nodes {
		if n.BoundCoverage != 1 {
			t.Errorf("host %d: CLOCK_REALTIME inside the page bounds in %.4f of evaluations, want all", n.ID, n.BoundCoverage)
		}
	}
	for _, c := range r.res.Clocks {
		t.Logf("host %d clock: %v", c.Host, c)
	}
	for _, c := range NTPClients {
		t.Logf("%s: %d queries, |offset| median %d ns, max %d ns", c, len(errs[c]), pctlNs(errs[c], 0.5), pctlNs(errs[c], 1))
	}
	t.Logf("bound widths at the queries: median %d ns, max %d ns; page error median %d ns, p99 %d ns (truth CLOCK_REALTIME)",
		pctlNs(widths, 0.5), pctlNs(widths, 1), r.res.Summary.ErrorP50Ns, r.res.Summary.ErrorP99Ns)
}

func pctlNs(v []int64, p float64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
