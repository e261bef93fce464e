package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/measure"
	"github.com/gclock/gclock/wire/keyfile"
)

// measurePort is the UDP port of `gclock measure` on the lab's hosts.
const measurePort = 3200

// measureConfig says how runMeasure runs `gclock measure` on the hosts.
type measureConfig struct {
	// Gclock runs the daemons; runMeasure sets its Duration to Warmup +
	// Expect + Margin.
	Gclock GclockConfig
	// Command runs `gclock measure` (the gclock binary and "measure");
	// runMeasure appends the node flags. Required.
	Command []string
	Env     []string // extra environment of the nodes
	// Latency runs `gclock measure latency` between hosts 0 and 1 instead
	// of an operation on every host.
	Latency bool
	// Args are more flags for every node (-op, -runs, -period, ...).
	Args []string
	// Expect is how long the nodes should run once started; the daemons
	// run until the nodes are done, at most measureOverrun*Expect + Margin
	// after the warm-up.
	Expect, Margin time.Duration
}

// measureOverrun is how many times longer than expected (Expect) the
// nodes may run before runMeasure gives up on them: under the busy profile
// (`--load 4 --load-outside 2`) at a load average of 20 on 2 cores, 300
// allreduce iterations took 7 times their 6.2 s (4 times, the old cap,
// ended the run at iteration 214). The daemons stop as soon as the nodes
// are done, so a generous cap costs nothing; it bounds a hung run.
const measureOverrun = 16

// measureCap is how long after the warm-up the daemons may run for mc.
func measureCap(mc measureConfig) time.Duration { return measureOverrun*mc.Expect + mc.Margin }

// MeasureResult is one runMeasure.
type MeasureResult struct {
	Stamps []measure.Stamp // every node's
	// Truth is the true global time at a CLOCK_MONOTONIC_RAW instant: the
	// reference's (host 0's) emulated clock, which the evaluator rebuilds
	// from its daemon's configuration. The nodes never see it. A func: left
	// out of the JSON.
	Truth  measure.Truth `json:"-"`
	Gclock GclockResult  // the daemons evaluated over the same run
	Dir    string        // the nodes' stamp files and logs
}

// runMeasure starts the daemons (RunGclock), waits for their warm-up, runs
// one `gclock measure` process per host (each reading its own daemon's page
// and its own emulated clock, talking UDP through the switch), waits for
// them and the daemons, and returns every stamp with the truth.
func (l *Lab) runMeasure(ctx context.Context, mc measureConfig) (MeasureResult, error) {
	var res MeasureResult
	if len(mc.Command) == 0 {
		return res, errors.New("lab: measure: command: empty (want the gclock binary and \"measure\")")
	}
	if mc.Expect <= 0 || mc.Margin < 0 {
		return res, fmt.Errorf("lab: measure: expect %v, margin %v: want a positive expected run time", mc.Expect, mc.Margin)
	}
	hosts := l.Config().Hosts
	if mc.Latency {
		hosts = 2
	}
	dir := filepath.Join(l.Config().RunDir, "measure")
	if err := os.RemoveAll(dir); err != nil {
		return res, fmt.Errorf("lab: measure: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, fmt.Errorf("lab: measure: %w", err)
	}
	res.Dir = dir
	gc := mc.Gclock
	// The daemons run until the nodes are done (Until), at most for
	// measureOverrun times the expected run and the margin: a loaded
	// machine makes iterations overrun their period.
	gc.Duration = gc.Warmup + measureCap(mc)
	nodesDone := make(chan struct{})
	gc.Until = nodesDone
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gdir := filepath.Join(l.Config().RunDir, "gclock")
	// A previous run's pages and configs must not be taken for this run's.
	if err := os.RemoveAll(gdir); err != nil {
		return res, fmt.Errorf("lab: measure: %w", err)
	}
	gdone := make(chan gout, 1)
	go func() {
		r, err := l.RunGclock(ctx, gc)
		gdone <- gout{r, err}
	}()
	if err := waitPages(ctx, gdir, l.Config().Hosts, gdone); err != nil {
		return res, err
	}
	truth, err := referenceTruth(filepath.Join(gdir, "h0.yaml"))
	if err != nil {
		return res, err
	}
	res.Truth = truth
	select {
	case g := <-gdone:
		return res, fmt.Errorf("lab: measure: the daemons stopped during the warm-up: %v", g.err)
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(gc.Warmup):
	}
	var procs []*netlab.Proc
	defer func() {
		for _, p := range procs {
			p.Stop(2 * time.Second)
		}
	}()
	procs, err = l.startNodes(mc, hosts, dir, gdir)
	if err != nil {
		return res, err
	}
	if err := waitNodes(ctx, procs, gdone, dir, mc.Expect); err != nil {
		return res, err
	}
	close(nodesDone)
	g := <-gdone
	if g.err != nil {
		return res, fmt.Errorf("lab: measure: %w", g.err)
	}
	res.Gclock = g.r
	res.Stamps, err = readStamps(dir, hosts)
	return res, err
}

// waitNodes waits for every node to end, and reports the first that
// failed (with its log's tail) or the daemons stopping first (the nodes
// overran their expected run expect).
func waitNodes(ctx context.Context, procs []*netlab.Proc, gdone <-chan gout, dir string, expect time.Duration) error {
	for _, p := range procs {
		select {
		case <-p.Done():
		case g := <-gdone:
			return fmt.Errorf("lab: measure: the daemons stopped while host %d's node ran (%v): the nodes ran more than %d times their expected %v (fewer -runs, or a quieter machine)", p.Host, g.err, measureOverrun, expect)
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := p.Err(); err != nil {
			log := filepath.Join(dir, fmt.Sprintf("node-h%d.log", p.Host))
			tail, _ := os.ReadFile(log)
			if len(tail) > 600 {
				tail = tail[len(tail)-600:]
			}
			return fmt.Errorf("lab: measure: host %d's node failed (%v): %s (log %s)", p.Host, err, strings.TrimSpace(string(tail)), log)
		}
	}
	return nil
}

// gout is what RunGclock returned.
type gout struct {
	r   GclockResult
	err error
}

// waitPages waits for the pages of hosts daemons in gdir: RunGclock
// recreates its directory, then writes the configs and starts the daemons.
func waitPages(ctx context.Context, gdir string, hosts int, gdone <-chan gout) error {
	deadline := time.Now().Add(15 * time.Second)
	for h := 0; h < hosts; {
		if _, err := os.Stat(filepath.Join(gdir, fmt.Sprintf("page-h%d", h))); err == nil {
			h++
			continue
		}
		select {
		case g := <-gdone:
			return fmt.Errorf("lab: measure: the daemons stopped before their pages appeared: %v", g.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: measure: no page of host %d after 15 s (see %s)", h, gdir)
		}
	}
	return nil
}

// startNodes starts `gclock measure` on hosts 0..hosts-1, reading the
// daemons' pages and configs in gdir, writing stamps and logs to dir.
func (l *Lab) startNodes(mc measureConfig, hosts int, dir, gdir string) ([]*netlab.Proc, error) {
	var peers []string
	for i := range hosts {
		peers = append(peers, net.JoinHostPort(netlab.HostAddr(i).String(), strconv.Itoa(measurePort)))
	}
	// The nodes' key: op page needs one (its server answers 8-KB pages
	// to short requests); the other ops run without, as the lab's
	// daemons do, on the lab's private links (-insecure, said explicitly).
	auth := []string{"-insecure"}
	if i := slices.Index(mc.Args, "-op"); i >= 0 && i+1 < len(mc.Args) && mc.Args[i+1] == measure.OpPage {
		line, err := keyfile.NewLine(1)
		if err != nil {
			return nil, fmt.Errorf("lab: measure: %w", err)
		}
		kf := filepath.Join(dir, "cluster.key")
		if err := os.WriteFile(kf, []byte(line), 0o600); err != nil {
			return nil, fmt.Errorf("lab: measure: %w", err)
		}
		auth = []string{"-key", kf}
	}
	var procs []*netlab.Proc
	for i := range hosts {
		argv := append([]string(nil), mc.Command...)
		if mc.Latency {
			argv = append(argv, "latency")
		}
		argv = append(argv, auth...)
		argv = append(argv, "-rank", strconv.Itoa(i), "-peers", strings.Join(peers, ","),
			"-page", filepath.Join(gdir, fmt.Sprintf("page-h%d", i)),
			"-clock-config", filepath.Join(gdir, fmt.Sprintf("h%d.yaml", i)),
			"-o", filepath.Join(dir, fmt.Sprintf("stamps-r%d.csv", i)))
		argv = append(argv, mc.Args...)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("node-h%d.log", i)))
		if err != nil {
			return procs, fmt.Errorf("lab: measure: %w", err)
		}
		p, err := l.ExecEnv(i, argv, mc.Env, netlab.ExecOptions{Stdout: logf, Stderr: logf})
		logf.Close()
		if err != nil {
			return procs, fmt.Errorf("lab: measure: %w", err)
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// readStamps reads the nodes' stamps-r<i>.csv in dir.
func readStamps(dir string, hosts int) ([]measure.Stamp, error) {
	var out []measure.Stamp
	for i := range hosts {
		path := filepath.Join(dir, fmt.Sprintf("stamps-r%d.csv", i))
		f, err := os.Open(path)
		if err != nil {
			return out, fmt.Errorf("lab: measure: %w", err)
		}
		ss, err := measure.ReadStamps(f, path)
		f.Close()
		if err != nil {
			return out, fmt.Errorf("lab: measure: %w", err)
		}
		out = append(out, ss...)
	}
	return out, nil
}

// referenceTruth rebuilds the reference's clock from its daemon's
// configuration: global time is that clock, so its ideal reading at a raw
// instant is the true global time. An evaluator's privilege.
func referenceTruth(path string) (measure.Truth, error) {
	c, err := daemon.Load(path)
	if err != nil {
		return nil, fmt.Errorf("lab: measure: reference clock: %w", err)
	}
	if c.Clock.Source != daemon.ClockEmulated {
		return func(raw int64) int64 { return raw }, nil
	}
	// The same clock the daemon built (clock.EmulatedConfig.Params: drift
	// steps and wander included). Stamps are looked up in any order after the run, so a
	// query older than the clock's look-back window is answered by a
	// fresh copy walked forward from the origin.
	p := c.Clock.Emulated.Params()
	emu, err := clock.NewEmulated(p)
	if err != nil {
		return nil, fmt.Errorf("lab: measure: reference clock: %w", err)
	}
	var mu sync.Mutex
	return func(raw int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		if raw < emu.Oldest() {
			if fresh, err := clock.NewEmulated(p); err == nil {
				emu = fresh
			}
		}
		return emu.Ideal(raw)
	}, nil
}
