package lab

import (
	"bufio"
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
	"github.com/gclock/gclock/engine/engineconf"
	"github.com/gclock/gclock/eval"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/internal/satmath"
	"github.com/gclock/gclock/lab/netlab"
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
	// Origin is the CLOCK_MONOTONIC_RAW instant (ns) the emulated clocks
	// start from (0: when RunGclock draws them). Run sets it before the
	// daemons and the peers start, so that chronyd runs on the same clocks
	// (HostClocks).
	Origin int64
	// Wander is how every emulated clock's frequency moves besides its
	// drift: a random walk, a temperature cycle and steps
	// (DefaultWander: a commodity crystal).
	Wander Wander

	// Base is the daemon configuration the per-host ones are made from
	// (peers, node id, clock, page and metrics are set by the lab); nil
	// means LabDaemonConfig().
	Base *daemon.Config
	// Trace keeps every evaluation in GclockResult.Series, for plots.
	Trace bool
	// Measurements has every daemon log the exchanges it receives
	// (log.measurements) to measurements-h<i>.csv in the logs directory;
	// after the run they are replayed for what they allowed
	// (GclockSummary.Limit, limit.go).
	Measurements bool
	// Tweak, if set, edits each host's configuration last (per-host
	// settings such as refclock.sock). Code, not data: left out of the
	// spec's JSON (a func field fails the whole encoding).
	Tweak func(host int, c *daemon.Config) `json:"-"`
	// StateFiles gives every daemon a state file (state.file,
	// state-h<i>.json in the logs directory, saved every second).
	StateFiles bool
	// Faults are killed, paused and partitioned daemons during the run
	// (faults.go); GclockResult.Faults condenses each.
	Faults []Fault
	// FailoverAfter, when positive, runs reference failover: the first
	// three hosts (ids 1, 2, 3) are reference.order, failover_after is
	// this, and GclockResult.Failover measures the elections. 0: host 0
	// is the reference alone.
	FailoverAfter time.Duration
	// Until, when closed after the warm-up, ends the run early (as if
	// Duration had passed); the traffic rates count the time actually run.
	// Not data either: left out of the JSON.
	Until <-chan struct{} `json:"-"`
}

// DefaultGclockConfig: 60 s, 10 s of warm-up, an evaluation every 10 ms,
// emulated clocks with drifts up to +-30 ppm, offsets up to +-5 ms and a
// commodity crystal's wander (DefaultWander).
func DefaultGclockConfig() GclockConfig {
	return GclockConfig{Duration: 60 * time.Second, Warmup: 10 * time.Second, EvalEvery: 10 * time.Millisecond,
		Emulate: true, MaxDriftPPM: 30, MaxOffset: 5 * time.Millisecond, Seed: 1, Wander: DefaultWander()}
}

// Wander is the frequency change of the lab's emulated clocks.
type Wander struct {
	// RandomWalkPPM is the standard deviation of the frequency's random
	// walk per second (ppm per sqrt(s)), in steps of one second.
	RandomWalkPPM float64 `json:"random_walk_ppm_per_sqrt_s"`
	// SinePPM and SinePeriod: a temperature cycle, each host with its own
	// phase.
	SinePPM    float64       `json:"sine_ppm"`
	SinePeriod time.Duration `json:"sine_period"`
	// Steps change every host's drift but the reference's by DeltaPPM at
	// After (from the daemons' start).
	Steps []WanderStep `json:"steps,omitempty"`
}

// WanderStep is one frequency step of Wander.
type WanderStep struct {
	After    time.Duration `json:"after"`
	DeltaPPM float64       `json:"delta_ppm"`
}

// DefaultWander is a commodity crystal oscillator in a machine room
// (docs/lab.md, "Wandering clocks"): a random walk of 0.005 ppm per
// sqrt(s), whose Allan deviation sqrt(tau/3) * 0.005 ppm is 0.1 ppm at
// tau = 1000 s, the floor Mills reports for ordinary computer clocks
// (Computer Network Time Synchronization, ch. 12: 1e-7 near 1000-2000 s);
// and a temperature cycle of +-0.1 ppm every 15 minutes (an air
// conditioner's cycle of about a degree, on an AT-cut crystal's slope of
// about 0.1 ppm per degree near its turnover point at room temperature),
// which keeps the frequency's excursion over 1000 s at Mills' 0.1 ppm.
func DefaultWander() Wander {
	return Wander{RandomWalkPPM: 0.005, SinePPM: 0.1, SinePeriod: 15 * time.Minute}
}

// String is the wander in the lab's flag syntax.
func (w Wander) String() string {
	s := fmt.Sprintf("random walk %g ppm/sqrt(s), sine %g ppm every %v", w.RandomWalkPPM, w.SinePPM, w.SinePeriod)
	for _, st := range w.Steps {
		s += fmt.Sprintf(", step %+g ppm at %v", st.DeltaPPM, st.After)
	}
	return s
}

// emulated returns host's emulated clock configuration under w (host 0
// the reference: no steps).
func (w Wander) emulated(c daemon.EmulatedClockConfig, host int) daemon.EmulatedClockConfig {
	if w.RandomWalkPPM > 0 || w.SinePPM > 0 {
		c.WanderPPM, c.WanderStep = w.RandomWalkPPM, daemon.Duration(time.Second)
		c.SinePPM, c.SinePeriod = w.SinePPM, daemon.Duration(w.SinePeriod)
	}
	if host != 0 {
		drift := c.DriftPPM
		for _, st := range w.Steps {
			drift += st.DeltaPPM
			c.DriftSteps = append(c.DriftSteps, daemon.DriftStep{After: daemon.Duration(st.After), DriftPPM: drift})
		}
	}
	return c
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
	case !(gc.Wander.RandomWalkPPM >= 0 && gc.Wander.RandomWalkPPM <= 10):
		return fmt.Errorf("gclock: wander: random walk %v ppm/sqrt(s): want 0..10", gc.Wander.RandomWalkPPM)
	case !(gc.Wander.SinePPM >= 0 && gc.Wander.SinePPM <= 100):
		return fmt.Errorf("gclock: wander: sine %v ppm: want 0..100", gc.Wander.SinePPM)
	case gc.Wander.SinePPM > 0 && gc.Wander.SinePeriod < 2*time.Second:
		return fmt.Errorf("gclock: wander: sine period %v: want at least 2s", gc.Wander.SinePeriod)
	}
	for i, f := range gc.Faults {
		if err := f.validate(i, 1<<16, gc.Duration); err != nil {
			return err
		}
	}
	prev := time.Duration(-1)
	for i, st := range gc.Wander.Steps {
		if st.After <= prev || !(math.Abs(st.DeltaPPM) <= 500) {
			return fmt.Errorf("gclock: wander: step %d (%+g ppm at %v): want |delta| <= 500 ppm at increasing times >= 0", i, st.DeltaPPM, st.After)
		}
		prev = st.After
	}
	return nil
}

// daemonPort is the UDP port of the lab's daemons.
const daemonPort = 3190

// LabProfile is the sync profile the lab runs by default
// (deploy/profiles/precise.yaml: why each setting, and docs/lab.md).
const LabProfile = "precise"

// LabDaemonConfig is the daemon configuration the lab runs by default:
// LabDaemonConfigFor(LabProfile). The lab fills in peers, ids, clocks,
// page and metrics.
func LabDaemonConfig() daemon.Config {
	c, err := LabDaemonConfigFor(LabProfile)
	if err != nil {
		panic(err) // a shipped profile; engineconf's tests decode it
	}
	return c
}

// LabDaemonConfigFor is daemon.DefaultConfig with the sync section of the
// shipped profile (engineconf.Profile: the engine's defaults and the
// profile's keys, as a config saying `sync: {profile: NAME}`) and no key.
func LabDaemonConfigFor(profile string) (daemon.Config, error) {
	c := daemon.DefaultConfig()
	s, err := engineconf.Profile(profile)
	if err != nil {
		return c, err
	}
	c.Sync = s
	// No key: the lab's hosts talk over veth links in private network
	// namespaces that only the lab's own processes reach, and the keyless
	// runs measure the unauthenticated path (lab spoof --key measures the
	// other). The daemon refuses peers off loopback without a key unless
	// told so (docs/daemon.md, "Security").
	c.Auth.Insecure = true
	return c, nil
}

// ClockTruth is what the evaluator knows about one host's clock.
type ClockTruth struct {
	Host      int     `json:"host"`
	OffsetNs  int64   `json:"offset_ns"`
	DriftPPM  float64 `json:"drift_ppm"`
	Emulated  bool    `json:"emulated"`
	Reference bool    `json:"reference,omitempty"`
	// Config rebuilds the host's emulated clock (Emulated only): an
	// evaluator's own copy, e.g. the truth of programs run in the lab
	// (Config.New, then Ideal at raw instants in increasing order).
	Config daemon.EmulatedClockConfig `json:"-"`
}

// GclockSummary is the evaluation of one host (ID = host index) or of all
// hosts but the reference (ID -1), under the names `gclock sim --json`
// uses.
type GclockSummary struct {
	ID int `json:"id"`
	Summary
	UnsyncedShare float64 `json:"unsynced_share"` // evaluations without an estimate (after warm-up)
	// BoundCoverage is the share of the reads claiming synced whose
	// [earliest, latest] held the truth (1 when none did): a synced read
	// is a promise. BoundCoverageAll is over every read with an estimate
	// (synced, stale, degraded), as in `gclock sim`.
	BoundCoverage    float64 `json:"bound_coverage"`
	BoundCoverageAll float64 `json:"bound_coverage_all"`
	BoundWidthMeanNs float64 `json:"bound_width_mean_ns"` // mean latest - earliest
	// StatusShare is the share of reads after warm-up in each status;
	// LongestNotSyncedS the longest stretch of reads after warm-up that
	// did not say synced (s): how long a host took to re-acquire.
	StatusShare       map[string]float64 `json:"status_share"`
	LongestNotSyncedS float64            `json:"longest_not_synced_s"`
	// Traffic after the warm-up (per host for the overall summary: divided
	// by the hosts that synchronise, all but the reference).
	MessagesPerNodePerS  float64 `json:"messages_per_node_per_s"`  // engine messages sent
	ExchangesPerNodePerS float64 `json:"exchanges_per_node_per_s"` // probe/reply exchanges
	RoundsPerNodePerS    float64 `json:"rounds_per_node_per_s"`    // global resyncs (rounds of exchanges)
	// The same during the warm-up (convergence).
	ConvergenceExchangesPerNodePerS float64 `json:"convergence_exchanges_per_node_per_s"`
	ConvergenceRoundsPerNodePerS    float64 `json:"convergence_rounds_per_node_per_s"`
	// Rounds and RoundsCut count the rounds this host drove with its
	// children over the whole run (the overall summary: all hosts'), and
	// those of them sync.round_budget ended before their exchanges.
	Rounds    float64 `json:"rounds,omitempty"`
	RoundsCut float64 `json:"rounds_cut,omitempty"`
	// Limit is what the host's logged exchanges allowed (limit.go; the
	// overall summary: the hosts' mean); nil without
	// GclockConfig.Measurements or where the truth changes in the run.
	Limit *LimitFigures `json:"limit,omitempty"`
}

// SeriesPoint is one evaluation of one host, relative to the truth.
type SeriesPoint struct {
	AtNs   int64 // since the daemons started
	Host   int
	ErrNs  int64 // estimate - truth
	LoNs   int64 // earliest - truth (saturated)
	HiNs   int64 // latest - truth
	Synced bool
	// Bounded: the read has bounds (synced, stale or degraded), whether
	// or not it promises them.
	Bounded bool
}

// WriteSeries writes every evaluation to the CSV file path (t_s, host,
// err_ns, lo_ns, hi_ns, synced).
func WriteSeries(path string, series []SeriesPoint) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "t_s,host,err_ns,lo_ns,hi_ns,synced")
	for _, p := range series {
		fmt.Fprintf(w, "%.3f,%d,%d,%d,%d,%v\n", float64(p.AtNs)/1e9, p.Host, p.ErrNs, p.LoNs, p.HiNs, p.Synced)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// GclockResult is one RunGclock.
type GclockResult struct {
	Summary GclockSummary   `json:"summary"`
	Nodes   []GclockSummary `json:"nodes"`
	Clocks  []ClockTruth    `json:"clocks"`
	Series  []SeriesPoint   `json:"-"`
	Faults  []FaultResult   `json:"faults,omitempty"`
	Logs    string          `json:"logs"` // directory of the daemons' configs and logs
	// Agreement is the check that needs no truth (eval.Agreement): at
	// every evaluation after the warm-up the synced page reads of all
	// hosts share a point. Violations must be 0.
	Agreement eval.Agreement `json:"agreement"`
	// SyncedOutside counts the synced reads after the warm-up whose
	// bounds missed the truth: global time in the scale of the term the
	// read claims (scales.go; the first reference's clock, then the line
	// each reference that took over froze and published). SyncedUnjudged
	// counts the synced reads of a term whose scale no reference page
	// showed (not judged; must be 0), ScaleRedefinitions the reads of a
	// reference page that defined its term's scale anew (a reference
	// restarted within its term).
	SyncedOutside      uint64 `json:"synced_outside"`
	SyncedUnjudged     uint64 `json:"synced_unjudged"`
	ScaleRedefinitions uint64 `json:"scale_redefinitions"`
	// PageBusyReads counts the page reads that found a daemon in the
	// middle of an update for a reader's whole 100-ms budget
	// (gtime.ErrBusy; the evaluator read again, gtime.ReadPatiently).
	PageBusyReads uint64 `json:"page_busy_reads"`
	// Failover measures the elections (GclockConfig.FailoverAfter).
	Failover *FailoverFigures `json:"failover,omitempty"`
	// LimitError names a replay of the logged exchanges that failed
	// (GclockSummary.Limit); "" when none did.
	LimitError string `json:"limit_error,omitempty"`
}

// hostClock is the evaluator's copy of a host's emulated clock.
type hostClock struct {
	truth ClockTruth      // truth.Config is the daemon's clock config
	emu   *clock.Emulated // nil: raw clock
}

// drawClocks draws n hosts' emulated clocks, the one clock population of
// the lab's runs: from a PCG on seed and stream, each host an offset
// uniform in +-maxOffset, a drift uniform in +-maxDriftPPM (to 0.001 ppm)
// and a noise seed of its own, all from the raw instant origin; shape
// (nil: none) adds host i's wander. The evaluator's copy is built with
// clock.EmulatedConfig.New, as the daemon builds its clock from the same
// config.
func drawClocks(n int, seed, stream uint64, origin int64, maxOffset time.Duration, maxDriftPPM float64,
	shape func(c daemon.EmulatedClockConfig, host int) daemon.EmulatedClockConfig) ([]*hostClock, error) {
	if origin == 0 {
		origin = gtime.RawNow()
	}
	rng := rand.New(rand.NewPCG(seed, stream))
	out := make([]*hostClock, n)
	for i := range n {
		c := daemon.EmulatedClockConfig{
			Offset:    daemon.Duration(int64((2*rng.Float64() - 1) * float64(maxOffset))),
			DriftPPM:  math.Round((2*rng.Float64()-1)*maxDriftPPM*1000) / 1000,
			Seed:      int64(seed)*1000 + int64(i),
			OriginRaw: origin,
		}
		if shape != nil {
			c = shape(c, i)
		}
		emu, err := c.New()
		if err != nil {
			return nil, fmt.Errorf("host %d clock: %w", i, err)
		}
		out[i] = &hostClock{emu: emu, truth: ClockTruth{Host: i, Reference: i == 0, Emulated: true,
			OffsetNs: int64(c.Offset), DriftPPM: c.DriftPPM, Config: c}}
	}
	return out, nil
}

// gclockStream is the PCG stream of the gclock runs' clocks.
const gclockStream = 0x6c6162

// HostClocks returns the emulated clocks RunGclock gives n hosts under gc
// (gc.Emulate, with gc.Origin set): the configs the daemons get, for
// putting another program on the same clocks. For evaluators and the lab
// only, as every clock config is.
func (gc GclockConfig) HostClocks(n int) ([]daemon.EmulatedClockConfig, error) {
	if !gc.Emulate || gc.Origin == 0 {
		return nil, errors.New("lab: host clocks: want emulated clocks with an origin")
	}
	hs, err := drawClocks(n, gc.Seed, gclockStream, gc.Origin, gc.MaxOffset, gc.MaxDriftPPM, gc.Wander.emulated)
	if err != nil {
		return nil, fmt.Errorf("lab: host clocks: %w", err)
	}
	out := make([]daemon.EmulatedClockConfig, n)
	for i, h := range hs {
		out[i] = h.truth.Config
	}
	return out, nil
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
	base, err := gc.daemonBase()
	if err != nil {
		return GclockResult{}, err
	}
	r := &gclockRun{l: l, gc: gc, n: l.Config().Hosts, dir: filepath.Join(l.Config().RunDir, "gclock")}
	// The truth: the reference's clock, or in reference-realtime mode the
	// machine's CLOCK_REALTIME (the reference serves it; every namespace
	// reads the same one). The mean-drift scale is not evaluated here.
	r.realtime = base.RealTime.Mode == daemon.RealTimeReference
	if err := os.RemoveAll(r.dir); err != nil {
		return GclockResult{}, fmt.Errorf("lab: gclock: %w", err)
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return GclockResult{}, fmt.Errorf("lab: gclock: %w", err)
	}
	if err := r.writeConfigs(base); err != nil {
		return GclockResult{}, err
	}
	if err := r.checkFaults(); err != nil {
		return GclockResult{}, err
	}
	defer func() {
		for _, p := range r.procs {
			p.Stop(3 * time.Second)
		}
	}()
	r.start = gtime.RawNow()
	for i := range r.n {
		p, err := r.startDaemon(i)
		if err != nil {
			return GclockResult{}, err
		}
		r.procs = append(r.procs, p)
	}
	r.readers, err = openPages(ctx, "gclock", r.dir, r.procs)
	defer func() { closePages(r.readers) }()
	if err != nil {
		return GclockResult{}, err
	}
	r.ev = newEvaluator(r.n, gc)
	r.scales = newTermScales()
	r.reads, r.claims = make([]gtime.Time, r.n), make([]gtime.Scale, r.n)
	if len(gc.Faults) > 0 {
		r.ev.gc.Trace = true // faultResults reads the series
	}
	r.faults = newFaultRunner(l, gc.Faults, r.startDaemon)
	defer func() { r.faults.resume(r.procs) }()
	if gc.FailoverAfter > 0 {
		r.el = newElections(gc, r.n)
	}
	if err := r.loop(ctx); err != nil {
		return GclockResult{}, err
	}
	res := r.result()
	if gc.Measurements {
		for _, p := range r.procs {
			p.Stop(3 * time.Second) // every exchange logged before the replay
		}
		r.limits(&res, base.Sync.CenterMemory)
	}
	return res, nil
}

// limits adds to res what each host's logged exchanges allowed
// (replayLimit), and the run's limit to the summary (runLimit: the one
// textbook estimator least on the hosts' mean), as the simulator's matrix
// does. Not where the truth changes during the run
// (faults, failover, a reference serving CLOCK_REALTIME): a replay of one
// source cannot follow it. A replay that fails is named in LimitError.
func (r *gclockRun) limits(res *GclockResult, memory float64) {
	if r.realtime || len(r.gc.Faults) > 0 || r.gc.FailoverAfter > 0 {
		return
	}
	var hosts []*LimitFigures
	for i := 1; i < r.n && i < len(res.Nodes); i++ {
		f, ok, err := r.replayLimit(i, memory)
		if err != nil {
			res.LimitError = fmt.Sprintf("h%d: %v", i, err)
			return
		}
		if !ok {
			continue
		}
		res.Nodes[i].Limit = &f
		hosts = append(hosts, &f)
	}
	if len(hosts) == 0 {
		return
	}
	if sum, ok := runLimit(hosts); ok {
		res.Summary.Limit = &sum
	} else {
		res.LimitError = "no textbook estimator had a line on every host"
	}
}

// gclockRun is one RunGclock: the daemons, their pages and the evaluator.
type gclockRun struct {
	l        *Lab
	gc       GclockConfig
	n        int
	dir      string // configs, logs, pages, metrics sockets
	realtime bool   // the truth is CLOCK_REALTIME (reference-realtime mode)
	clocks   []*hostClock
	procs    []*netlab.Proc
	readers  []*gtime.Reader
	ev       *evaluator
	faults   *faultRunner
	el       *elections // nil without failover

	start, warm, end int64 // CLOCK_MONOTONIC_RAW
	atWarmup         []traffic

	scales *termScales   // scales.go: each term's scale, from the reference pages
	reads  []gtime.Time  // this instant's reads, by host
	claims []gtime.Scale // the scale each read claims
}

// daemonBase is the daemon config every host's starts from (GclockConfig.Base
// or LabDaemonConfig), checked for what the lab can evaluate.
func (gc GclockConfig) daemonBase() (daemon.Config, error) {
	base := LabDaemonConfig()
	if gc.Base != nil {
		base = *gc.Base
	}
	if base.RealTime.Mode == daemon.RealTimeReference {
		// The truth is CLOCK_REALTIME itself, not UTC: the daemons serve it
		// without the kernel's view of it (this VM's kernel clock is
		// unsynchronised; real_time.upstream kernel would serve nothing).
		base.RealTime.Upstream = daemon.UpstreamNone
	}
	if base.RealTime.Mode == daemon.RealTimeMeanDrift {
		return base, fmt.Errorf("lab: gclock: real_time.mode %s: the lab does not evaluate it (none or %s)",
			base.RealTime.Mode, daemon.RealTimeReference)
	}
	return base, nil
}

// writeConfigs draws every host's clock (the evaluator keeps its copy in
// r.clocks) and writes the host's daemon config, h<i>.yaml in r.dir.
func (r *gclockRun) writeConfigs(base daemon.Config) error {
	gc := r.gc
	var peers []daemon.Peer
	for i := range r.n {
		peers = append(peers, daemon.Peer{ID: uint32(i + 1), Address: net.JoinHostPort(netlab.HostAddr(i).String(), strconv.Itoa(daemonPort))})
	}
	r.clocks = make([]*hostClock, r.n)
	if gc.Emulate {
		var err error
		r.clocks, err = drawClocks(r.n, gc.Seed, gclockStream, gc.Origin, gc.MaxOffset, gc.MaxDriftPPM, gc.Wander.emulated)
		if err != nil {
			return fmt.Errorf("lab: gclock: %w", err)
		}
	}
	for i := range r.n {
		if r.clocks[i] == nil {
			r.clocks[i] = &hostClock{truth: ClockTruth{Host: i, Reference: i == 0}}
		}
		if err := writeHostConfig(r.path("h%d.yaml", i), r.hostConfig(base, i, peers)); err != nil {
			return fmt.Errorf("lab: gclock: host %d config: %w", i, err)
		}
	}
	return nil
}

// writeHostConfig writes a host's daemon config c to path, once it reads
// back as the daemon will read it.
func writeHostConfig(path string, c *daemon.Config) error {
	b, err := yaml.Marshal(c)
	if err == nil {
		_, err = daemon.Parse(b)
	}
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	return err
}

// path is the file name.Sprintf(format, host) in r.dir.
func (r *gclockRun) path(format string, host int) string {
	return filepath.Join(r.dir, fmt.Sprintf(format, host))
}

// hostConfig is host i's daemon config: base with its id, the peers, the
// reference order, its clock (r.clocks[i]) and its files in r.dir.
func (r *gclockRun) hostConfig(base daemon.Config, i int, peers []daemon.Peer) *daemon.Config {
	gc := r.gc
	c := base
	c.Node = daemon.NodeConfig{ID: uint32(i + 1)}
	c.Peers = peers
	c.Reference.Order = []uint32{1}
	if gc.FailoverAfter > 0 {
		c.Reference.Order = nil
		for k := range min(3, r.n) {
			c.Reference.Order = append(c.Reference.Order, uint32(k+1))
		}
		c.Reference.FailoverAfter = daemon.Duration(gc.FailoverAfter)
	}
	if c.Auth.KeyFile == "" {
		// A --daemon-config without a key: the lab's namespaces are
		// private (see LabDaemonConfig), said explicitly.
		c.Auth.Insecure = true
	}
	if gc.Emulate {
		c.Clock = daemon.ClockConfig{Source: daemon.ClockEmulated, Emulated: r.clocks[i].truth.Config}
	} else {
		c.Clock = daemon.ClockConfig{Source: daemon.ClockRaw}
	}
	c.GlobalTime.ShmPath = r.path("page-h%d", i)
	c.Metrics.Listen = "unix:" + r.path("metrics-h%d.sock", i)
	if gc.Measurements {
		c.Log.Measurements = r.path("measurements-h%d.csv", i)
	}
	if gc.StateFiles {
		c.State = daemon.StateConfig{File: r.path("state-h%d.json", i), SaveEvery: daemon.Duration(time.Second)}
	}
	if gc.Tweak != nil {
		gc.Tweak(i, &c)
	}
	return &c
}

// checkFaults checks GclockConfig.Faults against the lab.
func (r *gclockRun) checkFaults() error {
	for i, f := range r.gc.Faults {
		if err := f.validate(i, r.n, r.gc.Duration); err != nil {
			return fmt.Errorf("lab: %w", err)
		}
		if partition(f.Kind) && r.l.Switch() == nil {
			return fmt.Errorf("lab: gclock: faults[%d]: a partition needs the switch (not a direct link)", i)
		}
	}
	return nil
}

// startDaemon starts host i's daemon, its output appended to h<i>.log.
func (r *gclockRun) startDaemon(i int) (*netlab.Proc, error) {
	logf, err := os.OpenFile(r.path("h%d.log", i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lab: gclock: %w", err)
	}
	defer logf.Close()
	argv := append(append([]string(nil), r.gc.Command...), "-config", r.path("h%d.yaml", i))
	p, err := r.l.ExecEnv(i, argv, r.gc.Env, netlab.ExecOptions{Stdout: logf, Stderr: logf})
	if err != nil {
		return nil, fmt.Errorf("lab: gclock: %w", err)
	}
	return p, nil
}

// loop evaluates every host every EvalEvery until Duration (or Until after
// the warm-up), running the faults and watching the elections.
func (r *gclockRun) loop(ctx context.Context) error {
	gc := r.gc
	tick := time.NewTicker(gc.EvalEvery)
	defer tick.Stop()
	r.end = r.start + gc.Duration.Nanoseconds()
	r.warm = r.start + gc.Warmup.Nanoseconds()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		now := gtime.RawNow()
		if err := r.faults.step(time.Duration(now-r.start), r.procs); err != nil {
			return err
		}
		if err := r.checkAlive(); err != nil {
			return err
		}
		now = gtime.RawNow()
		if r.atWarmup == nil && now >= r.warm {
			r.atWarmup = scrapeAll(r.dir, r.n)
		}
		if now >= r.end {
			return nil
		}
		if r.atWarmup != nil && isClosed(gc.Until) {
			r.end = now
			return nil
		}
		if r.el != nil {
			r.el.watch(r.dir, time.Duration(now-r.start), r.faults)
		}
		if err := r.evaluate(now); err != nil {
			return err
		}
	}
}

// checkAlive reports a daemon that exited without a fault killing it.
func (r *gclockRun) checkAlive() error {
	for i, p := range r.procs {
		if r.faults.down[i] {
			continue // killed on purpose
		}
		select {
		case <-p.Done():
			return fmt.Errorf("lab: gclock: the daemon of host %d exited early (%v); see %s", i, p.Err(), r.path("h%d.log", i))
		default:
		}
	}
	return nil
}

// evaluate reads every host's page at the raw instant now, then judges
// each read against global time in the scale of the term it claims.
func (r *gclockRun) evaluate(now int64) error {
	// Read every page at now first: a reference's page defines its
	// term's scale, against which the reads of that term are judged.
	for i, rd := range r.readers {
		var sc gtime.Scale
		t, busy, err := gtime.ReadPatiently(func(at int64) (gtime.Time, error) {
			t, s, err := rd.AtScale(at)
			sc = s
			return t, err
		}, now, gtime.BusyRetries)
		r.ev.busy += uint64(busy)
		if err != nil {
			return fmt.Errorf("lab: gclock: host %d: %w (after %d busy reads)", i, err, busy)
		}
		if t.Status == gtime.StatusNoDaemon {
			// Closed or replaced by a restarted daemon: read the
			// page now at the path, if any.
			if nr, err := gtime.Open(r.path("page-h%d", i)); err == nil {
				if t2, sc2, err := nr.AtScale(now); err == nil {
					rd.Close()
					r.readers[i], t, sc = nr, t2, sc2
				} else {
					nr.Close()
				}
			}
		}
		r.reads[i], r.claims[i] = t, sc
		r.scales.learn(i, sc)
	}
	for i, t := range r.reads {
		var truth int64
		known := true
		if r.realtime {
			off, _ := rawclock.WallOffset()
			truth = now + off
		} else {
			truth, known = r.scales.truth(r.claims[i].Term, now, r.clocks)
		}
		r.ev.add(i, now-r.start, now >= r.warm, t, truth, known)
	}
	r.ev.instant(now - r.start)
	return nil
}

// result is the run's figures, with the clocks' truth and the faults'.
func (r *gclockRun) result() GclockResult {
	gc := r.gc
	final := scrapeAll(r.dir, r.n)
	res := r.ev.result(r.atWarmup, final, float64(gc.Warmup)/1e9, float64(r.end-r.warm)/1e9)
	res.ScaleRedefinitions = r.scales.redefined
	for _, h := range r.clocks {
		res.Clocks = append(res.Clocks, h.truth)
	}
	res.Logs = r.dir
	if r.el != nil {
		res.Failover = r.el.figures()
	}
	if len(gc.Faults) > 0 {
		res.Faults = faultResults(res.Series, gc.Faults, r.n, gc.Duration)
		if !gc.Trace {
			res.Series = nil
		}
	}
	return res
}

// openPages waits up to 10 s for each host's page (dir/page-h<i>, written
// by procs[i]) and opens it; what names the caller in errors ("gclock",
// "spoof"). The readers opened so far are returned with an error too:
// closePages closes them.
func openPages(ctx context.Context, what, dir string, procs []*netlab.Proc) ([]*gtime.Reader, error) {
	readers := make([]*gtime.Reader, len(procs))
	for i := range procs {
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
				return readers, fmt.Errorf("lab: %s: the daemon of host %d exited (%v); see %s", what, i, procs[i].Err(), filepath.Join(dir, fmt.Sprintf("h%d.log", i)))
			case <-ctx.Done():
				return readers, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return readers, fmt.Errorf("lab: %s: host %d: no page after 10 s: %w", what, i, err)
			}
		}
	}
	return readers, nil
}

// closePages closes every reader openPages opened.
func closePages(readers []*gtime.Reader) {
	for _, r := range readers {
		if r != nil {
			r.Close()
		}
	}
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
	cut       float64 // of them, ended by the round budget
}

func (t traffic) sub(u traffic) traffic {
	return traffic{ok: t.ok && u.ok, messages: t.messages - u.messages, exchanges: t.exchanges - u.exchanges, rounds: t.rounds - u.rounds, cut: t.cut - u.cut}
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
	// Summed over the children (a missing family is 0: nil's metrics are none).
	total := func(name string) (v float64) {
		for _, m := range fams[name].GetMetric() {
			v += m.GetCounter().GetValue()
		}
		return v
	}
	t.rounds = total("gclock_child_rounds_total")
	t.cut = total("gclock_child_rounds_cut_total")
	return t, nil
}

// evaluator accumulates the reads of every host's page (package eval).
type evaluator struct {
	gc     GclockConfig
	hosts  []*eval.Acc // after warm-up, per host
	series []SeriesPoint
	// This instant's counted reads, for the agreement check; the check
	// and the synced reads outside their bounds.
	now      []eval.Read
	agree    eval.Agreement
	outside  uint64
	unjudged uint64
	busy     uint64 // page reads that found the page busy (gtime.ReadPatiently)
}

func newEvaluator(n int, gc GclockConfig) *evaluator {
	e := &evaluator{gc: gc, hosts: make([]*eval.Acc, n)}
	for i := range e.hosts {
		e.hosts[i] = eval.New(e.options())
	}
	return e
}

// options: the lab's reads are few (a host read every EvalEvery for a few
// minutes), so their quantiles are exact.
func (e *evaluator) options() eval.Options {
	return eval.Options{Interval: int64(e.gc.EvalEvery), Exact: true}
}

// add takes host's read t at run time at; truth is global time in the
// scale the read claims, known false when that scale is not known (truth
// is then the evaluator's best guess, and a synced read is not judged).
func (e *evaluator) add(host int, at int64, counted bool, t gtime.Time, truth int64, known bool) {
	if e.gc.Trace {
		e.series = append(e.series, SeriesPoint{AtNs: at, Host: host, ErrNs: satmath.Sub(t.Est, truth),
			LoNs: satmath.Sub(t.Earliest, truth), HiNs: satmath.Sub(t.Latest, truth), Synced: t.Status == gtime.StatusSynced,
			Bounded: t.Status == gtime.StatusSynced || t.Status == gtime.StatusStale || t.Status == gtime.StatusDegraded})
	}
	if !counted {
		return
	}
	// The page has no separate monotonic estimate: Est never goes back.
	rd := eval.Read{At: at, Est: t.Est, Earliest: t.Earliest, Latest: t.Latest, Mono: t.Est,
		Status: eval.Status(t.Status), Truth: truth}
	e.hosts[host].Add(rd)
	e.now = append(e.now, rd)
	switch {
	case rd.Status != eval.Synced:
	case !known:
		e.unjudged++
	case truth < rd.Earliest || truth > rd.Latest:
		e.outside++
	}
}

// instant ends one evaluation instant: its synced reads must share a
// point.
func (e *evaluator) instant(at int64) {
	e.agree.Check(at, e.now)
	e.now = e.now[:0]
}

// gclockSummary lays out eval's summary of host id (-1: all but the
// reference) under the JSON names of GclockSummary.
func gclockSummary(id int, s eval.Summary) GclockSummary {
	return GclockSummary{ID: id, Summary: s.Errors, UnsyncedShare: s.UnsyncedShare,
		BoundCoverage: s.BoundCoverage, BoundCoverageAll: s.BoundCoverageAll, BoundWidthMeanNs: s.BoundWidthMeanNs,
		StatusShare: s.StatusShare, LongestNotSyncedS: float64(s.LongestNotSyncedNs) / 1e9}
}

func (e *evaluator) result(warm, final []traffic, warmS, steadyS float64) GclockResult {
	n := len(e.hosts)
	var res GclockResult
	res.Series = e.series
	all := eval.New(e.options())
	var conv, steady traffic
	var rounds, cut float64 // every host's, over the whole run
	haveTraffic := true
	for i := range n {
		s := gclockSummary(i, e.hosts[i].Summary())
		var c, st traffic
		if warm != nil && i < len(warm) && i < len(final) {
			c, st = warm[i], final[i].sub(warm[i])
		}
		if !c.ok || !st.ok {
			haveTraffic = false
		}
		s.MessagesPerNodePerS = eval.PerNodePerS(st.messages, 1, steadyS)
		s.ExchangesPerNodePerS = eval.PerNodePerS(st.exchanges, 1, steadyS)
		s.RoundsPerNodePerS = eval.PerNodePerS(st.rounds, 1, steadyS)
		s.ConvergenceExchangesPerNodePerS = eval.PerNodePerS(c.exchanges, 1, warmS)
		s.ConvergenceRoundsPerNodePerS = eval.PerNodePerS(c.rounds, 1, warmS)
		if i < len(final) && final[i].ok {
			s.Rounds, s.RoundsCut = final[i].rounds, final[i].cut
			rounds, cut = rounds+s.Rounds, cut+s.RoundsCut
		}
		conv.messages, conv.exchanges, conv.rounds = conv.messages+c.messages, conv.exchanges+c.exchanges, conv.rounds+c.rounds
		steady.messages, steady.exchanges, steady.rounds = steady.messages+st.messages, steady.exchanges+st.exchanges, steady.rounds+st.rounds
		res.Nodes = append(res.Nodes, s)
		if i == 0 {
			continue // the reference: its error is 0 by definition
		}
		all.Merge(e.hosts[i])
	}
	sum := gclockSummary(-1, all.Summary())
	sum.Rounds, sum.RoundsCut = rounds, cut
	if sync := n - 1; haveTraffic && sync > 0 {
		sum.MessagesPerNodePerS = eval.PerNodePerS(steady.messages, n, steadyS)
		sum.ExchangesPerNodePerS = eval.PerNodePerS(steady.exchanges, sync, steadyS)
		sum.RoundsPerNodePerS = eval.PerNodePerS(steady.rounds, sync, steadyS)
		sum.ConvergenceExchangesPerNodePerS = eval.PerNodePerS(conv.exchanges, sync, warmS)
		sum.ConvergenceRoundsPerNodePerS = eval.PerNodePerS(conv.rounds, sync, warmS)
	}
	res.Summary = sum
	res.Agreement, res.SyncedOutside, res.SyncedUnjudged = e.agree, e.outside, e.unjudged
	res.PageBusyReads = e.busy
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
