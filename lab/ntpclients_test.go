package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/ntp"
)

// Stock NTP clients the lab queries gclock's NTP server with (Debian's
// ntpsec-ntpdig, ntpsec-ntpdate, a shell shim over ntpdig, and chrony). None of them touches the
// clock as run here: ntpdig without -S/-s, ntpdate only with -q (which
// runs ntpdig without them) and chronyd only with -Q.
const (
	clientNtpdig  = "ntpdig"
	clientNtpdate = "ntpdate"
	clientChronyd = "chronyd"
)

// ntpClients are the clients queryNTP knows, in the order tests use them.
var ntpClients = []string{clientNtpdig, clientNtpdate, clientChronyd}

// ntpMeasurement is what one stock client reported about one server.
type ntpMeasurement struct {
	Client string
	// OffsetNs is the server's time minus the client's clock, as the client
	// reports it (microsecond resolution in all three).
	OffsetNs int64
	// DelayNs is the round trip the client measured plus the server's
	// root delay (ntpdig, ntpdate: from the four timestamps and the reply;
	// chronyd: the largest of its samples).
	DelayNs int64
	// RootDispNs is the server's root dispersion as the client read it
	// (ntpdig's hex dump of the reply; chronyd's measurements log: the
	// largest of its samples).
	RootDispNs int64
	Output     string
}

// Bound is the error bound on OffsetNs that the NTP fields give a client:
// the server's root dispersion (its own error bound) plus half the round
// trip, plus the printed microsecond; rootDisp < 0 takes the
// measurement's own.
func (m ntpMeasurement) Bound(rootDisp int64) int64 {
	if rootDisp < 0 {
		rootDisp = m.RootDispNs
	}
	return rootDisp + m.DelayNs/2 + 2000
}

// runner runs a command and returns its combined output.
type runner func(ctx context.Context, argv []string) ([]byte, error)

// localRunner runs commands in this process's namespace.
func localRunner(ctx context.Context, argv []string) ([]byte, error) {
	return exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
}

// hostRunner runs commands in a host's namespace (Exec) and waits for them.
func (l *Lab) hostRunner(host int) runner {
	return func(ctx context.Context, argv []string) ([]byte, error) {
		f, err := os.CreateTemp(l.Config().RunDir, "out-*")
		if err != nil {
			return nil, err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		p, err := l.Exec(host, argv, netlab.ExecOptions{Stdout: f, Stderr: f})
		if err != nil {
			return nil, err
		}
		select {
		case <-p.Done():
		case <-ctx.Done():
			p.Stop(time.Second)
		}
		out, rerr := os.ReadFile(f.Name())
		if err := p.Err(); err != nil {
			return out, fmt.Errorf("%s in host %d: %w", argv[0], host, err)
		}
		return out, rerr
	}
}

// queryNTP asks server (an IP address; port 123: ntpdig takes no port)
// for the time with one stock client and parses what it reports. dir is a
// private directory for chronyd's pid file and measurements log.
func queryNTP(ctx context.Context, run runner, client, server, dir string) (ntpMeasurement, error) {
	m := ntpMeasurement{Client: client, RootDispNs: -1}
	var argv []string
	switch client {
	case clientNtpdig:
		argv = []string{"ntpdig", "-d", "-d", "-t", "2", server}
	case clientNtpdate:
		// -q: query only (the shim then runs ntpdig without -S/-s); -d -d
		// passes through to ntpdig.
		argv = []string{"ntpdate", "-q", "-d", "-d", "-t", "2", server}
	case clientChronyd:
		logdir := filepath.Join(dir, "chronyd-q")
		if err := os.RemoveAll(logdir); err != nil {
			return m, err
		}
		if err := os.MkdirAll(logdir, 0o700); err != nil {
			return m, err
		}
		// -Q: print the offset, never set the clock. Four samples (iburst),
		// each logged with its delay and the server's root dispersion.
		argv = []string{"chronyd", "-Q", "-u", "root", "-t", "15", "server " + server + " iburst",
			"cmdport 0", "pidfile " + filepath.Join(logdir, "chronyd.pid"), "logdir " + logdir, "log measurements"}
	default:
		return m, fmt.Errorf("lab: ntp client %q: unknown (want ntpdig, ntpdate or chronyd)", client)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return m, fmt.Errorf("lab: ntp client %s: not installed (ci/deps.sh installs ntpsec-ntpdig, ntpsec-ntpdate, chrony): %w", client, err)
	}
	out, err := run(ctx, argv)
	m.Output = string(out)
	if err != nil {
		return m, fmt.Errorf("lab: %s %s: %w: %s", client, server, err, strings.TrimSpace(string(out)))
	}
	switch client {
	case clientNtpdig, clientNtpdate:
		var d ntpdigDebug
		if d, err = parseNtpdigDebug(string(out), time.Now().UnixNano()); err != nil {
			break
		}
		m.OffsetNs, m.DelayNs = d.OffsetNs, d.DelayNs
		if !d.HaveReply {
			err = errors.New("no hex dump of the reply in its -d -d output")
			break
		}
		if d.Reply.Leap == ntp.LeapUnsync || d.Reply.Stratum == 0 || d.Reply.Stratum >= ntp.MaxStratum {
			err = fmt.Errorf("the server says it is unsynchronised (leap %d, stratum %d)", d.Reply.Leap, d.Reply.Stratum)
			break
		}
		m.RootDispNs = ntp.ShortNs(d.Reply.RootDispersion) + 1 // ShortNs truncates
		m.DelayNs += ntp.ShortNs(d.Reply.RootDelay) + 1
		// The result line must agree (ntpdig's own arithmetic, at its us).
		var lineOff int64
		if lineOff, _, err = parseNtpdigLine(string(out)); err == nil && (lineOff-m.OffsetNs > 1500 || m.OffsetNs-lineOff > 1500) {
			err = fmt.Errorf("result line offset %d ns, timestamps give %d ns", lineOff, m.OffsetNs)
		}
	case clientChronyd:
		if m.OffsetNs, err = parseChronydQ(string(out)); err != nil {
			break
		}
		var log []byte
		if log, err = os.ReadFile(filepath.Join(dir, "chronyd-q", "measurements.log")); err != nil {
			break
		}
		var ss []chronyMeasurement
		if ss, err = parseChronyMeasurements(string(log)); err != nil {
			break
		}
		for _, s := range ss {
			m.DelayNs = max(m.DelayNs, s.DelayNs+s.RootDelayNs)
			m.RootDispNs = max(m.RootDispNs, s.RootDispNs)
		}
	}
	if err != nil {
		return m, fmt.Errorf("lab: %s %s: %w", client, server, err)
	}
	return m, nil
}

// parseSeconds reads a decimal number of seconds ("1795603966.869897",
// "-0.000012") into ns without going through float64 (a Unix time in
// float64 keeps only ~0.2 us).
func parseSeconds(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	ip, fp, _ := strings.Cut(s, ".")
	if ip == "" || len(fp) > 9 || strings.ContainsAny(ip+fp, "+-") {
		return 0, fmt.Errorf("%q: not a number of seconds", s)
	}
	sec, err := strconv.ParseInt(ip, 10, 64)
	if err != nil || sec > math.MaxInt64/1_000_000_000-1 {
		return 0, fmt.Errorf("%q: not a number of seconds", s)
	}
	var frac int64
	if fp != "" {
		f, err := strconv.ParseUint(fp, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: not a number of seconds", s)
		}
		frac = int64(f)
		for range 9 - len(fp) {
			frac *= 10
		}
	}
	v := sec*1e9 + frac
	if neg {
		v = -v
	}
	return v, nil
}

// ntpdigDebug is what `ntpdig -d -d` prints about one exchange.
type ntpdigDebug struct {
	OffsetNs, DelayNs int64      // from the four timestamps, at NTP's resolution
	Reply             ntp.Packet // the server's reply, from the hex dump
	HaveReply         bool
}

// parseNtpdigDebug reads the four timestamps `ntpdig -d` prints in hex,
//
//	org t1: eeb13c7e.deb19800 rec t2: eeb13c7e.df9930b5
//	xmt t3: eeb13c7e.df9f63d1 dst t4: eeb13c7e.def72000
//
// (the decimal lines after them are rounded to the microsecond), and with
// -d -d the hex dumps of the request and the reply (16 bytes a line, the
// reply's 48 bytes second). The offset ((t2-t1)+(t3-t4))/2 and delay
// (t4-t1)-(t3-t2) are RFC 5905's, the figures ntpdig reports; the reply
// gives the server's root dispersion, stratum and leap. pivot (ns since
// the epoch, e.g. time.Now) picks the NTP era.
func parseNtpdigDebug(out string, pivot int64) (ntpdigDebug, error) {
	var d ntpdigDebug
	var t [5]int64
	var have [5]bool
	var dump []byte
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if b, ok := hexDumpLine(f); ok {
			dump = append(dump, b...)
			continue
		}
		for i := 0; i+2 < len(f); i++ {
			if len(f[i+1]) != 3 || f[i+1][0] != 't' || f[i+1][2] != ':' {
				continue
			}
			k := int(f[i+1][1] - '0')
			hi, lo, ok := strings.Cut(f[i+2], ".")
			if k < 1 || k > 4 || !ok || len(hi) != 8 || len(lo) != 8 {
				continue // the decimal copies
			}
			v, err := strconv.ParseUint(hi+lo, 16, 64)
			if err != nil {
				return d, fmt.Errorf("ntpdig -d: t%d %q: not an NTP timestamp", k, f[i+2])
			}
			t[k], have[k] = ntp.UnixNs(v, pivot), true
		}
	}
	for k := 1; k <= 4; k++ {
		if !have[k] {
			return d, fmt.Errorf("ntpdig -d: no t%d in its output (no answer?): %q", k, strings.TrimSpace(out))
		}
	}
	d.OffsetNs = ((t[2] - t[1]) + (t[3] - t[4])) / 2
	d.DelayNs = (t[4] - t[1]) - (t[3] - t[2])
	if len(dump) >= 2*ntp.HeaderLen {
		if err := d.Reply.UnmarshalBinary(dump[ntp.HeaderLen : 2*ntp.HeaderLen]); err == nil {
			d.HaveReply = d.Reply.Mode == ntp.ModeServer
		}
	}
	return d, nil
}

// hexDumpLine reads one line of ntpdig's hex dump: 16 two-digit hex bytes
// and their printable rendering.
func hexDumpLine(f []string) ([]byte, bool) {
	if len(f) < 17 {
		return nil, false
	}
	b := make([]byte, 16)
	for i := range 16 {
		if len(f[i]) != 2 {
			return nil, false
		}
		v, err := strconv.ParseUint(f[i], 16, 8)
		if err != nil {
			return nil, false
		}
		b[i] = byte(v)
	}
	return b, true
}

// parseNtpdigLine reads ntpdig's (and ntpdate -q's) result line,
//
//	2026-11-25 10:52:46.976870 (+0000) +0.002956 +/- 0.000103 10.77.0.1 s1 no-leap
//
// and returns the offset and the "+/-" (half the round trip plus the
// clocks' precision).
func parseNtpdigLine(out string) (offsetNs, plusMinusNs int64, err error) {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 1; i+1 < len(f); i++ {
			if f[i] != "+/-" {
				continue
			}
			if offsetNs, err = parseSeconds(f[i-1]); err != nil {
				return 0, 0, fmt.Errorf("ntpdig: offset: %w", err)
			}
			if plusMinusNs, err = parseSeconds(f[i+1]); err != nil {
				return 0, 0, fmt.Errorf("ntpdig: +/-: %w", err)
			}
			if len(f) > i+3 && f[len(f)-1] == "unsync" {
				return 0, 0, errors.New("ntpdig: the server says it is unsynchronised")
			}
			return offsetNs, plusMinusNs, nil
		}
	}
	return 0, 0, fmt.Errorf("ntpdig: no result line in %q", strings.TrimSpace(out))
}

// parseChronydQ reads chronyd -Q's "System clock wrong by 0.002996 seconds
// (ignored)": the server's time minus the system clock.
func parseChronydQ(out string) (int64, error) {
	const key = "System clock wrong by "
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != "seconds" {
			return 0, fmt.Errorf("chronyd -Q: %q: unexpected format", line)
		}
		return parseSeconds(f[0])
	}
	return 0, fmt.Errorf("chronyd -Q: no %q line (no answer within its timeout?): %q", strings.TrimSpace(key), strings.TrimSpace(out))
}

// chronyMeasurement is one line of chronyd's measurements.log.
type chronyMeasurement struct {
	Leap                    string
	Stratum                 int
	OffsetNs, DelayNs       int64 // offset: the source minus the local clock
	DispersionNs            int64 // the sample's peer dispersion
	RootDelayNs, RootDispNs int64
	Tests                   string // "111 111 1111": chrony's packet tests, all passed
	RefID                   string
}

// parseChronyMeasurements reads chronyd's measurements.log (`log
// measurements`): per sample the leap status, stratum, tests, offset,
// delay and the server's root delay and dispersion.
func parseChronyMeasurements(log string) ([]chronyMeasurement, error) {
	var out []chronyMeasurement
	sc := bufio.NewScanner(strings.NewReader(log))
	ln := 0
	for sc.Scan() {
		ln++
		f := strings.Fields(sc.Text())
		// Date Time IP L St 123 567 ABCD LP RP Score Offset PeerDel PeerDisp RootDel RootDisp Refid MTxRx
		if len(f) < 17 || strings.HasPrefix(f[0], "=") || f[0] == "Date" {
			continue
		}
		st, err := strconv.Atoi(f[4])
		if err != nil {
			continue
		}
		var v [5]float64
		for i, k := range []int{11, 12, 13, 14, 15} {
			if v[i], err = strconv.ParseFloat(f[k], 64); err != nil || math.IsNaN(v[i]) || math.Abs(v[i]) > 1e6 {
				return nil, fmt.Errorf("chrony measurements.log: line %d: field %d %q: not a number", ln, k+1, f[k])
			}
		}
		ns := func(x float64) int64 { return int64(math.Round(x * 1e9)) }
		out = append(out, chronyMeasurement{Leap: f[3], Stratum: st, Tests: f[5] + " " + f[6] + " " + f[7],
			OffsetNs: ns(v[0]), DelayNs: ns(v[1]), DispersionNs: ns(v[2]), RootDelayNs: ns(v[3]), RootDispNs: ns(v[4]), RefID: f[16]})
	}
	if len(out) == 0 {
		return nil, errors.New("chrony measurements.log: no sample")
	}
	return out, nil
}
