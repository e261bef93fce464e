//go:build linux

package refclock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chronySystemTime reads `chronyc tracking`'s "System time" as system
// clock minus NTP time, in seconds; ok false before chronyd has a source.
func chronySystemTime(out string) (float64, bool) {
	if strings.Contains(out, "Not synchronised") {
		return 0, false
	}
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, ":")
		if strings.TrimSpace(k) != "System time" {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 3 {
			return 0, false
		}
		s, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, false
		}
		if f[2] == "slow" {
			s = -s
		}
		return s, true
	}
	return 0, false
}

// TestChronydReadsSamples runs the real chronyd (-x: it never touches the
// clock) with `refclock SOCK` and feeds it samples saying that true time
// is CLOCK_REALTIME + 1.234567 ms: chronyc tracking must then report the
// system clock 1.234567 ms slow of NTP time. This pins the protocol
// (layout, byte order, sign of the offset) against chronyd itself.
func TestChronydReadsSamples(t *testing.T) {
	if _, err := exec.LookPath("chronyd"); err != nil {
		t.Skip("chronyd not installed (ci/deps.sh installs chrony)")
	}
	if os.Geteuid() != 0 {
		t.Skip("chronyd needs root (-u root); run the tests as root")
	}
	dir, err := os.MkdirTemp("", "gclock-refclock")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o700) // chronyd refuses a socket directory others can read
	sock, cmd := filepath.Join(dir, "gclock.sock"), filepath.Join(dir, "chronyd.sock")
	conf := fmt.Sprintf("pidfile %s/chronyd.pid\nbindcmdaddress %s\ncmdport 0\n"+
		"refclock SOCK %s refid GCLK poll 2 precision 1e-7\n", dir, cmd, sock)
	cf := filepath.Join(dir, "chrony.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "chronyd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := exec.CommandContext(ctx, "chronyd", "-x", "-u", "root", "-d", "-f", cf)
	c.Stdout, c.Stderr = logf, logf
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		c.Wait()
	}()
	_ = os.MkdirAll("/var/run/chrony", 0o750) // chronyc's reply socket
	const offset = 1.234567e-3
	s := NewSender(sock)
	defer s.Close()
	deadline := time.Now().Add(40 * time.Second) // poll 2: chronyd takes a sample every 4 s
	var got float64
	var ok bool
	var sent int
	for time.Now().Before(deadline) {
		if s.Send(Sample{Time: time.Now().UnixNano(), Offset: offset}) == nil {
			sent++
		}
		time.Sleep(100 * time.Millisecond)
		if sent%5 != 4 {
			continue
		}
		out, err := exec.Command("chronyc", "-h", cmd, "tracking").CombinedOutput()
		if err != nil {
			continue
		}
		if got, ok = chronySystemTime(string(out)); ok {
			t.Logf("after %d samples:\n%s", sent, out)
			break
		}
	}
	if !ok {
		log, _ := os.ReadFile(filepath.Join(dir, "chronyd.log"))
		t.Fatalf("chronyd never used the samples (%d sent); its log:\n%s", sent, log)
	}
	// chronyd works in ns; the sample's instant is truncated to the us, which
	// moves the offset by the clock's rate error over it (nothing here).
	if d := got + offset; d > 2e-9 || d < -2e-9 {
		t.Errorf("chronyd: system time %+.9f s of NTP time, want %+.9f", got, -offset)
	}
}
