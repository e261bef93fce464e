package sim

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

// Failover in the simulator: every node runs an engine.Member (the
// reference election and failover the daemon runs), faults stop and
// restart nodes, and the evaluator judges each read against the time scale
// of the reference the node follows: its ideal clock, or, after a takeover,
// the frozen line of the node that took over applied to its ideal clock.

// FailoverStats is what the evaluator measures across faults.
type FailoverStats struct {
	// MaxJump is the largest |change of served Est - elapsed truth| between
	// two evaluations of a node (a restarted node starts afresh), ns.
	MaxJump int64 `json:"max_jump_ns"`
	// Backwards counts reads whose Est was below the node's previous one.
	Backwards int `json:"backwards"`
	// BackInSync is, per fault, the time from the stop or pause (a
	// partition: from its heal) until every running node read synced time
	// from the current view of one running reference; -1 if that never
	// happened.
	BackInSync []Duration `json:"back_in_sync"`
	// Changes is the number of reference changes over all nodes.
	Changes uint64 `json:"reference_changes"`
	// Terms is the highest election term reached (engine.Member.Term).
	Terms uint32 `json:"terms"`
	// TwoReferences counts the evaluations at which more than one node
	// was a reference under its majority lease (must be 0).
	TwoReferences uint64 `json:"two_references"`
	// StaleTerm counts the engine messages refused for an older term.
	StaleTerm uint64 `json:"stale_term_refused"`
}

// scale is one reference's time scale: its ideal clock, through its
// frozen line if it took over.
type scale struct {
	frozen bool
	fm     estimate.Mapping
}

// failoverState is the runner's failover bookkeeping.
type failoverState struct {
	scales   map[engine.NodeID]scale
	lastEst  []int64
	lastT    []int64
	haveLast []bool
	stats    FailoverStats
	done     []bool
	// cuts are the partition faults in force (indexes into Faults).
	cuts []int
	sc   *Scenario
}

// cut reports whether a partition in force drops what from sends to to.
func (f *failoverState) cut(from, to int) bool {
	for _, k := range f.cuts {
		ft := &f.sc.Faults[k]
		inFrom, inTo := slices.Contains(ft.Nodes, from), slices.Contains(ft.Nodes, to)
		switch ft.OneWay {
		case "out":
			if inFrom && !inTo {
				return true
			}
		case "in":
			if !inFrom && inTo {
				return true
			}
		default:
			if inFrom != inTo {
				return true
			}
		}
	}
	return false
}

// faultOn starts pause or partition fault k.
func (r *runner) faultOn(k int) {
	ft := &r.sc.Faults[k]
	if ft.Kind == FaultPartition {
		r.fo.cuts = append(r.fo.cuts, k)
		return
	}
	n := &r.nodes[ft.Node]
	if n.down || n.paused {
		return
	}
	n.paused = true
	n.tickGen++
	r.fo.haveLast[ft.Node] = false
}

// faultOff ends pause or partition fault k: a paused node steps what
// waited for it, then runs its timers.
func (r *runner) faultOff(k int) error {
	ft := &r.sc.Faults[k]
	if ft.Kind == FaultPartition {
		r.fo.cuts = slices.DeleteFunc(r.fo.cuts, func(c int) bool { return c == k })
		return nil
	}
	i := ft.Node
	n := &r.nodes[i]
	if !n.paused {
		return nil
	}
	n.paused = false
	q := n.queue
	n.queue = nil
	local := n.clk.Read(r.now)
	for _, m := range q {
		n.eng.Step(*m, local)
	}
	n.eng.Tick(local)
	return r.drain(i, local)
}

// checkLeases counts the evaluations at which two nodes are references
// under their lease, and notes the highest term.
func (r *runner) checkLeases() {
	leased := 0
	for i := range r.nodes {
		n := &r.nodes[i]
		if n.down {
			continue
		}
		m := n.mem
		r.fo.stats.Terms = max(r.fo.stats.Terms, m.Term())
		if m.Reference() == engine.NodeID(i) && m.Leased(n.clk.Read(r.now)) {
			leased++
		}
	}
	if leased > 1 {
		r.fo.stats.TwoReferences++
	}
}

// members reports whether the run drives engine.Member (the default
// engine) rather than Options.NewNode's nodes.
func (r *runner) members() bool { return r.fo != nil }

// newMember builds node i's member.
func (r *runner) newMember(i int, cfg engine.Config) (*engine.Member, error) {
	order := r.sc.Failover.Order
	if len(order) == 0 {
		order = []int{r.sc.Reference}
	}
	ids := toIDs(order)
	self := i
	all := make([]engine.NodeID, r.sc.Nodes)
	for k := range all {
		all[k] = engine.NodeID(k)
	}
	return engine.NewMember(engine.MemberConfig{
		Engine: cfg, Order: ids, Cluster: all, FailoverAfter: time.Duration(r.sc.Failover.After),
		Roles: func(ref engine.NodeID, gone []engine.NodeID) ([]engine.NodeID, []engine.NodeID, error) {
			return r.failoverRoles(self, int(ref), gone)
		},
	}, r.log)
}

// failoverRoles is node self's roles under reference ref: the scenario's
// roles when nobody is gone; else the topology over the nodes not gone
// (positions: ref, then the others by id) with the gone ones as leaves of
// ref, as the daemon builds them (daemon.Config's failoverRoles).
func (r *runner) failoverRoles(self, ref int, gone []engine.NodeID) ([]engine.NodeID, []engine.NodeID, error) {
	if len(gone) == 0 {
		if ref != r.sc.Reference {
			return nil, nil, fmt.Errorf("reference %d without a gone node: only %d starts as reference", ref, r.sc.Reference)
		}
		return toIDs(r.sources[self]), toIDs(r.children[self]), nil
	}
	if slices.Contains(gone, engine.NodeID(self)) {
		return []engine.NodeID{engine.NodeID(ref)}, nil, nil
	}
	ids := []int{ref}
	for i := range r.sc.Nodes {
		if i != ref && !slices.Contains(gone, engine.NodeID(i)) {
			ids = append(ids, i)
		}
	}
	src, ch, err := roles(r.sc.Topology, len(ids), 0)
	if err != nil {
		return nil, nil, err
	}
	pos := slices.Index(ids, self)
	var sources, children []engine.NodeID
	for _, s := range src[pos] {
		sources = append(sources, engine.NodeID(ids[s]))
	}
	for _, c := range ch[pos] {
		children = append(children, engine.NodeID(ids[c]))
	}
	if self == ref {
		children = append(children, gone...)
	}
	return sources, children, nil
}

// noteEvents records a takeover's frozen line (the new time scale).
func (r *runner) noteEvents(id int, evs []engine.Event) {
	if r.fo == nil {
		return
	}
	for _, ev := range evs {
		if ev.Kind != engine.EvReferenceChange || int(ev.Peer) != id {
			continue
		}
		fm, frozen := r.nodes[id].mem.Frozen()
		r.fo.scales[ev.Peer] = scale{frozen: frozen, fm: fm}
	}
}

// truthOf is global time at the present truth on the scale of reference
// ref.
func (r *runner) truthOf(ref engine.NodeID) int64 {
	ideal := r.nodes[ref].clk.Ideal(r.now)
	sc := r.fo.scales[ref]
	if !sc.frozen {
		return ideal
	}
	dx := ideal - sc.fm.X0
	return sc.fm.Y0 + dx + int64(math.Round(sc.fm.Skew*float64(dx)))
}

// down stops node i: no more ticks, messages to it are lost.
func (r *runner) down(i int) {
	n := &r.nodes[i]
	n.down = true
	n.tickGen++
	r.fo.haveLast[i] = false
}

// up starts node i again with a fresh member on the same clock.
func (r *runner) up(i int) error {
	n := &r.nodes[i]
	if !n.down {
		return nil
	}
	cfg := r.engineConfig()
	cfg.ID = engine.NodeID(i)
	m, err := r.newMember(i, cfg)
	if err != nil {
		return fmt.Errorf("restarting node %d: %w", i, err)
	}
	r.fo.stats.Changes += n.mem.Changes()
	r.fo.stats.StaleTerm += n.mem.StaleTerm()
	n.mem, n.eng, n.down = m, m, false
	n.tickGen++
	r.push(event{t: r.now, kind: evTick, node: int32(i), gen: n.tickGen})
	return nil
}

// checkContinuity notes node i's read at the present truth.
func (r *runner) checkContinuity(i int, est int64) {
	f := r.fo
	if f.haveLast[i] {
		if est < f.lastEst[i] {
			f.stats.Backwards++
		}
		d := (est - f.lastEst[i]) - (r.now - f.lastT[i])
		f.stats.MaxJump = max(f.stats.MaxJump, d, -d)
	}
	f.lastEst[i], f.lastT[i], f.haveLast[i] = est, r.now, true
}

// checkBackInSync ends the faults after which every running node reads
// synced time from the current view of one running reference.
func (r *runner) checkBackInSync() {
	f := r.fo
	ok := true
	ref := engine.NodeID(math.MaxUint32)
	for i := range r.nodes {
		n := &r.nodes[i]
		if n.down || n.paused {
			continue
		}
		local := n.clk.Read(r.now)
		cur := n.mem.Reference()
		if ref == math.MaxUint32 {
			ref = cur
		}
		if cur != ref || r.nodes[cur].down || r.nodes[cur].paused || n.mem.Serving(local) != cur || n.mem.Estimate(local).Status != engine.StatusSynced {
			ok = false
			break
		}
	}
	for k, ft := range r.sc.Faults {
		// A partition is judged from its heal: while it lasts, the side
		// without a majority rightly serves no promise.
		from := Origin + int64(ft.Down)
		if ft.Kind == FaultPartition {
			if ft.Up == 0 {
				continue
			}
			from = Origin + int64(ft.Up)
		}
		if f.done[k] || r.now < from {
			continue
		}
		if ok && r.now > from {
			f.done[k] = true
			f.stats.BackInSync[k] = Duration(r.now - from)
		}
	}
}

// failoverResult sums up the failover statistics.
func (r *runner) failoverResult() *FailoverStats {
	if r.fo == nil || (len(r.sc.Failover.Order) < 2 && len(r.sc.Faults) == 0) {
		return nil
	}
	s := r.fo.stats
	s.BackInSync = slices.Clone(s.BackInSync)
	for i := range r.nodes {
		if !r.nodes[i].down {
			s.Changes += r.nodes[i].mem.Changes()
			s.StaleTerm += r.nodes[i].mem.StaleTerm()
		}
	}
	return &s
}
