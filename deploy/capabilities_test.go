package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gclock/gclock/ntp"
)

// unitCaps reads the capability settings of the unit and a drop-in.
func unitCaps(t *testing.T, files ...string) (user string, caps []string, groups []string) {
	t.Helper()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
			if !ok || strings.HasPrefix(k, "#") {
				continue
			}
			switch k {
			case "User":
				user = v
			case "AmbientCapabilities":
				if v == "" {
					caps = nil
				}
				for _, c := range strings.Fields(v) {
					caps = append(caps, strings.ToLower(strings.TrimPrefix(c, "CAP_")))
				}
			case "SupplementaryGroups":
				groups = append(groups, strings.Fields(v)...)
			}
		}
	}
	return user, caps, groups
}

// TestUnitCapabilities runs gclockd the way deploy/gclockd.service does:
// an unprivileged user (here uid 65534) with the unit's capabilities only,
// no new privileges, plus each feature's drop-in (deploy/systemd), and
// checks that each documented feature works with exactly that, and fails
// with a clear error without its drop-in: the page and the state file in
// the daemon's own directories, an NTP server on port 123
// (ntp-port-123.conf), the page's group (page-group.conf). (issue 19: with
// the unit's capability set, ntp.listen :123 and global_time.group failed.)
func TestUnitCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the daemon as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed")
	}
	user, caps, _ := unitCaps(t, "gclockd.service")
	if user == "" || user == "root" || len(caps) != 0 {
		t.Fatalf("gclockd.service: User=%q, ambient capabilities %v; want its own user and none", user, caps)
	}
	const uid, gid, group = 65534, 65534, 100 // nobody, nogroup; a group to give the page to (users)
	dir := t.TempDir()
	for d := dir; d != "/tmp" && d != "/"; d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // the daemon's user walks to its files
	}
	bin := buildCmd(t, dir, "gclockd")
	run := func(t *testing.T, name string, caps, groups []string, ntpListen, pageGroup string) (stderr string, err error) {
		t.Helper()
		home := filepath.Join(dir, name)
		for _, d := range []string{home, filepath.Join(home, "run"), filepath.Join(home, "state")} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chown(d, uid, gid)
		}
		os.Chmod(filepath.Join(home, "state"), 0o700) // StateDirectoryMode
		l, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.LocalAddr().(*net.UDPAddr).Port
		l.Close()
		cfg := fmt.Sprintf(`node: {id: 1}
peers: [{id: 1, address: "127.0.0.1:%d"}]
reference: {order: [1]}
clock: {source: raw}
global_time: {shm_path: %s%s}
state: {file: %s}
real_time: {mode: reference-realtime, upstream: none} # capabilities, not the VM's unsynchronised kernel
`, port, filepath.Join(home, "run", "page"), pageGroup, filepath.Join(home, "state", "state.json"))
		if ntpListen != "" {
			cfg += "ntp: {listen: \"" + ntpListen + "\"}\n"
		}
		cfgPath := filepath.Join(home, "gclock.yaml")
		os.WriteFile(cfgPath, []byte(cfg), 0o644)
		capList := "-all"
		for _, c := range caps {
			capList += ",+" + c
		}
		args := []string{fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", gid), "--no-new-privs",
			"--inh-caps=" + capList, "--ambient-caps=" + capList, "--bounding-set=" + capList}
		if len(groups) > 0 {
			args = append(args, "--groups="+strings.Join(groups, ","))
		} else {
			args = append(args, "--clear-groups")
		}
		cmd := exec.Command(setpriv, append(args, "--", bin, "-config", cfgPath)...)
		var out bytes.Buffer
		cmd.Stderr = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// It runs until told to stop, or fails at start.
		select {
		case err := <-done:
			return out.String(), fmt.Errorf("exited at start: %v", err)
		case <-time.After(3 * time.Second):
		}
		if ntpListen != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_, qerr := ntp.Query(ctx, ntpListen)
			cancel()
			if qerr != nil {
				t.Errorf("%s: the NTP server on %s does not answer: %v", name, ntpListen, qerr)
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-done; err != nil {
			return out.String(), fmt.Errorf("stopped with %v", err)
		}
		for _, f := range []string{filepath.Join(home, "run", "page"), filepath.Join(home, "state", "state.json")} {
			fi, err := os.Stat(f)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid {
				t.Errorf("%s: %s owned by uid %d, want the daemon's %d", name, f, st.Uid, uid)
			}
		}
		return out.String(), nil
	}

	t.Run("base", func(t *testing.T) {
		if stderr, err := run(t, "base", caps, nil, "", ""); err != nil {
			t.Fatalf("the unit's settings: %v\n%s", err, stderr)
		}
	})
	t.Run("ntp-port-123", func(t *testing.T) {
		if l, err := net.ListenPacket("udp4", "127.0.0.1:123"); err != nil {
			t.Skipf("127.0.0.1:123 is taken on this machine: %v", err)
		} else {
			l.Close()
		}
		if stderr, err := run(t, "ntp-without", caps, nil, "127.0.0.1:123", ""); err == nil || !strings.Contains(stderr, "permission denied") {
			t.Errorf("port 123 without the drop-in: %v, want a refusal (permission denied)\n%s", err, stderr)
		}
		_, withCaps, _ := unitCaps(t, "gclockd.service", "systemd/ntp-port-123.conf")
		if stderr, err := run(t, "ntp-with", withCaps, nil, "127.0.0.1:123", ""); err != nil {
			t.Errorf("port 123 with ntp-port-123.conf (%v): %v\n%s", withCaps, err, stderr)
		}
	})
	t.Run("page-group", func(t *testing.T) {
		pg := fmt.Sprintf(", group: \"%d\"", group)
		if stderr, err := run(t, "group-without", caps, nil, "", pg); err == nil {
			t.Errorf("global_time.group without the drop-in: started\n%s", stderr)
		}
		_, _, groups := unitCaps(t, "gclockd.service", "systemd/page-group.conf")
		if len(groups) != 1 || groups[0] != "GROUP" {
			t.Fatalf("page-group.conf: SupplementaryGroups %v, want the GROUP placeholder", groups)
		}
		if stderr, err := run(t, "group-with", caps, []string{fmt.Sprint(group)}, "", pg); err != nil {
			t.Errorf("global_time.group with SupplementaryGroups: %v\n%s", err, stderr)
		}
	})
}
