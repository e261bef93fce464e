package netlab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gclock/gclock/netmodel"
)

// busyLoop is one CPU-bound process: a shell loop, SCHED_OTHER like any
// program.
var busyLoop = []string{"sh", "-c", "while :; do :; done"}

// StartLoad runs n CPU-bound processes (shell busy loops, SCHED_OTHER like
// any program), spread over the host namespaces, until the returned stop
// function is called or the lab goes down. The switch's thread runs
// SCHED_FIFO (Config.SchedFIFO) and is not slowed by them; the daemons,
// chronyd and ptp4l share the CPUs with them like programs on a busy node.
func (l *Lab) StartLoad(n int) (stop func(), err error) {
	return l.startBusy(n, func(i int) (string, int) { return l.HostNS(i % l.cfg.Hosts), i % l.cfg.Hosts })
}

// StartLoadOutside runs n busy loops like StartLoad's but in this process's
// own namespace, outside every lab namespace: load the lab's hosts do not
// own, as other programs on the same cores.
func (l *Lab) StartLoadOutside(n int) (stop func(), err error) {
	return l.startBusy(n, func(int) (string, int) { return "", -1 })
}

func (l *Lab) startBusy(n int, where func(i int) (ns string, host int)) (stop func(), err error) {
	var procs []*Proc
	stop = func() {
		for _, p := range procs {
			p.Stop(time.Second)
		}
	}
	for i := range n {
		ns, host := where(i)
		p, err := l.execIn(ns, host, busyLoop, nil, ExecOptions{})
		if err != nil {
			stop()
			return nil, fmt.Errorf("lab: load: %w", err)
		}
		procs = append(procs, p)
	}
	return stop, nil
}

// floodIf is the veth pair (floodIf, floodIf+"p") in floodNS whose frames
// never reach the lab's switch.
const floodIf = "fl0"

// StartFlood builds the namespace floodNS and runs `command loadgen flood` in it: pps
// small frames a second written to one end of a veth pair, each received
// and dropped by the kernel at the other end in softirq, for at most d.
// Everything else on the machine waits for that work, as it waits for a
// busy NIC's interrupts; none of it crosses the lab's switch.
func (l *Lab) StartFlood(ctx context.Context, command []string, env []string, pps int, d time.Duration) (stop func(), err error) {
	if pps <= 0 || pps > 1e6 {
		return nil, fmt.Errorf("lab: flood: %d frames/s: want 1..1000000", pps)
	}
	if len(command) == 0 {
		return nil, fmt.Errorf("lab: flood: no load generator command")
	}
	if err := ipCmd(ctx, "netns", "add", l.floodNS()); err != nil {
		return nil, fmt.Errorf("lab: flood: %w", err)
	}
	for _, args := range [][]string{
		{"-n", l.floodNS(), "link", "add", floodIf, "type", "veth", "peer", "name", floodIf + "p"},
		{"-n", l.floodNS(), "addr", "add", "10.78.0.2/30", "dev", floodIf + "p"},
		{"-n", l.floodNS(), "link", "set", floodIf, "up"},
		{"-n", l.floodNS(), "link", "set", floodIf + "p", "up"},
	} {
		if err := ipCmd(ctx, args...); err != nil {
			return nil, fmt.Errorf("lab: flood: %w", err)
		}
	}
	argv := append(append([]string{}, command...), "lab", "loadgen", "flood", "-iface", floodIf, "-dst", floodIf+"p",
		"-pps", strconv.Itoa(pps), "-for", d.String())
	logf, err := os.Create(filepath.Join(l.cfg.RunDir, "flood.log"))
	if err != nil {
		return nil, fmt.Errorf("lab: flood: log: %w", err)
	}
	p, err := l.execIn(l.floodNS(), -1, argv, env, ExecOptions{Stdout: logf, Stderr: logf})
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("lab: flood: %w", err)
	}
	return func() { p.Stop(time.Second) }, nil
}

// StartCross runs the cross traffic: every host sends a bulk TCP flow to
// the next (h0 to h1, ..., the last to h0) through the switch, at share of
// the port rate on the wire (so that every egress port carries share of
// its rate, plus the ACKs of its own host's flow), for at most d. Each
// host runs `command loadgen bulk`, its log in RunDir/bulk-h<i>.log.
func (l *Lab) StartCross(command, env []string, share float64, d time.Duration) (stop func(), err error) {
	if !(share > 0 && share <= 1) {
		return nil, fmt.Errorf("lab: cross traffic %v: want a share of the port rate in (0, 1]", share)
	}
	if l.cfg.PortRate <= 0 {
		return nil, fmt.Errorf("lab: cross traffic needs a port rate (Config.PortRate, --port-rate)")
	}
	if len(command) == 0 {
		return nil, fmt.Errorf("lab: cross traffic: no load generator command")
	}
	rate := share * float64(l.cfg.PortRate)
	var procs []*Proc
	stop = func() {
		for _, p := range procs {
			p.Stop(time.Second)
		}
	}
	for i := range l.cfg.Hosts {
		to := HostAddr((i+1)%l.cfg.Hosts).String() + ":" + strconv.Itoa(bulkPort)
		argv := append(append([]string{}, command...), "lab", "loadgen", "bulk", "-listen", ":"+strconv.Itoa(bulkPort),
			"-to", to, "-rate", strconv.FormatFloat(rate, 'f', 0, 64), "-for", d.String())
		logf, err := os.Create(filepath.Join(l.cfg.RunDir, fmt.Sprintf("bulk-h%d.log", i)))
		if err != nil {
			stop()
			return nil, fmt.Errorf("lab: cross traffic: log: %w", err)
		}
		p, err := l.execIn(l.HostNS(i), i, argv, env, ExecOptions{Stdout: logf, Stderr: logf})
		logf.Close()
		if err != nil {
			stop()
			return nil, fmt.Errorf("lab: cross traffic: %w", err)
		}
		procs = append(procs, p)
	}
	l.log.Info("cross traffic", "share", share, "port_rate", netmodel.FormatRate(l.cfg.PortRate), "wire_bps", rate)
	return stop, nil
}
