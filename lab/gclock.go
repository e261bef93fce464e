package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/gtime"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// GclockConfig says how RunGclock runs one gclock daemon per host and
// evaluates them.
type GclockConfig struct {
	// Command runs `gclock daemon` (for the CLI: the gclock binary and
	// "daemon"); RunGclock appends "-config FILE". Required.
	Command []string
	Env     []string // extra environment of the daemons

	Duration  time.Duration // from the daemons' start to the end of the evaluation
	Warmup    time.Duration // convergence: evaluated but left out of the summaries
	EvalEvery time.Duration // evaluation interval

	// Emulate gives every host an emulated clock (the evaluator alone knows
	// its offset and drift); false runs every daemon on the raw clock, as
	// chronyd and ptp4l run, where the true offset is 0.
	Emulate     bool
	MaxDriftPPM float64       // each host's drift is uniform in [-MaxDriftPPM, MaxDriftPPM]
	MaxOffset   time.Duration // each host's initial offset is uniform in [-MaxOffset, MaxOffset]
	Seed        uint64        // of the clocks' parameters

	// Base is the daemon configuration the per-host ones are made from
	// (peers, node id, clock, page and metrics are set by the lab); nil
	// means LabDaemonConfig().
	Base *daemon.Config
	// Trace keeps every evaluation in GclockResult.Series, for plots.
	Trace bool
	// Measurements has every daemon log the exchanges it receives
	// (log.measurements) to measurements-h<i>.csv in the logs directory.
	Measurements bool
	// Until, when closed after the warm-up, ends the run early (as if
	// Duration had passed); the traffic rates count the time actually run.
	Until <-chan struct{}
}

// DefaultGclockConfig: 60 s, 10 s of warm-up, an evaluation every 10 ms,
// emulated clocks with drifts up to +-30 ppm and offsets up to +-5 ms.
func DefaultGclockConfig() GclockConfig {
	return GclockConfig{Duration: 60 * time.Second, Warmup: 10 * time.Second, EvalEvery: 10 * time.Millisecond,
		Emulate: true, MaxDriftPPM: 30, MaxOffset: 5 * time.Millisecond, Seed: 1}
}

// Validate reports the first invalid field.
func (gc GclockConfig) Validate() error {
	switch {
	case len(gc.Command) == 0:
		return errors.New("gclock: command: empty (want the gclock binary and \"daemon\")")
	case gc.Duration <= 0:
		return fmt.Errorf("gclock: duration %v: must be positive", gc.Duration)
	case gc.Warmup < 0 || gc.Warmup >= gc.Duration:
		return fmt.Errorf("gclock: warmup %v: want 0 <= warmup < duration %v", gc.Warmup, gc.Duration)
	case gc.EvalEvery < time.Millisecond || gc.EvalEvery > gc.Duration:
		return fmt.Errorf("gclock: eval interval %v: want 1ms..duration", gc.EvalEvery)
	case !(gc.MaxDriftPPM >= 0 && gc.MaxDriftPPM <= 500):
		return fmt.Errorf("gclock: max drift %v ppm: want 0..500", gc.MaxDriftPPM)
	case gc.MaxOffset < 0 || gc.MaxOffset > time.Hour:
		return fmt.Errorf("gclock: max offset %v: want 0..1h", gc.MaxOffset)
	}
	return nil
}

// DaemonPort is the UDP port of the lab's daemons.
const DaemonPort = 3190

// LabDaemonConfig is the daemon configuration the lab runs by default:
// daemon.DefaultConfig with the settings below (docs/lab.md says why). The
// lab fills in peers, ids, clocks, page and metrics.
func LabDaemonConfig() daemon.Config {
	c := daemon.DefaultConfig()
	s := &c.Sync
	// The centre line over the whole run (constant emulated drifts), kernel
	// stamps, the drift applied continuously.
	s.Estimator = "center"
	s.Window = 2048
	s.ContinuousDrift = true
	// Resyncs (rounds): a ramp from one a second, the period doubling
	// every three rounds (1, 1, 1, 2, 2, 2, 4, 4, 4 s: the initial period
	// is below the minimum), then fixed at 5.5 s: 7 resyncs in a 10-s
	// warm-up and at most 0.2 a second after, the daemon issue's budget
	// (5.5 s, not 5: the ramp's 4-s periods straddle the warm-up's end,
	// and at 5 s a fast run could fit 11 resyncs in the 50 s after it).
	// Accuracy here is bought with exchanges, so the budget is spent.
	// 60 exchanges per round: a pareto link rarely gives a fast one (about
	// 5% of one-way delays fall within 1 us of the floor), and the centre
	// line rests on the fastest each way.
	s.PingsPerRound = 60
	s.InitialGlobalPeriod = daemon.Duration(time.Second)
	s.MinGlobalPeriod = daemon.Duration(5500 * time.Millisecond)
	s.MaxGlobalPeriod = daemon.Duration(5500 * time.Millisecond)
	s.SuccessThresh = 3
	// Error reports only for what queueing cannot explain.
	s.DiscountDelay = true
	return c
}

// ClockTruth is what the evaluator knows about one host's clock.
type ClockTruth struct {
	Host      int     `json:"host"`
	OffsetNs  int64   `json:"offset_ns"`
	DriftPPM  float64 `json:"drift_ppm"`
	Emulated  bool    `json:"emulated"`
	Reference bool    `json:"reference,omitempty"`
}

// GclockSummary is the evaluation of one host (ID = host index) or of all
// hosts but the reference (ID -1), under the names `gclock sim --json`
// uses.
type GclockSummary struct {
	ID int `json:"id"`
	Summary
	UnsyncedShare    float64 `json:"unsynced_share"`      // evaluations without an estimate (after warm-up)
	BoundCoverage    float64 `json:"bound_coverage"`      // share of evaluations with the truth in [earliest, latest]
	BoundWidthMeanNs float64 `json:"bound_width_mean_ns"` // mean latest - earliest
	// Traffic after the warm-up (per host for the overall summary: divided
	// by the hosts that synchronise, all but the reference).
	MessagesPerNodePerS  float64 `json:"messages_per_node_per_s"`  // engine messages sent
	ExchangesPerNodePerS float64 `json:"exchanges_per_node_per_s"` // probe/reply exchanges
	RoundsPerNodePerS    float64 `json:"rounds_per_node_per_s"`    // global resyncs (rounds of exchanges)
	// The same during the warm-up (convergence).
	ConvergenceExchangesPerNodePerS float64 `json:"convergence_exchanges_per_node_per_s"`
	ConvergenceRoundsPerNodePerS    float64 `json:"convergence_rounds_per_node_per_s"`
}

// SeriesPoint is one evaluation of one host, relative to the truth.
type SeriesPoint struct {
	AtNs   int64 // since the daemons started
	Host   int
	ErrNs  int64 // estimate - truth
	LoNs   int64 // earliest - truth (saturated)
	HiNs   int64 // latest - truth
	Synced bool
}

// GclockResult is one RunGclock.
type GclockResult struct {
	Summary GclockSummary   `json:"summary"`
	Nodes   []GclockSummary `json:"nodes"`
	Clocks  []ClockTruth    `json:"clocks"`
	Series  []SeriesPoint   `json:"-"`
	Logs    string          `json:"logs"` // directory of the daemons' configs and logs
}

// hostClock is the evaluator's copy of a host's emulated clock.
type hostClock struct {
	truth ClockTruth
	emu   *clock.Emulated // nil: raw clock
	conf  daemon.EmulatedClockConfig
}

func (h *hostClock) at(raw int64) int64 {
	if h.emu == nil {
		return raw
	}
	return h.emu.Ideal(raw)
}

// RunGclock starts one `gclock daemon` per host (host 0 the reference, a
// star, kernel timestamps, each with its own emulated clock), evaluates
// every host's shared-memory page against the truth every EvalEvery for
// Duration, scrapes the daemons' metrics for their traffic, stops them and
// returns the figures. The hosts share one kernel clock, so the truth at a
// CLOCK_MONOTONIC_RAW instant r is the reference's emulated clock at r, and
// a host's estimate at r is its page evaluated at r: both exactly known.
func (l *Lab) RunGclock(ctx context.Context, gc GclockConfig) (GclockResult, error) {
	if err := gc.Validate(); err != nil {
		return GclockResult{}, fmt.Errorf("lab: %w", err)
	}
	n := l.cfg.Hosts
	dir := filepath.Join(l.cfg.RunDir, "gclock")
	if err := os.RemoveAll(dir); err != nil {
		return GclockResult{}, fmt.Errorf("lab: gclock: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return GclockResult{}, fmt.Errorf("lab: gclock: %w", err)
	}
	base := LabDaemonConfig()
	if gc.Base != nil {
		base = *gc.Base
	}
	origin := gtime.RawNow()
	rng := rand.New(rand.NewPCG(gc.Seed, 0x6c6162))
	clocks := make([]*hostClock, n)
	var peers []daemon.Peer
	for i := range n {
		peers = append(peers, daemon.Peer{ID: uint32(i + 1), Address: net.JoinHostPort(HostAddr(i).String(), strconv.Itoa(DaemonPort))})
	}
	var procs []*Proc
	defer func() {
		for _, p := range procs {
			p.Stop(3 * time.Second)
		}
	}()
	for i := range n {
		h := &hostClock{truth: ClockTruth{Host: i, Reference: i == 0}}
		if gc.Emulate {
			h.conf = daemon.EmulatedClockConfig{
				Offset:    daemon.Duration(int64((2*rng.Float64() - 1) * float64(gc.MaxOffset))),
				DriftPPM:  math.Round((2*rng.Float64()-1)*gc.MaxDriftPPM*1000) / 1000,
				Seed:      int64(gc.Seed)*1000 + int64(i),
				OriginRaw: origin,
			}
			emu, err := clock.NewEmulated(clock.EmuParams{Origin: origin, Offset: int64(h.conf.Offset),
				DriftPPM: h.conf.DriftPPM, Seed: h.conf.Seed})
			if err != nil {
				return GclockResult{}, fmt.Errorf("lab: gclock: host %d clock: %w", i, err)
			}
			h.emu = emu
			h.truth.Emulated, h.truth.OffsetNs, h.truth.DriftPPM = true, int64(h.conf.Offset), h.conf.DriftPPM
		}
		clocks[i] = h
		c := base
		c.Node = daemon.NodeConfig{ID: uint32(i + 1)}
		c.Peers = peers
		c.Reference.Order = []uint32{1}
		if gc.Emulate {
			c.Clock = daemon.ClockConfig{Source: daemon.ClockEmulated, Emulated: h.conf}
		} else {
			c.Clock = daemon.ClockConfig{Source: daemon.ClockRaw}
		}
		c.GlobalTime.ShmPath = filepath.Join(dir, fmt.Sprintf("page-h%d", i))
		c.Metrics.Listen = "unix:" + filepath.Join(dir, fmt.Sprintf("metrics-h%d.sock", i))
		if gc.Measurements {
			c.Log.Measurements = filepath.Join(dir, fmt.Sprintf("measurements-h%d.csv", i))
		}
		b, err := yaml.Marshal(&c)
		if err != nil {
			return GclockResult{}, fmt.Errorf("lab: gclock: host %d config: %w", i, err)
		}
		if _, err := daemon.Parse(b); err != nil {
			return GclockResult{}, fmt.Errorf("lab: gclock: host %d config: %w", i, err)
		}
		cf := filepath.Join(dir, fmt.Sprintf("h%d.yaml", i))
		if err := os.WriteFile(cf, b, 0o644); err != nil {
			return GclockResult{}, fmt.Errorf("lab: gclock: %w", err)
		}
	}
	start := gtime.RawNow()
	for i := range n {
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("h%d.log", i)))
		if err != nil {
			return GclockResult{}, fmt.Errorf("lab: gclock: %w", err)
		}
		argv := append(append([]string(nil), gc.Command...), "-config", filepath.Join(dir, fmt.Sprintf("h%d.yaml", i)))
		p, err := l.ExecEnv(i, argv, gc.Env, ExecOptions{Stdout: logf, Stderr: logf})
		logf.Close()
		if err != nil {
			return GclockResult{}, fmt.Errorf("lab: gclock: %w", err)
		}
		procs = append(procs, p)
	}
	readers := make([]*gtime.Reader, n)
	defer func() {
		for _, r := range readers {
			if r != nil {
				r.Close()
			}
		}
	}()
	for i := range n {
		path := filepath.Join(dir, fmt.Sprintf("page-h%d", i))
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := gtime.Open(path)
			if err == nil {
				readers[i] = r
				break
			}
			select {
			case <-procs[i].Done():
				return GclockResult{}, fmt.Errorf("lab: gclock: the daemon of host %d exited (%v); see %s", i, procs[i].Err(), filepath.Join(dir, fmt.Sprintf("h%d.log", i)))
			case <-ctx.Done():
				return GclockResult{}, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return GclockResult{}, fmt.Errorf("lab: gclock: host %d: no page after 10 s: %w", i, err)
			}
		}
	}
	ev := newEvaluator(n, gc)
	var atWarmup []traffic
	tick := time.NewTicker(gc.EvalEvery)
	defer tick.Stop()
	end := start + gc.Duration.Nanoseconds()
	warm := start + gc.Warmup.Nanoseconds()
	for {
		select {
		case <-ctx.Done():
			return GclockResult{}, ctx.Err()
		case <-tick.C:
		}
		for i, p := range procs {
			select {
			case <-p.Done():
				return GclockResult{}, fmt.Errorf("lab: gclock: the daemon of host %d exited early (%v); see %s", i, p.Err(), filepath.Join(dir, fmt.Sprintf("h%d.log", i)))
			default:
			}
		}
		r := gtime.RawNow()
		if atWarmup == nil && r >= warm {
			atWarmup = scrapeAll(dir, n)
		}
		if r >= end {
			break
		}
		if atWarmup != nil && isClosed(gc.Until) {
			end = r
			break
		}
		truth := clocks[0].at(r)
		for i, rd := range readers {
			t, err := rd.At(r)
			if err != nil {
				return GclockResult{}, fmt.Errorf("lab: gclock: host %d: %w", i, err)
			}
			ev.add(i, r-start, r >= warm, t, truth)
		}
	}
	final := scrapeAll(dir, n)
	res := ev.result(atWarmup, final, float64(gc.Warmup)/1e9, float64(end-warm)/1e9)
	for _, h := range clocks {
		res.Clocks = append(res.Clocks, h.truth)
	}
	res.Logs = dir
	return res, nil
}

// isClosed reports whether c is closed (false for nil).
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// traffic is what one daemon's metrics say it sent.
type traffic struct {
	ok        bool
	messages  float64 // engine messages sent
	exchanges float64 // probes sent
	rounds    float64 // rounds completed with its children
}

func (t traffic) sub(u traffic) traffic {
	return traffic{ok: t.ok && u.ok, messages: t.messages - u.messages, exchanges: t.exchanges - u.exchanges, rounds: t.rounds - u.rounds}
}

func scrapeAll(dir string, n int) []traffic {
	out := make([]traffic, n)
	for i := range n {
		out[i], _ = scrape(filepath.Join(dir, fmt.Sprintf("metrics-h%d.sock", i)))
	}
	return out
}

// scrape reads a daemon's Prometheus metrics over its Unix socket.
func scrape(sock string) (traffic, error) {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://gclock/metrics")
	if err != nil {
		return traffic{}, err
	}
	defer resp.Body.Close()
	return parseTraffic(resp.Body)
}

// parseTraffic sums the counters RunGclock reports from a daemon's metrics.
func parseTraffic(r io.Reader) (traffic, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return traffic{}, fmt.Errorf("metrics: %w", err)
	}
	t := traffic{ok: true}
	if f, ok := fams["gclock_sync_messages_total"]; ok {
		for _, m := range f.GetMetric() {
			var typ, dir string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "type":
					typ = lp.GetValue()
				case "direction":
					dir = lp.GetValue()
				}
			}
			if dir != "sent" {
				continue
			}
			v := m.GetCounter().GetValue()
			t.messages += v
			if typ == "probe" {
				t.exchanges += v
			}
		}
	}
	if f, ok := fams["gclock_child_rounds_total"]; ok {
		for _, m := range f.GetMetric() {
			t.rounds += m.GetCounter().GetValue()
		}
	}
	return t, nil
}

// evaluator accumulates the errors of every host's page.
type evaluator struct {
	gc     GclockConfig
	errs   [][]int64 // after warm-up, per host
	in     []int     // truth inside the bounds
	total  []int     // evaluations after warm-up
	unsync []int
	width  []float64
	widthN []int
	series []SeriesPoint
}

func newEvaluator(n int, gc GclockConfig) *evaluator {
	return &evaluator{gc: gc, errs: make([][]int64, n), in: make([]int, n), total: make([]int, n),
		unsync: make([]int, n), width: make([]float64, n), widthN: make([]int, n)}
}

func (e *evaluator) add(host int, at int64, counted bool, t gtime.Time, truth int64) {
	synced := t.Status == gtime.StatusSynced || t.Status == gtime.StatusStale
	if e.gc.Trace {
		e.series = append(e.series, SeriesPoint{AtNs: at, Host: host, ErrNs: satDiff(t.Est, truth),
			LoNs: satDiff(t.Earliest, truth), HiNs: satDiff(t.Latest, truth), Synced: synced})
	}
	if !counted {
		return
	}
	e.total[host]++
	if t.Earliest <= truth && truth <= t.Latest {
		e.in[host]++
	}
	if !synced {
		e.unsync[host]++
		return
	}
	e.errs[host] = append(e.errs[host], satDiff(t.Est, truth))
	if w := t.Width(); w < math.MaxInt64 {
		e.width[host] += float64(w)
		e.widthN[host]++
	}
}

func satDiff(a, b int64) int64 {
	d := a - b
	if (a >= 0) != (b >= 0) && (d >= 0) != (a >= 0) { // overflow
		if a >= 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return d
}

func (e *evaluator) result(warm, final []traffic, warmS, steadyS float64) GclockResult {
	n := len(e.errs)
	var res GclockResult
	res.Series = e.series
	all := GclockSummary{ID: -1}
	var allErrs []int64
	var in, total, unsync, wN int
	var wSum float64
	var conv, steady traffic
	haveTraffic := true
	for i := range n {
		s := GclockSummary{ID: i, Summary: Summarize(e.errs[i])}
		if e.total[i] > 0 {
			s.BoundCoverage = float64(e.in[i]) / float64(e.total[i])
			s.UnsyncedShare = float64(e.unsync[i]) / float64(e.total[i])
		}
		if e.widthN[i] > 0 {
			s.BoundWidthMeanNs = e.width[i] / float64(e.widthN[i])
		}
		var c, st traffic
		if warm != nil && i < len(warm) && i < len(final) {
			c, st = warm[i], final[i].sub(warm[i])
		}
		if !c.ok || !st.ok {
			haveTraffic = false
		}
		if steadyS > 0 {
			s.MessagesPerNodePerS = st.messages / steadyS
			s.ExchangesPerNodePerS = st.exchanges / steadyS
			s.RoundsPerNodePerS = st.rounds / steadyS
		}
		if warmS > 0 {
			s.ConvergenceExchangesPerNodePerS = c.exchanges / warmS
			s.ConvergenceRoundsPerNodePerS = c.rounds / warmS
		}
		conv.messages, conv.exchanges, conv.rounds = conv.messages+c.messages, conv.exchanges+c.exchanges, conv.rounds+c.rounds
		steady.messages, steady.exchanges, steady.rounds = steady.messages+st.messages, steady.exchanges+st.exchanges, steady.rounds+st.rounds
		res.Nodes = append(res.Nodes, s)
		if i == 0 {
			continue // the reference: its error is 0 by definition
		}
		allErrs = append(allErrs, e.errs[i]...)
		in, total, unsync = in+e.in[i], total+e.total[i], unsync+e.unsync[i]
		wSum, wN = wSum+e.width[i], wN+e.widthN[i]
	}
	all.Summary = Summarize(allErrs)
	if total > 0 {
		all.BoundCoverage = float64(in) / float64(total)
		all.UnsyncedShare = float64(unsync) / float64(total)
	}
	if wN > 0 {
		all.BoundWidthMeanNs = wSum / float64(wN)
	}
	if sync := float64(n - 1); haveTraffic && sync > 0 {
		if steadyS > 0 {
			all.MessagesPerNodePerS = steady.messages / float64(n) / steadyS
			all.ExchangesPerNodePerS = steady.exchanges / sync / steadyS
			all.RoundsPerNodePerS = steady.rounds / sync / steadyS
		}
		if warmS > 0 {
			all.ConvergenceExchangesPerNodePerS = conv.exchanges / sync / warmS
			all.ConvergenceRoundsPerNodePerS = conv.rounds / sync / warmS
		}
	}
	res.Summary = all
	return res
}

// String is a one-line description of a host's clock.
func (c ClockTruth) String() string {
	if !c.Emulated {
		return "raw clock"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "offset %+.3f ms, drift %+.3f ppm", float64(c.OffsetNs)/1e6, c.DriftPPM)
	return b.String()
}
