package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/gclock/gclock/estimate"
)

// Reference election and failover (docs/daemon.md, "Reference failover").
//
// A Member is one node of a cluster with a reference order: it wraps the
// Node of the current view (the roles for the current reference) and owns
// the choice of that reference. Like Node it is a pure state machine: Tick
// and Step go in, Ready comes out; it reads no clock and opens no socket.
//
// Every member watches the current reference of the order: any engine
// message from it (probe, time diff, period change) or an answer to a
// status query counts as heard. A member that has heard nothing for
// FailoverAfter/2 asks the reference for its status; after FailoverAfter of
// silence it moves to the next node of the order that answers a status
// query (or that is itself). A member that takes over freezes its last
// local->global line and from then on runs its Node on that line
// extrapolated: global time continues from the member's own estimate. The
// others rebuild their Node for the new roles and keep reading global time
// from the old one until the new one is synced. A member that starts asks
// the others who the reference is (discovery), so a returning reference
// follows the current one instead of serving too.

// MemberConfig configures a Member.
type MemberConfig struct {
	// Engine is this node's engine configuration; Sources and Children are
	// ignored: they come from Roles for each reference.
	Engine Config
	// Order is the reference order: Order[0] is the reference when the
	// cluster starts, then the failover order. Fewer than two nodes: no
	// failover, the Member is its Node.
	Order []NodeID
	// FailoverAfter is how long the reference may be silent before the
	// member moves to the next of the order.
	FailoverAfter time.Duration
	// Roles gives this node's sources and children when ref is the
	// reference and gone (the nodes before it in Order) are presumed gone.
	Roles func(ref NodeID, gone []NodeID) (sources, children []NodeID, err error)
	// NoDiscovery starts on Order[0] at once instead of asking the others
	// who the reference is first.
	NoDiscovery bool
}

// Member is a node that follows a reference of an order and fails over
// (see MemberConfig). Not safe for concurrent use.
type Member struct {
	cfg   MemberConfig
	log   *slog.Logger
	self  NodeID
	after int64

	view *view
	idx  int // index in Order of the current reference

	started bool
	heard   int64 // local time the reference was last heard
	changes uint64
	stuck   bool // the last failover found nobody: log quietly until that changes
	seq     uint32

	// Discovery (at start): queries out until discEnd; best index named.
	discovering bool
	discEnd     int64
	discWait    map[NodeID]uint32
	discBest    int

	// Liveness query to the reference.
	qSeq uint32
	qEnd int64 // 0: none out

	// Failover walk: querying Order[walk] until walkEnd.
	walk    int // 0: none
	walkSeq uint32
	walkEnd int64

	out      Ready // collected output
	nodeNext int64 // the view's last NextTick
}

// view is the Node of one reference. After a takeover the Node runs on a
// frozen mapping of the local clock; after a change of reference, reads
// come from the previous view (prev) until the new one is synced.
//
// A new Node numbers its rounds and period changes from 1 again, and a
// child ignores a round or change numbered below one it has seen. So each
// view shifts the numbers it sends by the largest its predecessor sent
// (roundBase, seqBase) and shifts them back in the answers.
type view struct {
	ref    NodeID
	cur    *Node
	prev   *view
	frozen bool
	fm     estimate.Mapping // local -> engine clock when frozen

	roundBase, seqBase uint32 // added to outgoing Round / period-change Seq
	maxRound, maxSeq   uint32 // largest sent (after the shift)
}

// NewMember builds a member on the first reference of the order.
func NewMember(cfg MemberConfig, logger *slog.Logger) (*Member, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	self := cfg.Engine.ID
	if len(cfg.Order) == 0 {
		return nil, fmt.Errorf("engine: member %d: reference order: empty: %w", self, ErrConfig)
	}
	if cfg.Roles == nil {
		return nil, fmt.Errorf("engine: member %d: no roles function: %w", self, ErrConfig)
	}
	if len(cfg.Order) > 1 && cfg.FailoverAfter <= 0 {
		return nil, fmt.Errorf("engine: member %d: failover_after %v: must be positive: %w", self, cfg.FailoverAfter, ErrConfig)
	}
	for i, id := range cfg.Order {
		if slices.Index(cfg.Order, id) != i {
			return nil, fmt.Errorf("engine: member %d: reference order: node %d twice: %w", self, id, ErrConfig)
		}
	}
	cfg.Order = slices.Clone(cfg.Order)
	m := &Member{cfg: cfg, log: logger.With("node", self), self: self, after: int64(cfg.FailoverAfter)}
	eng, err := m.newNode(0)
	if err != nil {
		return nil, err
	}
	m.view = &view{ref: cfg.Order[0], cur: eng}
	return m, nil
}

func (m *Member) newNode(j int) (*Node, error) {
	ref := m.cfg.Order[j]
	src, ch, err := m.cfg.Roles(ref, m.cfg.Order[:j])
	if err != nil {
		return nil, fmt.Errorf("engine: member %d: roles under reference %d: %w", m.self, ref, err)
	}
	c := m.cfg.Engine
	c.Sources, c.Children = src, ch
	return New(c, m.log)
}

// failover reports whether the member watches the reference at all.
func (m *Member) failover() bool { return len(m.cfg.Order) > 1 }

// queryTimeout is how long a liveness or failover query waits for its
// answer.
func (m *Member) queryTimeout() int64 {
	return min(max(m.after/4, int64(20*time.Millisecond)), int64(time.Second))
}

// discoverTimeout is how long discovery waits for answers.
func (m *Member) discoverTimeout() int64 {
	return min(max(m.after/2, int64(50*time.Millisecond)), int64(time.Second))
}

// Reference is the current reference.
func (m *Member) Reference() NodeID { return m.cfg.Order[m.idx] }

// Changes counts the reference changes so far.
func (m *Member) Changes() uint64 { return m.changes }

// Discovering reports whether the member is still asking who the
// reference is (it answers no status query meanwhile).
func (m *Member) Discovering() bool { return m.discovering }

// Node is the current view's engine (for snapshots, priors, checks). Its
// local clock is In(local).
func (m *Member) Node() *Node { return m.view.cur }

// In maps a local time onto the current Node's clock: the identity, or
// the frozen line after a takeover.
func (m *Member) In(local int64) int64 { return m.view.in(local) }

// Frozen returns the frozen local->global line of a member that took
// over, and whether it did.
func (m *Member) Frozen() (estimate.Mapping, bool) { return m.view.fm, m.view.frozen }

// Numbers returns the largest round and period-change numbers sent.
func (m *Member) Numbers() (round, seq uint32) { return m.view.maxRound, m.view.maxSeq }

// SetNumbers makes the member number its rounds and period changes after
// round and seq (a restarted node's, restored from its state). Call before
// the first Tick.
func (m *Member) SetNumbers(round, seq uint32) {
	v := m.view
	v.roundBase, v.seqBase = round, seq
	v.maxRound, v.maxSeq = round, seq
}

// Serving is the reference whose view the last Estimate or Read at local
// would come from: the current one, or the previous one while the current
// is unsynced.
func (m *Member) Serving(local int64) NodeID {
	v, _ := m.view.serving(local)
	return v.ref
}

// Estimate is global time at local: the current view's, or the previous
// view's while the current one is unsynced.
func (m *Member) Estimate(local int64) Time { return m.looking(m.view.estimate(local)) }

// looking hides the default reference's reading while the member has not
// yet asked who the reference is: a returning reference would otherwise
// serve its own clock as synced, zero wide, while the cluster runs on
// another node's time scale. A restored prior (stale, bounded) stays.
func (m *Member) looking(t Time) Time {
	if (m.started && !m.discovering) || !m.failover() || m.cfg.NoDiscovery || t.Status != StatusSynced {
		return t
	}
	return Time{Est: t.Est, Earliest: math.MinInt64, Latest: math.MaxInt64, Status: StatusUnsynced}
}

// Read is Estimate that also advances the monotonic reading of the view
// that answers.
func (m *Member) Read(local int64) Time { return m.looking(m.view.read(local)) }

// CheckMessage is Node.CheckMessage for a message the member would pass to
// its Node (status messages are always accepted here).
func (m *Member) CheckMessage(msg Message, local int64) error {
	switch msg.Type {
	case MsgStatusQuery, MsgStatusReply:
		return nil
	}
	v := m.view
	v.stamps(&msg)
	v.unshift(&msg)
	return v.cur.CheckMessage(msg, v.in(local))
}

// Tick advances the member to local: starts discovery on the first call,
// runs the reference watch and the Node's timers.
func (m *Member) Tick(local int64) {
	if !m.started {
		m.started = true
		m.heard = local
		if m.failover() && !m.cfg.NoDiscovery {
			m.startDiscovery(local)
			return
		}
	}
	if m.discovering {
		if local < m.discEnd {
			return
		}
		m.endDiscovery(local)
	}
	m.watch(local)
	m.view.cur.Tick(m.view.in(local))
	m.drain(local)
}

// Step gives the member a message received at local.
func (m *Member) Step(msg Message, local int64) {
	switch msg.Type {
	case MsgStatusQuery:
		if m.discovering || !m.started {
			// Not knowing the reference yet, it would name the default one:
			// the asker decides without this answer. An asker this member
			// waits for is starting too: it will name nobody either.
			if _, ok := m.discWait[msg.From]; ok && m.discovering {
				delete(m.discWait, msg.From)
				m.discoveryAnswered(local)
			}
			return
		}
		m.out.Messages = append(m.out.Messages, Message{Type: MsgStatusReply, From: m.self, To: msg.From, Seq: msg.Seq, Reference: m.Reference()})
		return
	case MsgStatusReply:
		m.statusReply(msg, local)
		return
	}
	if msg.From == m.Reference() {
		m.heardRef(local)
	}
	v := m.view
	v.stamps(&msg)
	v.unshift(&msg)
	v.cur.Step(msg, v.in(local))
	m.drain(local)
}

// TxStamp is Node.TxStamp on the current view: the transmit stamp local
// of the probe or reply seq sent to to (stamps.go).
func (m *Member) TxStamp(t MsgType, to NodeID, seq uint32, local int64) {
	m.view.cur.TxStamp(t, to, seq, m.view.in(local))
}

// Ready returns the messages and events since the last call and the local
// time of the next Tick wanted (0: none).
func (m *Member) Ready() Ready {
	r := m.out
	m.out = Ready{}
	next := m.nodeNext
	if m.discovering {
		next = m.discEnd // the Node is not ticked before
	}
	at := func(t int64) {
		if t != 0 && (next == 0 || t < next) {
			next = t
		}
	}
	if m.started && m.failover() && !m.discovering && m.Reference() != m.self {
		switch {
		case m.walk != 0:
			at(m.walkEnd)
		case m.qEnd != 0:
			at(min(m.qEnd, m.heard+m.after))
		default:
			at(m.heard + (m.after+1)/2)
		}
	}
	if !m.started {
		next = 0
	}
	r.NextTick = next
	return r
}

// drain collects the view's output after a Tick or Step.
func (m *Member) drain(local int64) {
	r := m.view.ready()
	m.out.Messages = append(m.out.Messages, r.Messages...)
	m.out.Events = append(m.out.Events, r.Events...)
	m.out.Rounds = append(m.out.Rounds, r.Rounds...)
	m.nodeNext = r.NextTick
	m.view.dropPrev(local)
}

func (m *Member) query(to NodeID, local int64) uint32 {
	m.seq++
	m.out.Messages = append(m.out.Messages, Message{Type: MsgStatusQuery, From: m.self, To: to, Seq: m.seq})
	return m.seq
}

func (m *Member) heardRef(local int64) {
	m.heard = local
	m.stuck = false
	m.walk = 0 // the reference is back: no failover
}

// ---- discovery ----

func (m *Member) startDiscovery(local int64) {
	m.discovering = true
	m.discEnd = local + m.discoverTimeout()
	m.discWait = map[NodeID]uint32{}
	m.discBest = 0
	for _, id := range m.cfg.Order {
		if id != m.self {
			m.discWait[id] = m.query(id, local)
		}
	}
}

// discoveryAnswered ends discovery once every node asked has answered.
func (m *Member) discoveryAnswered(local int64) {
	if len(m.discWait) > 0 {
		return
	}
	m.endDiscovery(local)
	m.watch(local)
	m.view.cur.Tick(m.view.in(local))
	m.drain(local)
}

// endDiscovery follows the latest node of the order that anyone named.
// With nobody answering (the cluster is starting), the first of the order
// is the reference.
func (m *Member) endDiscovery(local int64) {
	m.discovering = false
	m.discWait = nil
	m.heard = local
	best := m.discBest
	if best == 0 {
		return
	}
	if m.cfg.Order[best] == m.self {
		// The others still follow this node: it restarted before they
		// noticed. Its frozen line is lost; global time restarts from its
		// clock (docs/daemon.md).
		m.log.Warn("restarted while still the reference: global time restarts from this node's clock")
	} else {
		m.log.Info("joining the current reference", "reference", m.cfg.Order[best])
	}
	m.rebuild(best, false, local)
	// The view before discovery followed the default reference, a guess:
	// it must not serve while the new one acquires (for a returning
	// reference it is its own clock, not the cluster's time scale).
	m.view.prev = nil
}

// ---- liveness ----

// watch checks the current reference at local.
func (m *Member) watch(local int64) {
	if !m.failover() || m.Reference() == m.self {
		return
	}
	if m.walk != 0 {
		if local >= m.walkEnd {
			m.logIf(!m.stuck, slog.LevelInfo, "next in reference.order does not answer", "node", m.cfg.Order[m.walk])
			m.walkFrom(m.walk+1, local)
		}
		return
	}
	if m.qEnd != 0 && local >= m.qEnd {
		m.qEnd = 0 // unanswered: a new query if still quiet
	}
	quiet := local - m.heard
	if quiet >= m.after {
		m.qEnd = 0
		m.walkFrom(m.idx+1, local)
		return
	}
	if quiet >= (m.after+1)/2 && m.qEnd == 0 {
		m.qSeq = m.query(m.Reference(), local)
		m.qEnd = local + m.queryTimeout()
	}
}

// walkFrom moves to node j of the order: this node takes over, another is
// asked for its status (its reply, or its silence, moves the walk on).
func (m *Member) walkFrom(j int, local int64) {
	old := m.Reference()
	if j < len(m.cfg.Order) {
		id := m.cfg.Order[j]
		if id == m.self {
			m.stuck = false
			m.walk = 0
			m.log.Warn("reference silent: taking over", "old", old, "silent_for", time.Duration(m.after))
			m.rebuild(j, true, local)
			return
		}
		m.walk, m.walkEnd = j, local+m.queryTimeout()
		m.walkSeq = m.query(id, local)
		return
	}
	// Nobody after the reference answers: keep waiting for it.
	m.logIf(!m.stuck, slog.LevelWarn, "reference silent and no node after it in reference.order answers (logged again when that changes)", "reference", old)
	m.stuck = true
	m.walk = 0
	m.heard = local
}

func (m *Member) statusReply(r Message, local int64) {
	j := slices.Index(m.cfg.Order, r.Reference)
	if j < 0 {
		m.log.Debug("status reply names a node outside the order", "from", r.From, "reference", r.Reference)
		return
	}
	switch {
	case m.discovering:
		if seq, ok := m.discWait[r.From]; !ok || seq != r.Seq {
			return
		}
		delete(m.discWait, r.From)
		m.discBest = max(m.discBest, j)
		m.discoveryAnswered(local)
	case m.walk != 0 && r.From == m.cfg.Order[m.walk] && r.Seq == m.walkSeq:
		m.stuck = false
		m.log.Warn("reference silent: following the next in order", "old", m.Reference(), "reference", r.From)
		walk := m.walk
		m.walk = 0
		m.rebuild(walk, false, local)
	case r.From == m.Reference() && m.Reference() != m.self:
		m.heardRef(local)
		m.qEnd = 0
		// The reference itself follows a later node: follow it too.
		if j > m.idx {
			m.log.Info("the reference follows a later node", "reference", m.Reference(), "new", r.Reference)
			m.rebuild(j, false, local)
		}
	}
}

// rebuild makes Order[j] the reference: a new Node for the new roles.
// takeOver (Order[j] is this node): the Node's clock becomes the frozen
// line of global time as this node estimates it at local.
func (m *Member) rebuild(j int, takeOver bool, local int64) {
	ref := m.cfg.Order[j]
	eng, err := m.newNode(j)
	if err != nil {
		m.log.Error("cannot change reference", "reference", ref, "err", err)
		return
	}
	old := m.view
	v := &view{ref: ref, cur: eng, roundBase: old.maxRound, seqBase: old.maxSeq, maxRound: old.maxRound, maxSeq: old.maxSeq}
	if takeOver {
		t0 := old.estimate(local)
		v.frozen = true
		if t0.Status == StatusUnsynced {
			m.log.Warn("taking over unsynced: global time continues from this node's clock")
			v.fm = estimate.Mapping{X0: local, Y0: local, Valid: true}
		} else {
			// The rate: the middle of the bounds 30 s ahead, which follows
			// the middle of the rates the exchanges allow, rather than the
			// selected estimator's line, whose rate a few seconds after
			// synchronizing was up to 14 ppm off on loopback
			// (TestRunFailoverUDP: the old scale 41 us away 4 s after the
			// takeover in one run of ten, at most 7.5 us in eleven with
			// this). Without finite bounds, the estimator's line.
			const far = 30 * int64(time.Second)
			var skew float64
			if tf := old.estimate(local + far); bounded(t0) && bounded(tf) {
				m0 := t0.Earliest/2 + t0.Latest/2
				mf := tf.Earliest/2 + tf.Latest/2
				skew = float64(mf-m0-far) / float64(far)
			} else {
				const d = int64(time.Second)
				skew = float64(old.estimate(local+d).Est-t0.Est-d) / float64(d)
			}
			v.fm = estimate.Mapping{X0: local, Y0: t0.Est, Skew: skew, Valid: true}
			m.log.Info("global time frozen at takeover", "local", local, "global", t0.Est, "skew", v.fm.Skew,
				"width", t0.Latest-t0.Earliest)
		}
	} else {
		v.prev = old
		if old.cur.HasPrior() {
			v.prev = nil // a restored prior bounds the old reference's time, never synced since
		}
		for p := v.prev; p != nil; p = p.prev {
			if p.prev != nil && p.prev.prev != nil {
				p.prev.prev = nil // keep at most two generations
			}
		}
	}
	m.view = v
	m.idx = j
	m.heard = local
	m.qEnd, m.walk = 0, 0
	m.changes++
	took := 0.0
	if takeOver {
		took = 1
	}
	m.out.Events = append(m.out.Events, Event{Local: local, Kind: EvReferenceChange, Peer: ref, Value: took})
	v.cur.Tick(v.in(local))
	m.drain(local)
}

// logIf logs at level if loud, at debug level otherwise: a condition that
// persists is logged when it starts, not at every check.
func (m *Member) logIf(loud bool, level slog.Level, msg string, args ...any) {
	if !loud {
		level = slog.LevelDebug
	}
	m.log.Log(context.Background(), level, msg, args...)
}

// ---- the view ----

// stamps maps a driver's receive stamps (a probe's T2, a reply's T4) onto
// the Node's clock, as the Step time is.
func (v *view) stamps(msg *Message) {
	msg.T4 = v.in(msg.T4)
	if msg.Type == MsgProbe {
		msg.T2 = v.in(msg.T2)
	}
}

// in maps a local time onto the Node's clock.
func (v *view) in(local int64) int64 {
	if !v.frozen || local == 0 {
		return local
	}
	dx := local - v.fm.X0
	return v.fm.Y0 + dx + int64(math.Round(v.fm.Skew*float64(dx)))
}

// out maps a Node time back onto the local clock, rounded up so that a
// timer set there is not early.
func (v *view) out(x int64) int64 {
	if !v.frozen || x == 0 {
		return x
	}
	return v.fm.X0 + int64(math.Ceil(float64(x-v.fm.Y0)/(1+v.fm.Skew))) + 1
}

// unshift takes the view's numbering back out of an answer.
func (v *view) unshift(m *Message) {
	if m.Type == MsgProbeReply || m.Type == MsgErrReport {
		m.Round -= v.roundBase
	}
}

// ready is the Node's output with the view's numbering and timers on the
// local clock.
func (v *view) ready() Ready {
	r := v.cur.Ready()
	r.NextTick = v.out(r.NextTick)
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Type {
		case MsgProbe, MsgTimeDiff, MsgPeriodChange:
			m.Round += v.roundBase
			v.maxRound = max(v.maxRound, m.Round)
		}
		if m.Type == MsgPeriodChange {
			m.Seq += v.seqBase
			v.maxSeq = max(v.maxSeq, m.Seq)
		}
	}
	return r
}

// dropPrev forgets the previous view once the current one is synced.
func (v *view) dropPrev(local int64) {
	if v.prev != nil && v.cur.Estimate(v.in(local)).Status != StatusUnsynced {
		v.prev = nil
	}
}

// serving is the view that answers a reading at local: v, or the newest
// of its previous views while the ones after it are unsynced (fell).
func (v *view) serving(local int64) (s *view, fell bool) {
	for v.prev != nil && v.cur.Estimate(v.in(local)).Status == StatusUnsynced {
		v, fell = v.prev, true
	}
	return v, fell
}

func (v *view) estimate(local int64) Time {
	s, fell := v.serving(local)
	t := s.cur.Estimate(s.in(local))
	if fell {
		t = notPromised(t)
	}
	return t
}

// notPromised marks a reading of the previous view: it bounds the old
// reference's time scale, and the new reference's differs from it by that
// node's error when it took over, which this member does not know. The
// reading continues global time but is not a promise: synced becomes stale.
func notPromised(t Time) Time {
	if t.Status == StatusSynced {
		t.Status = StatusStale
	}
	return t
}

func (v *view) read(local int64) Time {
	s, fell := v.serving(local)
	t := s.cur.Read(s.in(local))
	if fell {
		t = notPromised(t)
	}
	return t
}

// bounded reports whether both of t's bounds are finite.
func bounded(t Time) bool { return t.Earliest > math.MinInt64 && t.Latest < math.MaxInt64 }
