package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
)

// TestNotifier: systemd's notify protocol as Type=notify and WatchdogSec
// expect it: READY=1 once, the first time global time is synced, STATUS=
// on every change, WATCHDOG=1 at half the interval, STOPPING=1 at the end.
func TestNotifier(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	recv := func() string {
		l.SetReadDeadline(time.Now().Add(2 * time.Second))
		b := make([]byte, 4096)
		n, err := l.Read(b)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(b[:n])
	}
	env := map[string]string{"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": strconv.Itoa(os.Getpid())}
	n, err := newNotifier(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if n.pingEvery() != time.Second {
		t.Errorf("ping every %v, want 1s (half of WATCHDOG_USEC)", n.pingEvery())
	}
	steps := []struct {
		st   engine.Status
		want string // "" : nothing sent
	}{
		{engine.StatusUnsynced, "STATUS=global time unsynced (node 2, reference 1)"},
		{engine.StatusUnsynced, ""},
		{engine.StatusSynced, "READY=1\nSTATUS=global time synced (node 2, reference 1)"},
		{engine.StatusDegraded, "STATUS=global time degraded (node 2, reference 1)"},
		{engine.StatusSynced, "STATUS=global time synced (node 2, reference 1)"}, // READY only once
	}
	for _, s := range steps {
		if err := n.statusChanged(s.st.String(), "global time", "", s.st, 2, 1); err != nil {
			t.Fatal(err)
		}
		if s.want == "" {
			continue
		}
		if got := recv(); got != s.want {
			t.Errorf("after %v: sent %q, want %q", s.st, got, s.want)
		}
	}
	t0 := time.Unix(1000, 0)
	n.ping(t0)
	if got := recv(); got != "WATCHDOG=1" {
		t.Errorf("ping: %q", got)
	}
	n.ping(t0.Add(400 * time.Millisecond)) // too soon: nothing
	n.ping(t0.Add(990 * time.Millisecond)) // the loop's 1-s tick, a little early
	if got := recv(); got != "WATCHDOG=1" {
		t.Errorf("ping after half the interval: %q", got)
	}
	n.stopping()
	if got := recv(); got != "STOPPING=1" {
		t.Errorf("stopping: %q", got)
	}
}

// TestNotifierEnv: without NOTIFY_SOCKET nothing is sent; a watchdog meant
// for another process is not ours; bad values say what is wrong.
func TestNotifierEnv(t *testing.T) {
	n, err := newNotifier(func(string) string { return "" })
	if err != nil || n.pingEvery() != 0 || n.statusChanged("synced", "global time", "", engine.StatusSynced, 1, 1) != nil {
		t.Errorf("no NOTIFY_SOCKET: %v, ping every %v", err, n.pingEvery())
	}
	n, err = newNotifier(func(k string) string {
		return map[string]string{"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"}[k]
	})
	if err != nil || n.pingEvery() != 0 {
		t.Errorf("WATCHDOG_PID of another process: %v, ping every %v", err, n.pingEvery())
	}
	for _, env := range []map[string]string{
		{"NOTIFY_SOCKET": "relative/path"},
		{"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "soon"},
		{"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "0"},
	} {
		if _, err := newNotifier(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("%v: err %v, want one that says what it wants", env, err)
		}
	}
	// A socket nobody listens on: the error names it, once.
	n, _ = newNotifier(func(k string) string {
		return map[string]string{"NOTIFY_SOCKET": filepath.Join(t.TempDir(), "gone")}[k]
	})
	if err := n.statusChanged("synced", "global time", "", engine.StatusSynced, 1, 1); err == nil || !strings.Contains(err.Error(), "sd_notify") {
		t.Errorf("dead socket: %v", err)
	}
	if err := n.statusChanged("degraded", "global time", "", engine.StatusDegraded, 1, 1); err != nil {
		t.Errorf("second error reported again: %v", err)
	}
}
