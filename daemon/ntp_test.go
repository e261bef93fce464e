package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/refclock"
	"github.com/gclock/gclock/ntp"
)

func TestNTPConfig(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.RealTime.Mode = RealTimeReference
		return c
	}
	cases := []struct {
		name  string
		edit  func(*Config)
		field string // "" = valid
		msg   string
	}{
		{"defaults: off", func(c *Config) { c.RealTime.Mode = RealTimeNone }, "", ""},
		{"ntp and refclock on", func(c *Config) { c.NTP.Listen = ":123"; c.Refclock.Sock = "/run/chrony.gclock.sock" }, "", ""},
		{"mean-drift is served too", func(c *Config) { c.RealTime.Mode = RealTimeMeanDrift; c.NTP.Listen = "127.0.0.1:1123" }, "", ""},
		{"ntp without a UTC scale", func(c *Config) { c.RealTime.Mode = RealTimeNone; c.NTP.Listen = ":123" }, "ntp.listen", "real_time.mode is none"},
		{"refclock without a UTC scale", func(c *Config) { c.RealTime.Mode = RealTimeNone; c.Refclock.Sock = "/run/x.sock" }, "refclock.sock", "real_time.mode is none"},
		{"ntp not host:port", func(c *Config) { c.NTP.Listen = "123" }, "ntp.listen", "not host:port"},
		{"ntp port 0", func(c *Config) { c.NTP.Listen = ":0" }, "ntp.listen", "not in 1..65535"},
		{"ntp on the daemon's socket", func(c *Config) { c.NTP.Listen = ":3190" }, "ntp.listen", "same UDP socket"},
		{"stratum 0", func(c *Config) { c.NTP.Stratum = 0 }, "ntp.stratum", "outside [1, 15]"},
		{"stratum 16", func(c *Config) { c.NTP.Stratum = 16 }, "ntp.stratum", "outside [1, 15]"},
		{"relative socket", func(c *Config) { c.Refclock.Sock = "chrony.sock" }, "refclock.sock", "absolute path"},
		{"every 1ms", func(c *Config) { c.Refclock.Every = Duration(time.Millisecond) }, "refclock.every", "outside [10ms, 1h]"},
		{"allow list", func(c *Config) { c.NTP.Allow = []string{"0.0.0.0/0", "::/0", "192.0.2.7", "::ffff:10.0.0.0/104"} }, "", ""},
		{"allow not a CIDR", func(c *Config) { c.NTP.Allow = []string{"10.0.0.0/33"} }, "ntp.allow", "not a CIDR"},
		{"rate limit off", func(c *Config) { c.NTP.RateLimit = NTPRateLimitConfig{} }, "", ""},
		{"rate limit burst 0", func(c *Config) { c.NTP.RateLimit.Interval, c.NTP.RateLimit.Burst = Duration(time.Second), 0 }, "ntp.rate_limit", "burst 0"},
		{"rate limit leak 0", func(c *Config) { c.NTP.RateLimit.Interval, c.NTP.RateLimit.Leak = Duration(time.Second), 0 }, "ntp.rate_limit", "leak 0"},
		{"rate limit kod 5", func(c *Config) { c.NTP.RateLimit.KoD = 5 }, "ntp.rate_limit", "kod 5"},
		{"rate limit leak 20", func(c *Config) { c.NTP.RateLimit.Leak = 20 }, "ntp.rate_limit", "leak 20"},
	}
	for _, tc := range cases {
		c := base()
		tc.edit(&c)
		err := c.Validate()
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: err %v, want %s: ...%s...", tc.name, err, tc.field, tc.msg)
		}
	}
	// From YAML, with the line.
	_, err := Parse([]byte("real_time:\n  mode: none\nntp:\n  listen: \":123\"\n"))
	if err == nil || !strings.Contains(err.Error(), "line 4: ntp.listen") {
		t.Errorf("YAML: %v, want line 4: ntp.listen", err)
	}
	c, err := Parse([]byte("real_time: {mode: reference-realtime}\nntp: {listen: \":123\"}\nrefclock: {sock: /run/chrony.gclock.sock}\n"))
	if err != nil || c.NTP.Stratum != 1 || c.Refclock.Every != Duration(250*time.Millisecond) || c.NTP.RateLimit.Burst != 16 || c.NTP.Allow != nil {
		t.Errorf("YAML with defaults: %+v %+v, %v", c.NTP, c.Refclock, err)
	}
	// The rate limit is off by default, as chrony's (issue 29: on, a flood
	// forged with a client's address cut it to 0 answers of 10); an
	// interval alone turns it on with the burst and a leak.
	if c.NTP.RateLimit.limit().Interval != 0 {
		t.Errorf("ntp.rate_limit on by default: %+v", c.NTP.RateLimit)
	}
	c, err = Parse([]byte("real_time: {mode: reference-realtime}\nntp: {listen: \":123\", rate_limit: {interval: 2s}}\n"))
	if l := c.NTP.RateLimit.limit(); err != nil || l.Interval != int64(2*time.Second) || l.Burst != 16 || l.Leak != 2 || l.KoD != 0 {
		t.Errorf("rate_limit: {interval: 2s}: %+v, %v", l, err)
	}
}

func TestSameSocket(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{":123", "127.0.0.1:123", true}, {"0.0.0.0:3190", "10.0.0.1:3190", true}, {"10.0.0.1:123", "10.0.0.2:123", false},
		{"10.0.0.1:123", "10.0.0.1:124", false}, {"bad", ":1", false},
	} {
		if got := sameSocket(c.a, c.b); got != c.want {
			t.Errorf("sameSocket(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

// TestRunNTP runs three daemons serving UTC (reference-realtime) over
// loopback, node 3 on an emulated clock 3 ms ahead and 40 ppm fast, each
// with an NTP server, node 1 (the reference) and node 3 with a refclock
// feed. The machine's CLOCK_REALTIME is the truth (the reference serves
// it, and every process here reads the same one), so an NTP client's
// offset is the served time's error plus the exchange's own uncertainty:
// it must be within the root dispersion (the served bound) plus half the
// round trip, and that bound must be far below the emulated 3 ms (or the
// check could not tell a node serving its own clock). The refclock samples
// must be within the page's bound width of 0, and the reference, which
// serves its own CLOCK_REALTIME, must send none.
//
// On loopback UDP in real time: its point is NTP over the kernel's sockets with Go's
// ntp.Query as the client.
func TestRunNTP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons for a few seconds")
	}
	cfgs := rtCluster(t, RealTimeReference)
	for i := range cfgs {
		cfgs[i].NTP.RateLimit = NTPRateLimitConfig{} // 50 queries a second (TestRunNTPLimits limits)
	}
	cfgs[2].Clock = ClockConfig{Source: ClockEmulated, Emulated: EmulatedClockConfig{Offset: Duration(3 * time.Millisecond), DriftPPM: 40, Seed: 1}}
	ports := freePorts(t, 3)
	dir := t.TempDir()
	socks := map[int]*net.UnixConn{}
	for i := range cfgs {
		cfgs[i].NTP.Listen = fmt.Sprintf("127.0.0.1:%d", ports[i])
		if i == 0 || i == 2 {
			p := filepath.Join(dir, fmt.Sprintf("chrony%d.sock", i+1))
			c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			socks[i] = c
			cfgs[i].Refclock = RefclockConfig{Sock: p, Every: Duration(100 * time.Millisecond)}
			cfgs[i].Metrics.Listen = "unix:" + filepath.Join(dir, fmt.Sprintf("metrics%d.sock", i+1))
		}
	}
	readers, stop := startCluster(t, cfgs)
	mono := newMonotone(len(readers))
	waitSynced(t, readers, mono, int64(5*time.Millisecond), time.Now().Add(20*time.Second))

	end := time.Now().Add(max(*runFor, 3*time.Second))
	type stat struct{ errs, disp, delay []int64 }
	stats := make([]stat, 3)
	for time.Now().Before(end) {
		for i := range cfgs {
			res, err := ntp.Query(context.Background(), cfgs[i].NTP.Listen)
			if err != nil {
				t.Fatalf("node %d: %v", i+1, err)
			}
			p := res.Reply
			disp := ntp.ShortNs(p.RootDispersion)
			if d := res.Offset.Nanoseconds(); d > disp+res.Delay.Nanoseconds()/2+1000 || -d > disp+res.Delay.Nanoseconds()/2+1000 {
				t.Errorf("node %d: offset %v beyond root dispersion %d ns + delay/2 %v", i+1, res.Offset, disp, res.Delay/2)
			}
			// Under 1 ms, the offset check above tells a node serving its own
			// clock (+3 ms). Under CI load the served bound once widened to
			// 1.1-1.8 ms: a CLOCK_REALTIME sample's half-width was that of
			// the widest of its five read sandwiches, one of them preempted
			// (transport.medianBound); with the median's own bound it stays
			// near the polls' 500 ppm x 200 ms (max 0.23 ms beside a compile
			// loop or eight busy loops on 2 cores, median 0.06-0.12 ms).
			if disp > int64(time.Millisecond) {
				t.Errorf("node %d: root dispersion %d ns: too wide to tell a node serving its own clock (+3 ms)", i+1, disp)
			}
			wantStratum, wantRef := uint8(2), ntp.RefIDString("\x7f\x00\x00\x01")
			if i == 0 {
				wantStratum, wantRef = 1, ntp.RefIDString("GCLK")
			}
			if p.Stratum != wantStratum || p.RefID != wantRef || p.Leap != ntp.LeapNone || p.RootDelay != 0 {
				t.Errorf("node %d: stratum %d refid %#x leap %d root delay %d, want %d %#x 0 0", i+1, p.Stratum, p.RefID, p.Leap, p.RootDelay, wantStratum, wantRef)
			}
			if ref := ntp.UnixNs(p.RefTime, time.Now().UnixNano()); ref > ntp.UnixNs(p.Transmit, ref) || time.Since(time.Unix(0, ref)) > 5*time.Second {
				t.Errorf("node %d: reference time %v: after the transmit time or older than 5 s", i+1, time.Unix(0, ref))
			}
			e := res.Offset.Nanoseconds()
			stats[i].errs = append(stats[i].errs, max(e, -e))
			stats[i].disp = append(stats[i].disp, disp)
			stats[i].delay = append(stats[i].delay, res.Delay.Nanoseconds())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, s := range stats {
		t.Logf("node %d (%s clock), %d queries: |offset| median %d ns, p99 %d ns, max %d ns; root dispersion median %d ns, max %d ns; delay median %d ns",
			i+1, cfgs[i].Clock.Source, len(s.errs), pctl(s.errs, 0.5), pctl(s.errs, 0.99), pctl(s.errs, 1), pctl(s.disp, 0.5), pctl(s.disp, 1), pctl(s.delay, 0.5))
	}

	// Refclock samples from node 3: offset = served - CLOCK_REALTIME, truth 0.
	c := socks[2]
	var offs []int64
	buf := make([]byte, 128)
	for { // the samples queued while the clients ran
		c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			break
		}
	}
	for range 10 {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("node 3 refclock: %v", err)
		}
		s, err := refclock.Parse(buf[:n])
		if err != nil {
			t.Fatalf("node 3 refclock: %v", err)
		}
		page := mono.check(t, 2, readers[2])
		off := int64(s.Offset * 1e9)
		if off > page.Width()+1000 || -off > page.Width()+1000 {
			t.Errorf("node 3 refclock: offset %d ns beyond the bound width %d ns", off, page.Width())
		}
		if d := time.Since(time.Unix(0, s.Time)); d < 0 || d > time.Second {
			t.Errorf("node 3 refclock: sample time %v, %v ago", time.Unix(0, s.Time), d)
		}
		offs = append(offs, max(off, -off))
	}
	t.Logf("node 3 refclock: |offset| median %d ns, max %d ns over %d samples", pctl(offs, 0.5), pctl(offs, 1), len(offs))
	socks[0].SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := socks[0].Read(buf); err == nil {
		t.Errorf("the reference sent a refclock sample (%d bytes): it would feed chronyd its own clock", n)
	}
	// The counters, as Prometheus sees them.
	for _, i := range []int{0, 2} {
		m := scrapeUnix(t, strings.TrimPrefix(cfgs[i].Metrics.Listen, "unix:"))
		answered := m[`gclock_ntp_requests_total{result="answered"}`]
		sent, ref := m[`gclock_refclock_samples_total{result="sent"}`], m[`gclock_refclock_samples_total{result="reference"}`]
		if answered < float64(len(stats[i].errs)) || m[`gclock_ntp_requests_total{result="refused"}`] != 0 {
			t.Errorf("node %d metrics: %v answered, want >= %d queries", i+1, answered, len(stats[i].errs))
		}
		if (i == 0 && (sent != 0 || ref == 0)) || (i == 2 && (sent < 10 || ref != 0)) {
			t.Errorf("node %d metrics: refclock sent %v, skipped as reference %v", i+1, sent, ref)
		}
	}
	stop()
}

// scrapeUnix reads a daemon's metrics over its Unix socket: sample name
// with labels -> value.
func scrapeUnix(t *testing.T, sock string) map[string]float64 {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://gclock/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
			// Also without the node label every metric carries, for the
			// tests that read one daemon's metrics.
			if k := withoutNodeLabel(line[:i]); k != line[:i] {
				out[k] = v
			}
		}
	}
	return out
}

// TestRunNTPLimits runs a daemon's NTP server with a rate limit (1s, 16,
// leak 2, kod 2): a flood from one loopback address (2000 requests as fast
// as it can) gets the burst, an answer for about one in four of the rest
// and a KoD RATE for a quarter of the others, nothing for the rest; an allow list without loopback answers nothing; the
// counters say so. Then the NTP socket is released when the daemon fails
// to start after binding it (a state file it cannot create).
func TestRunNTPLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons")
	}
	cfgs := rtCluster(t, RealTimeReference)[:1]
	cfgs[0].Peers = cfgs[0].Peers[:1]
	cfgs[0].Reference.Order = []uint32{1}
	port := freePorts(t, 1)[0]
	dir := t.TempDir()
	cfgs[0].NTP.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	cfgs[0].NTP.RateLimit = NTPRateLimitConfig{Interval: Duration(time.Second), Burst: 16, Leak: 2, KoD: 2}
	cfgs[0].Metrics.Listen = "unix:" + filepath.Join(dir, "metrics.sock")
	_, stop := startCluster(t, cfgs)
	c, err := net.Dial("udp", cfgs[0].NTP.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var answers, kods int
	buf := make([]byte, 128)
	for i := range 2000 {
		q := ntp.Packet{Version: 4, Mode: ntp.ModeClient, Transmit: uint64(i + 1)}
		b, _ := q.MarshalBinary()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	for {
		c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, err := c.Read(buf)
		if err != nil {
			break
		}
		var p ntp.Packet
		if p.UnmarshalBinary(buf[:n]) != nil {
			continue
		}
		if p.Stratum == 0 && p.RefID == ntp.RefIDString("RATE") {
			kods++
		} else {
			answers++
		}
	}
	m := scrapeUnix(t, strings.TrimPrefix(cfgs[0].Metrics.Listen, "unix:"))
	limited, kod := m[`gclock_ntp_requests_total{result="limited"}`], m[`gclock_ntp_requests_total{result="kod"}`]
	t.Logf("2000 requests from one address: %d answers, %d KoD RATE read; metrics: %v limited, %v kod, %v answered",
		answers, kods, limited, kod, m[`gclock_ntp_requests_total{result="answered"}`])
	// The socket buffers may drop some of the flood and of the replies;
	// of what the server read beyond the burst, a quarter was answered
	// (the leak), a quarter of the rest got a KoD (a third of the dropped).
	over := limited + kod + m[`gclock_ntp_requests_total{result="answered"}`] - 16
	if answers < 16 || float64(answers) > 16+over/2 || over < 1000 || kod < limited/5 || kod > limited/2 || kods == 0 || float64(kods) > kod {
		t.Errorf("flood: %d answers, %d KoD read; metrics %v limited, %v kod", answers, kods, limited, kod)
	}
	stop()

	// An allow list without loopback.
	cfgs = rtCluster(t, RealTimeReference)[:1]
	cfgs[0].Peers = cfgs[0].Peers[:1]
	cfgs[0].Reference.Order = []uint32{1}
	cfgs[0].NTP.Listen = fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	cfgs[0].NTP.Allow = []string{"10.0.0.0/8"}
	cfgs[0].Metrics.Listen = "unix:" + filepath.Join(dir, "metrics2.sock")
	_, stop = startCluster(t, cfgs)
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		res, err := ntp.Query(ctx, cfgs[0].NTP.Listen)
		cancel()
		if err == nil || res.Reply.Mode != 0 {
			t.Errorf("a source outside ntp.allow was answered: %+v, %v", res.Reply, err)
		}
	}
	if m := scrapeUnix(t, strings.TrimPrefix(cfgs[0].Metrics.Listen, "unix:")); m[`gclock_ntp_requests_total{result="denied"}`] != 3 {
		t.Errorf("denied counter %v, want 3", m[`gclock_ntp_requests_total{result="denied"}`])
	}
	stop()

	// A start that fails after the NTP socket is bound releases it.
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfgs[0].Metrics.Listen = ""
	cfgs[0].State.File = filepath.Join(blocker, "sub", "state.json")
	if err := Run(context.Background(), cfgs[0], slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "state.file") {
		t.Fatalf("Run with a state file under a regular file: %v", err)
	}
	l, err := net.ListenPacket("udp", cfgs[0].NTP.Listen)
	if err != nil {
		t.Fatalf("the NTP socket is still bound after the failed start: %v", err)
	}
	l.Close()
}
