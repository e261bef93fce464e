package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/eval"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/lab/clockshim"
	"github.com/gclock/gclock/lab/netlab"
)

// Peer names accepted by runPeers.
const (
	PeerChrony = "chrony"
	PeerPTP4L  = "ptp4l"
)

// PeerConfig says how long to run the peers and which part of the run
// counts.
type PeerConfig struct {
	Duration time.Duration // whole run
	Warmup   time.Duration // readings before this are kept but not summarised
	// ChronyPoll is how often `chronyc tracking` is read (chronyd itself
	// polls its server at 16 Hz: minpoll -4 maxpoll -4).
	ChronyPoll time.Duration
	// PTPLogSyncInterval is ptp4l's logSyncInterval and
	// logMinDelayReqInterval (log2 seconds); -4 is 16 Hz like chrony's polls.
	PTPLogSyncInterval int
	Server, Client     int // host indexes: chronyd server / ptp4l master, and the client / slave
	// ChronyClients are the hosts that run a chronyd client of the
	// server, their readings pooled as gclock's hosts are (nil: every
	// host but the server, so that chrony meets the same links and hosts
	// gclock is judged on; ptp4l runs on Client alone).
	ChronyClients []int
	// Clocks are the hosts' emulated clocks (nil: every peer on the
	// machine's clock, where the true offset is 0). With them every
	// chronyd runs on its host's clock through the clock shim
	// (lab/clockshim), as gclock's daemon does, and each reading is judged
	// against the true offset of its client's clock from the server's at
	// the instant it was read. ptp4l stays on the machine's clock.
	Clocks []clock.EmulatedConfig
}

// chronyClients is ChronyClients with its default applied.
func (pc PeerConfig) chronyClients(hosts int) []int {
	if pc.ChronyClients != nil {
		return pc.ChronyClients
	}
	var out []int
	for h := range hosts {
		if h != pc.Server {
			out = append(out, h)
		}
	}
	return out
}

// DefaultPeerConfig runs 60 s, summarises after 10 s of convergence.
func DefaultPeerConfig() PeerConfig {
	return PeerConfig{Duration: 60 * time.Second, Warmup: 10 * time.Second, ChronyPoll: 250 * time.Millisecond,
		PTPLogSyncInterval: -4, Server: 0, Client: 1}
}

// Validate reports the first invalid field.
func (pc PeerConfig) Validate(hosts int) error {
	switch {
	case pc.Duration <= 0:
		return fmt.Errorf("duration %v: must be positive", pc.Duration)
	case pc.Warmup < 0 || pc.Warmup >= pc.Duration:
		return fmt.Errorf("warmup %v: want 0 <= warmup < duration %v", pc.Warmup, pc.Duration)
	case pc.ChronyPoll < 10*time.Millisecond:
		return fmt.Errorf("chrony poll %v: want >= 10ms", pc.ChronyPoll)
	case pc.PTPLogSyncInterval < -7 || pc.PTPLogSyncInterval > 4:
		return fmt.Errorf("ptp log sync interval %d: want -7..4", pc.PTPLogSyncInterval)
	case pc.Server == pc.Client || pc.Server < 0 || pc.Client < 0 || pc.Server >= hosts || pc.Client >= hosts:
		return fmt.Errorf("server %d, client %d: want two different hosts in 0..%d", pc.Server, pc.Client, hosts-1)
	case pc.ChronyClients != nil && len(pc.ChronyClients) == 0:
		return fmt.Errorf("chrony clients: an empty list (nil: every host but the server)")
	case pc.Clocks != nil && len(pc.Clocks) != hosts:
		return fmt.Errorf("clocks: %d, want one per host (%d)", len(pc.Clocks), hosts)
	}
	for i, c := range pc.Clocks {
		if c.OriginRaw == 0 {
			return fmt.Errorf("clocks: host %d: no origin_raw, so the clock cannot be rebuilt", i)
		}
	}
	seen := map[int]bool{}
	for _, h := range pc.ChronyClients {
		if h == pc.Server || h < 0 || h >= hosts || seen[h] {
			return fmt.Errorf("chrony client %d: want distinct hosts in 0..%d other than the server %d", h, hosts-1, pc.Server)
		}
		seen[h] = true
	}
	return nil
}

// Reading is one estimate a peer reported. On the machine's clock the
// true offset is 0; on emulated clocks (PeerConfig.Clocks) it is TrueNs.
type Reading struct {
	AtNs     int64 `json:"at_ns"`     // since the start of the run
	OffsetNs int64 `json:"offset_ns"` // client clock minus server clock, as the peer estimates it
	// TrueNs is the client's clock minus the server's at the reading, from
	// the clocks only the evaluator knows: 0 on the machine's clock.
	TrueNs int64 `json:"true_ns"`
}

// ErrorNs is the reading's error: estimate minus truth.
func (r Reading) ErrorNs() int64 { return r.OffsetNs - r.TrueNs }

// PeerResult is one peer's run.
type PeerResult struct {
	Peer     string    `json:"peer"`
	Link     string    `json:"link"`
	Summary  Summary   `json:"summary"` // readings after the warm-up
	Readings []Reading `json:"-"`
	Notes    []string  `json:"notes,omitempty"` // how it ran (timestamping modes, ...)
}

// runPeers runs the named peers (PeerChrony, PeerPTP4L) at the same time on
// the lab's link between pc.Server and pc.Client, and returns their
// results in the order asked. Each peer's processes are stopped when it
// returns; Down stops them too if the caller is interrupted.
func (l *Lab) runPeers(ctx context.Context, names []string, pc PeerConfig) ([]PeerResult, error) {
	if err := pc.Validate(l.Config().Hosts); err != nil {
		return nil, fmt.Errorf("lab: peers: %w", err)
	}
	for _, n := range names {
		if n != PeerChrony && n != PeerPTP4L {
			return nil, fmt.Errorf("lab: peers: %q: unknown peer (want %s or %s)", n, PeerChrony, PeerPTP4L)
		}
	}
	out := make([]PeerResult, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	start := time.Now()
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r PeerResult
			var err error
			switch n {
			case PeerChrony:
				r, err = l.runChrony(ctx, pc, start)
			case PeerPTP4L:
				r, err = l.runPTP4L(ctx, pc, start)
			}
			if err != nil {
				errs[i] = fmt.Errorf("lab: %s: %w", n, err)
				return
			}
			r.Link = l.Config().Link.String()
			r.Summary = summarizeAfter(r.Readings, pc.Warmup)
			if r.Summary.Evaluations == 0 {
				errs[i] = fmt.Errorf("lab: %s: no reading after the %v warm-up (see its log in %s)", n, pc.Warmup, l.Config().RunDir)
				return
			}
			out[i] = r
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// summarizeAfter summarises the errors of the readings taken at or after
// warmup into the run.
func summarizeAfter(rs []Reading, warmup time.Duration) Summary {
	var e []int64
	for _, rd := range rs {
		if rd.AtNs >= warmup.Nanoseconds() {
			e = append(e, rd.ErrorNs())
		}
	}
	return eval.SummarizeErrors(e)
}

// peerDir makes a fresh private directory for one peer instance (chronyd
// refuses a socket directory others can read).
func (l *Lab) peerDir(name string) (string, error) {
	d := filepath.Join(l.Config().RunDir, name)
	if err := os.RemoveAll(d); err != nil {
		return "", err
	}
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	return d, os.Chmod(d, 0o700)
}

func (l *Lab) runChrony(ctx context.Context, pc PeerConfig, start time.Time) (PeerResult, error) {
	if _, err := exec.LookPath("chronyd"); err != nil {
		return PeerResult{}, fmt.Errorf("chronyd not found (install chrony; ci/lab-deps.sh does): %w", err)
	}
	var procs []*netlab.Proc
	defer func() {
		for _, p := range procs {
			p.Stop(2 * time.Second)
		}
	}()
	clients := pc.chronyClients(l.Config().Hosts)
	procs, socks, err := l.startChrony(pc, clients)
	if err != nil {
		return PeerResult{}, err
	}
	res, err := pollChrony(ctx, pc, start, procs, clients, socks)
	if err != nil {
		return res, err
	}
	if pc.Clocks != nil {
		res.Notes = append(res.Notes, "chronyd on the hosts' emulated clocks (lab/clockshim), judged against them")
	}
	_ = os.MkdirAll("/var/run/chrony", 0o750) // chronyc's reply socket
	if out, err := exec.Command("chronyc", "-h", socks[0], "ntpdata").CombinedOutput(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "timestamping") || strings.HasPrefix(line, "Mode") || strings.HasPrefix(line, "Interleaved") {
				res.Notes = append(res.Notes, strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return res, nil
}

// startChrony starts chronyd as the server on pc.Server and as its client
// on each of clients, each with a directory of its own (and, with
// pc.Clocks, on its host's emulated clock: the shim is built into the run
// directory and each chronyd reads its clock's table, clock.knots, beside
// its configuration); socks are the clients' command sockets, in clients'
// order.
func (l *Lab) startChrony(pc PeerConfig, clients []int) (procs []*netlab.Proc, socks []string, err error) {
	hosts := append([]int{pc.Server}, clients...)
	var so string
	if pc.Clocks != nil {
		if so, err = clockshim.Build(l.Config().RunDir); err != nil {
			return nil, nil, err
		}
	}
	for i, h := range hosts {
		dir, err := l.peerDir(fmt.Sprintf("chrony-h%d", h))
		if err != nil {
			return procs, nil, err
		}
		var env []string
		if pc.Clocks != nil {
			// The table reaches past the run's end; the shim extends its
			// last knot's line after that.
			ks, err := pc.Clocks[h].Params().Knots(gtime.RawNow()+(pc.Duration+10*time.Minute).Nanoseconds(), 1<<20)
			if err != nil {
				return procs, nil, fmt.Errorf("host %d clock: %w", h, err)
			}
			table := filepath.Join(dir, "clock.knots")
			if err := clockshim.WriteTable(table, ks); err != nil {
				return procs, nil, err
			}
			env = clockshim.Env(so, table)
		}
		// logdir: chronyd's own logs of every measurement, its statistics
		// and its tracking beside its output, for taking a run apart after.
		conf := fmt.Sprintf("logdir %s\nlog measurements statistics tracking\n", dir)
		if i == 0 {
			conf += "local stratum 1\nallow 10.77.0.0/24\n"
		} else {
			conf += fmt.Sprintf("server %s minpoll -4 maxpoll -4 xleave iburst\n", netlab.HostAddr(pc.Server))
		}
		sock := filepath.Join(dir, "chronyd.sock")
		p, err := l.startChronydEnv(h, dir, sock, conf, env)
		if err != nil {
			return procs, nil, err
		}
		procs = append(procs, p)
		if i > 0 {
			socks = append(socks, sock)
		}
	}
	return procs, socks, nil
}

// chronyTruth is the evaluator's side of chrony on emulated clocks: the
// true offset of a client's clock from the server's at a raw instant.
type chronyTruth struct {
	server int
	clocks map[int]*clock.Emulated
}

func newChronyTruth(pc PeerConfig, clients []int) (*chronyTruth, error) {
	if pc.Clocks == nil {
		return nil, nil
	}
	t := &chronyTruth{server: pc.Server, clocks: map[int]*clock.Emulated{}}
	for _, h := range append([]int{pc.Server}, clients...) {
		e, err := pc.Clocks[h].New()
		if err != nil {
			return nil, fmt.Errorf("host %d clock: %w", h, err)
		}
		t.clocks[h] = e
	}
	return t, nil
}

// offset is client h's clock minus the server's at raw instant r, and
// their rate difference there; 0 on the machine's clock (t nil).
func (t *chronyTruth) offset(h int, r int64) (ns int64, rate float64) {
	if t == nil {
		return 0, 0
	}
	c, s := t.clocks[h], t.clocks[t.server]
	return c.Ideal(r) - s.Ideal(r), c.Skew(r) - s.Skew(r)
}

func (t *chronyTruth) err() error {
	if t == nil {
		return nil
	}
	for h, c := range t.clocks {
		if c.Err() != nil {
			return fmt.Errorf("host %d clock: %w", h, c.Err())
		}
	}
	return nil
}

// chronyTimingSlack is how much a reading's instant may cost its truth: a
// reading is taken at some moment of the question's round trip, so it is
// judged at the middle, which can be off by half the round trip times the
// rate difference of the two clocks. A reading above this is asked again
// (up to three times, the best kept).
const chronyTimingSlack = 10 // ns

// pollChrony asks every client's chronyd for its tracking every
// ChronyPoll until Duration after start, over chrony's command socket
// (internal/chronycmd, candmClient) with the raw clock read on both sides; the readings of all
// clients are pooled, and each client's median after the warm-up is
// noted. On emulated clocks each reading's truth is the clocks' offset at
// the middle of its round trip.
func pollChrony(ctx context.Context, pc PeerConfig, start time.Time, procs []*netlab.Proc, clients []int, socks []string) (PeerResult, error) {
	var res PeerResult
	res.Peer = PeerChrony
	truth, err := newChronyTruth(pc, clients)
	if err != nil {
		return res, err
	}
	cls := make([]*candmClient, len(socks))
	for i, sock := range socks {
		c, err := dialCandm(sock, filepath.Join(filepath.Dir(sock), "client.sock"))
		if err != nil {
			return res, fmt.Errorf("h%d: %w", clients[i], err)
		}
		defer c.close()
		cls[i] = c
	}
	per := make([][]Reading, len(socks))
	var slack []int64 // each kept reading's timing uncertainty, ns
	tick := time.NewTicker(pc.ChronyPoll)
	defer tick.Stop()
	end := start.Add(pc.Duration)
	var lastErr error
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-tick.C:
		}
		for _, p := range procs {
			select {
			case <-p.Done():
				return res, fmt.Errorf("chronyd in host %d exited: %v (logs: %s)", p.Host, p.Err(), filepath.Dir(filepath.Dir(socks[0])))
			default:
			}
		}
		for i, c := range cls {
			var best Reading
			bestSlack, got := int64(math.MaxInt64), false
			for try := 0; try < 3 && bestSlack > chronyTimingSlack; try++ {
				r0 := gtime.RawNow()
				tr, err := c.tracking(time.Second)
				r1 := gtime.RawNow()
				if err != nil {
					lastErr = fmt.Errorf("h%d: chronyd's tracking: %w", clients[i], err)
					break
				}
				if !chronySynced(tr) {
					break
				}
				mid := r0 + (r1-r0)/2
				off, rate := truth.offset(clients[i], mid)
				sl := int64(math.Ceil(float64(r1-r0) / 2 * math.Abs(rate)))
				if sl < bestSlack {
					at := time.Since(start).Nanoseconds() - (r1 - mid)
					// The correction is true time minus the clock: the
					// clock's offset is its negative.
					best, bestSlack, got = Reading{AtNs: at, OffsetNs: int64(math.Round(-tr.Correction * 1e9)), TrueNs: off}, sl, true
				}
			}
			if got {
				res.Readings = append(res.Readings, best)
				per[i] = append(per[i], best)
				slack = append(slack, bestSlack)
			}
		}
	}
	if err := truth.err(); err != nil {
		return res, fmt.Errorf("judging chrony: %w", err)
	}
	if len(res.Readings) == 0 && lastErr != nil {
		return res, lastErr
	}
	for i, rs := range per {
		sm := summarizeAfter(rs, pc.Warmup)
		res.Notes = append(res.Notes, fmt.Sprintf("client h%d: %d readings after the warm-up, median |error| %.3f us", clients[i], sm.Evaluations, float64(sm.ErrorP50Ns)/1e3))
	}
	if truth != nil && len(slack) > 0 {
		slices.Sort(slack)
		res.Notes = append(res.Notes, fmt.Sprintf("each reading judged at the middle of its question's round trip: timing uncertainty median %d ns, max %d ns", slack[len(slack)/2], slack[len(slack)-1]))
	}
	return res, nil
}

// parseChronyTracking reads `chronyc tracking` output and returns its
// "System time" as a signed offset in ns: positive when the system clock is
// fast of NTP time (ahead of the server), negative when slow. ok is false
// when chronyd has no estimate yet (reference "Not synchronised" / 0.0.0.0
// or no System time line).
func parseChronyTracking(out string) (offsetNs int64, ok bool, err error) {
	unsynced := false
	for _, line := range strings.Split(out, "\n") {
		k, v, found := strings.Cut(line, ":")
		if !found {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "Reference ID":
			if strings.HasPrefix(v, "00000000") {
				unsynced = true
			}
		case "Leap status":
			if v == "Not synchronised" {
				unsynced = true
			}
		case "System time":
			// "0.000001234 seconds slow of NTP time"
			f := strings.Fields(v)
			if len(f) != 6 || f[1] != "seconds" || f[3] != "of" || f[4] != "NTP" || f[5] != "time" {
				return 0, false, fmt.Errorf("chronyc tracking: System time %q: unexpected format", v)
			}
			sec, err := strconv.ParseFloat(f[0], 64)
			if err != nil || !(sec >= 0 && sec <= 1e6) {
				return 0, false, fmt.Errorf("chronyc tracking: System time %q: bad number", v)
			}
			ns := int64(sec*1e9 + 0.5)
			switch f[2] {
			case "fast":
			case "slow":
				ns = -ns
			default:
				return 0, false, fmt.Errorf("chronyc tracking: System time %q: want fast or slow", v)
			}
			offsetNs, ok = ns, true
		}
	}
	if unsynced {
		return 0, false, nil
	}
	return offsetNs, ok, nil
}

func (l *Lab) runPTP4L(ctx context.Context, pc PeerConfig, start time.Time) (PeerResult, error) {
	if _, err := exec.LookPath("ptp4l"); err != nil {
		return PeerResult{}, fmt.Errorf("ptp4l not found (install linuxptp; ci/lab-deps.sh does): %w", err)
	}
	var res PeerResult
	res.Peer = PeerPTP4L
	var procs []*netlab.Proc
	defer func() {
		for _, p := range procs {
			p.Stop(2 * time.Second)
		}
	}()
	var lines io.ReadCloser
	var slaveLog string
	for _, h := range []struct {
		host  int
		slave bool
	}{{pc.Server, false}, {pc.Client, true}} {
		p, out, log, err := l.startPTP4L(pc, h.host, h.slave)
		if err != nil {
			return res, err
		}
		procs = append(procs, p)
		if h.slave {
			lines, slaveLog = out, log
		}
	}
	defer lines.Close()
	ch := make(chan Reading, 1024)
	go readPTP4L(lines, slaveLog, start, ch)
	timer := time.NewTimer(time.Until(start.Add(pc.Duration)))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-timer.C:
			res.Notes = append(res.Notes, "software timestamping (-S), UDP IPv4, free_running 1, "+
				fmt.Sprintf("logSyncInterval %d", pc.PTPLogSyncInterval))
			return res, nil
		case r, ok := <-ch:
			if !ok {
				return res, fmt.Errorf("ptp4l slave in host %d stopped writing (log: %s)", pc.Client, l.Config().RunDir)
			}
			res.Readings = append(res.Readings, r)
		}
	}
}

// startPTP4L starts ptp4l on host, the master or (slave) the slave with
// its output on the pipe out, copied to log by readPTP4L.
func (l *Lab) startPTP4L(pc PeerConfig, host int, slave bool) (p *netlab.Proc, out io.ReadCloser, log string, err error) {
	dir, err := l.peerDir(fmt.Sprintf("ptp4l-h%d", host))
	if err != nil {
		return nil, nil, "", err
	}
	// free_running 1: ptp4l never adjusts the (shared) clock.
	// Announce at 4 Hz so the master is elected within a second (and
	// lost only after 12 silent announces, 3 s, on a loaded machine);
	// freq_est_interval 0 (its minimum): free-running ptp4l prints the
	// latest sync's "master offset" once per second, not once per 2 s.
	conf := fmt.Sprintf("[global]\nfree_running 1\nlogSyncInterval %d\nlogMinDelayReqInterval %d\n"+
		"logAnnounceInterval -2\nannounceReceiptTimeout 12\nfreq_est_interval %d\n"+
		"summary_interval %d\ntx_timestamp_timeout 20\nuds_address %s/ptp4l\n",
		pc.PTPLogSyncInterval, pc.PTPLogSyncInterval, max(0, pc.PTPLogSyncInterval), pc.PTPLogSyncInterval, dir)
	if slave {
		conf += "slaveOnly 1\n"
	} else {
		conf += "priority1 1\n"
	}
	cf := filepath.Join(dir, "ptp4l.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		return nil, nil, "", err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "ptp4l.log"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, "", err
	}
	opt := netlab.ExecOptions{Stdout: logf, Stderr: logf}
	var pw *os.File
	if slave {
		log = filepath.Join(dir, "ptp4l.log")
		pr, w, err := os.Pipe()
		if err != nil {
			logf.Close()
			return nil, nil, "", err
		}
		out, pw = pr, w
		opt.Stdout = pw
	}
	argv := []string{"ptp4l", "-f", cf, "-i", netlab.HostIf, "-S", "-4", "-m", "-q"}
	p, err = l.Exec(host, argv, opt)
	logf.Close()
	if pw != nil {
		pw.Close()
	}
	if err != nil {
		if out != nil {
			out.Close()
		}
		return nil, nil, "", err
	}
	return p, out, log, nil
}

// readPTP4L copies the slave's output (lines) to its log and sends every
// "master offset" on ch, stamped since start; it closes ch at the end.
func readPTP4L(lines io.Reader, slaveLog string, start time.Time, ch chan<- Reading) {
	defer close(ch)
	logf, err := os.OpenFile(slaveLog, os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		defer logf.Close()
	}
	sc := bufio.NewScanner(lines)
	for sc.Scan() {
		if logf != nil {
			fmt.Fprintln(logf, sc.Text())
		}
		off, ok := parsePTP4LOffset(sc.Text())
		if ok {
			ch <- Reading{AtNs: time.Since(start).Nanoseconds(), OffsetNs: off}
		}
	}
}

// parsePTP4LOffset reads a ptp4l "master offset" line, e.g.
//
//	ptp4l[1234.567]: master offset        -85 s2 freq      +0 path delay     10234
//
// and returns the offset in ns (slave minus master). ok is false for every
// other line.
func parsePTP4LOffset(line string) (offsetNs int64, ok bool) {
	_, rest, found := strings.Cut(line, "master offset")
	if !found {
		return 0, false
	}
	f := strings.Fields(rest)
	if len(f) < 2 || !strings.HasPrefix(f[1], "s") {
		return 0, false
	}
	v, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}
