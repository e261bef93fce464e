package daemon

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/gtime"
)

var (
	runFor   = flag.Duration("run-for", time.Second, "TestRunLoopback: how long to measure after convergence")
	kernelTS = flag.Bool("kernel-timestamps", true, "TestRunLoopback: use kernel receive stamps")
)

// freePorts finds n free UDP ports on 127.0.0.1.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var conns []net.PacketConn
	for range n {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
	}
	for _, c := range conns {
		c.Close()
	}
	return ports
}

// testCluster configures n daemons on free loopback UDP ports.
func testCluster(t *testing.T, n int) []Config {
	var addrs []string
	for _, p := range freePorts(t, n) {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return clusterAt(t, addrs)
}

// clusterAt configures a daemon at each address, node i+1 at addrs[i],
// with short periods and a page each in a temporary directory.
func clusterAt(t *testing.T, addrs []string) []Config {
	n := len(addrs)
	dir := t.TempDir()
	var cfgs []Config
	for i := range n {
		c := DefaultConfig()
		c.Peers = nil
		for j := range n {
			c.Peers = append(c.Peers, Peer{ID: uint32(j + 1), Address: addrs[j]})
		}
		c.Node.ID = uint32(i + 1)
		c.Reference.Order = []uint32{1}
		c.Sync.MinGlobalPeriod = Duration(50 * time.Millisecond)
		c.Sync.InitialGlobalPeriod = Duration(100 * time.Millisecond)
		c.Sync.StaleAfter = Duration(5 * time.Second)
		c.GlobalTime.ShmPath = filepath.Join(dir, fmt.Sprintf("page%d", i+1))
		c.GlobalTime.PublishEvery = Duration(100 * time.Millisecond)
		c.Transport.KernelTimestamps = *kernelTS
		cfgs = append(cfgs, c)
	}
	return cfgs
}

// TestRunLoopback runs a three-node star over loopback UDP. All nodes share
// this machine's CLOCK_MONOTONIC_RAW, so the truth is known: global time
// (node 1's raw clock) equals the raw clock everywhere, and every page must
// bound it. Node 3 runs an emulated clock (offset 3 ms, +40 ppm) that the
// daemon must learn.
//
// It stays on loopback UDP in real time: its point is kernel timestamps and a
// CLOCK_MONOTONIC_RAW shared by every daemon (the fake-time tests: docs/daemon.md).
func TestRunLoopback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons for a few seconds")
	}
	cfgs := testCluster(t, 3)
	cfgs[2].Clock = ClockConfig{Source: ClockEmulated, Emulated: EmulatedClockConfig{Offset: Duration(3 * time.Millisecond), DriftPPM: 40, Seed: 1}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, len(cfgs))
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, c := range cfgs {
		go func() { errs <- Run(ctx, c, logger.With("node", c.Node.ID)) }()
	}
	deadline := time.Now().Add(20 * time.Second)
	var readers []*gtime.Reader
	for i, c := range cfgs {
		readers = append(readers, openPage(t, c.GlobalTime.ShmPath, i+1, deadline))
	}
	// Wait for every page to be synced, then check the truth is inside the
	// bounds over a second of reads.
	for i, r := range readers {
		waitPageSynced(t, r, i+1, deadline)
	}
	errsNs := make([][]int64, len(readers))
	widths := make([][]int64, len(readers))
	inside, total, noisy := 0, 0, 0
	end := time.Now().Add(*runFor)
	for time.Now().Before(end) {
		for i, r := range readers {
			// An untimed read first: the first one after the sleep is
			// often descheduled (a truth window over 5 us), which left the
			// first node without an error figure under load.
			_, _ = r.Now()
			before := gtime.RawNow()
			tm, err := r.Now()
			after := gtime.RawNow()
			if err != nil {
				t.Fatal(err)
			}
			total++
			// The truth at the read lies in [before, after].
			if tm.Latest < before || tm.Earliest > after {
				t.Errorf("node %d: truth [%d, %d] outside bounds [%d, %d] (status %v)", i+1, before, after, tm.Earliest, tm.Latest, tm.Status)
			} else {
				inside++
			}
			widths[i] = append(widths[i], tm.Width())
			if after-before > 5000 {
				noisy++ // the reader was descheduled: the truth is too vague
				continue
			}
			mid := before + (after-before)/2
			e := tm.Est - mid
			errsNs[i] = append(errsNs[i], max(e, -e))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range readers {
		if len(errsNs[i]) == 0 {
			t.Fatalf("node %d: no read with a truth window under 5 us in %v", i+1, *runFor)
		}
	}
	pct := func(v []int64, p float64) int64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	for i := range readers {
		t.Logf("node %d (%s clock): |Est-truth| median %d ns p99 %d ns max %d ns; width median %d ns; %d reads",
			i+1, cfgs[i].Clock.Source, pct(errsNs[i], 0.5), pct(errsNs[i], 0.99), pct(errsNs[i], 1), pct(widths[i], 0.5), len(errsNs[i]))
	}
	t.Logf("truth inside [earliest, latest] in %d of %d reads (%d reads with a truth window over 5 us left out of the error figures)", inside, total, noisy)
	cancel()
	for range cfgs {
		if err := <-errs; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	for i, r := range readers {
		if tm, err := r.Now(); err != nil || tm.Status != gtime.StatusNoDaemon {
			t.Errorf("node %d after shutdown: %+v %v, want no-daemon", i+1, tm, err)
		}
	}
}

// TestRunRefuses: Run refuses a bad config, a port in use, a held page and a
// page directory anyone could replace the page in. On the kernel: a port in use is the kernel's refusal.
func TestRunRefuses(t *testing.T) {
	busy, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name string
		f    func(*Config)
		want string
	}{
		{"invalid", func(c *Config) { c.Sync.Estimator = "kalman" }, "sync.estimator"},
		{"port in use", func(c *Config) { c.Node.Listen = busy.LocalAddr().String() }, "listen"},
		{"page held", func(c *Config) { c.GlobalTime.ShmPath = heldPage(t) }, "another writer"},
		{"page directory anyone writes", func(c *Config) { c.GlobalTime.ShmPath = openDir(t) }, "without the sticky bit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testCluster(t, 2)[1]
			tt.f(&c)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := Run(ctx, c, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func heldPage(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "held")
	w, err := gtime.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return path
}

// openDir is a page directory that every user may write, without the
// sticky bit: anyone could replace the page, the daemon must refuse it.
func openDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "page")
}

// TestRunPageGroup: global_time.group gives the page that group and mode
// 0640; by default it is 0644.
//
// On loopback: the page's file mode and group are the kernel's (a quick run).
func TestRunPageGroup(t *testing.T) {
	for _, group := range []string{"", "65534"} {
		if group != "" && os.Geteuid() != 0 {
			t.Log("not root: cannot give the page another group; only the default is tested")
			continue
		}
		c := testCluster(t, 1)[0]
		c.GlobalTime.Group = group
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, c, nil) }()
		r := openPage(t, c.GlobalTime.ShmPath, 1, time.Now().Add(10*time.Second))
		r.Close()
		fi, err := os.Stat(c.GlobalTime.ShmPath)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		wantMode, wantGid := os.FileMode(0o644), uint32(os.Getegid())
		if group != "" {
			wantMode, wantGid = 0o640, 65534
		}
		if gid := fi.Sys().(*syscall.Stat_t).Gid; fi.Mode().Perm() != wantMode || gid != wantGid {
			t.Errorf("group %q: page mode %v gid %d, want %v and %d", group, fi.Mode().Perm(), gid, wantMode, wantGid)
		}
	}
}

func TestSectionValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Sync.Validate(); err != nil {
		t.Errorf("default sync: %v", err)
	}
	c.Sync.PingsPerRound = 0
	if err := c.Sync.Validate(); err == nil || !strings.Contains(err.Error(), "pings_per_round") {
		t.Errorf("sync.Validate = %v", err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "sync.pings_per_round") {
		t.Errorf("Validate = %v", err)
	}
	c.Clock.Source = "sundial"
	if err := c.Clock.Validate(); err == nil || !strings.Contains(err.Error(), "source") {
		t.Errorf("clock.Validate = %v", err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "clock.source") {
		t.Errorf("clock.Validate = %v", err)
	}
}

// openPage opens a daemon's page, waiting for the daemon to create it.
func openPage(t *testing.T, path string, node int, deadline time.Time) *gtime.Reader {
	t.Helper()
	for {
		r, err := gtime.Open(path)
		if err == nil {
			t.Cleanup(func() { r.Close() })
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d never created its page: %v", node, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitPageSynced waits until the page is synced with bounds under 1 ms wide.
func waitPageSynced(t *testing.T, r *gtime.Reader, node int, deadline time.Time) {
	t.Helper()
	waitPageSyncedBy(t, (*gtime.Reader).Now, r, node, deadline)
}

// waitPageSyncedBy is waitPageSynced reading the page with read: Reader.Now
// on the machine's raw clock, Reader.At the fake one under synctest.
func waitPageSyncedBy(t *testing.T, read func(*gtime.Reader) (gtime.Time, error), r *gtime.Reader, node int, deadline time.Time) {
	t.Helper()
	for {
		tm, err := read(r)
		if err != nil {
			t.Fatal(err)
		}
		if tm.Status == gtime.StatusSynced && tm.Width() < int64(time.Millisecond) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d not synced with a width under 1 ms: %+v", node, tm)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStatusValues: the daemon publishes engine.Status on the page as
// gtime.Status(s); the two must name the same states.
func TestStatusValues(t *testing.T) {
	for _, c := range []struct {
		e engine.Status
		g gtime.Status
	}{
		{engine.StatusUnsynced, gtime.StatusUnsynced},
		{engine.StatusSynced, gtime.StatusSynced},
		{engine.StatusStale, gtime.StatusStale},
		{engine.StatusDegraded, gtime.StatusDegraded},
	} {
		if gtime.Status(c.e) != c.g || c.e.String() != c.g.String() {
			t.Errorf("engine %v (%d) is gtime %v, want %v", c.e, c.e, gtime.Status(c.e), c.g)
		}
	}
}

// TestRunPageDirAndLeftovers (issue 17, safe defaults): the daemon creates
// its page's directory (mode 0755, its own) when it is missing, and files
// another user planted there (a page, its temporary, its lock) no longer
// stop it from starting: they are removed, logged, and the page is served.
//
// On the kernel: file ownership and modes are the kernel's.
func TestRunPageDirAndLeftovers(t *testing.T) {
	c := testCluster(t, 1)[0]
	dir := filepath.Join(t.TempDir(), "gclock")
	c.GlobalTime.ShmPath = filepath.Join(dir, "page")
	run := func() string {
		t.Helper()
		var logs lockedBuffer
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, c, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
		}()
		r := openPage(t, c.GlobalTime.ShmPath, 1, time.Now().Add(10*time.Second))
		r.Close()
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v\n%s", err, logs.String())
		}
		return logs.String()
	}
	logs := run()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("the page's directory was not created: %v", err)
	}
	if fi.Mode().Perm() != 0o755 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("page directory mode %v uid %d, want 0755 and the daemon's uid %d", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid, os.Geteuid())
	}
	if !strings.Contains(logs, "created the page's directory") {
		t.Errorf("no log of the directory's creation:\n%s", logs)
	}
	// Plant what a local user could have left in /dev/shm.
	owner := os.Geteuid()
	if owner == 0 {
		owner = 65534
	}
	for name, mode := range map[string]os.FileMode{"page": 0o666, "page.new": 0o644, "page.lock": 0o666} {
		p := filepath.Join(dir, name)
		os.Remove(p)
		if err := os.WriteFile(p, make([]byte, gtime.PageSize), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chown(p, owner, owner)
	}
	logs = run()
	for _, name := range []string{"page.lock", "page.new", "page's path"} {
		if !strings.Contains(logs, "removed a file beside the page") || !strings.Contains(logs, name) {
			t.Errorf("no warning naming the planted %s:\n%s", name, logs)
		}
	}
}
