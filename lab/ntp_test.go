package lab

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/ntp"
	"github.com/gclock/gclock/transport"
)

func TestParseNTPClients(t *testing.T) {
	// ntpdig -d -d against ntp.Responder serving +3 ms (250 us bound).
	dig := `ntpdig: querying 127.88.0.1 (127.88.0.1)
ntpdig: Sent to 127.88.0.1:
e3 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 ................
00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 ................
00 00 00 00 00 00 00 00 ee b1 3f 0c 85 21 40 00 ..........?..!@.
24 01 00 ec 00 00 00 00 00 00 00 11 47 43 4c 4b $...........GCLK
00 00 00 00 00 00 00 00 ee b1 3f 0c 85 21 40 00 ..........?..!@.
ee b1 3f 0c 85 ec c0 2a ee b1 3f 0c 86 66 d2 02 ..?....*..?..f..
org t1: eeb13f0c.85214000 rec t2: eeb13f0c.85ecc02a
xmt t3: eeb13f0c.8666d202 dst t4: eeb13f0c.85b43000
org t1: 1795604620.520039 rec t2: 1795604620.523144
xmt t3: 1795604620.525006 dst t4: 1795604620.522281
rec-org t21: 0.003105  xmt-dst t34: 0.002726
2026-11-25 11:03:40.525006 (+0000) +0.002915 +/- 0.000191 127.88.0.1 s1 no-leap
`
	pivot := time.Date(2026, 11, 25, 11, 0, 0, 0, time.UTC).UnixNano()
	d, err := parseNtpdigDebug(dig, pivot)
	if err != nil || d.OffsetNs != 2_915_447 || d.DelayNs != 379_452 {
		t.Errorf("parseNtpdigDebug = %+v, %v; want offset 2915447, delay 379452", d, err)
	}
	if !d.HaveReply || d.Reply.Stratum != 1 || d.Reply.RefID != ntp.RefIDString("GCLK") || d.Reply.RootDispersion != 0x11 || d.Reply.Precision != -20 {
		t.Errorf("reply %+v (have %v)", d.Reply, d.HaveReply)
	}
	off, pm, err := parseNtpdigLine(dig)
	if err != nil || off != 2_915_000 || pm != 191_000 {
		t.Errorf("parseNtpdigLine = %d, %d, %v", off, pm, err)
	}
	if off, _, err := parseNtpdigLine("2026-11-25 10:52:46.976870 (+0000) -0.000012 +/- 0.000103 10.77.0.2 s2 no-leap\n"); err != nil || off != -12_000 {
		t.Errorf("negative offset: %d, %v", off, err)
	}
	if off, err := parseChronydQ("2026-11-25T10:52:40Z System clock wrong by -0.002996 seconds (ignored)\n"); err != nil || off != -2_996_000 {
		t.Errorf("parseChronydQ = %d, %v", off, err)
	}
	meas := `========================================================================================================================================
   Date (UTC) Time     IP Address   L St 123 567 ABCD  LP RP Score    Offset  Peer del. Peer disp.  Root del. Root disp. Refid     MTxRx
========================================================================================================================================
2026-11-25 10:53:28 127.88.0.1      N  1 111 111 1111   6  6 0.00  2.995e-03  1.300e-05  1.156e-06  0.000e+00  2.594e-04 47434C4B 4B K K
`
	ms, err := parseChronyMeasurements(meas)
	if err != nil || len(ms) != 1 || ms[0].OffsetNs != 2_995_000 || ms[0].DelayNs != 13_000 || ms[0].RootDispNs != 259_400 ||
		ms[0].Stratum != 1 || ms[0].Leap != "N" || ms[0].Tests != "111 111 1111" || ms[0].RefID != "47434C4B" {
		t.Errorf("parseChronyMeasurements = %+v, %v", ms, err)
	}
	for _, bad := range []string{"", "ntpdig: no eligible servers\n", "org t1: eeb13f0c.85214000 rec t2: eeb13f0c.85ecc0zz\nxmt t3: eeb13f0c.8666d202 dst t4: eeb13f0c.85b43000\n",
		"org t1: eeb13f0c.85214000 rec t2: eeb13f0c.85ecc02a\n"} {
		if _, err := parseNtpdigDebug(bad, pivot); err == nil {
			t.Errorf("parseNtpdigDebug(%q): no error", bad)
		}
		if _, _, err := parseNtpdigLine(bad); err == nil {
			t.Errorf("parseNtpdigLine(%q): no error", bad)
		}
		if _, err := parseChronydQ(bad); err == nil {
			t.Errorf("parseChronydQ(%q): no error", bad)
		}
		if _, err := parseChronyMeasurements(bad); err == nil {
			t.Errorf("parseChronyMeasurements(%q): no error", bad)
		}
	}
}

// FuzzParseNTPClients: no client output makes a parser panic.
func FuzzParseNTPClients(f *testing.F) {
	f.Add("org t1: eeb13f0c.85214000 rec t2: eeb13f0c.85ecc02a\nxmt t3: eeb13f0c.8666d202 dst t4: eeb13f0c.85b43000\n" +
		"24 01 00 ec 00 00 00 00 00 00 00 11 47 43 4c 4b $...........GCLK\n")
	f.Add("2026-11-25 10:52:46.976870 (+0000) +0.002956 +/- 0.000103 10.77.0.1 s1 no-leap\n")
	f.Add("System clock wrong by 0.002996 seconds (ignored)")
	f.Add("2026-11-25 10:53:28 127.88.0.1      N  1 111 111 1111   6  6 0.00  2.995e-03  1.300e-05  1.156e-06  0.000e+00  2.594e-04 47434C4B 4B K K")
	f.Fuzz(func(t *testing.T, s string) {
		parseNtpdigDebug(s, 1_764_000_000_000_000_000)
		parseNtpdigLine(s)
		parseChronydQ(s)
		parseChronyMeasurements(s)
		parseSeconds(s)
	})
}

// offsetSource serves CLOCK_REALTIME + 3 ms with a 250 us bound.
type offsetSource struct{ asked atomic.Int64 }

func (s *offsetSource) At(raw int64) ntp.Reading {
	s.asked.Add(1)
	off, _ := rawclock.WallOffset()
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
	for _, c := range ntpClients {
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
	for _, c := range ntpClients {
		qctx, qcancel := context.WithTimeout(ctx, 30*time.Second)
		m, err := queryNTP(qctx, localRunner, c, "127.88.0.1", t.TempDir())
		qcancel()
		if err != nil {
			t.Errorf("%s: %v", c, err)
			continue
		}
		t.Logf("%s: offset %d ns, delay %d ns, root dispersion %d ns", c, m.OffsetNs, m.DelayNs, m.RootDispNs)
		if e := m.OffsetNs - 3_000_000; e > m.DelayNs/2+2000 || -e > m.DelayNs/2+2000 {
			t.Errorf("%s: offset %d ns, want 3000000 within half the delay %d ns (+2 us of printing)\n%s", c, m.OffsetNs, m.DelayNs, m.Output)
		}
		if m.RootDispNs < 250_000 || m.RootDispNs > 250_000+20_000 {
			t.Errorf("%s read a root dispersion of %d ns, want the served 250 us (rounded up to 1/65536 s)", c, m.RootDispNs)
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
//     must be within the root dispersion the server sent (its bound) plus
//     half the round trip the client measured, and that root dispersion
//     must be under 1 ms, far below the clocks' emulated offsets, so that
//     a daemon serving its own clock would fail;
//   - runs chronyd -x with `refclock SOCK` on hosts 1 and 2, fed by their
//     daemons: `chronyc tracking` must find the system clock within the
//     largest root dispersion the host served of gclock's time (again the
//     truth is 0).
func TestLabNTP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a lab for a minute")
	}
	needLab(t)
	for _, c := range ntpClients {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not installed (ci/deps.sh installs ntpsec-ntpdig, ntpsec-ntpdate and chrony)", c)
		}
	}
	const hosts = 3
	l, gc := gclockLab(t, hosts)
	chronys := map[int]*chronyRefclock{}
	for _, h := range []int{1, 2} {
		c, err := l.startChronyRefclock(h, ChainSetting{Name: "shipped", Refclock: ShippedRefclock, Extra: ShippedChronyExtra})
		if err != nil {
			t.Fatal(err)
		}
		chronys[h] = c
	}
	base := LabDaemonConfig()
	base.RealTime = daemon.RealTimeConfig{Mode: daemon.RealTimeReference, PollEvery: daemon.Duration(200 * time.Millisecond), MaxSlewPPM: 500,
		Upstream: daemon.UpstreamNone}
	base.NTP.Listen = ":123"
	base.NTP.RateLimit = daemon.NTPRateLimitConfig{} // the clients below query in a loop
	gc.Duration, gc.Warmup = 60*time.Second, 10*time.Second
	gc.Base = &base
	gc.Tweak = func(host int, c *daemon.Config) {
		if ch, ok := chronys[host]; ok {
			c.Refclock = daemon.RefclockConfig{Sock: ch.Sock, Every: daemon.Duration(ShippedEvery)}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	done := runGclockAsync(ctx, l, gc)
	time.Sleep(gc.Warmup)

	errs, delays := map[string][]int64{}, map[string][]int64{}
	disps := map[int][]int64{}
	qdir := t.TempDir()
	query := func(server int, client string) {
		from := (server + 1) % hosts
		qctx, qcancel := context.WithTimeout(ctx, 30*time.Second)
		m, err := queryNTP(qctx, l.hostRunner(from), client, netlab.HostAddr(server).String(), qdir)
		qcancel()
		if err != nil {
			t.Errorf("host %d -> %d: %v", from, server, err)
			return
		}
		if b := m.Bound(-1); m.OffsetNs > b || -m.OffsetNs > b {
			t.Errorf("%s in host %d -> host %d: offset %d ns beyond the bound %d ns (delay %d, root dispersion %d)\n%s",
				client, from, server, m.OffsetNs, b, m.DelayNs, m.RootDispNs, m.Output)
		}
		errs[client] = append(errs[client], max(m.OffsetNs, -m.OffsetNs))
		delays[client] = append(delays[client], m.DelayNs)
		disps[server] = append(disps[server], m.RootDispNs)
	}
	// Queries until 15 s before the daemons stop; chronyd -Q (4-8 s each)
	// once per server.
	stopAt := start.Add(gc.Duration - 15*time.Second)
	for round := 0; time.Now().Before(stopAt); round++ {
		for s := range hosts {
			for _, c := range ntpClients {
				if (c == clientChronyd && round > 0) || !time.Now().Before(stopAt) {
					continue
				}
				query(s, c)
			}
		}
	}
	// chronyd fed by the refclock: its idea of the system clock's offset,
	// checked per host against the widest root dispersion served there.
	for _, h := range []int{1, 2} {
		off, ok, out, err := chronys[h].Tracking(ctx)
		if err != nil || !ok {
			t.Errorf("host %d chronyd: no estimate from the refclock (%v):\n%s", h, err, out)
			continue
		}
		b := pctlNs(disps[h], 1) + 2000
		if len(disps[h]) == 0 || off > b || -off > b {
			t.Errorf("host %d chronyd: system clock %d ns from gclock's time, beyond the largest root dispersion served %d ns:\n%s", h, off, b, out)
		}
		t.Logf("host %d chronyd -x (refclock SOCK): system clock minus gclock time %+d ns (truth 0); largest root dispersion served %d ns", h, off, b-2000)
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
	for _, c := range ntpClients {
		t.Logf("%s: %d queries, |offset| median %d ns, max %d ns; round trip median %d ns", c, len(errs[c]),
			pctlNs(errs[c], 0.5), pctlNs(errs[c], 1), pctlNs(delays[c], 0.5))
	}
	for h := range hosts {
		t.Logf("host %d: root dispersion served median %d ns, max %d ns", h, pctlNs(disps[h], 0.5), pctlNs(disps[h], 1))
		// The offset checks above mean something only if the bounds are
		// narrower than a wrong time scale (the emulated clocks are
		// milliseconds apart). Held on the median: under CPU load (the
		// other test packages beside this one) one answer in sixty reached
		// 1.37 ms while the median stayed at 0.29 ms.
		if med := pctlNs(disps[h], 0.5); len(disps[h]) == 0 || med > int64(time.Millisecond) {
			t.Errorf("host %d: root dispersion median %d ns: too wide to tell a wrong time scale", h, med)
		}
	}
	t.Logf("pages: error median %d ns, p99 %d ns, coverage %.4f, mean width %.0f ns (truth CLOCK_REALTIME)",
		r.res.Summary.ErrorP50Ns, r.res.Summary.ErrorP99Ns, r.res.Summary.BoundCoverage, r.res.Summary.BoundWidthMeanNs)
}

func pctlNs(v []int64, p float64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
