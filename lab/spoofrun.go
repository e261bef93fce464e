package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/satmath"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/wire/keyfile"
)

// SpoofConfig says how RunSpoof runs daemons under a spoofer's attack.
type SpoofConfig struct {
	// Command runs `gclock daemon` (RunSpoof appends "-config FILE");
	// SpoofCommand runs the spoofer (`gclock lab spoof-send`; RunSpoof
	// appends "-config FILE", a spoofSendConfig in JSON). Env and
	// SpoofEnv are added to their environments.
	Command, SpoofCommand []string
	Env, SpoofEnv         []string

	// Daemons run on hosts 0..Daemons-1 (reference order 1, 2, ...); the
	// spoofer on host Daemons. The lab needs Daemons+1 hosts.
	Daemons int
	// Key gives the cluster a key (a file of mode 0600); false runs it
	// without one, to show what the spoofer then does.
	Key bool
	// Insider gives the spoofer the cluster key (Key must be set): it
	// then sends what a key holder sends to wedge a node (issue 17:
	// sequence numbers of 2^63 and beyond the jump limit, replays, replays
	// to another node), not forgeries of time.
	Insider bool
	// Capture taps host 1's traffic for this long from the start and
	// gives the spoofer the copies (replays and shifted time diffs); 0:
	// none.
	Capture time.Duration
	Rate    int // forged datagrams per second

	Duration  time.Duration // from the daemons' start to the end
	Warmup    time.Duration // the attack starts here; evaluations before it are not counted
	KillRefAt time.Duration // the reference's daemon is stopped here (0: never)
	EvalEvery time.Duration

	MaxDriftPPM float64
	MaxOffset   time.Duration
	Seed        uint64
}

// DefaultSpoofConfig: three daemons, a key, 5 s of capture, 10,000 forged
// datagrams a second from 8 s to 40 s, the reference stopped at 24 s.
func DefaultSpoofConfig() SpoofConfig {
	return SpoofConfig{Daemons: 3, Key: true, Capture: 5 * time.Second, Rate: 10000,
		Duration: 40 * time.Second, Warmup: 8 * time.Second, KillRefAt: 24 * time.Second, EvalEvery: 10 * time.Millisecond,
		MaxDriftPPM: 30, MaxOffset: 5 * time.Millisecond, Seed: 1}
}

// SpoofNode is one daemon's figures after the warm-up.
type SpoofNode struct {
	Host          int               `json:"host"`
	Evaluations   int               `json:"evaluations"`
	Synced        int               `json:"synced"`         // evaluations with status synced
	Outside       int               `json:"outside"`        // evaluations with the truth outside [earliest, latest]
	MaxAbsErrNs   int64             `json:"max_abs_err_ns"` // synced evaluations
	MaxWidthNs    int64             `json:"max_width_ns"`   // synced evaluations
	Drops         map[string]uint64 `json:"drops"`          // gclock_packets_dropped_total at the end (or at the stop)
	StatusChanges map[string]uint64 `json:"status_changes"`
	Reference     uint32            `json:"reference"` // at the end
}

// SpoofResult is one RunSpoof.
type SpoofResult struct {
	Key      bool           `json:"key"`
	Insider  bool           `json:"insider"`
	Captured int            `json:"captured"`
	Nodes    []SpoofNode    `json:"nodes"`
	Spoofer  spoofSendStats `json:"spoofer"`
	// FailoverMs is the time from the reference's stop until every
	// other daemon names host 1 (node 2) its reference; -1: not within
	// the run.
	FailoverMs float64      `json:"failover_ms"`
	Clocks     []ClockTruth `json:"clocks"`
	Logs       string       `json:"logs"`
}

// spoofDaemonConfig: the lab's daemon with rounds every second, 10
// exchanges each, failover after 2 s.
func spoofDaemonConfig() daemon.Config {
	c := LabDaemonConfig()
	c.Sync.PingsPerRound = 10
	c.Sync.InitialGlobalPeriod = daemon.Duration(500 * time.Millisecond)
	c.Sync.MinGlobalPeriod = daemon.Duration(time.Second)
	c.Sync.MaxGlobalPeriod = daemon.Duration(time.Second)
	c.Reference.FailoverAfter = daemon.Duration(2 * time.Second)
	return c
}

// RunSpoof runs sc.Daemons daemons and the spoofer, stops the reference
// at KillRefAt, evaluates every page against the truth every EvalEvery,
// and returns the figures with each daemon's drop counters.
func (l *Lab) RunSpoof(ctx context.Context, sc SpoofConfig) (SpoofResult, error) {
	r := &spoofRun{l: l, sc: sc, n: sc.Daemons, dir: filepath.Join(l.Config().RunDir, "spoof")}
	if err := sc.check(l.Config().Hosts); err != nil {
		return r.res, err
	}
	r.res.Key, r.res.Insider = sc.Key, sc.Insider
	if err := r.writeConfigs(); err != nil {
		return r.res, err
	}
	r.start = time.Now()
	r.procs = make([]*netlab.Proc, r.n)
	defer func() {
		for _, p := range r.procs {
			if p != nil {
				p.Stop(3 * time.Second)
			}
		}
	}()
	if err := r.startDaemons(); err != nil {
		return r.res, err
	}
	r.startCapture(ctx)
	var err error
	r.readers, err = openPages(ctx, "spoof", r.dir, r.procs)
	defer closePages(r.readers)
	if err != nil {
		return r.res, err
	}
	r.nodes = make([]SpoofNode, r.n)
	for i := range r.nodes {
		r.nodes[i].Host = i
	}
	r.report = filepath.Join(r.dir, "spoofer.json")
	defer func() {
		if r.spoofer != nil {
			r.spoofer.Stop(3 * time.Second)
		}
	}()
	r.res.FailoverMs = -1
	if err := r.loop(ctx); err != nil {
		return r.res, err
	}
	r.finish()
	return r.res, nil
}

// check reports what in sc the lab cannot run with hosts hosts.
func (sc SpoofConfig) check(hosts int) error {
	n := sc.Daemons
	switch {
	case len(sc.Command) == 0 || len(sc.SpoofCommand) == 0:
		return errors.New("lab: spoof: the daemon and spoofer commands are required")
	case n < 2:
		return fmt.Errorf("lab: spoof: %d daemons, want at least 2", n)
	case hosts < n+1:
		return fmt.Errorf("lab: spoof: %d hosts, want %d (the daemons and the spoofer)", hosts, n+1)
	case sc.Warmup <= sc.Capture || sc.Warmup >= sc.Duration:
		return fmt.Errorf("lab: spoof: want capture %v < warmup %v < duration %v", sc.Capture, sc.Warmup, sc.Duration)
	case sc.EvalEvery < time.Millisecond:
		return fmt.Errorf("lab: spoof: eval interval %v below 1ms", sc.EvalEvery)
	case sc.Insider && !sc.Key:
		return errors.New("lab: spoof: an insider needs the cluster to have a key")
	}
	return nil
}

// spoofRun is one RunSpoof: the daemons, the tap, the spoofer and the
// evaluation of the daemons under attack.
type spoofRun struct {
	l   *Lab
	sc  SpoofConfig
	n   int    // daemons, on hosts 0..n-1; the spoofer on host n
	dir string // configs, logs, pages, sockets, capture, spoofer report
	res SpoofResult

	base      daemon.Config
	keyFile   string            // the cluster key ("" without)
	peerAddrs map[uint32]string // the daemons' addresses by node id
	clocks    []*hostClock
	procs     []*netlab.Proc // nil: stopped (the killed reference)
	readers   []*gtime.Reader
	nodes     []SpoofNode
	start     time.Time

	capDone chan error // the tap's end
	capFile string     // "" without a capture
	spoofer *netlab.Proc
	report  string // the spoofer's JSON report

	killed, takenOver bool
	killedAt          time.Time
	lastPoll          time.Time
}

// writeConfigs makes r.dir, the cluster key (with SpoofConfig.Key) and the
// daemons' clocks and configs.
func (r *spoofRun) writeConfigs() error {
	sc, dir := r.sc, r.dir
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("lab: spoof: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lab: spoof: %w", err)
	}
	r.res.Logs = dir
	r.base = spoofDaemonConfig()
	if sc.Key {
		line, err := keyfile.NewLine(1)
		if err != nil {
			return fmt.Errorf("lab: spoof: %w", err)
		}
		kf := filepath.Join(dir, "cluster.key")
		if err := os.WriteFile(kf, []byte(line), 0o600); err != nil {
			return fmt.Errorf("lab: spoof: %w", err)
		}
		r.base.Auth = daemon.AuthConfig{KeyFile: kf, KeyID: 1}
		r.keyFile = kf
	}
	var peers []daemon.Peer
	var order []uint32
	r.peerAddrs = map[uint32]string{}
	for i := range r.n {
		a := net.JoinHostPort(netlab.HostAddr(i).String(), strconv.Itoa(daemonPort))
		peers = append(peers, daemon.Peer{ID: uint32(i + 1), Address: a})
		order = append(order, uint32(i+1))
		r.peerAddrs[uint32(i+1)] = a
	}
	var err error
	if r.clocks, err = drawClocks(r.n, sc.Seed, 0x73706f6f66, 0, sc.MaxOffset, sc.MaxDriftPPM, nil); err != nil {
		return fmt.Errorf("lab: spoof: %w", err)
	}
	for i := range r.n {
		r.res.Clocks = append(r.res.Clocks, r.clocks[i].truth)
		c := r.base
		c.Node = daemon.NodeConfig{ID: uint32(i + 1)}
		c.Peers, c.Reference.Order = peers, order
		c.Clock = daemon.ClockConfig{Source: daemon.ClockEmulated, Emulated: r.clocks[i].truth.Config}
		c.GlobalTime.ShmPath = filepath.Join(dir, fmt.Sprintf("page-h%d", i))
		c.Metrics.Listen = "unix:" + r.metrics(i)
		if err := writeHostConfig(filepath.Join(dir, fmt.Sprintf("h%d.yaml", i)), &c); err != nil {
			return fmt.Errorf("lab: spoof: host %d config: %w", i, err)
		}
	}
	return nil
}

// metrics is host i's metrics socket.
func (r *spoofRun) metrics(i int) string {
	return filepath.Join(r.dir, fmt.Sprintf("metrics-h%d.sock", i))
}

// startDaemons starts every host's daemon into r.procs.
func (r *spoofRun) startDaemons() error {
	for i := range r.n {
		logf, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("h%d.log", i)))
		if err != nil {
			return fmt.Errorf("lab: spoof: %w", err)
		}
		argv := append(append([]string(nil), r.sc.Command...), "-config", filepath.Join(r.dir, fmt.Sprintf("h%d.yaml", i)))
		r.procs[i], err = r.l.ExecEnv(i, argv, r.sc.Env, netlab.ExecOptions{Stdout: logf, Stderr: logf})
		logf.Close()
		if err != nil {
			return fmt.Errorf("lab: spoof: %w", err)
		}
	}
	return nil
}

// startCapture starts the tap on host 1 (node 2), from the start: the
// spoofer's copy of old valid traffic. r.capDone says when it is written.
func (r *spoofRun) startCapture(ctx context.Context) {
	r.capDone = make(chan error, 1)
	if r.sc.Capture <= 0 {
		r.capDone <- nil
		return
	}
	r.capFile = filepath.Join(r.dir, "capture.bin")
	go func() {
		cs, err := r.l.capture(ctx, 1, daemonPort, r.sc.Capture)
		if err == nil {
			var fh *os.File
			if fh, err = os.Create(r.capFile); err == nil {
				err = errors.Join(writeCapture(fh, cs), fh.Close())
			}
		}
		r.capDone <- err
	}()
}

// loop evaluates the daemons every EvalEvery for Duration: the spoofer
// starts after the warm-up, the reference is killed at KillRefAt.
func (r *spoofRun) loop(ctx context.Context) error {
	sc := r.sc
	tick := time.NewTicker(sc.EvalEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		el := time.Since(r.start)
		if el >= sc.Duration {
			return nil
		}
		if r.spoofer == nil && el >= sc.Warmup {
			if err := r.startSpoofer(el); err != nil {
				return err
			}
		}
		if !r.killed && sc.KillRefAt > 0 && el >= sc.KillRefAt {
			r.nodes[0].scrape(r.metrics(0))
			r.procs[0].Stop(3 * time.Second)
			r.procs[0] = nil
			r.killed, r.killedAt = true, time.Now()
		}
		if r.killed && r.res.FailoverMs < 0 && time.Since(r.lastPoll) >= 100*time.Millisecond {
			r.pollFailover()
		}
		for i, p := range r.procs {
			if p == nil {
				continue
			}
			select {
			case <-p.Done():
				return fmt.Errorf("lab: spoof: the daemon of host %d exited early (%v); see %s", i, p.Err(), r.dir)
			default:
			}
		}
		if err := r.evaluate(el); err != nil {
			return err
		}
	}
}

// startSpoofer starts the spoofer on host n once the tap is written, for
// the rest of the run (el of Duration gone).
func (r *spoofRun) startSpoofer(el time.Duration) error {
	sc := r.sc
	if err := <-r.capDone; err != nil {
		return fmt.Errorf("lab: spoof: %w", err)
	}
	if r.capFile != "" {
		if fh, err := os.Open(r.capFile); err == nil {
			cs, _ := readCapture(fh)
			fh.Close()
			r.res.Captured = len(cs)
		}
	}
	var keyID uint32
	if sc.Key {
		keyID = 1
	}
	scfg := spoofSendConfig{Peers: r.peerAddrs, Own: net.JoinHostPort(netlab.HostAddr(r.n).String(), strconv.Itoa(daemonPort)),
		KeyID: keyID, Rate: sc.Rate, Duration: sc.Duration - el, Capture: r.capFile, Seed: sc.Seed, Report: r.report,
		MaxDrift: r.base.Sync.MaxDriftPPM / 1e6}
	if sc.Insider {
		scfg.KeyFile = r.keyFile
	}
	b, _ := json.Marshal(scfg)
	cf := filepath.Join(r.dir, "spoofer-config.json")
	if err := os.WriteFile(cf, b, 0o644); err != nil {
		return fmt.Errorf("lab: spoof: %w", err)
	}
	logf, err := os.Create(filepath.Join(r.dir, "spoofer.log"))
	if err != nil {
		return fmt.Errorf("lab: spoof: %w", err)
	}
	r.spoofer, err = r.l.ExecEnv(r.n, append(append([]string(nil), sc.SpoofCommand...), "-config", cf), sc.SpoofEnv, netlab.ExecOptions{Stdout: logf, Stderr: logf})
	logf.Close()
	if err != nil {
		return fmt.Errorf("lab: spoof: %w", err)
	}
	return nil
}

// pollFailover sets FailoverMs once every surviving daemon names node 2
// its reference.
func (r *spoofRun) pollFailover() {
	r.lastPoll = time.Now()
	for i := 1; i < r.n; i++ {
		if f, err := scrapeFamilies(r.metrics(i)); err != nil || gaugeValue(f, "gclock_reference_id") != 2 {
			return
		}
	}
	r.res.FailoverMs = float64(time.Since(r.killedAt).Microseconds()) / 1e3
}

// evaluate reads every running daemon's page against the truth, counting
// after the warm-up (el into the run).
func (r *spoofRun) evaluate(el time.Duration) error {
	now := gtime.RawNow()
	// Global time is host 0's clock until host 1 takes over; from
	// then on it is what host 1 serves (its frozen estimate of the old
	// scale, docs/daemon.md "Reference failover"), and host 1, the
	// reference, is no longer evaluated.
	truth := r.clocks[0].at(now)
	if r.killed && !r.takenOver {
		if in, err := r.readers[1].Info(); err == nil && in.Reference == 2 {
			r.takenOver = true
		}
	}
	if r.takenOver {
		t1, err := r.readers[1].At(now)
		if err != nil {
			return fmt.Errorf("lab: spoof: host 1: %w", err)
		}
		truth = t1.Est
	}
	for i, rd := range r.readers {
		if r.procs[i] == nil || (r.takenOver && i == 1) {
			continue // stopped, or the reference
		}
		t, err := rd.At(now)
		if err != nil {
			return fmt.Errorf("lab: spoof: host %d: %w", i, err)
		}
		if el < r.sc.Warmup {
			continue
		}
		nd := &r.nodes[i]
		nd.Evaluations++
		if truth < t.Earliest || truth > t.Latest {
			nd.Outside++
		}
		if t.Status == gtime.StatusSynced {
			nd.Synced++
			nd.MaxAbsErrNs = max(nd.MaxAbsErrNs, satmath.Abs(satmath.Sub(t.Est, truth)))
			nd.MaxWidthNs = max(nd.MaxWidthNs, t.Width())
		}
	}
	return nil
}

// finish waits for the spoofer's report and scrapes the running daemons.
func (r *spoofRun) finish() {
	if r.spoofer != nil {
		select {
		case <-r.spoofer.Done():
		case <-time.After(5 * time.Second):
		}
		if b, err := os.ReadFile(r.report); err == nil {
			json.Unmarshal(b, &r.res.Spoofer)
		}
	}
	for i := range r.n {
		if r.procs[i] != nil {
			r.nodes[i].scrape(r.metrics(i))
		}
	}
	r.res.Nodes = r.nodes
}

// scrape fills the node's counters from its metrics.
func (nd *SpoofNode) scrape(sock string) {
	f, err := scrapeFamilies(sock)
	if err != nil {
		return
	}
	nd.Drops = labelled(f, "gclock_packets_dropped_total", "reason")
	nd.StatusChanges = labelled(f, "gclock_status_changes_total", "status")
	nd.Reference = uint32(gaugeValue(f, "gclock_reference_id"))
}

// metricSample is one series of a scraped metric family.
type metricSample struct {
	labels map[string]string
	value  float64 // the counter's or the gauge's
}

// scrapeFamilies reads a daemon's metrics over its Unix socket.
func scrapeFamilies(sock string) (map[string][]metricSample, error) {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://gclock/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string][]metricSample{}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			s := metricSample{labels: map[string]string{}, value: m.GetCounter().GetValue() + m.GetGauge().GetValue()}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			out[name] = append(out[name], s)
		}
	}
	return out, nil
}

func labelled(f map[string][]metricSample, name, label string) map[string]uint64 {
	out := map[string]uint64{}
	for _, m := range f[name] {
		out[m.labels[label]] = uint64(m.value)
	}
	return out
}

func gaugeValue(f map[string][]metricSample, name string) float64 {
	if len(f[name]) == 0 {
		return math.NaN()
	}
	return f[name][0].value
}

// SpoofReport is a Markdown report of one RunSpoof.
func SpoofReport(r SpoofResult) string {
	var b strings.Builder
	key := "without a key"
	if r.Key {
		key = "with a cluster key"
	}
	if r.Insider {
		key = "holding the cluster key (an insider)"
	}
	s := r.Spoofer
	fmt.Fprintf(&b, "Spoofer %s: %d datagrams sent (%d bytes; %.0f%% of send slots late), %d captured datagrams to replay; %d queries from its own address (%d bytes) got %d answers (%d bytes).\n",
		key, s.Sent, s.SentBytes, 100*s.Late, r.Captured, s.OwnQueries, s.OwnQueryBytes, s.Answers, s.AnswerBytes)
	if r.FailoverMs >= 0 {
		fmt.Fprintf(&b, "Failover: every daemon followed node 2 %.0f ms after the reference stopped.\n", r.FailoverMs)
	} else {
		b.WriteString("Failover: not seen within the run.\n")
	}
	b.WriteString("\n| host | evaluations | synced | truth outside bounds | max abs error synced (ns) | max width synced (ns) | reference | status changes | dropped |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, "| %d | %d | %d | %d | %d | %d | %d | %s | %s |\n", n.Host, n.Evaluations, n.Synced, n.Outside,
			n.MaxAbsErrNs, n.MaxWidthNs, n.Reference, kv(n.StatusChanges), kv(n.Drops))
	}
	return b.String()
}

func kv(m map[string]uint64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if m[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
