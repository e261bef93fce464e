package realtime

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"

	"github.com/gclock/gclock/engine"
)

// Mode is what the served time scale counts. The values are those of the
// wire (wire.RealTime.Mode).
type Mode uint8

// Modes.
const (
	// ModeNone: no scale (in a MsgInfo: the reference has no model yet).
	ModeNone Mode = iota
	// ModeReference: the reference's CLOCK_REALTIME (reference-realtime).
	ModeReference
	// ModeMeanDrift: the mean rate of all the cluster's clocks (mean-drift).
	ModeMeanDrift
)

// String is the mode's configuration name.
func (m Mode) String() string {
	switch m {
	case ModeNone:
		return "none"
	case ModeReference:
		return "reference-realtime"
	case ModeMeanDrift:
		return "mean-drift"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// MsgType is the kind of a real-time message.
type MsgType uint8

// Messages.
const (
	// MsgQuery: a node reports its rate and asks the reference for its
	// model (wire.OpRealTimeQuery).
	MsgQuery MsgType = iota + 1
	// MsgInfo: the reference's answer, the model or one mean-drift segment
	// (wire.OpRealTimeInfo).
	MsgInfo
)

// Message is what Scales send each other; its fields are those of
// wire.RealTime.
type Message struct {
	Type     MsgType
	From, To engine.NodeID
	// Seq numbers a node's queries; an info carries the one it answers.
	Seq uint32

	// Query: the sender's rate against the reference (d local / d global)
	// and a bound on its error (Rate 0: none yet); After: the At of the
	// newest mean-drift segment the sender knows (math.MinInt64: none).
	Rate, RateErr float64
	After         int64

	// Info: Mode (ModeNone: no model yet); At, a global time; Offset, the
	// value at At (reference-realtime: CLOCK_REALTIME - g; mean-drift: the
	// served time at At); Slope its rate per ns of g (mean-drift: M); Err
	// and SlopeErr bound Offset at At and Slope; Prev (mean-drift): the At
	// of the segment before, math.MinInt64 for the first.
	Mode                  Mode
	At, Offset, Err, Prev int64
	Slope, SlopeErr       float64
	// Up (reference-realtime): the state of the reference's CLOCK_REALTIME
	// read with the model's sample (zero: not read).
	Up Upstream
}

// Check names the first field no sender produces (the limits wire's decoder
// applies).
func (m *Message) Check() error {
	fin := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	bad := func(field string, v any) error {
		return fmt.Errorf("real-time message from %d: field %s = %v: %w", m.From, field, v, ErrMessage)
	}
	switch m.Type {
	case MsgQuery:
		switch {
		case !fin(m.Rate) || m.Rate < 0:
			return bad("rate", m.Rate)
		case !fin(m.RateErr) || m.RateErr < 0:
			return bad("rate_err", m.RateErr)
		}
	case MsgInfo:
		switch {
		case m.Mode > ModeMeanDrift:
			return bad("mode", m.Mode)
		case !fin(m.Slope):
			return bad("slope", m.Slope)
		case m.Err < 0:
			return bad("err", m.Err)
		case !fin(m.SlopeErr) || m.SlopeErr < 0:
			return bad("slope_err", m.SlopeErr)
		case m.Mode != ModeReference && m.Up != (Upstream{}):
			return bad("up", "set outside reference-realtime")
		}
		if err := m.Up.Check(); err != nil {
			return fmt.Errorf("real-time message from %d: %w", m.From, err)
		}
	default:
		return bad("type", m.Type)
	}
	return nil
}

// ErrMessage is wrapped by the errors of Check and Step for messages
// refused.
var ErrMessage = errors.New("real-time message refused")

const (
	// maxSegments is how many mean-drift segments a node keeps.
	maxSegments = 16
	// maxSpan is the largest |g - At| the models evaluate (about 146
	// years): beyond it a reading is refused rather than overflowed.
	maxSpan = int64(1) << 62
	// failWarn: this many unanswered queries in a row are logged as a
	// warning (once per streak: the page's bounds are widening meanwhile).
	failWarn = 5
	// reportAge: a rate report older than this many polls is forgotten.
	reportAge = 5
)

// Config is one node's Scale. Times are ns of the local clock, which on the
// reference is global time.
type Config struct {
	Mode      Mode
	ID        engine.NodeID
	Reference engine.NodeID
	// Poll is the time between queries (nodes) and samples or mean updates
	// (the reference).
	Poll int64
	// SampleEvery (reference-realtime, the reference): the time between
	// samples of CLOCK_REALTIME; 0 means Poll. With the kernel's rate known
	// (Upstream.RateKnown) the model's error is MaxSlew x 2 x SampleEvery
	// plus the read's, so a few ms keep it within microseconds.
	SampleEvery int64
	// Lead (mean-drift): a segment takes effect this long after it is made;
	// at least the time every node takes to learn it (the daemon: 2 x its
	// publication span + 2 x Poll).
	Lead int64
	// MaxSlew (reference-realtime): the fastest NTP may change
	// CLOCK_REALTIME's rate, per ns (500e-6: the kernel PLL's limit).
	MaxSlew float64
	// MaxDrift: the engine's worst-case |skew|, per ns; reports beyond
	// 2*MaxDrift are refused, means are clamped into 1 +- 2*MaxDrift.
	MaxDrift float64
	// Clocks is the number of clocks in the cluster (mean-drift).
	Clocks int
	// ReplyTimeout: a query unanswered this long has failed; 0 means
	// max(Poll, 1 s).
	ReplyTimeout int64
	// MaxAge (reference-realtime): a model of another node's
	// CLOCK_REALTIME older than this (global ns from its sample) is no
	// longer served: its reference stopped answering and no other serves
	// UTC (Unserved says so). 0: served however old, its bounds growing.
	MaxAge int64
}

// Validate names the first field out of range.
func (c *Config) Validate() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("realtime config field %s = %v: out of range", field, v)
	}
	switch {
	case c.Mode != ModeReference && c.Mode != ModeMeanDrift:
		return bad("Mode", c.Mode)
	case c.Poll <= 0:
		return bad("Poll", c.Poll)
	case c.SampleEvery < 0:
		return bad("SampleEvery", c.SampleEvery)
	case c.Lead < 0:
		return bad("Lead", c.Lead)
	case !(c.MaxSlew >= 0) || math.IsInf(c.MaxSlew, 0):
		return bad("MaxSlew", c.MaxSlew)
	case !(c.MaxDrift >= 0) || c.MaxDrift >= 1:
		return bad("MaxDrift", c.MaxDrift)
	case c.ReplyTimeout < 0:
		return bad("ReplyTimeout", c.ReplyTimeout)
	case c.MaxAge < 0:
		return bad("MaxAge", c.MaxAge)
	}
	return nil
}

// Inputs are what a node's driver measures for a Tick; the reference's
// driver passes the zero value.
type Inputs struct {
	// Rate, RateErr: the node's rate against global time (d local / d g)
	// and its bound (Rate); 0: not known.
	Rate, RateErr float64
	// Earliest is the engine's lower bound of global time now
	// (math.MinInt64: not known).
	Earliest int64
}

// Ready is a Scale's output since the last call.
type Ready struct {
	Messages []Message
	// Sample: the driver must take a sample of CLOCK_REALTIME - g now and
	// pass it to Sample.
	Sample bool
	// Moved (the reference): a sample changed the model's slope or found
	// a jump; what was published from the old model must be republished
	// now (its error allowance covers one sample interval more, no longer).
	Moved bool
	// NextTick is the local time at which Tick must next be called.
	NextTick int64
}

// Stats are a Scale's counters.
type Stats struct {
	Polls, PollFails, Replies, Jumps, Refused uint64
	// Retargets counts the reference changes (Retarget).
	Retargets     uint64
	Segments      int
	Mean, MeanErr float64
	// ModelAt is the global time of the reference-realtime model's sample
	// (HaveModel false: none yet).
	ModelAt   int64
	HaveModel bool
}

// offModel is CLOCK_REALTIME minus global time as a line from At, with a
// bound that grows from Err at SlopeErr per ns.
type offModel struct {
	At, Offset, Err int64
	Slope, SlopeErr float64
	// Up is the upstream state read with the sample at At.
	Up Upstream
	// Ref is the node whose CLOCK_REALTIME this is (failover.go).
	Ref engine.NodeID
}

func (m offModel) at(g int64) (off, err int64, ok bool) {
	d, ok := span(g, m.At)
	if !ok {
		return 0, 0, false
	}
	fd := float64(d)
	return m.Offset + int64(math.Round(m.Slope*fd)), m.Err + int64(math.Ceil(m.SlopeErr*math.Abs(fd))), true
}

// span is g - at when it is small enough for the models' arithmetic.
func span(g, at int64) (int64, bool) {
	d := g - at
	if (at > 0 && d > g) || (at < 0 && d < g) {
		return 0, false // wrapped
	}
	return d, d > -maxSpan && d < maxSpan
}

// segment is one piece of the mean-drift time scale: served(g) = A +
// (g-At) + (M-1)(g-At) from At on. Prev is the At of the segment before
// (math.MinInt64 for the first); MErr bounds |M - the true mean| when it
// was made (information only: served time is defined by M).
type segment struct {
	At, A, Prev int64
	M, MErr     float64
}

func (s segment) at(g int64) (int64, bool) {
	d, ok := span(g, s.At)
	if !ok {
		return 0, false
	}
	return s.A + d + int64(math.Round((s.M-1)*float64(d))), true
}

type rateReport struct {
	rate, err float64
	at        int64 // reference's local time of the report
}

// Scale is one node's real-time state: the reference's model and segments,
// or a node's copy of them.
type Scale struct {
	cfg   Config
	isRef bool
	log   *slog.Logger
	out   Ready

	started  bool
	nextPoll int64
	// a node's query in flight
	pending  bool
	pendSeq  uint32
	pendGK   int64 // global time is at least this when the reference answers
	pendAt   int64 // local time of the query (global time was at least pendGK then)
	deadline int64
	seq      uint32

	// reference-realtime: the model (reference: made from its samples;
	// node: the latest received) and, on the reference, the last sample.
	off      offModel
	haveOff  bool
	last     offModel // the last sample (Slope unused)
	haveLast bool
	// mean-drift: the chain of segments; segs[0] is the very first segment
	// of the reference when first is true. horizon: the chain is complete
	// up to this global time.
	segs    []segment
	first   bool
	horizon int64
	reports map[engine.NodeID]rateReport
	mean    float64
	meanErr float64

	// up is the upstream state the next sample carries (SetUpstream).
	up Upstream

	st         Stats
	failStreak int
	refusing   bool // the last reply was refused

	// eager: since Retarget, no model of the new reference's
	// CLOCK_REALTIME yet: a node polls, the reference samples, more often
	// (failover.go). ho slews served time from the old reference's model
	// to the new one's.
	eager bool
	ho    handover
	// eagerUntil (a node): it keeps polling eagerly until this local
	// time, one Poll after Retarget, while the new reference's slope is
	// measured over short spans (ramp). ramp (the new reference): its
	// slope is measured from anchor, its first sample, over spans that
	// double from SampleEvery until half a Poll, instead of between the
	// last two samples: a slope over 5 ms carries the two reads' error
	// divided by 5 ms (200-500 ppm, as much as max_slew_ppm again) for a
	// whole Poll.
	eagerUntil int64
	ramp       bool
	anchor     offModel
}

// New makes a Scale. A nil logger discards.
func New(cfg Config, logger *slog.Logger) (*Scale, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReplyTimeout == 0 {
		cfg.ReplyTimeout = max(cfg.Poll, 1e9)
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = cfg.Poll
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Scale{cfg: cfg, isRef: cfg.ID == cfg.Reference, log: logger,
		reports: map[engine.NodeID]rateReport{}, horizon: math.MinInt64}, nil
}

// Mode is the configured mode.
func (s *Scale) Mode() Mode { return s.cfg.Mode }

// Stats are the counters and the mean.
func (s *Scale) Stats() Stats {
	st := s.st
	st.Segments, st.Mean, st.MeanErr = len(s.segs), s.mean, s.meanErr
	st.ModelAt, st.HaveModel = s.off.At, s.haveOff
	return st
}

// Ready returns the output since the last call.
func (s *Scale) Ready() Ready {
	r := s.out
	s.out = Ready{}
	r.NextTick = s.nextPoll
	if s.pending {
		r.NextTick = min(r.NextTick, s.deadline)
	}
	if r.NextTick == 0 {
		r.NextTick = 1
	}
	return r
}

// Tick runs what is due at local: the reference samples at once and every
// Poll (reference-realtime, and the first mean-drift segment) or updates
// the mean; a node counts an unanswered query as failed and polls every
// Poll, its first poll one Poll after the first Tick.
func (s *Scale) Tick(local int64, in Inputs) {
	if !s.started {
		s.started = true
		s.nextPoll = local
		if !s.isRef {
			s.nextPoll = satAdd(local, s.cfg.Poll)
		}
	}
	if s.pending && local >= s.deadline {
		s.pending = false
		s.st.PollFails++
		s.failStreak++
		s.log.Debug("real-time query unanswered", "reference", s.cfg.Reference, "seq", s.pendSeq)
		if s.failStreak == failWarn {
			s.log.Warn("the reference has not answered 5 real-time queries in a row (is its real_time.mode the same?)",
				"reference", s.cfg.Reference, "mode", s.cfg.Mode)
		}
	}
	if local < s.nextPoll {
		return
	}
	s.nextPoll = satAdd(local, s.cfg.Poll)
	if s.eager || (!s.isRef && local < s.eagerUntil) {
		s.nextPoll = satAdd(local, s.eagerEvery())
	}
	if s.isRef {
		if s.cfg.Mode == ModeReference && s.up.RateKnown {
			// The slope is the kernel's: sample often. Without it the
			// slope is measured over Poll.
			s.nextPoll = satAdd(local, s.cfg.SampleEvery)
		}
		if s.cfg.Mode == ModeReference || len(s.segs) == 0 {
			s.out.Sample = true
			return
		}
		s.updateMean(local, 0, 0, false)
		return
	}
	if s.pending {
		return // one query at a time: the one in flight times out first
	}
	s.seq++
	q := Message{Type: MsgQuery, From: s.cfg.ID, To: s.cfg.Reference, Seq: s.seq, After: math.MinInt64}
	gk := in.Earliest
	if s.cfg.Mode == ModeMeanDrift {
		if in.Rate > 0 && !math.IsNaN(in.RateErr) && !math.IsInf(in.Rate+in.RateErr, 0) {
			q.Rate, q.RateErr = in.Rate, in.RateErr
		}
		if len(s.segs) > 0 {
			q.After = s.segs[len(s.segs)-1].At
		}
	}
	s.pending, s.pendSeq, s.pendGK, s.pendAt = true, s.seq, gk, local
	s.deadline = satAdd(local, s.cfg.ReplyTimeout)
	s.st.Polls++
	s.out.Messages = append(s.out.Messages, q)
}

// Sample hands the reference a sample of CLOCK_REALTIME - g: the offset
// off, valid within +-halfWidth, at global time g (its driver measures
// it; the read error of g belongs in halfWidth). Only the reference's
// Scale uses it: reference-realtime feeds the model, mean-drift starts its
// chain from the first one.
func (s *Scale) Sample(g, off, halfWidth int64) {
	if !s.isRef {
		return
	}
	if s.cfg.Mode == ModeMeanDrift {
		if len(s.segs) == 0 {
			s.updateMean(g, g, off, true)
		}
		return
	}
	e := max(halfWidth, 0)
	smp := offModel{At: g, Offset: off, Err: e, Up: s.up, Ref: s.cfg.ID}
	if s.haveOff && s.off.Ref == s.cfg.ID {
		pred, perr, ok := s.off.at(g)
		if d := off - pred; !ok || d > perr+e || d < -perr-e {
			// A step or a slew faster than MaxSlew: restart from this
			// sample with the old slope (a step does not change NTP's
			// frequency); the next sample measures it again.
			s.st.Jumps++
			s.log.Warn("reference CLOCK_REALTIME moved outside its bounds (step or fast slew): served time slews to it",
				"moved_ns", d, "bound_ns", perr+e, "jumps", s.st.Jumps)
			s.off = offModel{At: g, Offset: off, Err: e, Slope: s.off.Slope, SlopeErr: s.cfg.MaxSlew, Up: s.up, Ref: s.cfg.ID}
			if s.up.RateKnown {
				s.off.Slope = s.up.Rate
			}
			s.last, s.haveLast = smp, true
			s.anchor = smp // a ramp measures from here on
			s.out.Moved = true
			return
		}
	}
	if s.ramp && !s.haveLast {
		s.anchor = smp
	}
	switch {
	case s.up.RateKnown:
		// The kernel runs CLOCK_REALTIME at 1 + Rate of the local clock
		// until its NTP daemon calls adjtimex again: the line is exact
		// but for KernelRateErr, and a change of rate (at most MaxSlew)
		// made right after this sample is seen at the next one, one
		// SampleEvery later, when the page is republished (Moved): the
		// model's error holds MaxSlew over two sample intervals.
		s.ramp = false // the slope is the kernel's, not measured
		allow := int64(math.Ceil(s.cfg.MaxSlew * float64(2*s.cfg.SampleEvery)))
		if s.haveOff && s.off.Slope != s.up.Rate {
			s.out.Moved = true
		}
		s.nextPoll = min(s.nextPoll, satAdd(g, s.cfg.SampleEvery)) // g is the local clock here
		s.setModel(offModel{At: g, Offset: off, Err: e + allow, Slope: s.up.Rate, SlopeErr: KernelRateErr, Up: s.up, Ref: s.cfg.ID}, g)
	case s.haveLast && g > s.last.At:
		base := s.last
		if s.ramp && g > s.anchor.At {
			// After a takeover: the slope over the span since the first
			// sample, the next sample once the span has doubled, the
			// regular Poll once it reaches half a Poll (the model's age
			// never exceeds the span it was measured over).
			base = s.anchor
			span := g - base.At
			if 2*span >= s.cfg.Poll {
				s.ramp = false
			} else {
				s.nextPoll = min(s.nextPoll, satAdd(g, max(span, s.cfg.SampleEvery)))
			}
			s.out.Moved = true
		}
		fd := float64(g - base.At)
		s.setModel(offModel{At: g, Offset: off, Err: e,
			Slope:    float64(off-base.Offset) / fd,
			SlopeErr: s.cfg.MaxSlew + float64(e+base.Err)/fd, Up: s.up, Ref: s.cfg.ID}, g)
	case s.eager:
		// The first sample of a new reference: the second one, which
		// gives the slope, comes one SampleEvery later.
		s.nextPoll = min(s.nextPoll, satAdd(g, s.cfg.SampleEvery))
	}
	s.last, s.haveLast = smp, true
}

// KernelRateErr bounds how far CLOCK_REALTIME's rate against
// CLOCK_MONOTONIC_RAW strays from the one its tick and frequency give (per
// ns): the kernel's NTP-adjusted multiplier carries its rounding into the
// next tick (timekeeping_adjust), so the two clocks keep the rate to
// parts in 1e12; 1 ppb leaves room for what that does not model
// (measured on a quiet kernel: docs/daemon.md).
const KernelRateErr = 1e-9

// updateMean recomputes the mean rate and, once the last segment is in
// effect, makes the next one Lead ahead. The first segment starts at the
// sample (rg, ro).
func (s *Scale) updateMean(now, rg, ro int64, first bool) {
	sum, serr, n := 1.0, 0.0, 0
	// In id order, so that equal reports give a bit-equal mean.
	for _, id := range slices.Sorted(maps.Keys(s.reports)) {
		r := s.reports[id]
		if now-r.at > reportAge*s.cfg.Poll {
			delete(s.reports, id)
			continue
		}
		sum += r.rate
		serr += r.err
		n++
	}
	drift := s.cfg.MaxDrift
	missing := max(0, s.cfg.Clocks-1-n)
	sum += float64(missing)
	serr += float64(missing) * 2 * drift
	k := float64(1 + n + missing)
	m := min(max(sum/k, 1-2*drift), 1+2*drift)
	s.mean, s.meanErr = m, serr/k
	switch {
	case first:
		s.segs = []segment{{At: rg, A: satAdd(rg, ro), Prev: math.MinInt64, M: m, MErr: s.meanErr}}
		s.first = true
	case s.segs[len(s.segs)-1].At <= now && m != s.segs[len(s.segs)-1].M:
		l := s.segs[len(s.segs)-1]
		at := satAdd(now, s.cfg.Lead)
		a, ok := l.at(at)
		if !ok {
			return
		}
		s.appendSeg(segment{At: at, A: a, Prev: l.At, M: m, MErr: s.meanErr})
	}
	s.horizon = satAdd(now, s.cfg.Lead)
}

func (s *Scale) appendSeg(sg segment) {
	s.segs = append(s.segs, sg)
	if len(s.segs) > maxSegments {
		s.segs = append(s.segs[:0], s.segs[len(s.segs)-maxSegments:]...)
		s.first = false
	}
}

// Step takes a message received at local: on the reference a query (the
// answer is in Ready), on a node the reference's info. The error says why
// a message was refused; it changed nothing then.
func (s *Scale) Step(m Message, local int64) error {
	if err := m.Check(); err != nil {
		return err
	}
	switch m.Type {
	case MsgQuery:
		r, err := s.Answer(m, local)
		if err != nil {
			return err
		}
		s.out.Messages = append(s.out.Messages, r)
		return nil
	default:
		return s.stepInfo(m, local)
	}
}

// Answer is the reference's reply to a query received at local (Step
// queues it; a driver answering on the request's own socket calls Answer).
// A rate report outside 2*MaxDrift is logged and not counted, the query
// still answered.
func (s *Scale) Answer(q Message, local int64) (Message, error) {
	if err := q.Check(); err != nil {
		return Message{}, err
	}
	if q.Type != MsgQuery {
		return Message{}, fmt.Errorf("real-time %d message from %d: not a query: %w", q.Type, q.From, ErrMessage)
	}
	if !s.isRef {
		return Message{}, fmt.Errorf("real-time query from %d: node %d is not the reference: %w", q.From, s.cfg.ID, ErrMessage)
	}
	s.st.Replies++
	r := Message{Type: MsgInfo, From: s.cfg.ID, To: q.From, Seq: q.Seq}
	if s.cfg.Mode == ModeReference {
		if s.haveOff {
			o := s.off
			r.Mode, r.At, r.Offset, r.Slope, r.Err, r.SlopeErr, r.Up = ModeReference, o.At, o.Offset, o.Slope, o.Err, o.SlopeErr, o.Up
		}
		return r, nil
	}
	if q.Rate > 0 {
		// A report far outside what MaxDrift allows is refused (it would
		// drag the mean), not clamped.
		if d := 2 * s.cfg.MaxDrift; math.Abs(q.Rate-1) > d || q.RateErr > d {
			s.log.Warn("real-time rate report outside 2*sync.max_drift_ppm: ignored", "from", q.From, "rate", q.Rate, "rate_err", q.RateErr)
		} else {
			s.reports[q.From] = rateReport{rate: q.Rate, err: q.RateErr, at: local}
		}
	}
	if len(s.segs) == 0 {
		return r, nil
	}
	sg := s.pick(q.After, local)
	r.Mode, r.At, r.Offset, r.Slope, r.SlopeErr, r.Prev = ModeMeanDrift, sg.At, sg.A, sg.M, sg.MErr, sg.Prev
	return r, nil
}

// pick is the segment to send a node that knows the chain up to after:
// the one in effect now if the node is behind it, else the one following
// after (or the newest, when there is none).
func (s *Scale) pick(after, now int64) segment {
	cur := 0
	for i, sg := range s.segs {
		if sg.At <= now {
			cur = i
		}
	}
	if s.segs[cur].At > after {
		return s.segs[cur]
	}
	for _, sg := range s.segs[cur:] {
		if sg.At > after {
			return sg
		}
	}
	return s.segs[len(s.segs)-1]
}

// stepInfo takes the reference's answer on a node, logging a refusal once
// per streak.
func (s *Scale) stepInfo(m Message, local int64) error {
	if s.isRef || m.From != s.cfg.Reference {
		return fmt.Errorf("real-time info from %d: node %d follows %d: %w", m.From, s.cfg.ID, s.cfg.Reference, ErrMessage)
	}
	gk := int64(math.MinInt64)
	if s.pending && m.Seq == s.pendSeq {
		s.pending, gk = false, s.pendGK
		s.failStreak = 0
	}
	err := s.accept(m, gk)
	if err == nil && gk != math.MinInt64 && m.Mode == ModeReference && s.cfg.Mode == ModeReference {
		s.align(m.At, gk, local)
	}
	switch {
	case err != nil && !s.refusing:
		s.log.Warn("real-time reply refused (logged again when one is accepted)", "reference", s.cfg.Reference, "err", err)
	case err != nil:
		s.log.Debug("real-time reply refused", "reference", s.cfg.Reference, "err", err)
	case s.refusing:
		s.log.Info("real-time replies accepted again", "reference", s.cfg.Reference)
	}
	s.refusing = err != nil
	if err != nil {
		s.st.Refused++
		return fmt.Errorf("real-time info from %d: %w: %w", m.From, err, ErrMessage)
	}
	return nil
}

// align schedules a node's next poll just after the reference's next
// sample of CLOCK_REALTIME (reference-realtime without the kernel's rate:
// one a Poll), at global time at + Poll + Poll/20, from its answer to the
// query sent at local pendAt, when global time was at least gk. A node
// polling at its own phase held a model whose sample was up to a Poll old
// already when it arrived, and that age (max_slew_ppm x up to a Poll on
// each side) changed at random with every change of reference: the served
// width before and after a failover differed by up to 3x for no other
// reason. Not while the node polls eagerly after a change of reference.
// local is the node's clock at the answer.
func (s *Scale) align(at, gk, local int64) {
	if s.eager || local < s.eagerUntil {
		return
	}
	d, ok := span(satAdd(at, s.cfg.Poll+s.cfg.Poll/20), gk) // from the query to the poll
	elapsed := local - s.pendAt
	if !ok || d > elapsed+2*s.cfg.Poll {
		return // a sample ahead of global time: poll as usual
	}
	if d <= elapsed {
		d += ((elapsed-d)/s.cfg.Poll + 1) * s.cfg.Poll
	}
	s.nextPoll = s.pendAt + d
}

// accept takes the reference's answer. gk is a lower bound of global time
// when the reference answered (math.MinInt64: unknown).
func (s *Scale) accept(r Message, gk int64) error {
	if r.Mode != ModeNone && (r.At <= -maxSpan || r.At >= maxSpan || r.Offset <= -maxSpan || r.Offset >= maxSpan) {
		return fmt.Errorf("at %d, offset %d: beyond +-2^62 ns", r.At, r.Offset)
	}
	switch r.Mode {
	case ModeNone:
		return nil // the reference has no model yet
	case ModeReference:
		if s.cfg.Mode != ModeReference {
			return fmt.Errorf("mode reference-realtime from the reference, configured %s", s.cfg.Mode)
		}
		if math.Abs(r.Slope) > 0.01 || r.SlopeErr > 0.01 || r.Err > 1e9 {
			return fmt.Errorf("model slope %g +- %g, error %d ns: implausible", r.Slope, r.SlopeErr, r.Err)
		}
		if !s.haveOff || r.At >= s.off.At || s.off.Ref != r.From {
			g0 := r.At
			if gk != math.MinInt64 {
				g0 = max(g0, gk)
			}
			s.setModel(offModel{At: r.At, Offset: r.Offset, Err: r.Err, Slope: r.Slope, SlopeErr: r.SlopeErr, Up: r.Up, Ref: r.From}, g0)
		}
		return nil
	case ModeMeanDrift:
		if s.cfg.Mode != ModeMeanDrift {
			return fmt.Errorf("mode mean-drift from the reference, configured %s", s.cfg.Mode)
		}
		if math.Abs(r.Slope-1) > 2*s.cfg.MaxDrift+1e-12 || r.SlopeErr > 0.01 || r.Err != 0 {
			return fmt.Errorf("segment at %d: mean rate %g +- %g: outside 1 +- 2*sync.max_drift_ppm", r.At, r.Slope, r.SlopeErr)
		}
		sg := segment{At: r.At, A: r.Offset, Prev: r.Prev, M: r.Slope, MErr: r.SlopeErr}
		var l segment
		if len(s.segs) > 0 {
			l = s.segs[len(s.segs)-1]
		}
		switch {
		case len(s.segs) > 0 && sg.At == l.At:
			// Nothing new: no segment was made before the reference answered.
			if gk != math.MinInt64 {
				s.horizon = max(s.horizon, satAdd(gk, s.cfg.Lead))
			}
		case len(s.segs) > 0 && sg.At < l.At:
			// A late reply: nothing to learn.
		case len(s.segs) > 0 && sg.Prev == l.At:
			s.appendSeg(sg)
			s.horizon = max(s.horizon, satAdd(sg.At, s.cfg.Lead))
		default:
			// The first segment heard, or segments were missed: start a
			// new chain from this one.
			s.segs = append(s.segs[:0], sg)
			s.first = sg.Prev == math.MinInt64
			s.horizon = satAdd(sg.At, s.cfg.Lead)
		}
		return nil
	}
	return fmt.Errorf("unknown mode %d", r.Mode)
}

func satAdd(a, b int64) int64 {
	if s := a + b; (s > a) == (b > 0) {
		return s
	}
	if b > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

// Reporters are the nodes whose rate reports the reference keeps (for the
// mean), in id order.
func (s *Scale) Reporters() []engine.NodeID { return slices.Sorted(maps.Keys(s.reports)) }
