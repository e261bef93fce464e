package lab

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

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
