package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/engine/realtime"
)

// TestChronyFloat: chrony's 32-bit float (7-bit exponent, 25-bit
// coefficient) decoded as chrony's UTI_FloatNetworkToHost does.
func TestChronyFloat(t *testing.T) {
	enc := func(exp, coef int) uint32 { return uint32(exp&127)<<25 | uint32(coef&(1<<25-1)) }
	for _, tt := range []struct {
		x    uint32
		want float64
	}{
		{enc(2, 1<<23), 1},
		{enc(1, -(1 << 23)), -0.5},
		{enc(0, 0), 0},
		{enc(-10, 1<<24-1), float64(1<<24-1) * math.Pow(2, -35)},
		{enc(-64, 1), math.Pow(2, -89)},
		{enc(63, -(1 << 24)), -math.Pow(2, 62)},
	} {
		if got := chronyFloat(tt.x); got != tt.want {
			t.Errorf("%#08x: %g, want %g", tt.x, got, tt.want)
		}
	}
}

// trackingReply builds a reply as chronyd sends it.
func trackingReply(seq uint32, refID uint32, stratum, leap uint16, delay, disp uint32) []byte {
	b := make([]byte, candmRpyHeader+candmTrackingLen+4)
	b[0], b[1] = candmVersion, candmReply
	binary.BigEndian.PutUint16(b[4:], candmReqTracking)
	binary.BigEndian.PutUint16(b[6:], candmRpyTracking)
	binary.BigEndian.PutUint32(b[16:], seq)
	d := b[candmRpyHeader:]
	binary.BigEndian.PutUint32(d[0:], refID)
	binary.BigEndian.PutUint16(d[24:], stratum)
	binary.BigEndian.PutUint16(d[26:], leap)
	binary.BigEndian.PutUint32(d[64:], delay)
	binary.BigEndian.PutUint32(d[68:], disp)
	return b
}

// TestParseChronyTracking: the fields taken and every refusal.
func TestParseChronyTracking(t *testing.T) {
	one := uint32(2<<25 | 1<<23) // 1.0 s
	good := trackingReply(7, 0xc0a80101, 2, 1, one, one)
	tr, err := parseChronyTracking(good, 7)
	if err != nil || tr != (chronyTracking{RefID: 0xc0a80101, Stratum: 2, Leap: 1, RootDelay: 1, RootDisp: 1}) {
		t.Fatalf("%+v, %v", tr, err)
	}
	for _, tt := range []struct {
		name string
		edit func(b []byte)
		seq  uint32
	}{
		{"short", nil, 7},
		{"version", func(b []byte) { b[0] = 5 }, 7},
		{"request type", func(b []byte) { b[1] = 1 }, 7},
		{"another reply", func(b []byte) { b[7] = 1 }, 7},
		{"status failed", func(b []byte) { b[9] = 1 }, 7},
		{"sequence", nil, 8},
		{"leap 4", func(b []byte) { b[candmRpyHeader+27] = 4 }, 7},
		{"stratum 17", func(b []byte) { b[candmRpyHeader+25] = 17 }, 7},
		{"negative root delay", func(b []byte) { binary.BigEndian.PutUint32(b[candmRpyHeader+64:], 1<<24) }, 7},
		{"root dispersion 2^62", func(b []byte) { binary.BigEndian.PutUint32(b[candmRpyHeader+68:], 63<<25|1<<23) }, 7},
	} {
		b := append([]byte(nil), good...)
		if tt.name == "short" {
			b = b[:50]
		}
		if tt.edit != nil {
			tt.edit(b)
		}
		if _, err := parseChronyTracking(b, tt.seq); !errors.Is(err, errChrony) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	if r := chronyTrackingRequest(9); len(r) != candmRpyHeader+candmTrackingLen || r[0] != 6 || r[1] != 1 || r[5] != 33 || r[11] != 9 {
		t.Errorf("request % x", r[:20])
	}
}

// FuzzParseChronyTracking: any datagram is refused or gives values in
// range, never a panic.
func FuzzParseChronyTracking(f *testing.F) {
	f.Add(trackingReply(1, 0x7f7f0101, 3, 0, 0, 0x00800000))
	f.Add([]byte{6, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := parseChronyTracking(b, 1)
		if err == nil && (tr.Leap > 3 || tr.Stratum > 16 || !(tr.RootDelay >= 0) || !(tr.RootDisp >= 0)) {
			t.Fatalf("accepted %+v", tr)
		}
	})
}

// TestChronydTracking runs the real chronyd (-x: it never touches the
// clock) as a local stratum-3 reference with its command socket in a
// temporary directory, and reads its tracking as the reference does:
// stratum 3, reference id 127.127.1.1 (LOCAL), leap normal.
func TestChronydTracking(t *testing.T) {
	if _, err := exec.LookPath("chronyd"); err != nil {
		t.Skip("chronyd not installed (ci/deps.sh installs chrony)")
	}
	if os.Geteuid() != 0 {
		t.Skip("chronyd needs root (-u root); run the tests as root")
	}
	dir, err := os.MkdirTemp("", "gclock-chrony")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o700) // chronyd refuses a socket directory others can read
	sock := filepath.Join(dir, "chronyd.sock")
	conf := fmt.Sprintf("pidfile %s/chronyd.pid\nbindcmdaddress %s\ncmdport 0\nport 0\nlocal stratum 3\n", dir, sock)
	cf := filepath.Join(dir, "chrony.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := exec.CommandContext(ctx, "chronyd", "-x", "-u", "root", "-d", "-f", cf)
	c.Stdout, c.Stderr = &log, &log
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	defer cancel()
	var tr chronyTracking
	deadline := time.Now().Add(20 * time.Second)
	for {
		tr, err = queryChronyTracking(sock, dir, time.Second)
		if err == nil && tr.Stratum == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chronyd's tracking: %+v, %v\n%s", tr, err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tr.RefID != 0x7f7f0101 || tr.Leap != 0 {
		t.Errorf("tracking %+v, want reference id 127.127.1.1, leap 0", tr)
	}
	t.Logf("chronyd tracking: %+v", tr)
	if _, err := queryChronyTracking(filepath.Join(dir, "nope.sock"), dir, time.Second); err == nil {
		t.Error("a missing socket answered")
	}
}

// TestWithChrony: chronyd's tracking completes the kernel's state.
func TestWithChrony(t *testing.T) {
	kernel := realtime.Upstream{Known: true, Synced: true, MaxErr: 3_000_000, EstErr: 50_000}
	for _, tt := range []struct {
		name string
		u    realtime.Upstream
		tr   chronyTracking
		want realtime.Upstream
	}{
		{"stratum 2 via 10.0.0.1", kernel, chronyTracking{RefID: 0x0a000001, Stratum: 2, RootDelay: 0.004, RootDisp: 0.0011},
			realtime.Upstream{Known: true, Synced: true, MaxErr: 3_000_000, EstErr: 50_000, Stratum: 2, RefID: 0x0a000001, RootDelay: 4_000_000, RootDisp: 1_100_000}},
		{"chronyd unsynchronised", kernel, chronyTracking{Leap: 3},
			realtime.Upstream{Known: true, MaxErr: 3_000_000, EstErr: 50_000}},
		{"chronyd stratum 0", kernel, chronyTracking{Stratum: 0},
			realtime.Upstream{Known: true, MaxErr: 3_000_000, EstErr: 50_000}},
		{"leap from chronyd (leapsecmode slew)", kernel, chronyTracking{Stratum: 3, Leap: 2},
			realtime.Upstream{Known: true, Synced: true, MaxErr: 3_000_000, EstErr: 50_000, Stratum: 3, Leap: realtime.LeapDelete}},
		{"the kernel's leap stands", realtime.Upstream{Known: true, Synced: true, Leap: realtime.LeapInsert}, chronyTracking{Stratum: 3, Leap: 0},
			realtime.Upstream{Known: true, Synced: true, Stratum: 3, Leap: realtime.LeapInsert}},
		{"kernel unsynchronised, chronyd synced", realtime.Upstream{Known: true, MaxErr: 16e9}, chronyTracking{Stratum: 2},
			realtime.Upstream{Known: true, MaxErr: 16e9, Stratum: 2}},
	} {
		got := withChrony(tt.u, tt.tr)
		if got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
		if err := got.Check(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}
