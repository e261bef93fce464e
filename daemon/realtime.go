package daemon

// The real-time modes (Jezequel 5.4). The engine always runs on the local
// clocks and its global time is the reference's clock (CLOCK_MONOTONIC_RAW
// or an emulated clock): it is never slewed by NTP. A real-time mode maps
// that "raw" global time g onto the served time scale with a function that
// the reference defines and every node applies, at publish time only:
//
//   - reference-realtime: served(g) = g + O(g), O = the reference's
//     CLOCK_REALTIME minus g. The reference samples O every poll_every
//     (transport.RealtimeOffset: median of five sandwiched reads) and
//     models it as a line from its last sample: the slope is measured
//     between the last two samples (NTP's frequency correction), the error
//     is the sample's half-width plus max_slew_ppm per ns of distance from
//     the sample (NTP may change the slew rate at any time: the kernel PLL
//     and adjtime cap it at 500 ppm, chrony at its maxslewrate). A sample
//     outside the previous model's bounds (a step, or a faster slew) is
//     counted and logged; the model restarts from it.
//
//   - mean-drift: served(g) runs at the mean rate of all the cluster's
//     clocks. Nodes report their rate against the reference (d local / d g,
//     with a bound from their estimator); the reference averages them with
//     its own (1) and counts a node that has not reported as rate 1 with
//     error 2*max_drift. The served function is a chain of segments
//     served(g) = A + (g - At) + (M-1)(g - At), each continuous with the one
//     before (A = the previous segment's value at At), so a new mean never
//     makes a jump. The first segment starts at the reference's
//     CLOCK_REALTIME; a new one is made only once the last one is in effect,
//     and takes effect lead = 2*publishSpan + 2*poll_every after it is made,
//     so every node that polls knows it before it is used: the chain is the
//     same function on every node. Outside what a node knows (before its
//     first known segment, after its horizon) its bounds widen by 4*max_drift
//     per ns, the largest possible difference of two means.
//
// Nodes ask the reference with OpRealTimeQuery every poll_every (the
// request carries the rate report and the newest segment known) and get
// the model or the next segment in OpRealTimeInfo: a request/reply pair
// without ACKs (Mocha), the reply being the acknowledgement.
//
// The transform is applied to the engine's estimate and both bounds, so the
// page's bounds stay guaranteed under the stated assumptions, and the page
// is published with gtime.Update.Continuous: when a new model moves the
// estimate (an NTP step, a new mean), the served time does not jump, it
// slews to the new estimate at sync.max_slew_ppm and the bounds widen to
// hold it meanwhile. Served time never goes backwards; after a step of
// CLOCK_REALTIME it takes |step| / max_slew_ppm to catch up (ntpd's slew
// behaviour, not chrony's step).

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// Modes on the wire (wire.RealTime.Mode).
const (
	rtWireNone      = 0
	rtWireRealtime  = 1
	rtWireMeanDrift = 2
)

const (
	// realtimeReadMargin is added to the sandwich half-width of a realtime
	// sample: the median of five sandwiches was within -3..+10 ns of the
	// truth at p1..p99 (transport.RealtimeOffset), one sandwich 100-200 ns
	// off now and then without showing it in its width.
	realtimeReadMargin = 200
	// maxSegments is how many mean-drift segments a node keeps.
	maxSegments = 16
	// maxSpan is the largest |g - At| the models evaluate (about 146
	// years): beyond it a reading is refused rather than overflowed.
	maxSpan = int64(1) << 62
)

// offModel is CLOCK_REALTIME minus global time as a line from At, with a
// bound that grows from Err at SlopeErr per ns.
type offModel struct {
	At, Offset, Err int64
	Slope, SlopeErr float64
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

// realTime is one daemon's real-time state: the reference's model and
// segments, or a node's copy of them.
type realTime struct {
	mode    string
	id      uint32
	ref     engine.NodeID
	isRef   bool
	refAddr netip.AddrPort
	poll    int64   // ns between polls / samples
	lead    int64   // mean-drift: a segment takes effect this long after it is made
	maxSlew float64 // reference-realtime: per ns
	drift   float64 // sync.max_drift: per ns
	clocks  int     // clocks in the cluster (peers)

	// Hooks, replaced by unit tests.
	local      func() int64          // the local clock (global time on the reference)
	fromRaw    func(raw int64) int64 // CLOCK_MONOTONIC_RAW onto the local clock
	rawNow     func() int64
	realOffset func() (off, halfWidth int64) // CLOCK_REALTIME - CLOCK_MONOTONIC_RAW
	logWarn    func(msg string, args ...any)

	mu sync.Mutex
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
	reports map[uint32]rateReport
	mean    float64
	meanErr float64
	// counters (tests, logs)
	jumps, polls, pollFails, replies uint64
	failStreak                       int
	refusing                         bool // the last reply was refused
}

func newRealTime(n *node, ref engine.NodeID) (*realTime, error) {
	c := n.cfg
	rt := &realTime{
		mode: c.RealTime.Mode, id: c.Node.ID, ref: ref, isRef: c.Node.ID == uint32(ref),
		poll: int64(c.RealTime.PollEvery), maxSlew: c.RealTime.MaxSlewPPM / 1e6,
		drift: c.Sync.MaxDriftPPM / 1e6, clocks: len(c.Peers),
		local: n.clk.now, fromRaw: n.clk.fromRaw, rawNow: gtime.RawNow, realOffset: transport.RealtimeOffset,
		logWarn: n.log.Warn, reports: map[uint32]rateReport{}, horizon: math.MinInt64,
	}
	rt.lead = 2*n.publishSpan() + 2*rt.poll
	if !rt.isRef {
		addr, ok := n.peers[ref]
		if !ok {
			return nil, fmt.Errorf("real_time: the reference %d has no peer address", ref)
		}
		rt.refAddr = addr
	}
	return rt, nil
}

// timescale is what the page says it serves.
func (rt *realTime) timescale() gtime.Timescale {
	if rt.mode == RealTimeMeanDrift {
		return gtime.TimescaleMeanDrift
	}
	return gtime.TimescaleRealtime
}

// startRealTime runs the real-time poller until ctx is done; the returned
// function waits for it.
func (n *node) startRealTime(ctx context.Context) (wait func()) {
	if n.rt == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.rt.run(ctx, n)
	}()
	return func() { <-done }
}

func (rt *realTime) run(ctx context.Context, n *node) {
	if rt.isRef {
		rt.refTick() // the first sample at once
	}
	t := time.NewTicker(time.Duration(rt.poll))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rt.mu.Lock()
			n.log.Info("real time stopping", "mode", rt.mode, "reference", rt.isRef, "polls", rt.polls, "poll_failures", rt.pollFails,
				"replies", rt.replies, "realtime_jumps", rt.jumps, "segments", len(rt.segs), "mean_rate", rt.mean, "mean_rate_err", rt.meanErr)
			rt.mu.Unlock()
			return
		case <-t.C:
		}
		if rt.isRef {
			rt.refTick()
			continue
		}
		rt.query(ctx, n)
	}
}

// ---- the reference ----

// refTick samples CLOCK_REALTIME (reference-realtime) or recomputes the
// mean and extends the chain (mean-drift).
func (rt *realTime) refTick() {
	if rt.mode == RealTimeReference {
		rt.sampleOffset()
		return
	}
	rt.updateMean()
}

// realtimeSample is CLOCK_REALTIME minus the local clock now: the offset
// is valid anywhere in the [r1, r2] window of its reads.
func (rt *realTime) realtimeSample() (g, off, err int64) {
	r1 := rt.rawNow()
	o, hw := rt.realOffset()
	r2 := rt.rawNow()
	mid := r1 + (r2-r1)/2
	g = rt.fromRaw(mid)
	return g, mid + o - g, hw + realtimeReadMargin
}

func (rt *realTime) sampleOffset() {
	g, o, e := rt.realtimeSample()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	s := offModel{At: g, Offset: o, Err: e}
	if rt.haveOff {
		pred, perr, ok := rt.off.at(g)
		if d := o - pred; !ok || d > perr+e || d < -perr-e {
			// A step or a slew faster than max_slew_ppm: restart from this
			// sample with the old slope (a step does not change NTP's
			// frequency); the next sample measures it again.
			rt.jumps++
			rt.logWarn("reference CLOCK_REALTIME moved outside its bounds (step or fast slew): served time slews to it",
				"moved_ns", d, "bound_ns", perr+e, "jumps", rt.jumps)
			rt.off = offModel{At: g, Offset: o, Err: e, Slope: rt.off.Slope, SlopeErr: rt.maxSlew}
			rt.last, rt.haveLast = s, true
			return
		}
	}
	if rt.haveLast && g > rt.last.At {
		fd := float64(g - rt.last.At)
		rt.off = offModel{At: g, Offset: o, Err: e,
			Slope:    float64(o-rt.last.Offset) / fd,
			SlopeErr: rt.maxSlew + float64(e+rt.last.Err)/fd}
		rt.haveOff = true
	}
	rt.last, rt.haveLast = s, true
}

// updateMean recomputes the mean rate and, once the last segment is in
// effect, makes the next one lead ahead. The first segment starts now,
// from the reference's CLOCK_REALTIME.
func (rt *realTime) updateMean() {
	var rg, ro int64
	rt.mu.Lock()
	first := len(rt.segs) == 0
	rt.mu.Unlock()
	if first {
		rg, ro, _ = rt.realtimeSample()
	}
	now := rt.local()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	sum, serr, n := 1.0, 0.0, 0
	// In id order, so that equal reports give a bit-equal mean.
	for _, id := range slices.Sorted(maps.Keys(rt.reports)) {
		r := rt.reports[id]
		if now-r.at > 5*rt.poll {
			delete(rt.reports, id)
			continue
		}
		sum += r.rate
		serr += r.err
		n++
	}
	missing := max(0, rt.clocks-1-n)
	sum += float64(missing)
	serr += float64(missing) * 2 * rt.drift
	k := float64(1 + n + missing)
	m := min(max(sum/k, 1-2*rt.drift), 1+2*rt.drift)
	rt.mean, rt.meanErr = m, serr/k
	switch {
	case first:
		rt.segs = []segment{{At: rg, A: rg + ro, Prev: math.MinInt64, M: m, MErr: rt.meanErr}}
		rt.first = true
	case rt.segs[len(rt.segs)-1].At <= now && m != rt.segs[len(rt.segs)-1].M:
		l := rt.segs[len(rt.segs)-1]
		at := now + rt.lead
		a, ok := l.at(at)
		if !ok {
			return
		}
		rt.appendSeg(segment{At: at, A: a, Prev: l.At, M: m, MErr: rt.meanErr})
	}
	rt.horizon = now + rt.lead
}

func (rt *realTime) appendSeg(s segment) {
	rt.segs = append(rt.segs, s)
	if len(rt.segs) > maxSegments {
		rt.segs = append(rt.segs[:0], rt.segs[len(rt.segs)-maxSegments:]...)
		rt.first = false
	}
}

// handleQuery answers a node's OpRealTimeQuery on the reference.
func (rt *realTime) handleQuery(from uint32, q wire.RealTime, reply *wire.Packet) error {
	if !rt.isRef {
		return fmt.Errorf("real-time query from %d: node %d is not the reference", from, rt.id)
	}
	now := rt.local()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.replies++
	reply.RealTime = wire.RealTime{}
	if rt.mode == RealTimeReference {
		if rt.haveOff {
			o := rt.off
			reply.RealTime = wire.RealTime{Mode: rtWireRealtime, At: o.At, Offset: o.Offset, Slope: o.Slope, Err: o.Err, SlopeErr: o.SlopeErr}
		}
		return nil
	}
	if q.Rate > 0 {
		// A report far outside what max_drift allows is refused (it would
		// drag the mean), not clamped.
		if math.Abs(q.Rate-1) > 2*rt.drift || q.RateErr > 2*rt.drift {
			rt.logWarn("real-time rate report outside 2*sync.max_drift_ppm: ignored", "from", from, "rate", q.Rate, "rate_err", q.RateErr)
		} else {
			rt.reports[from] = rateReport{rate: q.Rate, err: q.RateErr, at: now}
		}
	}
	if len(rt.segs) == 0 {
		return nil
	}
	s := rt.pick(q.After, now)
	reply.RealTime = wire.RealTime{Mode: rtWireMeanDrift, At: s.At, Offset: s.A, Slope: s.M, SlopeErr: s.MErr, Prev: s.Prev}
	return nil
}

// pick is the segment to send a node that knows the chain up to after:
// the one in effect now if the node is behind it, else the one following
// after (or the newest, when there is none).
func (rt *realTime) pick(after, now int64) segment {
	cur := 0
	for i, s := range rt.segs {
		if s.At <= now {
			cur = i
		}
	}
	if rt.segs[cur].At > after {
		return rt.segs[cur]
	}
	for _, s := range rt.segs[cur:] {
		if s.At > after {
			return s
		}
	}
	return rt.segs[len(rt.segs)-1]
}

// ---- the other nodes ----

// query reports this node's rate (mean-drift) and asks for the model or
// the next segment.
func (rt *realTime) query(ctx context.Context, n *node) {
	q := wire.RealTime{After: math.MinInt64}
	local := n.clk.now()
	// gk: global time is at least this when the reference answers.
	n.mu.Lock()
	gk := n.eng.Estimate(local).Earliest
	n.mu.Unlock()
	if rt.mode == RealTimeMeanDrift {
		q.Rate, q.RateErr, _ = n.rate(local)
		rt.mu.Lock()
		if len(rt.segs) > 0 {
			q.After = rt.segs[len(rt.segs)-1].At
		}
		rt.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(rt.poll, int64(time.Second))))
	defer cancel()
	rt.mu.Lock()
	rt.polls++
	rt.mu.Unlock()
	reply, _, err := n.ep.Request(ctx, rt.refAddr, &wire.Packet{Op: wire.OpRealTimeQuery, Sender: rt.id, RealTime: q})
	if err != nil {
		rt.mu.Lock()
		rt.pollFails++
		rt.failStreak++
		streak := rt.failStreak
		rt.mu.Unlock()
		n.log.Debug("real-time query failed", "reference", rt.ref, "err", err)
		if streak == 5 {
			// Once per streak: the page's bounds are widening meanwhile.
			n.log.Warn("the reference has not answered 5 real-time queries in a row (is its real_time.mode the same?)",
				"reference", rt.ref, "mode", rt.mode, "err", err)
		}
		return
	}
	rt.mu.Lock()
	rt.failStreak = 0
	rt.mu.Unlock()
	err = rt.accept(reply.RealTime, gk)
	rt.mu.Lock()
	first := err != nil && !rt.refusing
	again := err == nil && rt.refusing
	rt.refusing = err != nil
	rt.mu.Unlock()
	switch {
	case first:
		n.log.Warn("real-time reply refused (logged again when one is accepted)", "reference", rt.ref, "err", err)
	case err != nil:
		n.log.Debug("real-time reply refused", "reference", rt.ref, "err", err)
	case again:
		n.log.Info("real-time replies accepted again", "reference", rt.ref)
	}
}

// accept takes the reference's answer. gk is a lower bound of global time
// when the reference answered (math.MinInt64: unknown).
func (rt *realTime) accept(r wire.RealTime, gk int64) error {
	if r.Mode != rtWireNone && (r.At <= -maxSpan || r.At >= maxSpan || r.Offset <= -maxSpan || r.Offset >= maxSpan) {
		return fmt.Errorf("at %d, offset %d: beyond +-2^62 ns", r.At, r.Offset)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch r.Mode {
	case rtWireNone:
		return nil // the reference has no model yet
	case rtWireRealtime:
		if rt.mode != RealTimeReference {
			return fmt.Errorf("mode reference-realtime from the reference, configured %s", rt.mode)
		}
		if math.Abs(r.Slope) > 0.01 || r.SlopeErr > 0.01 || r.Err > int64(time.Second) {
			return fmt.Errorf("model slope %g +- %g, error %d ns: implausible", r.Slope, r.SlopeErr, r.Err)
		}
		if !rt.haveOff || r.At >= rt.off.At {
			rt.off = offModel{At: r.At, Offset: r.Offset, Err: r.Err, Slope: r.Slope, SlopeErr: r.SlopeErr}
			rt.haveOff = true
		}
		return nil
	case rtWireMeanDrift:
		if rt.mode != RealTimeMeanDrift {
			return fmt.Errorf("mode mean-drift from the reference, configured %s", rt.mode)
		}
		if math.Abs(r.Slope-1) > 2*rt.drift+1e-12 || r.SlopeErr > 0.01 || r.Err != 0 {
			return fmt.Errorf("segment at %d: mean rate %g +- %g: outside 1 +- 2*sync.max_drift_ppm", r.At, r.Slope, r.SlopeErr)
		}
		s := segment{At: r.At, A: r.Offset, Prev: r.Prev, M: r.Slope, MErr: r.SlopeErr}
		var l segment
		if len(rt.segs) > 0 {
			l = rt.segs[len(rt.segs)-1]
		}
		switch {
		case len(rt.segs) > 0 && s.At == l.At:
			// Nothing new: no segment was made before the reference answered.
			if gk != math.MinInt64 {
				rt.horizon = max(rt.horizon, gk+rt.lead)
			}
		case len(rt.segs) > 0 && s.At < l.At:
			// A late reply: nothing to learn.
		case len(rt.segs) > 0 && s.Prev == l.At:
			rt.appendSeg(s)
			rt.horizon = max(rt.horizon, s.At+rt.lead)
		default:
			// The first segment heard, or segments were missed: start a
			// new chain from this one.
			rt.segs = append(rt.segs[:0], s)
			rt.first = s.Prev == math.MinInt64
			rt.horizon = s.At + rt.lead
		}
		return nil
	}
	return fmt.Errorf("unknown mode %d", r.Mode)
}

// rate is this node's clock rate against global time (d local / d global)
// and a bound on its error. The engine's guaranteed bounds at now and at
// now-D bound the mean rate over D: [(E(now)-L(now-D))/D, (L(now)-E(now-D))/D],
// plus max_wander*D/2 for how far the present rate may be from that mean.
// Spans D = 1 s, 2 s, ... 128 s are intersected (each one is a valid
// bound; the estimator's bounds in the past are those of its samples, so
// the long spans give the tight ones); the estimate is the line's slope
// over the longest span, clamped into the intersection.
func (n *node) rate(local int64) (rate, rateErr float64, ok bool) {
	wander := n.cfg.Sync.MaxWanderPPMPerS / 1e15 // per ns, per ns
	bounded := func(t engine.Time) bool {
		return t.Status != engine.StatusUnsynced && t.Earliest != math.MinInt64 && t.Latest != math.MaxInt64
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	tb := n.eng.Estimate(local)
	if !bounded(tb) {
		return 0, 0, false
	}
	lo, hi, s := 0.0, math.Inf(1), 0.0
	for d := int64(time.Second); d <= 128*int64(time.Second); d *= 2 {
		ta := n.eng.Estimate(local - d)
		if !bounded(ta) {
			break
		}
		fd := float64(d)
		w := wander * fd / 2
		lo = max(lo, float64(tb.Earliest-ta.Latest)/fd-w)
		hi = min(hi, float64(tb.Latest-ta.Earliest)/fd+w)
		s = float64(tb.Est-ta.Est) / fd // d global / d local
	}
	if lo <= 0 || math.IsInf(hi, 1) || hi < lo {
		return 0, 0, false
	}
	s = min(max(s, lo), hi)
	r := 1 / s
	return r, max(1/lo-r, r-1/hi), true
}

// ---- serving ----

// meanAt is served time at global time g on the mean-drift scale and how
// far it may be from the reference's chain there.
func (rt *realTime) meanAt(g int64) (v, ext int64, ok bool) {
	i := -1
	for j, s := range rt.segs {
		if s.At <= g {
			i = j
		}
	}
	if i < 0 {
		s := rt.segs[0]
		if v, ok = s.at(g); !ok {
			return 0, 0, false
		}
		if !rt.first {
			ext = int64(math.Ceil(4 * rt.drift * float64(s.At-g)))
		}
		return v, ext, true
	}
	if v, ok = rt.segs[i].at(g); !ok {
		return 0, 0, false
	}
	if rt.horizon == math.MinInt64 {
		return 0, 0, false
	}
	if g > rt.horizon {
		d, ok := span(g, rt.horizon)
		if !ok {
			return 0, 0, false
		}
		ext = int64(math.Ceil(4 * rt.drift * float64(d)))
	}
	return v, ext, true
}

// apply turns the engine's readings (global time on the reference's
// clock) into served time, bounds included. False: no model yet, or a
// reading the models cannot map; the page then says unsynced.
func (rt *realTime) apply(ts []engine.Time) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for i := range ts {
		t := &ts[i]
		if t.Status == engine.StatusUnsynced || t.Earliest == math.MinInt64 || t.Latest == math.MaxInt64 {
			return false
		}
		var e, l, h, xl, xh int64
		var ok1, ok2, ok3 bool
		if rt.mode == RealTimeReference {
			if !rt.haveOff {
				return false
			}
			// g + O(g) increases with g (|slope| << 1), and so do its
			// bounds: the lower bound is reached at Earliest.
			var oe, ol, oh int64
			oe, _, ok1 = rt.off.at(t.Est)
			ol, xl, ok2 = rt.off.at(t.Earliest)
			oh, xh, ok3 = rt.off.at(t.Latest)
			e, l, h = t.Est+oe, t.Earliest+ol, t.Latest+oh
		} else {
			if len(rt.segs) == 0 {
				return false
			}
			e, _, ok1 = rt.meanAt(t.Est)
			l, xl, ok2 = rt.meanAt(t.Earliest)
			h, xh, ok3 = rt.meanAt(t.Latest)
		}
		if !ok1 || !ok2 || !ok3 || l-xl > h+xh {
			return false
		}
		t.Earliest, t.Latest = l-xl, h+xh
		t.Est = min(max(e, t.Earliest), t.Latest)
		t.Mono = t.Est
	}
	return true
}

// handleRealTimeQuery is HandleRequest for OpRealTimeQuery.
func (n *node) handleRealTimeQuery(in *transport.Incoming, reply *wire.Packet) error {
	if n.rt == nil {
		return fmt.Errorf("real-time query from %d: real_time.mode is none here", in.Packet.Sender)
	}
	q := in.Packet.RealTime
	if !n.isPeer(in.Packet.Sender) {
		q.Rate, q.RateErr = 0, 0 // an authenticated tool's query: answered, its rate not counted
	}
	if d := 2 * n.cfg.Sync.MaxDriftPPM / 1e6; q.Rate > 0 && (math.Abs(q.Rate-1) > d || q.RateErr > d) {
		n.sec.drop(DropRejectedRate) // handleQuery refuses it too (and logs it)
	}
	return n.rt.handleQuery(in.Packet.Sender, q, reply)
}
