package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gclock/gclock/netmodel"
	"golang.org/x/sys/unix"
)

// HostIf is the name of each host's interface inside its namespace.
const HostIf = "eth0"

// maxHosts bounds Config.Hosts: addresses are 10.77.0.(i+1)/24 and port
// names p<i> must fit an interface name.
const maxHosts = 250

// netnsDir is where `ip netns` keeps its namespace handles.
const netnsDir = "/run/netns"

// Config says what lab to build.
type Config struct {
	Hosts int           // number of host namespaces, 2..maxHosts (Direct: exactly 2)
	Link  netmodel.Link // the emulated link between any two hosts
	Seed  uint64
	// SpinWindow is how long before a frame's release time the switch's
	// release thread stops sleeping and spins on the clock. 0 means
	// DefaultSpinWindow.
	SpinWindow time.Duration
	// BusyPoll is the switch's BusyPoll; DefaultConfig sets DefaultBusyPoll.
	BusyPoll time.Duration
	// WarmAfter is the switch's WarmAfter (the lab adds the warm-up veth
	// pair); DefaultConfig sets DefaultWarmAfter, 0 turns it off.
	WarmAfter time.Duration
	// SchedFIFO runs the switch's release thread under SCHED_FIFO, so that a
	// CPU-bound load beside the lab does not delay releases.
	SchedFIFO bool
	// PortRate is the switch's PortRate: every egress port a FIFO queue in
	// front of a line of this many bits per second (0: none).
	PortRate int64
	// RunDir holds per-run files of the peers (configs, sockets, logs). ""
	// means DefaultRunDir.
	RunDir string
	// FrameLog is the switch's FrameLog: a CSV of every released frame,
	// written when the lab goes down ("" none).
	FrameLog string
	// Concurrent lets this lab run beside other Concurrent labs, this
	// process's (tests under t.Parallel) and other processes' (another
	// test package), each in namespaces of its own; it holds LockPath
	// shared. A lab without it (the CLI's, a test of accuracy) holds it
	// exclusively: it waits until it is the only lab on the machine, as a
	// measurement needs.
	Concurrent bool
	Logger     *slog.Logger // nil: discard
}

// DefaultSpinWindow is the default Config.SpinWindow. A timer wake-up on an
// idle core here is late by 5-60 us (measured with `gclock lab validate`
// while tuning); spinning through the last 100 us keeps the release within a
// few us of its time, leaves room for a warm-up write (see WarmAfter) and
// costs at most 100 us of CPU per frame.
const DefaultSpinWindow = 100 * time.Microsecond

// DefaultBusyPoll is DefaultConfig's BusyPoll: a sync round's exchanges
// (a few hundred us apart) keep the switch polling, idle links let it
// sleep. Measured with `gclock lab validate -link fixed:100us`: p50 of the
// delivered delay 104-105 us busy-polling against 110-114 us sleeping.
const DefaultBusyPoll = 2 * time.Millisecond

// DefaultWarmAfter is DefaultConfig's WarmAfter. Measured with `gclock lab
// validate -link fixed:100us -interval 20ms` (every release cold): without
// warm-up writes the fastest frame took 109 us and the median 120-124 us,
// against 100.8 / 108-109 us with a frame every millisecond.
const DefaultWarmAfter = 200 * time.Microsecond

// warmPort is the switch's end of the warm-up veth pair; its peer
// (warmPort+"p") only drops what it receives.
const warmPort = "warm0"

// DefaultRunDir is the default Config.RunDir.
const DefaultRunDir = "/run/gclab"

// DefaultConfig is the default lab: 4 hosts, 100 us +- 50 us pareto
// jitter each way.
func DefaultConfig() Config {
	m := netmodel.Model{Delay: 100 * time.Microsecond, Jitter: 50 * time.Microsecond, Dist: netmodel.DistPareto}
	return Config{Hosts: 4, Link: netmodel.Link{Forward: m, Reverse: m}, Seed: 1, BusyPoll: DefaultBusyPoll, WarmAfter: DefaultWarmAfter}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	if c.Link.Direct {
		if c.Hosts != 2 {
			return fmt.Errorf("hosts %d: a direct link joins exactly 2 hosts", c.Hosts)
		}
	} else if c.Hosts < 2 || c.Hosts > maxHosts {
		return fmt.Errorf("hosts %d: want 2..%d", c.Hosts, maxHosts)
	}
	if c.SpinWindow < 0 || c.SpinWindow > 10*time.Millisecond {
		return fmt.Errorf("spin window %v: want 0..10ms", c.SpinWindow)
	}
	if c.WarmAfter < 0 || c.WarmAfter > time.Second {
		return fmt.Errorf("warm-after %v: want 0 (off)..1s", c.WarmAfter)
	}
	if c.BusyPoll < 0 || c.BusyPoll > time.Second {
		return fmt.Errorf("busy-poll %v: want 0 (off)..1s", c.BusyPoll)
	}
	if c.PortRate < 0 || c.PortRate > netmodel.MaxRateBps {
		return fmt.Errorf("port rate %d bit/s: want 0 (none)..%g", c.PortRate, netmodel.MaxRateBps)
	}
	if c.PortRate > 0 && c.Link.Direct {
		return fmt.Errorf("port rate %s: a direct link has no switch", netmodel.FormatRate(c.PortRate))
	}
	if err := c.Link.Validate(); err != nil {
		return err
	}
	return nil
}

// HostAddr is host i's address inside its namespace (10.77.0.(i+1)).
func HostAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 77, 0, byte(i + 1)}) }

// hostMAC is host i's fixed MAC address (locally administered), so that a
// capture can be read at a glance.
func hostMAC(i int) string { return fmt.Sprintf("02:77:00:00:%02x:%02x", i>>8&0xff, (i+1)&0xff) }

// ErrNotRoot is returned (wrapped) by Up when the process is not root.
var ErrNotRoot = errors.New("the lab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): run as root, e.g. with sudo")

// ErrNoNetns is returned (wrapped) by Up when network namespaces cannot be
// made here.
var ErrNoNetns = errors.New("network namespaces are unavailable")

// Lab is a running lab: host namespaces, the switch namespace and the
// switch, and the processes started in the hosts. Down removes all of it.
type Lab struct {
	cfg Config
	log *slog.Logger
	sw  *Switch

	mu    sync.Mutex
	procs []*Proc
	down  bool

	prefix  string // of every namespace name (HostNS)
	release func() // of the lab lock (lockLab), from Up to Down
}

// Check reports why this process cannot run a lab: ErrNotRoot or ErrNoNetns
// (wrapped, with the cause), or nil.
func Check() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab: uid %d: %w", os.Geteuid(), ErrNotRoot)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("lab: ip (iproute2) not found: %w (install iproute2; ci/lab-deps.sh does)", ErrNoNetns)
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("lab: kernel without network namespaces (/proc/self/ns/net: %v): %w", err, ErrNoNetns)
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		return fmt.Errorf("lab: ip netns list: %s: %w", strings.TrimSpace(string(out)), ErrNoNetns)
	}
	return nil
}

// SkipEnv names the environment variable that, set to anything, makes the
// lab integration tests of every package skip (SkipReason).
const SkipEnv = "GCLOCK_LAB_SKIP"

// SkipReason is why a lab integration test should skip here ("" when a
// lab can be built): what Check refuses, or SkipEnv set.
func SkipReason() string {
	if err := Check(); err != nil {
		return fmt.Sprintf("lab integration test needs root and network namespaces: %v", err)
	}
	if os.Getenv(SkipEnv) != "" {
		return SkipEnv + " is set: lab integration tests skipped"
	}
	return ""
}

// Up builds the lab: it waits for the lab lock (LockPath; see
// Config.Concurrent), removes what crashed runs left when it is the
// machine's only lab (every namespace under namePrefix that no lab of this
// process made, and the processes inside them), then creates its namespaces (named after the lab's prefix), veth
// pairs and addresses, and starts the switch. On any error
// it removes what it made. The caller must call Down, also on SIGINT and
// SIGTERM (the CLI cancels its context on them and defers Down).
func Up(ctx context.Context, cfg Config) (*Lab, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lab: config: %w", err)
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if cfg.SpinWindow == 0 {
		cfg.SpinWindow = DefaultSpinWindow
	}
	if cfg.RunDir == "" {
		cfg.RunDir = DefaultRunDir
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	release, first, err := lockLab(ctx, log, cfg.Concurrent)
	if err != nil {
		return nil, err
	}
	// Exclusive, with no other lab of this process up: every namespace
	// of another process is a leftover. Shared: only those of ended ones.
	clean := cleanupEnded
	if first {
		clean = cleanupOthers
	}
	if err := clean(log); err != nil {
		release()
		return nil, err
	}
	l := &Lab{cfg: cfg, log: log, prefix: runPrefix(), release: release}
	if err := l.build(ctx); err != nil {
		l.Down()
		return nil, err
	}
	return l, nil
}

func (l *Lab) build(ctx context.Context) error {
	if err := os.MkdirAll(l.cfg.RunDir, 0o755); err != nil {
		return fmt.Errorf("lab: run dir: %w", err)
	}
	n := l.cfg.Hosts
	names := make([]string, 0, n+1)
	for i := range n {
		names = append(names, l.HostNS(i))
	}
	if !l.cfg.Link.Direct {
		names = append(names, l.switchNS())
	}
	for _, ns := range names {
		if err := addNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for i := range n {
		if err := l.linkHost(ctx, i); err != nil {
			return err
		}
	}
	if l.cfg.Link.Direct {
		l.log.Info("lab up", "hosts", n, "link", "direct veth", "prefix", l.prefix)
		return nil
	}
	if err := l.upSwitch(ctx); err != nil {
		return err
	}
	l.log.Info("lab up", "hosts", n, "link", l.cfg.Link.String(), "prefix", l.prefix)
	return nil
}

// addNamespace makes namespace ns with loopback up and IPv6 off.
func addNamespace(ctx context.Context, ns string) error {
	if err := ipCmd(ctx, "netns", "add", ns); err != nil {
		return fmt.Errorf("lab: %w: %w", ErrNoNetns, err)
	}
	// No IPv6: its autoconfiguration chatter would cross the switch.
	if err := inNetns(ns, func() error {
		for _, f := range []string{"all", "default"} {
			p := "/proc/sys/net/ipv6/conf/" + f + "/disable_ipv6"
			if err := os.WriteFile(p, []byte("1"), 0o644); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("lab: %s: disable ipv6: %w", ns, err)
	}
	if err := ipCmd(ctx, "-n", ns, "link", "set", "lo", "up"); err != nil {
		return fmt.Errorf("lab: %s: %w", ns, err)
	}
	return nil
}

// linkHost gives host i its eth0: a veth to its switch port (on a direct
// link, host 0 makes the pair to host 1), its address and the multicast
// route.
func (l *Lab) linkHost(ctx context.Context, i int) error {
	ns := l.HostNS(i)
	switch {
	case l.cfg.Link.Direct && i == 0:
		if err := ipCmd(ctx, "-n", ns, "link", "add", HostIf, "address", hostMAC(0), "type", "veth",
			"peer", "name", HostIf, "address", hostMAC(1), "netns", l.HostNS(1)); err != nil {
			return fmt.Errorf("lab: direct veth: %w", err)
		}
	case !l.cfg.Link.Direct:
		if err := ipCmd(ctx, "-n", ns, "link", "add", HostIf, "address", hostMAC(i), "type", "veth",
			"peer", "name", portName(i), "netns", l.switchNS()); err != nil {
			return fmt.Errorf("lab: %s veth: %w", ns, err)
		}
		if err := ipCmd(ctx, "-n", l.switchNS(), "link", "set", portName(i), "up"); err != nil {
			return fmt.Errorf("lab: switch port %s: %w", portName(i), err)
		}
	}
	if err := ipCmd(ctx, "-n", ns, "addr", "add", HostAddr(i).String()+"/24", "dev", HostIf); err != nil {
		return fmt.Errorf("lab: %s address: %w", ns, err)
	}
	if err := ipCmd(ctx, "-n", ns, "link", "set", HostIf, "up"); err != nil {
		return fmt.Errorf("lab: %s link up: %w", ns, err)
	}
	// Multicast (PTP over UDP/IPv4) leaves through the lab interface.
	if err := ipCmd(ctx, "-n", ns, "route", "add", "224.0.0.0/4", "dev", HostIf); err != nil {
		return fmt.Errorf("lab: %s multicast route: %w", ns, err)
	}
	return nil
}

// upSwitch makes the warm-up veth pair (with WarmAfter) and starts the
// switch on the hosts' ports.
func (l *Lab) upSwitch(ctx context.Context) error {
	ports := make([]string, l.cfg.Hosts)
	for i := range ports {
		ports[i] = portName(i)
	}
	warm := ""
	if l.cfg.WarmAfter > 0 {
		warm = warmPort
		if err := ipCmd(ctx, "-n", l.switchNS(), "link", "add", warmPort, "type", "veth", "peer", "name", warmPort+"p"); err != nil {
			return fmt.Errorf("lab: warm-up veth: %w", err)
		}
		for _, w := range []string{warmPort, warmPort + "p"} {
			if err := ipCmd(ctx, "-n", l.switchNS(), "link", "set", w, "up"); err != nil {
				return fmt.Errorf("lab: warm-up veth %s: %w", w, err)
			}
		}
	}
	sw, err := startSwitch(switchConfig{
		WarmPort:   warm,
		WarmAfter:  l.cfg.WarmAfter,
		Namespace:  l.switchNS(),
		Ports:      ports,
		Link:       l.cfg.Link,
		Seed:       l.cfg.Seed,
		SpinWindow: l.cfg.SpinWindow,
		BusyPoll:   l.cfg.BusyPoll,
		SchedFIFO:  l.cfg.SchedFIFO,
		PortRate:   l.cfg.PortRate,
		FrameLog:   l.cfg.FrameLog,
		Logger:     l.log,
	})
	if err != nil {
		return err
	}
	l.sw = sw
	return nil
}

func portName(i int) string { return "p" + strconv.Itoa(i) }

// Config returns the lab's configuration (defaults filled in).
func (l *Lab) Config() Config { return l.cfg }

// Switch returns the lab's switch, nil for a direct link.
func (l *Lab) Switch() *Switch { return l.sw }

// Down stops every process started with Exec, stops the switch and removes
// every namespace the lab made (their veths go with them). It is safe to
// call more than once and from a signal handler's goroutine.
func (l *Lab) Down() error {
	l.mu.Lock()
	if l.down {
		l.mu.Unlock()
		return nil
	}
	l.down = true
	procs := l.procs
	l.mu.Unlock()
	for _, p := range procs {
		p.Stop(2 * time.Second)
	}
	if l.sw != nil {
		l.sw.close()
	}
	err := removeNamespaces(l.log, func(ns string) bool { return strings.HasPrefix(ns, l.prefix) })
	l.release()
	return err
}

// killNetnsPids kills the processes whose network namespace is ns: SIGTERM,
// then SIGKILL for those still there after a second.
func killNetnsPids(ns string, log *slog.Logger) {
	list := func() []int {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			return nil
		}
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			if p, err := strconv.Atoi(f); err == nil && p > 1 && p != os.Getpid() {
				pids = append(pids, p)
			}
		}
		return pids
	}
	pids := list()
	if len(pids) == 0 {
		return
	}
	for _, p := range pids {
		log.Info("stopping leftover process", "ns", ns, "pid", p)
		_ = unix.Kill(p, unix.SIGTERM)
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if len(list()) == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range list() {
		_ = unix.Kill(p, unix.SIGKILL)
	}
}

func ipCmd(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %s: %w", strings.Join(args, " "), strings.TrimSpace(out.String()), err)
	}
	return nil
}

// inNetns runs fn on an OS thread that has entered the network namespace ns
// (a name made by `ip netns add`). Sockets fn creates belong to ns and stay
// usable from any goroutine afterwards. fn must not start goroutines that
// expect to be inside ns.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns %s: own namespace: %w", ns, err)
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(filepath.Join(netnsDir, ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns %s: %w", ns, err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns %s: setns: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: the runtime ends it with this
			// goroutine instead of reusing a thread in the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("netns %s: setns back: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Proc is a process started in a host namespace by Exec.
type Proc struct {
	Host int
	Argv []string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// ExecOptions say where a host process's output goes.
type ExecOptions struct {
	Stdout, Stderr *os.File // nil: discarded
}

// Exec starts argv in host's namespace (`ip netns exec`) and tracks it: Down
// stops it. The process gets its own process group (Stop signals the group)
// and SIGKILL when the lab's process dies.
//
// This is where the per-host gclock daemons plug in: start
// `gclock daemon --config ...` in each host with Exec, then run the
// evaluator against them (see the TODO in cmd/gclock/lab.go).
func (l *Lab) Exec(host int, argv []string, opt ExecOptions) (*Proc, error) {
	return l.ExecEnv(host, argv, nil, opt)
}

// ExecEnv is Exec with env added to this process's environment.
func (l *Lab) ExecEnv(host int, argv, env []string, opt ExecOptions) (*Proc, error) {
	if host < 0 || host >= l.cfg.Hosts {
		return nil, fmt.Errorf("lab: exec: host %d: want 0..%d", host, l.cfg.Hosts-1)
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("lab: exec: host %d: empty command", host)
	}
	return l.execIn(l.HostNS(host), host, argv, env, opt)
}

// execIn is ExecEnv in namespace ns ("": this process's own, outside the
// lab's); host only labels the Proc.
func (l *Lab) execIn(ns string, host int, argv, env []string, opt ExecOptions) (*Proc, error) {
	where := "host " + strconv.Itoa(host)
	if ns == "" {
		where = "the root namespace"
	} else if ns != l.HostNS(host) {
		where = ns
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return nil, fmt.Errorf("lab: exec %s in %s: lab is down", argv[0], where)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if ns != "" {
		cmd = exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	}
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	if opt.Stdout != nil {
		cmd.Stdout = opt.Stdout
	}
	if opt.Stderr != nil {
		cmd.Stderr = opt.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := startOrdinary(cmd); err != nil {
		return nil, fmt.Errorf("lab: exec %s in %s: %w", argv[0], where, err)
	}
	p := &Proc{Host: host, Argv: argv, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	l.procs = append(l.procs, p)
	l.log.Debug("started", "where", where, "argv", argv, "pid", cmd.Process.Pid)
	return p, nil
}

// Pid is the process id (of `ip netns exec`, which execs argv in place).
func (p *Proc) pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error once Done is closed.
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the process to exit.
func (p *Proc) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = unix.Kill(-pgid, unix.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = unix.Kill(-pgid, unix.SIGKILL)
	<-p.done
}

// Logger returns the lab's logger (Config.Logger, or one that discards).
func (l *Lab) Logger() *slog.Logger { return l.log }
