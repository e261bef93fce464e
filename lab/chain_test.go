package lab

import (
	"encoding/binary"
	"errors"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/internal/chronycmd"
)

func TestParseChainSetting(t *testing.T) {
	for _, c := range []struct {
		in   string
		want ChainSetting
		err  string
	}{
		{"shipped=refid GCLK poll 0 filter 2 precision 1e-7;maxslewrate 500",
			ChainSetting{Name: "shipped", Refclock: "refid GCLK poll 0 filter 2 precision 1e-7", Extra: "maxslewrate 500\n"}, ""},
		{"p4=refid GCLK poll 4", ChainSetting{Name: "p4", Refclock: "refid GCLK poll 4"}, ""},
		{"a=poll 1; maxslewrate 500 ;; corrtimeratio 10", ChainSetting{Name: "a", Refclock: "poll 1", Extra: "maxslewrate 500\ncorrtimeratio 10\n"}, ""},
		{"poll 2", ChainSetting{}, "want NAME="},
		{"=poll 2", ChainSetting{}, "want NAME="},
		{"a/b=poll 2", ChainSetting{}, "no spaces or slashes"},
		{"a=poll 2\nlocal", ChainSetting{}, "no line breaks"},
	} {
		got, err := ParseChainSetting(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseChainSetting(%q) = %+v, %v; want an error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseChainSetting(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// TestSysModel: s(t) is the integral of the frequency (offset + drift +
// random walk + sine), checked against a fine numerical integration of
// the frequency the model draws.
func TestSysModel(t *testing.T) {
	c := SysClock{Offset: 3 * time.Microsecond, DriftPPM: 2, Wander: Wander{RandomWalkPPM: 0.05, SinePPM: 1, SinePeriod: 30 * time.Second}, Seed: 7}
	m := newSysModel(c, 1, 100)
	if got := m.at(0); math.Abs(got-3000) > 1e-6 {
		t.Fatalf("s(0) = %g ns, want the offset 3000", got)
	}
	freq := func(ts float64) float64 { // ppm
		k := min(int(ts), len(m.freq)-1)
		return c.DriftPPM + m.freq[k] + c.Wander.SinePPM*math.Sin(2*math.Pi*ts/c.Wander.SinePeriod.Seconds()+m.phase)
	}
	const dt = 1e-4
	s := 3000.0
	for i := range 1_000_000 { // 100 s
		ts := (float64(i) + 0.5) * dt
		s += freq(ts) * 1e3 * dt
		if (i+1)%50_000 == 0 {
			at := int64(float64(i+1) * dt * 1e9)
			if got := m.at(at); math.Abs(got-s) > 0.5 {
				t.Fatalf("s(%v) = %g ns, integrated %g ns", time.Duration(at), got, s)
			}
		}
	}
	// Another host draws another walk; the same host the same one.
	if newSysModel(c, 2, 100).at(50e9) == m.at(50e9) || newSysModel(c, 1, 100).at(50e9) != m.at(50e9) {
		t.Error("the model is not a function of (seed, host)")
	}
	// Beyond the drawn seconds the last frequency holds (no panic).
	if v := m.at(500e9); math.IsNaN(v) || math.IsInf(v, 0) {
		t.Errorf("s(500 s) = %g", v)
	}
}

// TestChronySynced: chronyd's correction counts only with a reference and
// a leap status other than 3.
func TestChronySynced(t *testing.T) {
	for _, c := range []struct {
		t    chronycmd.Tracking
		want bool
	}{
		{chronycmd.Tracking{RefID: 0x47434c4b, Stratum: 1}, true},
		{chronycmd.Tracking{RefID: 0x47434c4b, Stratum: 1, Leap: 1}, true},
		{chronycmd.Tracking{RefID: 0x47434c4b, Stratum: 1, Leap: 3}, false},
		{chronycmd.Tracking{RefID: 0, Stratum: 0}, false},
	} {
		if got := chronySynced(c.t); got != c.want {
			t.Errorf("%+v: synced %v, want %v", c.t, got, c.want)
		}
	}
}

// TestCandmClient: the lab's client against a stand-in chronyd that sends
// a late reply to the previous request before each answer, refuses one
// request and ignores another: a late reply is skipped, a refusal is an
// error wrapping chronycmd.ErrRefused, a timeout an error, and every
// answer is the one to its own request (the stand-in puts the sequence in
// the reference id).
func TestCandmClient(t *testing.T) {
	dir := t.TempDir()
	srvPath := filepath.Join(dir, "chronyd.sock")
	srv, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: srvPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	const refuse, ignore = 3, 4
	// answer turns a request into chronyd's reply (the request is padded
	// to the reply's length): type 2, RPY_TRACKING, status, the sequence
	// at 16, the reference id at 28.
	answer := func(req []byte, seq uint32, status uint16) []byte {
		b := append([]byte(nil), req...)
		b[1] = 2
		binary.BigEndian.PutUint16(b[6:], 5)
		binary.BigEndian.PutUint32(b[8:], uint32(status)<<16)
		binary.BigEndian.PutUint32(b[16:], seq)
		binary.BigEndian.PutUint32(b[28:], seq)
		return b
	}
	go func() {
		buf := make([]byte, 1024)
		for {
			n, from, err := srv.ReadFromUnix(buf)
			if err != nil {
				return
			}
			req := buf[:n]
			seq := binary.BigEndian.Uint32(req[8:])
			if seq > 1 {
				srv.WriteToUnix(answer(req, seq-1, 0), from) // late
			}
			switch seq {
			case ignore:
			case refuse:
				srv.WriteToUnix(answer(req, seq, 1), from)
			default:
				srv.WriteToUnix(answer(req, seq, 0), from)
			}
		}
	}()
	c, err := dialCandm(srvPath, filepath.Join(dir, "client.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for seq := uint32(1); seq <= 6; seq++ {
		tr, err := c.tracking(200 * time.Millisecond)
		switch seq {
		case refuse:
			if !errors.Is(err, chronycmd.ErrRefused) {
				t.Errorf("request %d (refused): %+v, %v; want ErrRefused", seq, tr, err)
			}
		case ignore:
			if err == nil {
				t.Errorf("request %d (no answer): %+v, want a timeout", seq, tr)
			}
		default:
			if err != nil || tr.RefID != seq {
				t.Errorf("request %d: %+v, %v; want the answer to request %d", seq, tr, err, seq)
			}
		}
	}
}

func TestSummarizeChain(t *testing.T) {
	rd := []ChainReading{
		{AtNs: 1e9, ErrNs: 900_000}, // warm-up: left out
		{AtNs: 11e9, ErrNs: 100, GclockErrNs: 50, LoNs: -1000, HiNs: 1000},
		{AtNs: 12e9, ErrNs: -300, GclockErrNs: -20, LoNs: -2000, HiNs: 500},
		{AtNs: 13e9, ErrNs: 5000, GclockErrNs: 10, LoNs: -1000, HiNs: 1000},   // beyond: the bound is max(D-E, L-D) = 6000, covers
		{AtNs: 14e9, ErrNs: 200, GclockErrNs: 0, LoNs: 100, HiNs: 1000},       // the page missed the truth: max(100, 800) = 800 covers
		{AtNs: 15e9, ErrNs: 0, GclockErrNs: 0, LoNs: math.MinInt64, HiNs: 10}, // no bound: infinite
	}
	r := summarizeChain(2, "x", rd, 10e9, 3)
	if r.Chain.Evaluations != 5 || r.Chain.ErrorMaxNs != 5000 || r.Gclock.ErrorMaxNs != 50 || r.Missing != 3 || r.FirstNs != 1e9 {
		t.Errorf("summary %+v", r)
	}
	if r.ClockBoundCovers != 1 || r.ClockBoundMaxNs != math.MaxInt64 {
		t.Errorf("ClockBound: covers %v, max %d", r.ClockBoundCovers, r.ClockBoundMaxNs)
	}
	for _, c := range []struct{ e, lo, hi, want int64 }{
		{0, -10, 10, 10}, {5, -10, 10, 15}, {-5, -10, 10, 15}, {50, 0, 10, 50}, {0, 5, 10, 10}, {-20, -10, -5, 15},
	} {
		if got := clockBoundFor(c.e, c.lo, c.hi); got != c.want {
			t.Errorf("clockBoundFor(%d, %d, %d) = %d, want %d", c.e, c.lo, c.hi, got, c.want)
		}
		// The bound holds the clock's error whenever the page held the truth.
		if c.lo <= 0 && c.hi >= 0 && max(c.e, -c.e) > clockBoundFor(c.e, c.lo, c.hi) {
			t.Errorf("clockBoundFor(%d, %d, %d) does not cover %d", c.e, c.lo, c.hi, c.e)
		}
	}
	if r := summarizeChain(1, "y", nil, 0, 7); r.FirstNs != -1 || r.Chain.Evaluations != 0 {
		t.Errorf("no readings: %+v", r)
	}
}

func TestCountTrackingUpdates(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tracking.log")
	log := `===================================================
   Date (UTC) Time     IP Address   St   Freq ppm   Skew ppm     Offset L Co  Offset sd Rem. corr. Root delay Root disp. Max. error
===================================================
2026-11-29 02:49:59 0.0.0.0          0      0.000 1000000.000  0.000e+00 ?  0  0.000e+00 -0.000e+00  1.000e+00  1.000e+00  1.500e+00
2026-11-29 02:50:15 GCLK             1     -0.084      9.767 -1.227e-06 N  1  8.321e-08 -0.000e+00  1.000e-09  3.294e-05  1.500e+00
2026-11-29 02:50:19 GCLK             1     -0.100      0.353 -1.954e-07 N  1  9.372e-08  1.561e-06  1.000e-09  2.075e-06  7.724e-05
`
	if err := os.WriteFile(p, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := countTrackingUpdates(p); n != 2 {
		t.Errorf("countTrackingUpdates = %d, want 2", n)
	}
	if n := countTrackingUpdates(p + ".missing"); n != 0 {
		t.Errorf("missing file: %d", n)
	}
}

// TestChronyDropIn: deploy/chrony/gclock.conf is the configuration `gclock
// lab chain` measures as "shipped" (ShippedRefclock, ShippedChronyExtra),
// and says to set refclock.every to ShippedEvery.
func TestChronyDropIn(t *testing.T) {
	b, err := os.ReadFile("../deploy/chrony/gclock.conf")
	if err != nil {
		t.Fatal(err)
	}
	var refclock, extra []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if f := strings.Fields(l); f[0] == "refclock" {
			if len(f) < 3 || f[1] != "SOCK" {
				t.Fatalf("refclock line %q: want refclock SOCK PATH ...", l)
			}
			refclock = append(refclock, strings.Join(f[3:], " "))
		} else {
			extra = append(extra, l)
		}
	}
	if len(refclock) != 1 || refclock[0] != ShippedRefclock {
		t.Errorf("refclock options %q, want one line with %q (what gclock lab chain measured)", refclock, ShippedRefclock)
	}
	if strings.Join(extra, "\n") != ShippedChronyExtra {
		t.Errorf("other lines %q, want %q", extra, ShippedChronyExtra)
	}
	if !strings.Contains(string(b), "every: "+ShippedEvery.String()) {
		t.Errorf("the drop-in does not say refclock.every %v", ShippedEvery)
	}
	// The daemon's default feed is the one the drop-in was measured with,
	// so that the socket's path is all a user sets.
	if d := daemon.DefaultConfig().Refclock.Every.D(); d != ShippedEvery {
		t.Errorf("the daemon's default refclock.every is %v, the drop-in's %v", d, ShippedEvery)
	}
}

// chainAllowance is what the chain may add to gclock's error at the p99
// (docs/daemon.md, "NTP and chrony": measured up to 1.7 us beyond gclock's
// p99 with a 1 ppm wander; 10 us leaves room for a loaded machine).
const chainAllowance = 10_000

// TestLabChain runs the chain as shipped (the refclock every ShippedEvery,
// chronyd -x with ShippedRefclock) on 3 hosts, the system clock chronyd
// disciplines emulated 2 ms off and 1 ppm fast: chronyd must find an
// estimate on both fed hosts within the warm-up, every estimate must be
// within the page's served bound plus chainAllowance of the truth (a
// chain with the sign of the offset wrong is 4 ms off, one that ignores
// the feed never synchronises), its p99 within gclock's plus
// chainAllowance, and the ClockBound bound must hold the clock chronyd
// steers.
func TestLabChain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a lab for 40 s")
	}
	needLab(t)
	if _, err := exec.LookPath("chronyd"); err != nil {
		t.Skip("chronyd not installed (ci/deps.sh installs chrony)")
	}
	l, gc := gclockLab(t, 3)
	cc := DefaultChainConfig()
	gc.Duration, gc.Warmup = 40*time.Second, 12*time.Second
	cc.Gclock = gc
	cc.Settings = cc.Settings[:1]
	cc.SysClock = SysClock{Offset: 2 * time.Millisecond, DriftPPM: 1, Wander: DefaultWander(), Seed: 3}
	res, err := l.RunChain(t.Context(), cc)
	if err != nil {
		t.Fatalf("RunChain: %v", err)
	}
	t.Logf("\n%s", ChainReport(res))
	if len(res.Rows) != 2 {
		t.Fatalf("%d rows, want 2 (hosts 1 and 2)", len(res.Rows))
	}
	for _, r := range res.Rows {
		if r.Chain.Evaluations == 0 || r.FirstNs < 0 || r.FirstNs > gc.Warmup.Nanoseconds() {
			t.Errorf("host %d: chronyd's first estimate at %v (want within the %v warm-up), %d reads after it, %d missing",
				r.Host, time.Duration(r.FirstNs), gc.Warmup, r.Chain.Evaluations, r.Missing)
			continue
		}
		for _, rd := range r.Readings {
			if rd.AtNs < gc.Warmup.Nanoseconds() {
				continue
			}
			if b := max(-rd.LoNs, rd.HiNs) + chainAllowance; max(rd.ErrNs, -rd.ErrNs) > b {
				t.Errorf("host %d at %v: chronyd's clock %d ns from gclock's time, beyond the served bound + allowance %d ns",
					r.Host, time.Duration(rd.AtNs), rd.ErrNs, b)
				break
			}
		}
		if r.Chain.ErrorP99Ns > r.Gclock.ErrorP99Ns+chainAllowance {
			t.Errorf("host %d: chain p99 %d ns, gclock's %d ns + allowance %d ns", r.Host, r.Chain.ErrorP99Ns, r.Gclock.ErrorP99Ns, chainAllowance)
		}
		if r.ClockBoundCovers != 1 {
			t.Errorf("host %d: the ClockBound bound held the clock chronyd steers in %.4f of reads, want all", r.Host, r.ClockBoundCovers)
		}
	}
}
