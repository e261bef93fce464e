package netlab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/netmodel"
	"golang.org/x/sys/unix"
)

// needLab skips the test, saying why, when this process cannot build a lab.
func needLab(t *testing.T) {
	t.Helper()
	if why := SkipReason(); why != "" {
		t.Skip(why)
	}
}

func namespaces(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	var ns []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], namePrefix) {
			ns = append(ns, f[0])
		}
	}
	return ns
}

// labNamespaces are the namespaces of lab l (under its prefix).
func labNamespaces(t *testing.T, l *Lab) []string {
	t.Helper()
	var ns []string
	for _, n := range namespaces(t) {
		if strings.HasPrefix(n, l.prefix) {
			ns = append(ns, n)
		}
	}
	return ns
}

func TestUpConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"one host", Config{Hosts: 1}, "hosts 1"},
		{"too many", Config{Hosts: maxHosts + 1}, "hosts 251"},
		{"direct needs two", Config{Hosts: 3, Link: netmodel.Link{Direct: true}}, "exactly 2"},
		{"bad model", Config{Hosts: 2, Link: netmodel.Link{Forward: netmodel.Model{Loss: 2}}}, "loss 2"},
		{"spin", Config{Hosts: 2, SpinWindow: time.Second}, "spin window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Up(context.Background(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Up = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestLab builds a 3-host lab with an asymmetric lossy, duplicating link,
// checks what the switch delivers with kernel timestamps, and checks that
// Down removes the namespaces and the processes started in them.
func TestLab(t *testing.T) {
	needLab(t)
	link, err := netmodel.ParseLink("fixed:200us/fixed:400us,loss=10%,dup=10%")
	if err != nil {
		t.Fatal(err)
	}
	// Concurrent: beside other packages' concurrent labs under `go test
	// ./...`; the checks below hold under load.
	cfg := Config{Hosts: 3, Link: link, Seed: 5, SchedFIFO: true, WarmAfter: DefaultWarmAfter, RunDir: t.TempDir(), Concurrent: true}
	l, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	defer l.Down()
	// Only this lab's: other packages' tests run labs of their own beside
	// it (a CI run counted two of the lab package's here).
	if got := labNamespaces(t, l); len(got) != 4 {
		t.Errorf("namespaces %v, want 3 hosts and the switch", got)
	}

	vc := ValidateConfig{A: 0, B: 2, Probes: 1000, Interval: time.Millisecond, Port: 47002}
	rs, err := l.Validate(context.Background(), vc)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	var b strings.Builder
	PrintValidation(&b, rs)
	t.Logf("\n%s", b.String())
	for _, r := range rs {
		want := int64(200e3)
		if r.From > r.To {
			want = 400e3
		}
		if r.Sent < vc.Probes*95/100 {
			t.Errorf("h%d>h%d: %d of %d probes got a transmit stamp", r.From, r.To, r.Sent, vc.Probes)
		}
		// Causality: no frame leaves before its configured delay.
		if r.MinNs < want {
			t.Errorf("h%d>h%d: min one-way delay %d ns < configured %d ns", r.From, r.To, r.MinNs, want)
		}
		// The switch adds its own lateness, but the fastest frame is close.
		if r.MinNs > want+100e3 {
			t.Errorf("h%d>h%d: min one-way delay %d ns, want within 100 us of %d ns", r.From, r.To, r.MinNs, want)
		}
		if r.CfgP50Ns != want {
			t.Errorf("h%d>h%d: configured p50 %d, want %d", r.From, r.To, r.CfgP50Ns, want)
		}
		// Binomial rates over ~1000 frames: 4 standard deviations.
		tol := 4 * math.Sqrt(0.1*0.9/float64(r.Sent))
		if math.Abs(r.LossRate-0.1) > tol {
			t.Errorf("h%d>h%d: loss %.3f, want 0.1 +- %.3f", r.From, r.To, r.LossRate, tol)
		}
		if math.Abs(r.DupRate-0.1) > tol {
			t.Errorf("h%d>h%d: dup %.3f, want 0.1 +- %.3f", r.From, r.To, r.DupRate, tol)
		}
	}
	// Ping-pong: h2 answers every probe of h0 once (duplicates are not
	// answered again), and the answers cross the slower direction.
	pp := ValidateConfig{A: 0, B: 2, Probes: 300, Interval: time.Millisecond, Port: 47004, PingPong: true}
	prs, err := l.Validate(context.Background(), pp)
	if err != nil {
		t.Fatalf("Validate ping-pong: %v", err)
	}
	if probes, answers := prs[0], prs[1]; answers.Sent < probes.Received*95/100 || answers.Sent > probes.Received {
		t.Errorf("ping-pong: %d probes arrived, %d answers sent with a stamp", probes.Received, answers.Sent)
	} else if answers.MinNs < 400e3 || answers.MinNs > 500e3 || probes.MinNs < 200e3 {
		t.Errorf("ping-pong: fastest probe %d ns (want >= 200 us), answer %d ns (want 400-500 us)", probes.MinNs, answers.MinNs)
	}
	// Probes 1 ms apart each way leave the switch idle for longer than
	// WarmAfter, so it made warm-up writes; none reached a host (the dup
	// rates above would show it).
	if l.Switch().warmUps() == 0 {
		t.Errorf("no warm-up write with WarmAfter %v and frames 1 ms apart", cfg.WarmAfter)
	}
	// The switch counted the same directions.
	for _, s := range l.Switch().Stats() {
		if s.Frames > 0 && s.LatenessSamples == 0 {
			t.Errorf("switch %d>%d: %d frames but no lateness sample", s.In, s.Out, s.Frames)
		}
	}

	p, err := l.Exec(1, []string{"sleep", "60"}, ExecOptions{})
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if _, err := l.Exec(7, []string{"true"}, ExecOptions{}); err == nil || !strings.Contains(err.Error(), "host 7") {
		t.Errorf("Exec on host 7 = %v, want an error naming the host", err)
	}
	start := time.Now()
	if err := l.Down(); err != nil {
		t.Fatalf("Down: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("process %d still running after Down", p.pid())
	}
	if err := unix.Kill(p.pid(), 0); !errors.Is(err, unix.ESRCH) {
		t.Errorf("process %d: kill 0 = %v after Down, want ESRCH", p.pid(), err)
	}
	if got := labNamespaces(t, l); len(got) != 0 {
		t.Errorf("namespaces left after Down: %v", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Down took %v", d)
	}
	if err := l.Down(); err != nil {
		t.Errorf("second Down: %v", err)
	}
	if _, err := l.Exec(0, []string{"true"}, ExecOptions{}); err == nil {
		t.Error("Exec after Down succeeded")
	}
}

// TestCleanupStale checks that Up removes what a crashed run left: a
// namespace with a process inside, named for a process that has ended
// (pid 0x7ffffffe does not run: above pid_max). A concurrent lab removes
// those; an exclusive one every other process's (cleanupOthers).
func TestCleanupStale(t *testing.T) {
	needLab(t)
	ns := namePrefix + "2147483646-7-h0"
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %s: %v", out, err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	l, err := Up(context.Background(), Config{Hosts: 2, Link: netmodel.Link{Direct: true}, RunDir: t.TempDir(), Concurrent: true})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	defer l.Down()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stale namespace's process survived Up")
	}
	for _, n := range namespaces(t) {
		if n == ns {
			t.Fatal("the stale namespace survived Up")
		}
	}
	// A direct link: validation sees the bare veth, no switch.
	rs, err := l.Validate(context.Background(), ValidateConfig{A: 0, B: 1, Probes: 200, Interval: time.Millisecond, Port: 47003})
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, r := range rs {
		if r.Received != r.Sent || r.Sent < 190 || r.MinNs <= 0 || r.MinNs > 100e3 {
			t.Errorf("direct h%d>h%d: %+v, want every probe, 0 < min < 100 us", r.From, r.To, r)
		}
	}
}

// TestCleanupChoices: what an exclusive Up (cleanupOthers: no other lab
// runs), a concurrent one (cleanupEnded) and neither remove. The lab tests
// run their labs concurrent, so this is where the exclusive choice is
// tested.
func TestCleanupChoices(t *testing.T) {
	const me, alive = 4711, 4712
	running := func(pid int) bool { return pid == me || pid == alive }
	tests := []struct {
		ns            string
		others, ended bool
	}{
		{"gclab-4711-1-h0", false, false}, // this process's lab
		{"gclab-4712-3-sw", true, false},  // a running process's
		{"gclab-4713-2-h1", true, true},   // an ended process's
		{"gclab-stale-test", true, false}, // no pid: an older gclock's fixed names
		{"gclab-h0", true, false},
	}
	others, ended := othersOf(me), endedOf(me, running)
	for _, tt := range tests {
		if got := others(tt.ns); got != tt.others {
			t.Errorf("cleanupOthers(%s) = %v, want %v", tt.ns, got, tt.others)
		}
		if got := ended(tt.ns); got != tt.ended {
			t.Errorf("cleanupEnded(%s) = %v, want %v", tt.ns, got, tt.ended)
		}
	}
}

func TestNsOwner(t *testing.T) {
	tests := []struct {
		ns   string
		want int
	}{
		{"gclab-4711-2-h0", 4711},
		{"gclab-4711-12-sw", 4711},
		{"gclab-h0", 0}, // an older gclock's fixed names
		{"gclab-sw", 0},
		{"gclab-stale-test", 0},
		{"gclab--1-h0", 0},
		{"gclab-0-1-h0", 0},
		{"gclab-4711", 0},
		{"other-4711-1-h0", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := nsOwner(tt.ns); got != tt.want {
			t.Errorf("nsOwner(%q) = %d, want %d", tt.ns, got, tt.want)
		}
	}
}

// TestConcurrentLabs brings up two Concurrent labs at once: each has
// namespaces of its own, an exclusive Up waits for both, one's Down leaves
// the other's namespaces, and cleanupEnded removes a namespace of an ended
// process's lab but none of a running one.
func TestConcurrentLabs(t *testing.T) {
	needLab(t)
	cfg := Config{Hosts: 2, Link: netmodel.Link{Direct: true}, RunDir: t.TempDir(), Concurrent: true}
	a, err := Up(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Up a: %v", err)
	}
	defer a.Down()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up b beside a: %v", err)
	}
	defer b.Down()
	if a.prefix == b.prefix || a.HostNS(0) == b.HostNS(0) {
		t.Fatalf("two labs share names: %s, %s", a.HostNS(0), b.HostNS(0))
	}
	has := func(ns string) bool {
		for _, n := range namespaces(t) {
			if n == ns {
				return true
			}
		}
		return false
	}
	for _, ns := range []string{a.HostNS(0), a.HostNS(1), b.HostNS(0), b.HostNS(1)} {
		if !has(ns) {
			t.Errorf("namespace %s missing; have %v", ns, namespaces(t))
		}
	}
	// Both labs carry traffic at once.
	for _, l := range []*Lab{a, b} {
		rs, err := l.Validate(context.Background(), ValidateConfig{A: 0, B: 1, Probes: 50, Interval: time.Millisecond, Port: 47004})
		if err != nil {
			t.Fatalf("Validate %s: %v", l.prefix, err)
		}
		for _, r := range rs {
			if r.Received != r.Sent || r.Sent < 45 {
				t.Errorf("%s h%d>h%d: %d of %d probes", l.prefix, r.From, r.To, r.Received, r.Sent)
			}
		}
	}
	excl := cfg
	excl.Concurrent = false
	short, cancelShort := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancelShort()
	if l, err := Up(short, excl); err == nil {
		l.Down()
		t.Fatal("an exclusive Up beside two concurrent labs succeeded; want it to wait")
	}

	// A namespace of a lab whose process has ended (pid 0x7ffffffe does not
	// run: above pid_max) goes; this process's stay.
	dead := namePrefix + "2147483646-1-h0"
	if out, err := exec.Command("ip", "netns", "add", dead).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %s: %v", out, err)
	}
	if err := cleanupEnded(nil); err != nil {
		t.Fatalf("CleanupEnded: %v", err)
	}
	if has(dead) {
		exec.Command("ip", "netns", "del", dead).Run()
		t.Errorf("CleanupEnded left %s", dead)
	}
	if !has(a.HostNS(0)) || !has(b.HostNS(0)) {
		t.Fatalf("CleanupEnded removed a running lab's namespaces: %v", namespaces(t))
	}

	if err := a.Down(); err != nil {
		t.Fatalf("Down a: %v", err)
	}
	if has(a.HostNS(0)) {
		t.Errorf("a's %s survived its Down", a.HostNS(0))
	}
	if !has(b.HostNS(0)) || !has(b.HostNS(1)) {
		t.Fatalf("a's Down removed b's namespaces: %v", namespaces(t))
	}
	if _, err := b.Exec(1, []string{"true"}, ExecOptions{}); err != nil {
		t.Errorf("b after a's Down: %v", err)
	}
}

// TestUpKeepsThisProcessLabs: Up removes the leftovers of other processes
// only. A namespace under this process's pid belongs to a concurrent lab
// that came up beside it and may be building already (two parallel lab
// tests lost theirs to the first one's cleanup in a CI run).
func TestUpKeepsThisProcessLabs(t *testing.T) {
	needLab(t)
	mine := fmt.Sprintf("%s%d-999999-h0", namePrefix, os.Getpid())
	stale := namePrefix + "2147483646-1-h0"
	// The test's own namespaces live only under this process's hold on
	// the lock: another process's measurement lab (which removes every
	// namespace of other processes) must neither take mine before Up
	// looks nor list it after Down and find it gone under its del (a CI
	// run: lab's TestTransportThroughSwitch failed so).
	release, _, err := HoldLock(context.Background(), nil)
	if err != nil {
		t.Fatalf("HoldLock: %v", err)
	}
	defer release()
	for _, ns := range []string{mine, stale} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %s: %v", ns, out, err)
		}
	}
	defer exec.Command("ip", "netns", "del", mine).Run()
	defer exec.Command("ip", "netns", "del", stale).Run()
	l, err := Up(context.Background(), Config{Hosts: 2, Link: netmodel.Link{Direct: true}, RunDir: t.TempDir(), Concurrent: true})
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	defer l.Down()
	got := namespaces(t)
	if !slices.Contains(got, mine) {
		t.Errorf("Up removed %s, a namespace of this process's labs: %v", mine, got)
	}
	if slices.Contains(got, stale) {
		t.Errorf("Up left %s, a dead process's namespace: %v", stale, got)
	}
}

// TestRemoveNamespacesGone: a namespace removed by someone else between
// cleanup's list and its del is what cleanup wanted, not an error (a CI
// run: an exclusive lab's cleanup listed another test's namespace, which
// that test then removed itself).
func TestRemoveNamespacesGone(t *testing.T) {
	needLab(t)
	release, _, err := HoldLock(context.Background(), nil)
	if err != nil {
		t.Fatalf("HoldLock: %v", err)
	}
	defer release()
	ns := fmt.Sprintf("%s%d-999998-h0", namePrefix, os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %s: %v", ns, out, err)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	seen := false
	err = removeNamespaces(nil, func(n string) bool {
		if n != ns {
			return false
		}
		seen = true
		// Gone before cleanup's del.
		if out, err := exec.Command("ip", "netns", "del", n).CombinedOutput(); err != nil {
			t.Fatalf("ip netns del %s: %s: %v", n, out, err)
		}
		return true
	})
	if !seen {
		t.Fatalf("removeNamespaces never offered %s", ns)
	}
	if err != nil {
		t.Errorf("removeNamespaces on a namespace gone before its del: %v", err)
	}
	if !gone(ns) {
		t.Errorf("%s still there", ns)
	}
}
