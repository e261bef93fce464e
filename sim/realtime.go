package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/internal/satmath"
)

// RealTimeSpec runs the served time scale (engine/realtime) on every node,
// as the daemon's real_time section does, and evaluates the served time
// against the true served scale. The reference's CLOCK_REALTIME is
// emulated here (Clock): the code under test only sees its samples.
type RealTimeSpec struct {
	// Mode is reference-realtime or mean-drift.
	Mode string `yaml:"mode" json:"mode"`
	// PollEvery is the time between queries and samples (0: 1s).
	PollEvery Duration `yaml:"poll_every" json:"poll_every"`
	// MaxSlewPPM is the fastest rate change of CLOCK_REALTIME the model
	// assumes (0: 500, the kernel PLL's limit).
	MaxSlewPPM float64 `yaml:"max_slew_ppm" json:"max_slew_ppm"`
	// Clock is the reference's emulated CLOCK_REALTIME.
	Clock WallClockSpec `yaml:"clock" json:"clock"`
	// Upstream, if set, emulates the reference kernel's adjtimex (the
	// daemon's real_time.upstream kernel) and UTC apart from
	// CLOCK_REALTIME: the truth becomes UTC. Unset: CLOCK_REALTIME is the
	// truth and no upstream is read (real_time.upstream none).
	Upstream *UpstreamSpec `yaml:"upstream" json:"upstream,omitempty"`
}

// UpstreamSpec is the reference kernel's view of its CLOCK_REALTIME, as a
// fake adjtimex returns it, and the hidden truth behind it.
type UpstreamSpec struct {
	// UTCOffset is CLOCK_REALTIME - UTC: the upstream's true error, which
	// only the evaluator sees.
	UTCOffset Duration `yaml:"utc_offset" json:"utc_offset"`
	// MaxError and EstError are what adjtimex reports (maxerror,
	// esterror); a MaxError below |UTCOffset| is a kernel that lies.
	MaxError Duration `yaml:"max_error" json:"max_error"`
	EstError Duration `yaml:"est_error" json:"est_error"`
	// Stratum is the upstream's stratum (chronyd's tracking; 0: unknown).
	Stratum int `yaml:"stratum" json:"stratum"`
	// Unsynced are the spans (since the start) in which the kernel says
	// STA_UNSYNC (maxerror 16 s, as Linux sets then).
	Unsynced []Span `yaml:"unsynced" json:"unsynced,omitempty"`
	// Leap announces a leap second (insert or delete) from Leap.At on.
	Leap *LeapSpec `yaml:"leap" json:"leap,omitempty"`
}

// Span is [From, To) since the start.
type Span struct {
	From Duration `yaml:"from" json:"from"`
	To   Duration `yaml:"to" json:"to"`
}

// LeapSpec is a leap second announced from At on.
type LeapSpec struct {
	At   Duration `yaml:"at" json:"at"`
	Kind string   `yaml:"kind" json:"kind"` // insert | delete
}

// unsyncedAt: the kernel says unsynchronised at d since the start.
func (u *UpstreamSpec) unsyncedAt(d int64) bool {
	for _, sp := range u.Unsynced {
		if d >= int64(sp.From) && d < int64(sp.To) {
			return true
		}
	}
	return false
}

// adjtimex is what the fake kernel reports at d since the start: all the
// code under test sees of the upstream.
func (u *UpstreamSpec) adjtimex(d int64) realtime.Upstream {
	up := realtime.Upstream{Known: true, Synced: true, MaxErr: int64(u.MaxError), EstErr: int64(u.EstError), Stratum: uint8(u.Stratum)}
	if u.unsyncedAt(d) {
		up = realtime.Upstream{Known: true, MaxErr: 16e9, EstErr: 16e9}
	}
	if u.Leap != nil && d >= int64(u.Leap.At) {
		up.Leap = realtime.LeapInsert
		if u.Leap.Kind == "delete" {
			up.Leap = realtime.LeapDelete
		}
	}
	return up
}

// WallClockSpec is the reference's CLOCK_REALTIME as NTP disciplines
// it: CLOCK_REALTIME - the reference's clock (ideal reading) is Offset,
// plus FreqPPM per ns since the start (the frequency correction), plus
// every step from its At on, plus every slew ramping at RatePPM from its
// At until Delta is absorbed (adjtime).
type WallClockSpec struct {
	Offset  Duration `yaml:"offset" json:"offset"`
	FreqPPM float64  `yaml:"freq_ppm" json:"freq_ppm"`
	// SampleNoise bounds the error of one CLOCK_REALTIME sample (uniform in
	// +-SampleNoise; 0: 100ns); the driver adds the clock's granularity and
	// jitter to the half-width it passes on.
	SampleNoise Duration   `yaml:"sample_noise" json:"sample_noise"`
	Steps       []WallStep `yaml:"steps" json:"steps,omitempty"`
	Slews       []WallSlew `yaml:"slews" json:"slews,omitempty"`
}

// WallStep steps CLOCK_REALTIME by Delta at At (since the start).
type WallStep struct {
	At    Duration `yaml:"at" json:"at"`
	Delta Duration `yaml:"delta" json:"delta"`
}

// WallSlew slews CLOCK_REALTIME by Delta from At on, at RatePPM.
type WallSlew struct {
	At      Duration `yaml:"at" json:"at"`
	Delta   Duration `yaml:"delta" json:"delta"`
	RatePPM float64  `yaml:"rate_ppm" json:"rate_ppm"`
}

func (s *RealTimeSpec) mode() realtime.Mode {
	if s.Mode == "mean-drift" {
		return realtime.ModeMeanDrift
	}
	return realtime.ModeReference
}

func (s *RealTimeSpec) poll() int64 {
	if s.PollEvery == 0 {
		return int64(time.Second)
	}
	return int64(s.PollEvery)
}

func (s *RealTimeSpec) maxSlew() float64 {
	if s.MaxSlewPPM == 0 {
		return 500e-6
	}
	return s.MaxSlewPPM * 1e-6
}

func (s *RealTimeSpec) noise() int64 {
	if s.Clock.SampleNoise == 0 {
		return 100
	}
	return int64(s.Clock.SampleNoise)
}

// validate adds the real_time section's errors.
func (s *RealTimeSpec) validate(bad func(field, format string, a ...any)) {
	if s.Mode != "reference-realtime" && s.Mode != "mean-drift" {
		bad("real_time.mode", "unknown mode %q (reference-realtime, mean-drift)", s.Mode)
	}
	if s.PollEvery < 0 {
		bad("real_time.poll_every", "must be >= 0 (0: 1s), got %v", s.PollEvery)
	}
	if !finiteIn(s.MaxSlewPPM, 0, 1e5) {
		bad("real_time.max_slew_ppm", "%v out of range [0, 100000] (0: 500)", s.MaxSlewPPM)
	}
	if u := s.Upstream; u != nil {
		if s.mode() != realtime.ModeReference {
			bad("real_time.upstream", "only with mode reference-realtime (mean-drift serves its own chain, not UTC)")
		}
		if u.MaxError < 0 || u.MaxError > Duration(16*time.Second) {
			bad("real_time.upstream.max_error", "%v out of range [0, 16s]", u.MaxError)
		}
		if u.EstError < 0 || u.EstError > Duration(16*time.Second) {
			bad("real_time.upstream.est_error", "%v out of range [0, 16s]", u.EstError)
		}
		if u.Stratum < 0 || u.Stratum > 15 {
			bad("real_time.upstream.stratum", "%d out of range [0, 15]", u.Stratum)
		}
		for i, sp := range u.Unsynced {
			if sp.From < 0 || sp.To <= sp.From {
				bad(fmt.Sprintf("real_time.upstream.unsynced[%d]", i), "want 0 <= from < to, got %v..%v", sp.From, sp.To)
			}
		}
		if l := u.Leap; l != nil && (l.At < 0 || (l.Kind != "insert" && l.Kind != "delete")) {
			bad("real_time.upstream.leap", "at %v kind %q: want at >= 0 and kind insert or delete", l.At, l.Kind)
		}
	}
	c := &s.Clock
	if !finiteIn(c.FreqPPM, -1000, 1000) {
		bad("real_time.clock.freq_ppm", "%v out of range [-1000, 1000]", c.FreqPPM)
	}
	if c.SampleNoise < 0 {
		bad("real_time.clock.sample_noise", "must be >= 0")
	}
	for i, st := range c.Steps {
		if st.At < 0 {
			bad(fmt.Sprintf("real_time.clock.steps[%d].at", i), "must be >= 0")
		}
	}
	for i, sl := range c.Slews {
		f := fmt.Sprintf("real_time.clock.slews[%d]", i)
		if sl.At < 0 {
			bad(f+".at", "must be >= 0")
		}
		if !(sl.RatePPM > 0) || sl.RatePPM > 1e5 {
			bad(f+".rate_ppm", "%v out of range (0, 100000]", sl.RatePPM)
		}
	}
}

// offsetAt is the emulated CLOCK_REALTIME minus the reference's ideal
// clock at truth t (only the evaluator and the sampling driver read it).
func (c *WallClockSpec) offsetAt(t int64) int64 {
	d := t - Origin
	o := int64(c.Offset) + int64(math.Round(c.FreqPPM*1e-6*float64(d)))
	for _, st := range c.Steps {
		if d >= int64(st.At) {
			o += int64(st.Delta)
		}
	}
	for _, sl := range c.Slews {
		if e := d - int64(sl.At); e > 0 {
			done := int64(sl.RatePPM * 1e-6 * float64(e))
			a := int64(sl.Delta)
			if a < 0 {
				o -= min(-a, done)
			} else {
				o += min(a, done)
			}
		}
	}
	return o
}

// rtNode is one node's real-time state in a run.
type rtNode struct {
	sc   *realtime.Scale
	gen  uint32
	page pageEmu
}

// pageEmu publishes like the daemon does (gtime.Update.Continuous) at every
// evaluation: the page line through the served readings now and span
// later, its value continuing the previous page's (the correction decays
// at the slew rate) and its bounds widened to hold it.
type pageEmu struct {
	have       bool
	x, y, corr int64
	k          float64
}

// rtRun is the run's real-time part and its evaluation.
type rtRun struct {
	spec   *RealTimeSpec
	nodes  []rtNode
	rng    *rand.Rand
	span   int64
	slew   float64 // the page's slew rate (engine.MaxSlewRate)
	drift  float64
	wander float64 // engine.MaxWander, for realtime.Rate
	// sampled: the truth time of each reference sample, by its global time
	// (the evaluator's: which models predate a step).
	sampled map[int64]int64
	res     RealTimeResult
}

// RealTimeResult is the evaluation of the served time scale: every
// synced reading of every node after the warm-up, as the page serves it
// (publish at each evaluation), against the true served scale (the
// emulated CLOCK_REALTIME, or the reference's chain of mean-drift segments
// at the true global time).
type RealTimeResult struct {
	Mode string `json:"mode"`
	// Reads are the synced readings counted, Covered those whose bounds
	// held the true served time; Coverage = Covered/Reads.
	Reads    int     `json:"reads"`
	Covered  int     `json:"covered"`
	Coverage float64 `json:"coverage"`
	// Blind are readings left out: after a step of CLOCK_REALTIME, until
	// the node has a model sampled after it (nothing can know it before).
	Blind int `json:"blind"`
	// Unserved are synced engine readings the scale could not map (no
	// model yet): the page says unsynced.
	Unserved int `json:"unserved"`
	// MaxAbsErr is the largest |served - truth| (ns) over Reads; MaxWidth
	// the widest bounds.
	MaxAbsErr int64 `json:"max_abs_err"`
	MaxWidth  int64 `json:"max_width"`
	// Backward counts readings below the node's previous one; MaxRate is
	// the largest (served change)/(local change) between two readings of a
	// node, which continuity keeps under 1 + drifts + the slew rate.
	Backward int     `json:"backward"`
	MaxRate  float64 `json:"max_rate"`
	MinRate  float64 `json:"min_rate"`
	// From the Scales: the reference's detected CLOCK_REALTIME jumps, the
	// nodes' polls and failed polls, the reference's segments (mean-drift)
	// and the messages sent.
	Jumps     uint64 `json:"jumps"`
	Polls     uint64 `json:"polls"`
	PollFails uint64 `json:"poll_fails"`
	Segments  int    `json:"segments"`
	Messages  uint64 `json:"messages"`
	// With an upstream: UpstreamUnserved counts synced engine readings not
	// served because the node knew the upstream unsynchronised;
	// UpstreamLate the synced reads served inside an unsynced span later
	// than one poll plus a second after it began (the node cannot know
	// sooner: must be 0); LeapNodes the nodes that know the announced leap
	// at the end.
	UpstreamUnserved int `json:"upstream_unserved,omitempty"`
	UpstreamLate     int `json:"upstream_late,omitempty"`
	LeapNodes        int `json:"leap_nodes,omitempty"`
	// Mean is the reference's mean rate (mean-drift), TrueMean the mean of
	// the clocks' rates against the reference's at the end.
	Mean     float64 `json:"mean,omitempty"`
	TrueMean float64 `json:"true_mean,omitempty"`

	lastOut, lastX []int64
}

// estimator is engine.Node's side-effect-free read.
type estimator interface{ Estimate(local int64) engine.Time }

func (r *runner) setupRealTime(ecfg engine.Config) error {
	sp := r.sc.RealTime
	if sp == nil {
		return nil
	}
	rr := &rtRun{spec: sp, nodes: make([]rtNode, len(r.nodes)),
		rng:  rand.New(rand.NewPCG(mix64(r.sc.Seed^0x7ea1), r.sc.Seed)),
		span: max(int64(r.sc.Engine.StaleAfter), int64(time.Second)), slew: ecfg.MaxSlewRate, drift: ecfg.MaxDrift, wander: ecfg.MaxWander,
		sampled: map[int64]int64{}}
	rr.res = RealTimeResult{Mode: sp.Mode, MinRate: math.Inf(1),
		lastOut: make([]int64, len(r.nodes)), lastX: make([]int64, len(r.nodes))}
	for i := range rr.nodes {
		sc, err := realtime.New(realtime.Config{Mode: sp.mode(), ID: engine.NodeID(i), Reference: engine.NodeID(r.ref),
			Poll: sp.poll(), Lead: 2*rr.span + 2*sp.poll(), MaxSlew: sp.maxSlew(), MaxDrift: ecfg.MaxDrift,
			Clocks: len(r.nodes)}, r.log.With("node", i))
		if err != nil {
			return fmt.Errorf("real_time of node %d: %w", i, err)
		}
		rr.nodes[i].sc = sc
		rr.res.lastOut[i] = math.MinInt64
		r.push(event{t: Origin + r.schedNoise(Origin), kind: evRTTick, node: int32(i)})
	}
	r.rt = rr
	return nil
}

func (r *runner) rtTick(e event) {
	rn := &r.rt.nodes[e.node]
	if e.gen != rn.gen {
		return
	}
	n := &r.nodes[e.node]
	local := n.clk.Read(e.t)
	in := realtime.Inputs{Earliest: math.MinInt64}
	if int(e.node) != r.ref {
		if es, ok := n.eng.(estimator); ok {
			in.Earliest = es.Estimate(local).Earliest
			if r.rt.spec.mode() == realtime.ModeMeanDrift {
				in.Rate, in.RateErr, _ = realtime.Rate(es.Estimate, local, r.rt.wander)
			}
		}
	}
	rn.sc.Tick(local, in)
	r.rtDrain(int(e.node))
}

func (r *runner) rtDeliver(e event) {
	n := &r.nodes[e.node]
	r.rt.nodes[e.node].sc.Step(*e.rtm, n.clk.Read(e.t)) // refusals are counted and logged by the Scale
	r.rtDrain(int(e.node))
}

// rtDrain carries a Scale's output: the reference's CLOCK_REALTIME sample
// (the emulation: the code under test sees the sample only), messages
// over the links, the timer.
func (r *runner) rtDrain(id int) {
	rn := &r.rt.nodes[id]
	n := &r.nodes[id]
	rd := rn.sc.Ready()
	if rd.Sample {
		// The driver reads its clock (granularity, jitter) and
		// CLOCK_REALTIME (within +-noise) at one instant; its half-width
		// holds both errors.
		g := n.clk.Read(r.now)
		noise := r.rt.spec.noise()
		e := int64((2*r.rt.rng.Float64() - 1) * float64(noise))
		real := n.clk.Ideal(r.now) + r.rt.spec.Clock.offsetAt(r.now) + e
		if u := r.rt.spec.Upstream; u != nil {
			rn.sc.SetUpstream(u.adjtimex(r.now - Origin))
		}
		rn.sc.Sample(g, real-g, noise+int64(r.sc.Clocks.Granularity+r.sc.Clocks.Jitter))
		if len(r.rt.spec.Clock.Steps) > 0 {
			r.rt.sampled[g] = r.now
		}
		rd.NextTick = rn.sc.Ready().NextTick
	}
	for i := range rd.Messages {
		m := rd.Messages[i]
		to := int(m.To)
		if to < 0 || to >= len(r.nodes) || to == id {
			continue
		}
		r.rt.res.Messages++
		depart := r.now + r.schedNoise(r.now)
		r.buf = r.links.Transmit(r.rng, id, to, r.sc.loadAt(depart-Origin).Load, r.buf)
		for _, d := range r.buf {
			arrive := depart + d
			r.push(event{t: arrive + r.schedNoise(arrive), kind: evRTDeliver, node: int32(to), rtm: &m})
		}
	}
	rn.gen++
	t := max(n.clk.TruthAt(rd.NextTick), r.now+pastTickDelay)
	r.push(event{t: t + r.schedNoise(t), kind: evRTTick, node: int32(id), gen: rn.gen})
}

// rtTruth is the true served time at truth t.
func (r *runner) rtTruth(t int64) (int64, bool) {
	ref := r.nodes[r.ref].clk
	if r.rt.spec.mode() == realtime.ModeReference {
		v := ref.Ideal(t) + r.rt.spec.Clock.offsetAt(t)
		if u := r.rt.spec.Upstream; u != nil {
			v -= int64(u.UTCOffset) // UTC
		}
		return v, true
	}
	return r.rt.nodes[r.ref].sc.Map(ref.Ideal(t))
}

// rtEvaluate publishes node i's served time at this evaluation, as its
// daemon would, and checks it against the truth. tm is the engine's
// reading at local.
func (r *runner) rtEvaluate(i int, local int64, tm engine.Time, counted bool) {
	rr := r.rt
	rn := &rr.nodes[i]
	es, ok := r.nodes[i].eng.(estimator)
	ts := []engine.Time{tm, tm}
	if ok {
		ts[1] = es.Estimate(local + rr.span)
	} else {
		ts[1].Est += rr.span
	}
	if tm.Status == engine.StatusUnsynced || !rn.sc.Apply(ts) {
		if counted && tm.Status == engine.StatusSynced {
			rr.res.Unserved++
			if up, ok := rn.sc.Upstream(); ok && up.Problem() != "" {
				rr.res.UpstreamUnserved++
			}
		}
		rn.page.have = false // the page says unsynced; the next publish starts afresh
		return
	}
	p := &rn.page
	s := ts[0]
	k := float64(ts[1].Est-s.Est) / float64(rr.span)
	if p.have {
		dx := local - p.x
		corr := p.corr
		if dec := rr.slew * float64(dx); dec >= math.Abs(float64(corr)) {
			corr = 0
		} else if corr > 0 {
			corr -= int64(dec)
		} else {
			corr += int64(dec)
		}
		prev := p.y + int64(math.Round(p.k*float64(dx))) + corr
		if prev < s.Earliest || prev > s.Latest {
			// gtime widens the half-width by the excess, both sides.
			hw := max(s.Est-s.Earliest, s.Latest-s.Est)
			gap := prev - s.Est
			if gap < 0 {
				gap = -gap
			}
			s.Earliest -= gap - hw + 1
			s.Latest += gap - hw + 1
		}
		p.corr = prev - s.Est
		s.Est = prev
	} else {
		p.corr = 0
	}
	p.have, p.x, p.y, p.k = true, local, s.Est-p.corr, k
	if !counted || tm.Status != engine.StatusSynced {
		return
	}
	res := &rr.res
	if last := res.lastOut[i]; last != math.MinInt64 {
		if s.Est < last {
			res.Backward++
		}
		if dx := local - res.lastX[i]; dx > 0 {
			rate := float64(s.Est-last) / float64(dx)
			res.MaxRate, res.MinRate = max(res.MaxRate, rate), min(res.MinRate, rate)
		}
	}
	res.lastOut[i], res.lastX[i] = s.Est, local
	truth, ok := r.rtTruth(r.now)
	if !ok {
		return
	}
	if rr.spec.mode() == realtime.ModeReference && r.rtBlind(i) {
		res.Blind++
		return
	}
	if u := rr.spec.Upstream; u != nil && u.unsyncedAt(r.now-Origin) && u.unsyncedAt(r.now-Origin-rr.spec.poll()-int64(time.Second)) {
		res.UpstreamLate++
	}
	res.Reads++
	if s.Earliest <= truth && truth <= s.Latest {
		res.Covered++
	}
	res.MaxAbsErr = max(res.MaxAbsErr, satmath.Abs(satmath.Sub(s.Est, truth)))
	res.MaxWidth = max(res.MaxWidth, satmath.Sub(s.Latest, s.Earliest))
}

// rtBlind: a step of CLOCK_REALTIME happened and node i's model was
// sampled before it.
func (r *runner) rtBlind(i int) bool {
	st := r.rt.nodes[i].sc.Stats()
	taken, ok := r.rt.sampled[st.ModelAt]
	for _, s := range r.rt.spec.Clock.Steps {
		at := Origin + int64(s.At)
		if at <= r.now && (!st.HaveModel || !ok || taken < at) {
			return true
		}
	}
	return false
}

// rtResult completes the real-time result at the end of the run.
func (r *runner) rtResult() *RealTimeResult {
	if r.rt == nil {
		return nil
	}
	res := r.rt.res
	if res.Reads > 0 {
		res.Coverage = float64(res.Covered) / float64(res.Reads)
	}
	if math.IsInf(res.MinRate, 1) {
		res.MinRate = 0
	}
	for i, rn := range r.rt.nodes {
		st := rn.sc.Stats()
		res.Polls += st.Polls
		res.PollFails += st.PollFails
		if i == r.ref {
			res.Jumps, res.Segments, res.Mean = st.Jumps, st.Segments, st.Mean
		}
		if up, ok := rn.sc.Upstream(); ok && up.Leap != realtime.LeapNone {
			res.LeapNodes++
		}
	}
	if res.Mode == "mean-drift" {
		// The clocks' rates against the reference's over the last second.
		ref := r.nodes[r.ref].clk
		t1 := r.now
		t0 := t1 - int64(time.Second)
		dr := float64(ref.Ideal(t1) - ref.Ideal(t0))
		sum := 0.0
		for i := range r.nodes {
			c := r.nodes[i].clk
			sum += float64(c.Ideal(t1)-c.Ideal(t0)) / dr
		}
		res.TrueMean = sum / float64(len(r.nodes))
	}
	res.lastOut, res.lastX = nil, nil
	return &res
}
