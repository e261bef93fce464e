package daemon

// The real-time modes (Jezequel 5.4) live in engine/realtime, a pure state
// machine (see its package doc for the semantics). This file is its
// driver: a goroutine that ticks it on the local clock, samples the
// reference's CLOCK_REALTIME when it asks (rawclock.WallOffset), hands
// a node's rate (realtime.Rate over the engine) and lower bound of global
// time with every Tick, sends its queries with transport requests and
// answers the other nodes' queries in HandleRequest. At publish the
// transform is applied to the engine's estimate and both bounds, and the
// page is published with gtime.Update.Continuous: when a new model moves
// the estimate (an NTP step, a new mean), the served time does not jump,
// it slews to the new estimate at sync.max_slew_ppm and the bounds widen to
// hold it meanwhile.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// wallReadMargin is added to the sandwich half-width of a wall-clock
// sample: the median of five sandwiches was within -3..+10 ns of the truth
// at p1..p99 (rawclock.WallOffset), one sandwich 100-200 ns off now
// and then without showing it in its width.
const wallReadMargin = 200

// refSampleEvery is how often the reference-realtime reference samples
// CLOCK_REALTIME and the kernel's state (adjtimex) when the kernel's rate
// is known: the model's error is max_slew_ppm over two intervals (500 ppm
// x 10 ms = 5 us) plus the read's; a sample is one adjtimex and five
// clock sandwiches, about 2 us of CPU, 200 times a second.
const refSampleEvery = 5 * time.Millisecond

// realTime drives one daemon's realtime.Scale. Under reference failover it
// follows the Member's reference (retarget): the Scale's clock is the local
// clock on a node and global time on the reference (toGlobal: the identity,
// or the frozen line of a takeover).
type realTime struct {
	mode  string
	id    uint32
	isRef atomic.Bool

	// Hooks, replaced by unit tests.
	local         func() int64            // the local clock
	toGlobal      func(local int64) int64 // the local clock onto global time, on the reference (nil: the identity)
	fromRaw       func(raw int64) int64   // CLOCK_MONOTONIC_RAW onto the local clock
	rawNow        func() int64
	wallRawOffset func() (off, halfWidth int64) // CLOCK_REALTIME - CLOCK_MONOTONIC_RAW
	// upstream reads CLOCK_REALTIME's own state with every sample (the
	// reference in reference-realtime mode with real_time.upstream kernel;
	// nil: not read, upstream.go). Every node has it: any may become the
	// reference.
	upstream func() (realtime.Upstream, error)
	// kick wakes the driver after a change of reference.
	kick chan struct{}
	// queries wait for the driver's queries in flight; cancelQuery ends
	// the one in flight (a change of reference: a query to a dead
	// reference must not hold the new one's first poll for its timeout).
	queries     sync.WaitGroup
	cancelQuery context.CancelFunc

	mu  sync.Mutex
	ref engine.NodeID
	sc  *realtime.Scale
	// What the reference last logged of its upstream: a read failure, the
	// problem (Upstream.Problem), the leap announced.
	upFailing bool
	upProblem string
	upLeap    uint8
}

func rtMode(mode string) realtime.Mode {
	if mode == RealTimeMeanDrift {
		return realtime.ModeMeanDrift
	}
	return realtime.ModeReference
}

func newRealTime(n *node, ref engine.NodeID) (*realTime, error) {
	c := n.cfg
	rt := &realTime{
		mode: c.RealTime.Mode, id: c.Node.ID, ref: ref,
		local: n.clk.now, fromRaw: n.clk.fromRaw, rawNow: n.sys.raw, wallRawOffset: rawclock.WallOffset,
		kick: make(chan struct{}, 1),
	}
	rt.isRef.Store(c.Node.ID == uint32(ref))
	if n.sys.wall != nil {
		rt.wallRawOffset = n.sys.wall
	}
	rt.toGlobal = func(local int64) int64 {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.eng.In(local)
	}
	poll := int64(c.RealTime.PollEvery)
	reply := max(poll, int64(time.Second))
	var maxAge int64
	if len(c.Reference.Order) > 1 {
		// A model of another node's CLOCK_REALTIME is served through one
		// failover (failover_after and a status query's timeout, at most
		// 1 s) and a few polls more, then no longer: no UTC source is left.
		maxAge = int64(c.Reference.FailoverAfter) + int64(time.Second) + 4*poll + 2*reply
	}
	sc, err := realtime.New(realtime.Config{
		Mode: rtMode(c.RealTime.Mode), ID: engine.NodeID(c.Node.ID), Reference: ref,
		Poll: poll, SampleEvery: int64(refSampleEvery), Lead: 2*n.publishSpan() + 2*poll,
		MaxSlew: c.RealTime.MaxSlewPPM / 1e6, MaxDrift: n.engCfg.MaxDrift, Clocks: len(c.Peers),
		ReplyTimeout: reply, MaxAge: maxAge,
	}, n.log)
	if err != nil {
		return nil, fmt.Errorf("real_time: %w", err)
	}
	rt.sc = sc
	if c.RealTime.Mode == RealTimeReference && c.RealTime.Upstream != UpstreamNone {
		kernel := n.sys.upstream
		if kernel == nil {
			kernel = readKernelUpstream
		}
		if c.Clock.Source == ClockRaw {
			// The kernel's rate is against CLOCK_MONOTONIC_RAW; after a
			// takeover global time is a line of slope 1 + skew on it.
			k := kernel
			kernel = func() (realtime.Upstream, error) {
				u, err := k()
				n.mu.Lock()
				fm, frozen := n.eng.Frozen()
				n.mu.Unlock()
				if frozen && u.RateKnown {
					u.Rate = (u.Rate - fm.Skew) / (1 + fm.Skew)
				}
				return u, err
			}
		}
		// Logged at the first read and at every change: whether chronyd
		// was reached is said once at start.
		known, failing := false, false
		if c.Clock.Source != ClockRaw {
			// The kernel's rate is against CLOCK_MONOTONIC_RAW, not an
			// emulated local clock: the slope is measured.
			k := kernel
			kernel = func() (realtime.Upstream, error) {
				u, err := k()
				u.Rate, u.RateKnown = 0, false
				return u, err
			}
		}
		rt.upstream = upstreamReader(kernel, c.RealTime.ChronySocket, chronyClientDir(c), func(err error) {
			switch {
			case err != nil && (!known || !failing):
				n.log.Info("chronyd's tracking not read: the kernel's clock state alone is the upstream (stratum not known)",
					"chrony_socket", c.RealTime.ChronySocket, "err", err)
			case err == nil && (!known || failing):
				n.log.Info("chronyd's tracking read: its stratum, reference id and root delay are the upstream's", "chrony_socket", c.RealTime.ChronySocket)
			}
			known, failing = true, err != nil
		})
	}
	if !rt.isRef.Load() {
		if _, ok := n.peers[ref]; !ok {
			return nil, fmt.Errorf("real_time: the reference %d has no peer address", ref)
		}
	}
	return rt, nil
}

// clock is the Scale's clock now: global time on the reference, the
// local clock on a node.
func (rt *realTime) clock() int64 {
	l := rt.local()
	if rt.isRef.Load() && rt.toGlobal != nil {
		return rt.toGlobal(l)
	}
	return l
}

// retarget follows a change of reference (engine.EvReferenceChange): a
// node asks the new reference for its model, the new reference samples its
// own CLOCK_REALTIME and upstream; served time moves from the old model to
// the new one without a jump (realtime.Scale.Retarget).
func (rt *realTime) retarget(n *node, ref engine.NodeID) {
	rt.mu.Lock()
	if ref == rt.ref {
		rt.mu.Unlock()
		return
	}
	_, known := n.peers[ref]
	self := uint32(ref) == rt.id
	if !known && !self {
		rt.mu.Unlock()
		n.log.Warn("real_time: the new reference has no peer address: UTC is not followed", "reference", ref)
		return
	}
	old := rt.ref
	rt.ref = ref
	rt.isRef.Store(self)
	rt.mu.Unlock()
	now := rt.clock() // n.mu: not under rt.mu
	rt.mu.Lock()
	rt.sc.Retarget(ref, now)
	if rt.cancelQuery != nil {
		rt.cancelQuery()
		rt.cancelQuery = nil
	}
	rt.mu.Unlock()
	if self {
		n.log.Info("real_time: this node is the reference now: served UTC is its own CLOCK_REALTIME (slewed to from the old reference's)",
			"old", old, "mode", rt.mode, "upstream", n.cfg.RealTime.Upstream)
	} else {
		n.log.Info("real_time: following the new reference", "reference", ref, "old", old, "mode", rt.mode)
	}
	select {
	case rt.kick <- struct{}{}:
	default:
	}
}

// timescale is what the page says it serves.
func (rt *realTime) timescale() gtime.Timescale {
	if rt.mode == RealTimeMeanDrift {
		return gtime.TimescaleMeanDrift
	}
	return gtime.TimescaleRealtime
}

// startRealTime runs the real-time driver until ctx is done; the returned
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

// run ticks the Scale at its NextTick and carries its output.
func (rt *realTime) run(ctx context.Context, n *node) {
	t := time.NewTimer(0)
	defer t.Stop()
	defer rt.queries.Wait()
	for {
		select {
		case <-ctx.Done():
			rt.mu.Lock()
			st := rt.sc.Stats()
			rt.mu.Unlock()
			n.log.Info("real time stopping", "mode", rt.mode, "reference", rt.isRef.Load(), "polls", st.Polls, "poll_failures", st.PollFails, "retargets", st.Retargets,
				"replies", st.Replies, "wall_jumps", st.Jumps, "segments", st.Segments, "mean_rate", st.Mean, "mean_rate_err", st.MeanErr)
			return
		case <-t.C:
		case <-rt.kick:
		}
		isRef := rt.isRef.Load()
		local := rt.clock()
		in := realtime.Inputs{Earliest: math.MinInt64}
		if !isRef {
			n.mu.Lock()
			in.Earliest = n.eng.Estimate(local).Earliest
			n.mu.Unlock()
			if rt.mode == RealTimeMeanDrift {
				in.Rate, in.RateErr, _ = n.rate(local)
			}
		}
		rt.mu.Lock()
		rt.sc.Tick(local, in)
		rd := rt.sc.Ready()
		rt.mu.Unlock()
		if rd.Sample {
			// The upstream is read without the lock (chronyd's socket may
			// take up to chronyTimeout), the sample right after it.
			u, uerr := rt.fetchUpstream()
			rt.mu.Lock()
			rt.setUpstream(n, u, uerr)
			g, off, hw := rt.bestWallSample()
			rt.sc.Sample(g, off, hw)
			after := rt.sc.Ready()
			rd.NextTick = after.NextTick
			rt.mu.Unlock()
			if after.Moved {
				// The page carries the old model's line: republish.
				select {
				case n.pub <- struct{}{}:
				default:
				}
			}
		}
		// A query runs beside the driver (the Scale has one in flight
		// at a time and times it out itself): a reference that died
		// must not hold the driver for the query's timeout, up to
		// max(poll_every, 1 s), past the failover that replaced it.
		for _, q := range rd.Messages {
			qctx, cancel := context.WithTimeout(ctx, time.Duration(max(int64(n.cfg.RealTime.PollEvery), int64(time.Second))))
			rt.mu.Lock()
			rt.cancelQuery = cancel
			rt.mu.Unlock()
			rt.queries.Go(func() {
				defer cancel()
				rt.query(qctx, n, q)
			})
		}
		// The local clock runs within max_drift of real time: a timer a
		// few ppm early or late is one more Tick or a later poll.
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(time.Duration(max(rd.NextTick-rt.clock(), 0)))
	}
}

// fetchUpstream reads CLOCK_REALTIME's own state (errNoUpstream: not read,
// real_time.upstream none or not the reference-realtime reference).
func (rt *realTime) fetchUpstream() (u realtime.Upstream, err error) {
	if rt.upstream == nil {
		return realtime.Upstream{}, errNoUpstream
	}
	return rt.upstream()
}

// errNoUpstream: no upstream is read here.
var errNoUpstream = errors.New("no upstream read")

// setUpstream hands the Scale CLOCK_REALTIME's own state for the sample
// that follows, and logs its changes. A state that cannot be read is
// served as unsynchronised: nothing vouches for CLOCK_REALTIME then.
// Called with rt.mu held.
func (rt *realTime) setUpstream(n *node, u realtime.Upstream, err error) {
	if err == errNoUpstream {
		return
	}
	switch {
	case err != nil && !rt.upFailing:
		n.log.Warn("cannot read the state of CLOCK_REALTIME: served UTC is unsynced until it can (logged again when it can)", "err", err)
	case err == nil && rt.upFailing:
		n.log.Info("the state of CLOCK_REALTIME is read again")
	}
	rt.upFailing = err != nil
	if err != nil {
		u = realtime.Upstream{Known: true}
	}
	if err := rt.sc.SetUpstream(u); err != nil {
		n.log.Warn("the state of CLOCK_REALTIME is out of range: served as unsynchronised", "err", err)
		u = realtime.Upstream{Known: true}
	}
	if p := u.Problem(); p != rt.upProblem {
		if p != "" {
			n.log.Warn("the reference's CLOCK_REALTIME is not synchronised (the kernel says STA_UNSYNC or TIME_ERROR; "+
				"is chronyd or ntpd running and tracking a source?): served UTC is unsynced, NTP answers leap 3 until it is",
				"reason", p, "max_error", time.Duration(u.MaxErr))
		} else {
			n.log.Info("the reference's CLOCK_REALTIME is synchronised: served UTC includes its error bound",
				"max_error", time.Duration(u.MaxErr), "est_error", time.Duration(u.EstErr))
		}
		rt.upProblem = p
	}
	if u.Leap != rt.upLeap {
		n.log.Info("leap second announcement of CLOCK_REALTIME changed (passed on to NTP clients)", "leap", u.Leap)
		rt.upLeap = u.Leap
	}
}

// unserved says why served time at global time g is not UTC ("": it is).
func (rt *realTime) unserved(g int64) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.sc.Unserved(g)
}

// upstreamState is the upstream state of the model served (false: no
// model, or not reference-realtime).
func (rt *realTime) upstreamState() (realtime.Upstream, bool) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.sc.Upstream()
}

// wallRetryAbove: a wall sample wider than this (the reads were
// preempted) is taken again, up to wallTries times, and the narrowest
// kept: the model's error starts from the sample's.
const (
	wallRetryAbove = 1000 + wallReadMargin
	wallTries      = 4
)

// bestWallSample is wallSample taken again while it is wider than
// wallRetryAbove, the narrowest of wallTries kept.
func (rt *realTime) bestWallSample() (g, off, err int64) {
	g, off, err = rt.wallSample()
	for range wallTries - 1 {
		if err <= wallRetryAbove {
			break
		}
		if g2, off2, err2 := rt.wallSample(); err2 < err {
			g, off, err = g2, off2, err2
		}
	}
	return g, off, err
}

// wallSample is CLOCK_REALTIME minus the local clock now: the offset
// is valid anywhere in the [r1, r2] window of its reads.
func (rt *realTime) wallSample() (g, off, err int64) {
	r1 := rt.rawNow()
	o, hw := rt.wallRawOffset()
	r2 := rt.rawNow()
	mid := r1 + (r2-r1)/2
	g = rt.fromRaw(mid)
	if rt.isRef.Load() && rt.toGlobal != nil {
		g = rt.toGlobal(g)
	}
	return g, mid + o - g, hw + wallReadMargin
}

// query sends one of the Scale's queries to the reference and steps its
// reply (ctx bounds the wait); an unanswered query is counted by the
// Scale at its deadline.
func (rt *realTime) query(ctx context.Context, n *node, q realtime.Message) {
	p := &wire.Packet{Op: wire.OpRealTimeQuery, Sender: rt.id, RealTime: wire.RealTime{Rate: q.Rate, RateErr: q.RateErr, After: q.After}}
	// The query names its reference: one asked before a change of
	// reference is answered by the old one, whose reply the Scale refuses.
	addr, ok := n.peers[q.To]
	if !ok {
		return
	}
	reply, _, err := n.ep.Request(ctx, addr, p)
	if err != nil {
		n.log.Debug("real-time query failed", "reference", q.To, "err", err)
		return
	}
	m := fromWireInfo(reply.RealTime)
	m.From, m.To, m.Seq = q.To, engine.NodeID(rt.id), q.Seq
	local := rt.clock()
	rt.mu.Lock()
	rt.sc.Step(m, local) // refusals are logged by the Scale
	rt.mu.Unlock()
	// The answer may move the next poll (realtime.Scale aligns it to the
	// reference's samples): the driver's timer follows.
	select {
	case rt.kick <- struct{}{}:
	default:
	}
}

func fromWireInfo(r wire.RealTime) realtime.Message {
	return realtime.Message{Type: realtime.MsgInfo, Mode: realtime.Mode(r.Mode), At: r.At, Offset: r.Offset,
		Slope: r.Slope, Err: r.Err, SlopeErr: r.SlopeErr, Prev: r.Prev,
		Up: realtime.Upstream{Known: r.UpKnown, Synced: r.UpSynced, MaxErr: r.UpMaxErr, EstErr: r.UpEstErr, Leap: r.UpLeap,
			Stratum: r.UpStratum, RefID: r.UpRefID, RootDelay: r.UpRootDelay, RootDisp: r.UpRootDisp}}
}

func toWireInfo(m realtime.Message) wire.RealTime {
	u := m.Up
	return wire.RealTime{Mode: uint8(m.Mode), At: m.At, Offset: m.Offset, Slope: m.Slope, Err: m.Err, SlopeErr: m.SlopeErr, Prev: m.Prev,
		UpKnown: u.Known, UpSynced: u.Synced, UpLeap: u.Leap, UpStratum: u.Stratum, UpRefID: u.RefID,
		UpMaxErr: u.MaxErr, UpEstErr: u.EstErr, UpRootDelay: u.RootDelay, UpRootDisp: u.RootDisp}
}

// handleQuery answers a node's OpRealTimeQuery on the reference.
func (rt *realTime) handleQuery(from uint32, q wire.RealTime, reply *wire.Packet) error {
	local := rt.clock()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	reply.RealTime = wire.RealTime{}
	r, err := rt.sc.Answer(realtime.Message{Type: realtime.MsgQuery, From: engine.NodeID(from), To: engine.NodeID(rt.id),
		Rate: q.Rate, RateErr: q.RateErr, After: q.After}, local)
	if err != nil {
		return err
	}
	reply.RealTime = toWireInfo(r)
	return nil
}

// rate is this node's clock rate against global time (d local / d global)
// and a bound on its error (realtime.Rate over the engine).
func (n *node) rate(local int64) (rate, rateErr float64, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return realtime.Rate(n.eng.Estimate, local, n.engCfg.MaxWander)
}

// apply turns the engine's readings (global time on the reference's
// clock) into served time, bounds included. False: no model yet, or a
// reading the models cannot map; the page then says unsynced.
func (rt *realTime) apply(ts []engine.Time) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.sc.Apply(ts)
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
	if d := 2 * n.engCfg.MaxDrift; q.Rate > 0 && (math.Abs(q.Rate-1) > d || q.RateErr > d) {
		n.sec.drop(dropRejectedRate) // the Scale refuses it too (and logs it)
	}
	return n.rt.handleQuery(in.Packet.Sender, q, reply)
}
