package daemon

// The real-time modes (Jezequel 5.4) live in engine/realtime, a pure state
// machine (see its package doc for the semantics). This file is its
// driver: a goroutine that ticks it on the local clock, samples the
// reference's CLOCK_REALTIME when it asks (transport.RealtimeOffset), hands
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
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// realtimeReadMargin is added to the sandwich half-width of a realtime
// sample: the median of five sandwiches was within -3..+10 ns of the truth
// at p1..p99 (transport.RealtimeOffset), one sandwich 100-200 ns off now
// and then without showing it in its width.
const realtimeReadMargin = 200

// realTime drives one daemon's realtime.Scale.
type realTime struct {
	mode    string
	id      uint32
	ref     engine.NodeID
	isRef   bool
	refAddr netip.AddrPort

	// Hooks, replaced by unit tests.
	local      func() int64          // the local clock (global time on the reference)
	fromRaw    func(raw int64) int64 // CLOCK_MONOTONIC_RAW onto the local clock
	rawNow     func() int64
	realOffset func() (off, halfWidth int64) // CLOCK_REALTIME - CLOCK_MONOTONIC_RAW

	mu sync.Mutex
	sc *realtime.Scale
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
		mode: c.RealTime.Mode, id: c.Node.ID, ref: ref, isRef: c.Node.ID == uint32(ref),
		local: n.clk.now, fromRaw: n.clk.fromRaw, rawNow: n.sys.raw, realOffset: transport.RealtimeOffset,
	}
	poll := int64(c.RealTime.PollEvery)
	sc, err := realtime.New(realtime.Config{
		Mode: rtMode(c.RealTime.Mode), ID: engine.NodeID(c.Node.ID), Reference: ref,
		Poll: poll, Lead: 2*n.publishSpan() + 2*poll,
		MaxSlew: c.RealTime.MaxSlewPPM / 1e6, MaxDrift: n.engCfg.MaxDrift, Clocks: len(c.Peers),
		ReplyTimeout: max(poll, int64(time.Second)),
	}, n.log)
	if err != nil {
		return nil, fmt.Errorf("real_time: %w", err)
	}
	rt.sc = sc
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
	for {
		select {
		case <-ctx.Done():
			rt.mu.Lock()
			st := rt.sc.Stats()
			rt.mu.Unlock()
			n.log.Info("real time stopping", "mode", rt.mode, "reference", rt.isRef, "polls", st.Polls, "poll_failures", st.PollFails,
				"replies", st.Replies, "realtime_jumps", st.Jumps, "segments", st.Segments, "mean_rate", st.Mean, "mean_rate_err", st.MeanErr)
			return
		case <-t.C:
		}
		local := rt.local()
		in := realtime.Inputs{Earliest: math.MinInt64}
		if !rt.isRef {
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
		if rd.Sample {
			g, off, hw := rt.realtimeSample()
			rt.sc.Sample(g, off, hw)
			rd.NextTick = rt.sc.Ready().NextTick
		}
		rt.mu.Unlock()
		for _, q := range rd.Messages {
			rt.query(ctx, n, q)
		}
		// The local clock runs within max_drift of real time: a timer a
		// few ppm early or late is one more Tick or a later poll.
		t.Reset(time.Duration(max(rd.NextTick-rt.local(), 0)))
	}
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

// query sends one of the Scale's queries to the reference and steps its
// reply; an unanswered query is counted by the Scale at its deadline.
func (rt *realTime) query(ctx context.Context, n *node, q realtime.Message) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(int64(n.cfg.RealTime.PollEvery), int64(time.Second))))
	defer cancel()
	p := &wire.Packet{Op: wire.OpRealTimeQuery, Sender: rt.id, RealTime: wire.RealTime{Rate: q.Rate, RateErr: q.RateErr, After: q.After}}
	reply, _, err := n.ep.Request(ctx, rt.refAddr, p)
	if err != nil {
		n.log.Debug("real-time query failed", "reference", rt.ref, "err", err)
		return
	}
	m := fromWireInfo(reply.RealTime)
	m.From, m.To, m.Seq = rt.ref, engine.NodeID(rt.id), q.Seq
	local := rt.local()
	rt.mu.Lock()
	rt.sc.Step(m, local) // refusals are logged by the Scale
	rt.mu.Unlock()
}

func fromWireInfo(r wire.RealTime) realtime.Message {
	return realtime.Message{Type: realtime.MsgInfo, Mode: realtime.Mode(r.Mode), At: r.At, Offset: r.Offset,
		Slope: r.Slope, Err: r.Err, SlopeErr: r.SlopeErr, Prev: r.Prev}
}

func toWireInfo(m realtime.Message) wire.RealTime {
	return wire.RealTime{Mode: uint8(m.Mode), At: m.At, Offset: m.Offset, Slope: m.Slope, Err: m.Err, SlopeErr: m.SlopeErr, Prev: m.Prev}
}

// handleQuery answers a node's OpRealTimeQuery on the reference.
func (rt *realTime) handleQuery(from uint32, q wire.RealTime, reply *wire.Packet) error {
	local := rt.local()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	reply.RealTime = wire.RealTime{}
	r, err := rt.sc.Answer(realtime.Message{Type: realtime.MsgQuery, From: engine.NodeID(from), To: rt.ref,
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
		n.sec.drop(DropRejectedRate) // the Scale refuses it too (and logs it)
	}
	return n.rt.handleQuery(in.Packet.Sender, q, reply)
}
