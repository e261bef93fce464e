package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// Reference failover (docs/daemon.md, "Reference failover").
//
// Every node watches the current reference of reference.order: any engine
// message from it (probe, time diff, period change) or an answer to a
// status query counts as heard. A node that has heard nothing for
// failover_after/2 asks the reference for its status; after failover_after
// of silence it moves to the next node of the order that answers a status
// query (or that is itself). A node that takes over freezes its last
// local->global line and from then on feeds the engine, as its local
// clock, that line extrapolated: global time continues from the node's own
// estimate. The others rebuild their engine for the new roles and keep
// reading global time from the old engine until the new one is synced.
// A node that starts asks the nodes of the order who the reference is, so
// a returning reference follows the current one instead of serving too.

// engineView is the engine the daemon drives. After a takeover the engine
// runs on a frozen mapping of the local clock (frozen); after a change of
// reference, reads come from the previous engine (prev) until the new one
// is synced. Guarded by node.mu.
//
// A new engine numbers its rounds and period changes from 1 again, and a
// child ignores a round or change numbered below one it has seen. So each
// view shifts the numbers it sends by the largest its predecessor sent
// (roundBase, seqBase) and shifts them back in the answers (probe replies
// and error reports carry the round).
type engineView struct {
	cur    *engine.Node
	prev   *engineView
	frozen bool
	fm     estimate.Mapping // local -> engine clock when frozen

	roundBase, seqBase uint32 // added to outgoing Round / period-change Seq
	maxRound, maxSeq   uint32 // largest sent (after the shift)
}

// successor is a view after v: its numbers continue v's.
func (v *engineView) successor(eng *engine.Node) *engineView {
	return &engineView{cur: eng, roundBase: v.maxRound, seqBase: v.maxSeq, maxRound: v.maxRound, maxSeq: v.maxSeq}
}

// in maps a daemon local time onto the engine's clock.
func (v *engineView) in(local int64) int64 {
	if !v.frozen || local == 0 {
		return local
	}
	dx := local - v.fm.X0
	return v.fm.Y0 + dx + int64(math.Round(v.fm.Skew*float64(dx)))
}

// out maps an engine time back onto the local clock, rounded up so that
// a timer set there is not early.
func (v *engineView) out(x int64) int64 {
	if !v.frozen || x == 0 {
		return x
	}
	return v.fm.X0 + int64(math.Ceil(float64(x-v.fm.Y0)/(1+v.fm.Skew))) + 1
}

func (v *engineView) Tick(local int64) {
	v.cur.Tick(v.in(local))
	v.dropPrev(local)
}

func (v *engineView) Step(m engine.Message, local int64) {
	m.T1, m.T4 = v.in(m.T1), v.in(m.T4) // kernel stamps through the same map
	if m.Type == engine.MsgProbeReply || m.Type == engine.MsgErrReport {
		m.Round -= v.roundBase
	}
	v.cur.Step(m, v.in(local))
	v.dropPrev(local)
}

// dropPrev forgets the previous engine once the current one is synced.
func (v *engineView) dropPrev(local int64) {
	if v.prev != nil && v.cur.Estimate(v.in(local)).Status != engine.StatusUnsynced {
		v.prev = nil
	}
}

func (v *engineView) Ready() engine.Ready {
	r := v.cur.Ready()
	r.NextTick = v.out(r.NextTick)
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Type {
		case engine.MsgProbe, engine.MsgTimeDiff, engine.MsgPeriodChange:
			m.Round += v.roundBase
			v.maxRound = max(v.maxRound, m.Round)
		}
		if m.Type == engine.MsgPeriodChange {
			m.Seq += v.seqBase
			v.maxSeq = max(v.maxSeq, m.Seq)
		}
	}
	return r
}

// Estimate is global time at local: the current engine's, or the previous
// engine's while the current one is unsynced.
func (v *engineView) Estimate(local int64) engine.Time {
	t := v.cur.Estimate(v.in(local))
	if t.Status == engine.StatusUnsynced && v.prev != nil {
		return v.prev.Estimate(local)
	}
	return t
}

func (v *engineView) Snapshot() engine.Snapshot { return v.cur.Snapshot() }

// failover is a node's view of the reference order.
type failover struct {
	order []engine.NodeID
	after time.Duration
	self  engine.NodeID

	idx      atomic.Int32 // index in order of the current reference
	heard    atomic.Int64 // local time the current reference was last heard
	changes  atomic.Uint64
	querying atomic.Bool
	// discovering: the node does not know the reference yet and answers
	// no status query (it would name the default reference).
	discovering atomic.Bool
	// stuck: the last failOver found nobody to follow: the next ones log
	// at debug level until a failover succeeds or the reference is heard.
	stuck atomic.Bool
}

func newFailover(cfg Config) *failover {
	f := &failover{after: cfg.Reference.FailoverAfter.D(), self: engine.NodeID(cfg.Node.ID)}
	for _, id := range cfg.Reference.Order {
		f.order = append(f.order, engine.NodeID(id))
	}
	if len(f.order) == 0 {
		f.order = []engine.NodeID{engine.NodeID(cfg.ReferenceID())}
	}
	return f
}

// reference is the node's current reference.
func (n *node) reference() engine.NodeID {
	return n.fo.order[n.fo.idx.Load()]
}

// heardFrom notes a message from a node at local time local.
func (n *node) heardFrom(from engine.NodeID, local int64) {
	if from == n.reference() {
		n.fo.heard.Store(local)
		n.fo.stuck.Store(false)
	}
}

// statusReply answers a status query: global time now and the reference.
func (n *node) statusReply(reply *wire.Packet) error {
	if n.fo.discovering.Load() {
		// Every daemon of a cluster started together asks the others at
		// once: expected, the asker retries (logged at debug level only).
		return fmt.Errorf("status query while looking for the current reference: %w", transport.ErrNotReady)
	}
	now := n.clk.now()
	n.mu.Lock()
	t := n.eng.Estimate(now)
	n.mu.Unlock()
	reply.Status = wire.Status{Local: now, Time: t, Reference: uint32(n.reference())}
	return nil
}

// queryStatus asks a peer for its status.
func queryStatus(ctx context.Context, ep *transport.Endpoint, self uint32, addr netip.AddrPort, timeout time.Duration) (wire.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	reply, _, err := ep.Request(ctx, addr, &wire.Packet{Op: wire.OpStatusQuery, Sender: self})
	if err != nil {
		return wire.Status{}, err
	}
	if reply.Op.Kind() != wire.OpStatusReply {
		return wire.Status{}, fmt.Errorf("status query answered with %v", reply.Op)
	}
	return reply.Status, nil
}

// queryTimeout is how long a liveness query waits for its answer.
func (n *node) queryTimeout() time.Duration {
	return min(max(n.fo.after/4, 20*time.Millisecond), time.Second)
}

// discoverReference asks the other nodes of the order who the reference
// is, before the node starts: the answer latest in the order wins. With
// nobody answering (the cluster is starting), the first of the order is
// the reference.
func (n *node) discoverReference(ctx context.Context) {
	if len(n.fo.order) < 2 {
		return
	}
	n.fo.discovering.Store(true)
	defer n.fo.discovering.Store(false)
	var mu sync.Mutex
	best := 0
	var wg sync.WaitGroup
	for _, id := range n.fo.order {
		addr, ok := n.peers[id]
		if id == n.fo.self || !ok {
			continue
		}
		wg.Go(func() {
			st, err := queryStatus(ctx, n.ep, n.cfg.Node.ID, addr, min(max(n.fo.after/2, 50*time.Millisecond), time.Second))
			if err != nil {
				return
			}
			if i := slices.Index(n.fo.order, engine.NodeID(st.Reference)); i > 0 {
				mu.Lock()
				best = max(best, i)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	n.fo.heard.Store(n.clk.now())
	if best == 0 {
		return
	}
	if n.fo.order[best] == n.fo.self {
		// The others still follow this node: it restarted before they
		// noticed. Its frozen line is lost; global time restarts from
		// its clock (docs/daemon.md).
		n.log.Warn("restarted while still the reference: global time restarts from this node's clock")
		n.fo.idx.Store(int32(best))
		n.rebuild(best, false)
		return
	}
	n.log.Info("joining the current reference", "reference", n.fo.order[best])
	n.rebuild(best, false)
}

// startFailover runs the liveness watch until ctx is done; the returned
// function waits for it to end.
func (n *node) startFailover(ctx context.Context) func() {
	if len(n.fo.order) < 2 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := max(n.fo.after/8, 5*time.Millisecond)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n.watchReference(ctx)
			}
		}
	}()
	return func() { <-done }
}

// watchReference checks the current reference once.
func (n *node) watchReference(ctx context.Context) {
	ref := n.reference()
	if ref == n.fo.self {
		return
	}
	now := n.clk.now()
	quiet := time.Duration(now - n.fo.heard.Load())
	if quiet >= n.fo.after {
		n.failOver(ctx)
		return
	}
	if quiet >= n.fo.after/2 && n.fo.querying.CompareAndSwap(false, true) {
		addr, ok := n.peers[ref]
		if !ok {
			n.fo.querying.Store(false)
			return
		}
		n.goSend(func(ctx context.Context) {
			defer n.fo.querying.Store(false)
			st, err := queryStatus(ctx, n.ep, n.cfg.Node.ID, addr, n.queryTimeout())
			if err != nil || n.reference() != ref {
				return
			}
			n.fo.heard.Store(n.clk.now())
			// The reference itself follows a later node: follow it too.
			if i := slices.Index(n.fo.order, engine.NodeID(st.Reference)); i > int(n.fo.idx.Load()) {
				n.log.Info("the reference follows a later node", "reference", ref, "new", st.Reference)
				n.rebuild(i, false)
			}
		})
	}
}

// failOver moves to the next live node of the order after the current
// reference.
func (n *node) failOver(ctx context.Context) {
	cur := int(n.fo.idx.Load())
	old := n.fo.order[cur]
	for j := cur + 1; j < len(n.fo.order); j++ {
		id := n.fo.order[j]
		if id == n.fo.self {
			n.fo.stuck.Store(false)
			n.log.Warn("reference silent: taking over", "old", old, "silent_for", n.fo.after)
			n.rebuild(j, true)
			return
		}
		addr, ok := n.peers[id]
		if !ok {
			continue
		}
		if _, err := queryStatus(ctx, n.ep, n.cfg.Node.ID, addr, n.queryTimeout()); err != nil {
			n.logIf(!n.fo.stuck.Load(), slog.LevelInfo, "next in reference.order does not answer", "node", id, "err", err)
			continue
		}
		n.fo.stuck.Store(false)
		n.log.Warn("reference silent: following the next in order", "old", old, "reference", id)
		n.rebuild(j, false)
		return
	}
	// Nobody after the reference answers: keep waiting for it.
	n.logIf(!n.fo.stuck.Load(), slog.LevelWarn, "reference silent and no node after it in reference.order answers (logged again when that changes)", "reference", old)
	n.fo.stuck.Store(true)
	n.fo.heard.Store(n.clk.now())
}

// rolesFor is this node's roles when order[j] is the reference. The nodes
// before it in the order are presumed gone: the topology is built over
// the others (so that no live node hangs below a dead one), and the gone
// ones are attached directly to the reference as leaves, where a returning
// one finds a source. If the topology cannot be built without them (an
// explicit graph they disconnect), the full topology is used.
func (n *node) rolesFor(j int) (sources, children []engine.NodeID, err error) {
	ref := n.fo.order[j]
	gone := n.fo.order[:j]
	if len(gone) == 0 {
		return n.cfg.Roles(uint32(ref))
	}
	c := n.cfg
	c.Peers = slices.DeleteFunc(slices.Clone(c.Peers), func(p Peer) bool { return slices.Contains(gone, engine.NodeID(p.ID)) })
	c.Topology.Edges = slices.DeleteFunc(slices.Clone(c.Topology.Edges), func(e [2]uint32) bool {
		return slices.Contains(gone, engine.NodeID(e[0])) || slices.Contains(gone, engine.NodeID(e[1]))
	})
	self := c.Node.ID
	c.Node.ID = uint32(ref) // a gone node computes the same graph as the others
	if _, _, err := c.Roles(uint32(ref)); err != nil {
		n.log.Warn("topology without the nodes before the reference failed: using the full topology", "err", err)
		return n.cfg.Roles(uint32(ref))
	}
	if slices.Contains(gone, n.fo.self) {
		return []engine.NodeID{ref}, nil, nil
	}
	c.Node.ID = self
	sources, children, err = c.Roles(uint32(ref))
	if err != nil {
		return nil, nil, err
	}
	if ref == n.fo.self {
		children = append(children, gone...)
	}
	return sources, children, nil
}

// rebuild makes order[j] the reference: a new engine for the new roles.
// takeOver (order[j] is this node): the engine's clock becomes the frozen
// line of global time as this node estimates it now.
func (n *node) rebuild(j int, takeOver bool) {
	ref := n.fo.order[j]
	src, children, err := n.rolesFor(j)
	if err != nil {
		n.log.Error("cannot change reference", "reference", ref, "err", err)
		return
	}
	eng, err := engine.New(n.cfg.EngineConfig(src, children), n.log)
	if err != nil {
		n.log.Error("cannot change reference", "reference", ref, "err", err)
		return
	}
	if n.rt != nil {
		n.log.Warn("real_time does not follow reference changes yet: it still asks the first reference of the order",
			"reference", ref, "mode", n.cfg.RealTime.Mode)
	}
	now := n.clk.now()
	n.mu.Lock()
	x := n.lockedLocal(now)
	v := n.eng.successor(eng)
	if takeOver {
		const d = int64(time.Second)
		t0, t1 := n.eng.Estimate(x), n.eng.Estimate(x+d)
		v.frozen = true
		if t0.Status == engine.StatusUnsynced {
			n.log.Warn("taking over unsynced: global time continues from this node's clock")
			v.fm = estimate.Mapping{X0: x, Y0: x, Valid: true}
		} else {
			v.fm = estimate.Mapping{X0: x, Y0: t0.Est, Skew: float64(t1.Est-t0.Est-d) / float64(d), Valid: true}
			n.log.Info("global time frozen at takeover", "local", x, "global", t0.Est, "skew", v.fm.Skew,
				"width", t0.Latest-t0.Earliest)
		}
	} else {
		v.prev = n.eng
		if n.eng.cur.HasPrior() {
			v.prev = nil // a restored prior (state.go) bounds the old reference's time, never synced since
		}
		for p := v.prev; p != nil; p = p.prev {
			if p.prev != nil && p.prev.prev != nil {
				p.prev.prev = nil // keep at most two generations
			}
		}
	}
	n.eng = v
	n.fo.idx.Store(int32(j))
	n.fo.heard.Store(now)
	n.fo.changes.Add(1)
	v.Tick(x)
	r := v.Ready()
	n.next = r.NextTick
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
	n.dispatch(r)
}

// logIf logs at level if loud, at debug level otherwise: a condition that
// persists is logged when it starts, not at every check.
func (n *node) logIf(loud bool, level slog.Level, msg string, args ...any) {
	if !loud {
		level = slog.LevelDebug
	}
	n.log.Log(context.Background(), level, msg, args...)
}
