package lab

// The chain to programs' clocks (`gclock lab chain`, issue 29 item 8):
// gclock does not steer CLOCK_REALTIME, chronyd does, fed by the daemon's
// refclock SOCK samples (daemon/ntp.go, internal/refclock). RunChain
// measures what that chain adds: every host but the reference runs one
// chronyd -x (never touches the clock) per chrony setting compared, all
// fed the same samples by a relay, and chronyd's estimate of the system
// clock's offset (its tracking "System time", read over its command
// socket) is judged against the truth beside gclock's own error in the
// same run.
//
// The truth. The daemons run in reference-realtime mode: served global
// time is the reference's CLOCK_REALTIME, which every namespace shares,
// so global time minus CLOCK_REALTIME is truly 0 (the evaluator's truth,
// as in RunGclock). That clock is perfect against itself, so a chronyd
// fed the samples directly would never have to follow an oscillator. The
// relay therefore makes the system clock chronyd disciplines an emulated
// one, CLOCK_REALTIME + s(t) with s a known function (SysClock: an offset,
// a drift, the lab's wander): it subtracts s(t) from every sample's offset
// (true time - system clock). chronyd's estimate of the system clock minus
// true time is then judged against s(t) at the instant it is read; what
// is left is the chain's error: the clock chronyd would steer, minus
// global time. chronyd -x applies its corrections at once (its null
// driver): the estimate is the clock chronyd steers towards, not the slew
// still under way on a real clock (maxslewrate does not enter).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/eval"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/chronycmd"
	"github.com/gclock/gclock/internal/quantile"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/internal/refclock"
	"github.com/gclock/gclock/internal/satmath"
	"github.com/gclock/gclock/lab/netlab"
)

// ChainSetting is one chronyd configuration fed by the refclock.
type ChainSetting struct {
	Name string `json:"name"`
	// Refclock is what follows `refclock SOCK <path>` in chrony.conf.
	Refclock string `json:"refclock"`
	// Extra is more chrony.conf lines (e.g. "maxslewrate 500").
	Extra string `json:"extra,omitempty"`
}

// Conf is the chrony.conf line(s) the setting adds for a socket at sock.
func (s ChainSetting) Conf(sock string) string {
	c := fmt.Sprintf("refclock SOCK %s %s\n", sock, s.Refclock)
	if s.Extra != "" {
		c += strings.TrimSpace(s.Extra) + "\n"
	}
	return c
}

// ShippedRefclock is the refclock line docs/daemon.md and
// deploy/chrony/gclock.conf recommend (after the socket's path), with the
// daemon's refclock.every at ShippedEvery: a poll of 1 s; filter 2: the
// mean of the last two samples, so that a poll with 2 of its 4 samples is
// not missed (chrony's default filter, 64, needs 4 samples a poll).
const ShippedRefclock = "refid GCLK poll 0 filter 2 precision 1e-7"

// ShippedEvery is the refclock.every that goes with ShippedRefclock.
const ShippedEvery = 250 * time.Millisecond

// ShippedChronyExtra is the other line of the recommended chrony.conf.
const ShippedChronyExtra = "maxslewrate 500"

// DefaultChainSettings are the recommended configuration and the
// alternatives `gclock lab chain` compares it with: a poll of 1 s with
// chrony's default filter (4 samples needed a poll), 2 s, 4 s (the
// recommendation before the measurement) and chrony's default, 16 s.
func DefaultChainSettings() []ChainSetting {
	return []ChainSetting{
		{Name: "shipped", Refclock: ShippedRefclock, Extra: ShippedChronyExtra},
		{Name: "poll0", Refclock: "refid GCLK poll 0 precision 1e-7", Extra: ShippedChronyExtra},
		{Name: "poll1", Refclock: "refid GCLK poll 1 precision 1e-7", Extra: ShippedChronyExtra},
		{Name: "poll2", Refclock: "refid GCLK poll 2 precision 1e-7", Extra: ShippedChronyExtra},
		{Name: "poll4", Refclock: "refid GCLK poll 4 precision 1e-7", Extra: ShippedChronyExtra},
	}
}

// ParseChainSetting reads NAME=REFCLOCK-OPTIONS[;EXTRA-LINE...] (the
// --setting flag).
func ParseChainSetting(s string) (ChainSetting, error) {
	name, rest, ok := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, "/ \t") {
		return ChainSetting{}, fmt.Errorf("chain setting %q: want NAME=REFCLOCK-OPTIONS[;EXTRA-LINE...] with a NAME of no spaces or slashes", s)
	}
	parts := strings.Split(rest, ";")
	cs := ChainSetting{Name: name, Refclock: strings.TrimSpace(parts[0])}
	for _, p := range parts[1:] {
		if p = strings.TrimSpace(p); p != "" {
			cs.Extra += p + "\n"
		}
	}
	if strings.ContainsAny(cs.Refclock, "\n\r") || strings.ContainsAny(cs.Extra, "\r") {
		return ChainSetting{}, fmt.Errorf("chain setting %q: no line breaks (separate extra lines with ;)", s)
	}
	return cs, nil
}

// SysClock is the emulated system clock chronyd disciplines: CLOCK_REALTIME
// + s(t), s(t) = Offset + Drift * t + the wander's integral, t since the
// run's start.
type SysClock struct {
	Offset   time.Duration `json:"offset"`
	DriftPPM float64       `json:"drift_ppm"`
	Wander   Wander        `json:"wander"` // Steps are not used
	Seed     uint64        `json:"seed"`
}

// DefaultSysClock is a disciplined machine's clock in steady state: no
// offset or drift left (chronyd's driftfile has the drift) and the lab's
// commodity-crystal wander (DefaultWander).
func DefaultSysClock() SysClock { return SysClock{Wander: DefaultWander(), Seed: 1} }

// sysModel evaluates a SysClock: the random walk's frequency per whole
// second and the offset accumulated at each whole second, precomputed.
type sysModel struct {
	c     SysClock
	phase float64
	freq  []float64 // ppm of the random walk in second k
	acc   []float64 // ns accumulated by the random walk at second k
}

func newSysModel(c SysClock, host int, seconds int) *sysModel {
	r := rand.New(rand.NewPCG(c.Seed, 0x73797363+uint64(host)))
	m := &sysModel{c: c, phase: 2 * math.Pi * r.Float64()}
	f, a := 0.0, 0.0
	for range seconds + 1 {
		m.freq = append(m.freq, f)
		m.acc = append(m.acc, a)
		a += f * 1e3 // ppm over 1 s = 1e3 ns
		f += c.Wander.RandomWalkPPM * r.NormFloat64()
	}
	return m
}

// at is s(t) in ns, t in ns since the start (relative: float64 is exact
// enough).
func (m *sysModel) at(t int64) float64 {
	ts := float64(t) / 1e9
	s := float64(m.c.Offset) + m.c.DriftPPM*1e3*ts
	if k := int(math.Floor(ts)); k >= 0 {
		k = min(k, len(m.freq)-1)
		s += m.acc[k] + m.freq[k]*1e3*(ts-float64(k))
	}
	if w := m.c.Wander; w.SinePPM > 0 && w.SinePeriod > 0 {
		p := w.SinePeriod.Seconds()
		s += w.SinePPM * 1e3 * p / (2 * math.Pi) * (math.Cos(m.phase) - math.Cos(2*math.Pi*ts/p+m.phase))
	}
	return s
}

// ChainConfig is one RunChain.
type ChainConfig struct {
	// Gclock is the daemons' run (Command required); RunChain sets
	// reference-realtime mode and each host's refclock.
	Gclock GclockConfig
	// Every is the daemons' refclock.every (the daemon's default: ShippedEvery).
	Every time.Duration
	// ReadEvery is how often every chronyd's tracking is read.
	ReadEvery time.Duration
	Settings  []ChainSetting
	SysClock  SysClock
}

// DefaultChainConfig: the daemons as RunGclock's default (70 s, 10 s
// warm-up), the feed every ShippedEvery, the default settings.
func DefaultChainConfig() ChainConfig {
	gc := DefaultGclockConfig()
	gc.Duration = 70 * time.Second
	return ChainConfig{Gclock: gc, Every: ShippedEvery, ReadEvery: 250 * time.Millisecond,
		Settings: DefaultChainSettings(), SysClock: DefaultSysClock()}
}

// Validate reports the first invalid field.
func (cc ChainConfig) Validate() error {
	if err := cc.Gclock.Validate(); err != nil {
		return err
	}
	switch {
	case cc.Every < 10*time.Millisecond || cc.Every > time.Minute:
		return fmt.Errorf("chain: refclock every %v: want 10ms..1m", cc.Every)
	case cc.ReadEvery < 10*time.Millisecond || cc.ReadEvery > cc.Gclock.Duration:
		return fmt.Errorf("chain: read every %v: want 10ms..duration", cc.ReadEvery)
	case len(cc.Settings) == 0:
		return errors.New("chain: no chrony setting")
	case !(math.Abs(cc.SysClock.DriftPPM) <= 500):
		return fmt.Errorf("chain: system clock drift %v ppm: want |drift| <= 500", cc.SysClock.DriftPPM)
	case cc.SysClock.Offset < -time.Second || cc.SysClock.Offset > time.Second:
		return fmt.Errorf("chain: system clock offset %v: want within 1s", cc.SysClock.Offset)
	}
	seen := map[string]bool{}
	for _, s := range cc.Settings {
		if seen[s.Name] {
			return fmt.Errorf("chain: setting %q twice", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}

// ChainReading is one read of one chronyd.
type ChainReading struct {
	// AtNs is since the run's start: the relays' (just before the
	// chronyds and the daemons start), the origin of s(t) too.
	AtNs int64 `json:"at_ns"`
	// ErrNs is the clock chronyd would steer minus global time: its
	// estimate of the system clock minus true time, minus the truth s(t).
	ErrNs int64 `json:"err_ns"`
	// GclockErrNs is the host's page (Est) minus the truth at the same
	// instant; LoNs and HiNs its Earliest and Latest minus the truth.
	GclockErrNs int64 `json:"gclock_err_ns"`
	LoNs        int64 `json:"lo_ns"`
	HiNs        int64 `json:"hi_ns"`
}

// ChainRow is one chronyd (host, setting) after the warm-up.
type ChainRow struct {
	Host    int    `json:"host"`
	Setting string `json:"setting"`
	// Chain is the chain's error (ChainReading.ErrNs), Gclock the page's
	// at the same instants.
	Chain  Summary `json:"chain"`
	Gclock Summary `json:"gclock_at_reads"`
	// ClockBound is what the ClockBound segment (daemon/clockbound.go)
	// would publish for the clock chronyd steers at each read, max(D - E,
	// L - D) with D that clock's reading: its median and largest, and the
	// share of reads where it held the chain's error.
	ClockBoundP50Ns  int64   `json:"clockbound_p50_ns"`
	ClockBoundMaxNs  int64   `json:"clockbound_max_ns"`
	ClockBoundCovers float64 `json:"clockbound_covers"`
	// Missing is the reads without an estimate after the warm-up (chronyd
	// not synchronised to the refclock yet); FirstNs is the first read
	// with one (since the start; -1: none).
	Missing int   `json:"missing"`
	FirstNs int64 `json:"first_ns"`
	// Updates is how many times chronyd updated its estimate from the
	// refclock over the whole run (its tracking.log): one a poll when no
	// poll is missed (a poll with fewer samples than its filter needs is).
	Updates  int            `json:"updates"`
	Readings []ChainReading `json:"-"`
}

// ChainResult is a RunChain.
type ChainResult struct {
	Hosts    int             `json:"hosts"`
	Every    time.Duration   `json:"refclock_every"`
	Duration time.Duration   `json:"duration"`
	Warmup   time.Duration   `json:"warmup"`
	SysClock SysClock        `json:"sys_clock"`
	Settings []ChainSetting  `json:"settings"`
	Gclock   GclockResult    `json:"-"`
	Nodes    []GclockSummary `json:"gclock_nodes"`
	Rows     []ChainRow      `json:"rows"`
	Logs     string          `json:"logs"`
}

// RunChain runs the daemons (reference-realtime, a refclock feed on every
// host but the reference) and per such host one chronyd -x per setting,
// and reads every chronyd's estimate every ReadEvery (see the file's
// comment for the truth).
func (l *Lab) RunChain(ctx context.Context, cc ChainConfig) (ChainResult, error) {
	if err := cc.Validate(); err != nil {
		return ChainResult{}, fmt.Errorf("lab: %w", err)
	}
	n := l.Config().Hosts
	if n < 2 {
		return ChainResult{}, fmt.Errorf("lab: chain: %d hosts: want 2 or more (the reference feeds no chronyd)", n)
	}
	gc := cc.Gclock
	base := LabDaemonConfig()
	if gc.Base != nil {
		base = *gc.Base
	}
	base.RealTime = daemon.RealTimeConfig{Mode: daemon.RealTimeReference, PollEvery: daemon.Duration(200 * time.Millisecond),
		MaxSlewPPM: 500, Upstream: daemon.UpstreamNone}
	gc.Base = &base
	dir := filepath.Join(l.Config().RunDir, "chain")
	if err := os.RemoveAll(dir); err != nil {
		return ChainResult{}, fmt.Errorf("lab: chain: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ChainResult{}, fmt.Errorf("lab: chain: %w", err)
	}
	secs := int(gc.Duration.Seconds()) + 60
	models := make([]*sysModel, n)
	chronys := make([][]*chronyRefclock, n)
	relays := make([]*chainRelay, n)
	defer func() {
		for _, r := range relays {
			if r != nil {
				r.close()
			}
		}
		for _, cs := range chronys {
			for _, c := range cs {
				c.Proc.Stop(2 * time.Second)
			}
		}
	}()
	startWall := time.Now().UnixNano()
	for h := 1; h < n; h++ {
		models[h] = newSysModel(cc.SysClock, h, secs)
		var socks []string
		for _, s := range cc.Settings {
			c, err := l.startChronyRefclock(h, s)
			if err != nil {
				return ChainResult{}, err
			}
			chronys[h] = append(chronys[h], c)
			socks = append(socks, c.Sock)
		}
		r, err := newChainRelay(filepath.Join(dir, fmt.Sprintf("relay-h%d.sock", h)), socks, models[h], startWall)
		if err != nil {
			return ChainResult{}, fmt.Errorf("lab: chain: host %d: %w", h, err)
		}
		relays[h] = r
	}
	prevTweak := gc.Tweak
	gc.Tweak = func(host int, c *daemon.Config) {
		if host > 0 {
			c.Refclock = daemon.RefclockConfig{Sock: relays[host].path, Every: daemon.Duration(cc.Every)}
		}
		if prevTweak != nil {
			prevTweak(host, c)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var g GclockResult
	var gerr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		g, gerr = l.RunGclock(runCtx, gc)
	}()
	rows, rerr := readChain(runCtx, l.Config().RunDir, cc, chronys, models, startWall, finished)
	if rerr != nil {
		cancel()
	}
	<-finished
	if gerr != nil && (rerr == nil || !errors.Is(gerr, context.Canceled)) {
		return ChainResult{}, gerr
	}
	if rerr != nil {
		return ChainResult{}, rerr
	}
	res := ChainResult{Hosts: n, Every: cc.Every, Duration: gc.Duration, Warmup: gc.Warmup, SysClock: cc.SysClock,
		Settings: cc.Settings, Gclock: g, Nodes: g.Nodes, Rows: rows, Logs: l.Config().RunDir}
	for h := 1; h < n; h++ {
		if st := relays[h].stats(); st.bad > 0 {
			return res, fmt.Errorf("lab: chain: host %d's relay got %d datagrams that are not samples", h, st.bad)
		}
	}
	return res, nil
}

// readChain reads every chronyd and every host's page every ReadEvery
// until finished is closed (the daemons' run ended).
func readChain(ctx context.Context, runDir string, cc ChainConfig, chronys [][]*chronyRefclock, models []*sysModel,
	startWall int64, finished <-chan struct{}) ([]ChainRow, error) {
	n := len(chronys)
	clients := make([][]*candmClient, n)
	readers := make([]*gtime.Reader, n)
	defer func() {
		for h := range n {
			for _, c := range clients[h] {
				c.close()
			}
			if readers[h] != nil {
				readers[h].Close()
			}
		}
	}()
	for h := 1; h < n; h++ {
		for _, c := range chronys[h] {
			cl, err := dialCandm(c.Cmd, filepath.Join(c.Dir, "client.sock"))
			if err != nil {
				return nil, fmt.Errorf("lab: chain: host %d: %w", h, err)
			}
			clients[h] = append(clients[h], cl)
		}
	}
	readings := make([][][]ChainReading, n)
	missing := make([][]int, n)
	lastErr := make([][]error, n)
	for h := 1; h < n; h++ {
		readings[h] = make([][]ChainReading, len(cc.Settings))
		missing[h] = make([]int, len(cc.Settings))
		lastErr[h] = make([]error, len(cc.Settings))
	}
	warm := cc.Gclock.Warmup.Nanoseconds()
	tick := time.NewTicker(cc.ReadEvery)
	defer tick.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-finished:
			break loop
		case <-tick.C:
		}
		for h := 1; h < n; h++ {
			if readers[h] == nil {
				r, err := gtime.Open(filepath.Join(runDir, "gclock", fmt.Sprintf("page-h%d", h)))
				if err != nil {
					continue // the daemon has not made it yet
				}
				readers[h] = r
			}
			for i, cl := range clients[h] {
				select {
				case <-chronys[h][i].Proc.Done():
					return nil, fmt.Errorf("lab: chain: chronyd %s in host %d exited: %v (log: %s)", cc.Settings[i].Name, h, chronys[h][i].Proc.Err(), chronys[h][i].Dir)
				default:
				}
				t, err := cl.tracking(time.Second)
				raw := gtime.RawNow()
				off, _ := rawclock.WallOffset()
				at := raw + off - startWall
				if err != nil || !chronySynced(t) {
					if at >= warm {
						missing[h][i]++
						if err != nil {
							lastErr[h][i] = err
						}
					}
					continue
				}
				pt, err := readers[h].At(raw)
				if err != nil {
					return nil, fmt.Errorf("lab: chain: host %d: %w", h, err)
				}
				truth := raw + off // global time: the shared CLOCK_REALTIME
				s := models[h].at(at)
				readings[h][i] = append(readings[h][i], ChainReading{AtNs: at,
					ErrNs:       int64(math.Round(-t.Correction*1e9 - s)),
					GclockErrNs: satmath.Sub(pt.Est, truth), LoNs: satmath.Sub(pt.Earliest, truth), HiNs: satmath.Sub(pt.Latest, truth)})
			}
		}
	}
	var rows []ChainRow
	for h := 1; h < n; h++ {
		for i, s := range cc.Settings {
			row := summarizeChain(h, s.Name, readings[h][i], warm, missing[h][i])
			row.Updates = countTrackingUpdates(filepath.Join(chronys[h][i].Dir, "tracking.log"))
			if row.Chain.Evaluations == 0 && lastErr[h][i] != nil {
				return nil, fmt.Errorf("lab: chain: chronyd %s in host %d: no estimate after the warm-up (%d reads failed, the last: %v; log: %s)",
					s.Name, h, missing[h][i], lastErr[h][i], chronys[h][i].Dir)
			}
			rows = append(rows, row) // no estimate (Evaluations 0): chronyd never synchronised to the feed
		}
	}
	return rows, nil
}

// countTrackingUpdates counts the lines of chronyd's tracking.log that
// name the refclock (GCLK): its updates from it; 0 if it cannot be read.
func countTrackingUpdates(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[2] == "GCLK" {
			n++
		}
	}
	return n
}

// chainRelay receives a daemon's samples and sends each, its offset less
// the emulated system clock's s(t), to every chronyd of the host.
type chainRelay struct {
	path    string
	conn    *net.UnixConn
	senders []*refclock.Sender
	model   *sysModel
	start   int64 // wall ns
	wg      sync.WaitGroup
	mu      sync.Mutex
	n, bad  int
}

type relayStats struct{ n, bad int }

func newChainRelay(path string, socks []string, m *sysModel, startWall int64) (*chainRelay, error) {
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, err
	}
	r := &chainRelay{path: path, conn: c, model: m, start: startWall}
	for _, s := range socks {
		r.senders = append(r.senders, refclock.NewSender(s))
	}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *chainRelay) serve() {
	defer r.wg.Done()
	buf := make([]byte, 256)
	for {
		k, err := r.conn.Read(buf)
		if err != nil {
			return
		}
		smp, err := refclock.Parse(buf[:k])
		r.mu.Lock()
		r.n++
		if err != nil {
			r.bad++
		}
		r.mu.Unlock()
		if err != nil {
			continue
		}
		smp.Offset -= r.model.at(smp.Time-r.start) / 1e9
		for _, s := range r.senders {
			s.Send(smp) // a chronyd not listening (yet) misses it, as from the daemon
		}
	}
}

func (r *chainRelay) stats() relayStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return relayStats{r.n, r.bad}
}

func (r *chainRelay) close() {
	r.conn.Close()
	r.wg.Wait()
	for _, s := range r.senders {
		s.Close()
	}
	os.Remove(r.path)
}

// chronyRefclock is a chronyd -x in one host that reads gclock's refclock
// feed (`refclock SOCK`): it never touches the clock, and its tracking
// says how far it finds the system clock from gclock's time.
type chronyRefclock struct {
	Host int
	Dir  string // its private directory: config, log, sockets
	Sock string // the refclock socket: the daemon's refclock.sock
	Cmd  string // chronyc's socket (chronyc -h Cmd)
	Proc *netlab.Proc
}

// startChronyRefclock starts chronyd -x in host with the setting's
// `refclock SOCK <dir>/refclock.sock ...`; Down stops it.
func (l *Lab) startChronyRefclock(host int, s ChainSetting) (*chronyRefclock, error) {
	if _, err := exec.LookPath("chronyd"); err != nil {
		return nil, fmt.Errorf("lab: chronyd not found (install chrony; ci/deps.sh does): %w", err)
	}
	dir, err := l.peerDir(fmt.Sprintf("chrony-refclock-h%d-%s", host, s.Name))
	if err != nil {
		return nil, fmt.Errorf("lab: chrony refclock: %w", err)
	}
	c := &chronyRefclock{Host: host, Dir: dir, Sock: filepath.Join(dir, "refclock.sock"), Cmd: filepath.Join(dir, "chronyd.sock")}
	_ = os.MkdirAll("/var/run/chrony", 0o750) // chronyc's reply socket
	c.Proc, err = l.startChronydIn(host, dir, c.Cmd, fmt.Sprintf("logdir %s\nlog tracking refclocks\n", dir)+s.Conf(c.Sock), c.Sock)
	if err != nil {
		return nil, fmt.Errorf("lab: chrony refclock: %w", err)
	}
	return c, nil
}

// startChronydIn starts `chronyd -x` (it never touches the clock) in host,
// in the foreground with its log in dir/chronyd.log, on dir/chrony.conf:
// its pid file in dir, its command socket at cmd (no UDP command port),
// then extra. It returns once cmd and every path in wait exist, or an
// error naming the host and the log when chronyd exits first or makes
// them not within 5 s.
func (l *Lab) startChronydIn(host int, dir, cmd, extra string, wait ...string) (*netlab.Proc, error) {
	return l.startChronydEnv(host, dir, cmd, extra, nil, wait...)
}

// startChronydEnv is startChronydIn with env added to chronyd's
// environment (the clock shim's, clockshim.Env).
func (l *Lab) startChronydEnv(host int, dir, cmd, extra string, env []string, wait ...string) (*netlab.Proc, error) {
	conf := fmt.Sprintf("pidfile %s/chronyd.pid\nbindcmdaddress %s\ncmdport 0\n", dir, cmd) + extra
	cf := filepath.Join(dir, "chrony.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "chronyd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// -x: never touch the clock; -d: foreground, log to stderr.
	p, err := l.ExecEnv(host, []string{"chronyd", "-x", "-u", "root", "-d", "-f", cf}, env, netlab.ExecOptions{Stdout: logf, Stderr: logf})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		made := true
		for _, path := range append([]string{cmd}, wait...) {
			if _, err := os.Stat(path); err != nil {
				made = false
			}
		}
		if made {
			return p, nil
		}
		select {
		case <-p.Done():
			return nil, fmt.Errorf("chronyd in host %d exited: %v (log: %s)", host, p.Err(), dir)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("chronyd in host %d made not all of %s and %v in 5 s (log: %s)", host, cmd, wait, dir)
		}
	}
}

// Tracking reads `chronyc tracking`: the system clock minus gclock's time
// as chronyd estimates it (parseChronyTracking); ok false before chronyd
// has used a sample.
func (c *chronyRefclock) Tracking(ctx context.Context) (offsetNs int64, ok bool, out string, err error) {
	b, err := exec.CommandContext(ctx, "chronyc", "-h", c.Cmd, "tracking").CombinedOutput()
	if err != nil {
		return 0, false, string(b), fmt.Errorf("chronyc tracking (host %d): %s: %w", c.Host, strings.TrimSpace(string(b)), err)
	}
	offsetNs, ok, err = parseChronyTracking(string(b))
	return offsetNs, ok, string(b), err
}

// chronySynced: chronyd has a reference and a leap status other than 3
// (unsynchronised); only then is its correction an estimate.
func chronySynced(t chronycmd.Tracking) bool { return t.RefID != 0 && t.Leap != 3 }

// candmClient asks one chronyd for its tracking (internal/chronycmd) from
// a socket of its own, kept for the run: a reply that comes after its
// request timed out is read by the next request, which skips it.
type candmClient struct {
	conn *net.UnixConn
	path string
	seq  uint32
	buf  []byte
}

func dialCandm(server, local string) (*candmClient, error) {
	os.Remove(local)
	c, err := net.DialUnix("unixgram", &net.UnixAddr{Name: local, Net: "unixgram"}, &net.UnixAddr{Name: server, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("chronyd command socket %s: %w", server, err)
	}
	return &candmClient{conn: c, path: local, buf: make([]byte, 1024)}, nil
}

func (c *candmClient) tracking(timeout time.Duration) (chronycmd.Tracking, error) {
	c.seq++
	c.conn.SetDeadline(time.Now().Add(timeout))
	if _, err := c.conn.Write(chronycmd.TrackingRequest(c.seq)); err != nil {
		return chronycmd.Tracking{}, err
	}
	for {
		k, err := c.conn.Read(c.buf)
		if err != nil {
			return chronycmd.Tracking{}, err
		}
		t, err := chronycmd.ParseTracking(c.buf[:k], c.seq)
		if seq, ok := chronycmd.ReplySequence(c.buf[:k]); err != nil && ok && seq != c.seq {
			continue // a late reply to an earlier request
		}
		return t, err
	}
}

func (c *candmClient) close() {
	c.conn.Close()
	os.Remove(c.path)
}

// summarizeChain condenses one chronyd's readings after the warm-up.
func summarizeChain(host int, setting string, rd []ChainReading, warm int64, missing int) ChainRow {
	row := ChainRow{Host: host, Setting: setting, Missing: missing, Readings: rd, FirstNs: -1}
	if len(rd) > 0 {
		row.FirstNs = rd[0].AtNs
	}
	var ce, ge, cb []int64
	covered := 0
	for _, r := range rd {
		if r.AtNs < warm {
			continue
		}
		ce, ge = append(ce, r.ErrNs), append(ge, r.GclockErrNs)
		b := clockBoundFor(r.ErrNs, r.LoNs, r.HiNs)
		cb = append(cb, b)
		if max(r.ErrNs, -r.ErrNs) <= b {
			covered++
		}
	}
	row.Chain, row.Gclock = eval.SummarizeErrors(ce), eval.SummarizeErrors(ge)
	if len(cb) > 0 {
		q := quantile.Of(cb, 0.5, 1)
		row.ClockBoundP50Ns, row.ClockBoundMaxNs = q[0], q[1]
		row.ClockBoundCovers = float64(covered) / float64(len(cb))
	}
	return row
}

// clockBoundFor is the ClockBound segment's bound (daemon/clockbound.go,
// clockBoundSample) for a clock D that is e from the truth, the page's
// interval [lo, hi] from the truth: max(D - Earliest, Latest - D, 0).
func clockBoundFor(e, lo, hi int64) int64 {
	if lo == math.MinInt64 || hi == math.MaxInt64 {
		return math.MaxInt64
	}
	return max(e-lo, hi-e, 0)
}

// ChainReport is the run as text: per host gclock's error over the run
// (the evaluator's) and, per setting, the chain's error and the ClockBound
// segment's bound for the clock chronyd steers.
func ChainReport(res ChainResult) string {
	var b strings.Builder
	sc := res.SysClock
	us := func(ns int64) string { return fmt.Sprintf("%.1f", float64(ns)/1e3) }
	fmt.Fprintf(&b, "chain to programs' clocks: %d hosts (host 0 the reference, no feed), refclock every %v, %v after a %v warm-up\n",
		res.Hosts, res.Every, res.Duration-res.Warmup, res.Warmup)
	fmt.Fprintf(&b, "emulated system clock chronyd disciplines: offset %v, drift %+g ppm, %s (seed %d)\n",
		sc.Offset, sc.DriftPPM, sc.Wander, sc.Seed)
	for _, s := range res.Settings {
		fmt.Fprintf(&b, "  %-12s refclock SOCK ... %s", s.Name, s.Refclock)
		if s.Extra != "" {
			fmt.Fprintf(&b, "; %s", strings.ReplaceAll(strings.TrimSpace(s.Extra), "\n", "; "))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nerrors in us: |error| median / p99; bias: mean signed error\n\n")
	b.WriteString("| host | gclock (page, whole run) | setting | chain | chain bias | gclock at the chain's reads | ClockBound median / max | ClockBound covers | reads (missing) | first estimate | updates |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	node := map[int]GclockSummary{}
	for _, nd := range res.Nodes {
		node[nd.ID] = nd
	}
	for _, r := range res.Rows {
		g := node[r.Host]
		fmt.Fprintf(&b, "| %d | %s / %s | %s | %s / %s | %+.1f | %s / %s | %s / %s | %.4f | %d (%d) | %.1f s | %d |\n",
			r.Host, us(g.ErrorP50Ns), us(g.ErrorP99Ns), r.Setting, us(r.Chain.ErrorP50Ns), us(r.Chain.ErrorP99Ns),
			r.Chain.ErrorBiasNs/1e3, us(r.Gclock.ErrorP50Ns), us(r.Gclock.ErrorP99Ns),
			us(r.ClockBoundP50Ns), us(r.ClockBoundMaxNs), r.ClockBoundCovers, r.Chain.Evaluations, r.Missing, float64(r.FirstNs)/1e9, r.Updates)
	}
	b.WriteString("\nper setting, all hosts' reads pooled:\n\n| setting | chain median / p99 | gclock at the same reads median / p99 | ClockBound covers |\n|---|---|---|---|\n")
	for _, s := range res.Settings {
		var ce, ge []int64
		covered, total := 0, 0
		for _, r := range res.Rows {
			if r.Setting != s.Name {
				continue
			}
			for _, rd := range r.Readings {
				if rd.AtNs < res.Warmup.Nanoseconds() {
					continue
				}
				ce, ge = append(ce, rd.ErrNs), append(ge, rd.GclockErrNs)
				total++
				if max(rd.ErrNs, -rd.ErrNs) <= clockBoundFor(rd.ErrNs, rd.LoNs, rd.HiNs) {
					covered++
				}
			}
		}
		c, g := eval.SummarizeErrors(ce), eval.SummarizeErrors(ge)
		fmt.Fprintf(&b, "| %s | %s / %s | %s / %s | %.4f |\n", s.Name, us(c.ErrorP50Ns), us(c.ErrorP99Ns), us(g.ErrorP50Ns), us(g.ErrorP99Ns),
			float64(covered)/float64(max(total, 1)))
	}
	return b.String()
}
