package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/internal/chronycmd"
)

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
	var tr chronycmd.Tracking
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
		tr   chronycmd.Tracking
		want realtime.Upstream
	}{
		{"stratum 2 via 10.0.0.1", kernel, chronycmd.Tracking{RefID: 0x0a000001, Stratum: 2, RootDelay: 0.004, RootDisp: 0.0011},
			realtime.Upstream{Known: true, Synced: true, MaxErr: 3_000_000, EstErr: 50_000, Stratum: 2, RefID: 0x0a000001, RootDelay: 4_000_000, RootDisp: 1_100_000}},
		{"chronyd unsynchronised", kernel, chronycmd.Tracking{Leap: 3},
			realtime.Upstream{Known: true, MaxErr: 3_000_000, EstErr: 50_000}},
		{"chronyd stratum 0", kernel, chronycmd.Tracking{Stratum: 0},
			realtime.Upstream{Known: true, MaxErr: 3_000_000, EstErr: 50_000}},
		{"leap from chronyd (leapsecmode slew)", kernel, chronycmd.Tracking{Stratum: 3, Leap: 2},
			realtime.Upstream{Known: true, Synced: true, MaxErr: 3_000_000, EstErr: 50_000, Stratum: 3, Leap: realtime.LeapDelete}},
		{"the kernel's leap stands", realtime.Upstream{Known: true, Synced: true, Leap: realtime.LeapInsert}, chronycmd.Tracking{Stratum: 3, Leap: 0},
			realtime.Upstream{Known: true, Synced: true, Stratum: 3, Leap: realtime.LeapInsert}},
		{"kernel unsynchronised, chronyd synced", realtime.Upstream{Known: true, MaxErr: 16e9}, chronycmd.Tracking{Stratum: 2},
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
