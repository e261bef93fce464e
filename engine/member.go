package engine

import (
	"context"
	"errors"
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
// Terms. The cluster moves through terms (as raft's): the reference of
// term t is Order[t mod len(Order)], so a term names one reference by
// construction. Every message carries its sender's term. A member that
// hears of a newer term follows its reference (a reference steps down);
// an engine message of an older term is refused (counted, StaleTerm) and
// its sender is told the newer term.
//
// Leases. Only a majority of the cluster makes a reference: the reference
// sends heartbeats (status queries with FlagBeat) every failover_after/12
// and promises time (StatusSynced) only while a majority, itself included,
// acknowledged one sent less than failover_after/4 ago. A follower
// promises time only while it heard, less than failover_after/4 ago, a
// heartbeat its bounds show to be fresh and that the reference sent
// under its lease. A member votes for a new term only after
// 3/4 failover_after without a word from its reference, and never again
// acknowledges a heartbeat of an older term. So every promise on the old
// term ends before the new reference is elected (4/16 + 1/16 + 4/16 of
// failover_after after the last majority heard the old one, against
// 12/16): a paused, partitioned or returning reference serves no
// conflicting time; its reads say stale until it learns the newer term.
//
// Failover. A member that has heard nothing from its reference for
// FailoverAfter/2 asks it for its status; after FailoverAfter of silence
// it walks the order from the reference on: a node that answers will
// stand (the member waits for its term); when the walk reaches the member
// itself, it asks every node for its vote on the next term naming it, and
// takes over when a majority grants it. A member that takes over freezes
// its last local->global line and from then on runs its Node on that line
// extrapolated: global time continues from the member's own estimate. The
// others rebuild their Node for the new roles and keep reading global time
// from the old one (stale) until the new one is synced. A member that
// starts asks the others for their term (discovery), so a returning
// reference follows the current one instead of serving too.

// MemberConfig configures a Member.
type MemberConfig struct {
	// Engine is this node's engine configuration; Sources and Children are
	// ignored: they come from Roles for each reference.
	Engine Config
	// Order is the reference order: Order[0] is the reference when the
	// cluster starts, then the failover order. Fewer than two nodes: no
	// failover, the Member is its Node.
	Order []NodeID
	// Cluster is every node of the cluster (this one included): the
	// electorate, whose majority makes a reference and who get its
	// heartbeats. Empty: Order.
	Cluster []NodeID
	// FailoverAfter is how long the reference may be silent before the
	// member moves to the next of the order.
	FailoverAfter time.Duration
	// Roles gives this node's sources and children when ref is the
	// reference and gone (the nodes before it in Order) are presumed gone.
	Roles func(ref NodeID, gone []NodeID) (sources, children []NodeID, err error)
	// NoDiscovery starts on Order[0] at once instead of asking the others
	// who the reference is first.
	NoDiscovery bool
	// FirstSeq numbers the status queries after it. A driver whose
	// transport answers a repeated (sender, seq) from a reply cache must
	// make it differ from one start to the next (the daemon takes the
	// boot's microseconds), else a restarted node's queries would get the
	// cached answers to its previous life's: a vote it was never given.
	FirstSeq uint32
}

// Member is a node that follows a reference of an order and fails over
// (see MemberConfig). Not safe for concurrent use.
type Member struct {
	cfg   MemberConfig
	log   *slog.Logger
	self  NodeID
	after int64

	view *view
	idx  int // index in Order of the current reference: term mod len(Order)

	started bool
	heard   int64 // local time the reference was last heard
	changes uint64
	stuck   bool // the last failover found nobody: log quietly until that changes
	seq     uint32

	// Election.
	term     uint32          // current term
	voted    uint32          // highest term this member is bound to by a vote (max of term and grants)
	grants   map[uint32]bool // terms voted for, above term
	refSince int64           // reference: local time it became the reference
	stale    uint64          // engine messages refused for an older term
	lease    int64           // reference: local time its majority lease ends
	fLease   int64           // follower: local time its reference's lease ends
	beatNext int64           // reference: next heartbeat
	beats    map[uint32]int64
	acked    map[NodeID]int64 // per node: send time of the newest heartbeat acknowledged
	notice   map[NodeID]int64 // per node: when it was last told the current term
	nextWalk int64            // no failover walk before this

	// Candidacy: votes asked for candTerm until candEnd.
	cand     bool
	candTerm uint32
	candIdx  int
	candSent int64
	candEnd  int64
	candSeqs map[NodeID]uint32
	votes    map[NodeID]bool

	// Discovery (at start): queries out until discEnd; highest term named.
	discovering bool
	discEnd     int64
	discWait    map[NodeID]uint32
	discTerm    uint32

	// Liveness query to the reference.
	qSeq uint32
	qEnd int64 // 0: none out

	// Failover walk: while walking, querying Order[walk] until walkEnd;
	// walkK is its distance from the reference in the order.
	walking bool
	walk    int
	walkK   int
	walkSeq uint32
	walkEnd int64

	out      Ready // collected output
	nodeNext int64 // the view's last NextTick

	// A scale this node defined as a reference before a restart
	// (RestoreScale), continued if discovery finds it still the
	// reference of that term.
	restored      estimate.Mapping
	restoredTerm  uint32
	haveRestored  bool
	continueScale *estimate.Mapping // for the next rebuild of this node's own view
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
	if len(cfg.Cluster) == 0 {
		cfg.Cluster = cfg.Order
	}
	cfg.Cluster = slices.Clone(cfg.Cluster)
	for i, id := range cfg.Cluster {
		if slices.Index(cfg.Cluster, id) != i {
			return nil, fmt.Errorf("engine: member %d: cluster: node %d twice: %w", self, id, ErrConfig)
		}
	}
	for _, id := range append([]NodeID{self}, cfg.Order...) {
		if !slices.Contains(cfg.Cluster, id) {
			return nil, fmt.Errorf("engine: member %d: cluster: node %d (self or in the order) missing: %w", self, id, ErrConfig)
		}
	}
	m := &Member{cfg: cfg, log: logger.With("node", self), self: self, after: int64(cfg.FailoverAfter), seq: cfg.FirstSeq,
		beats: map[uint32]int64{}, acked: map[NodeID]int64{}, notice: map[NodeID]int64{}, grants: map[uint32]bool{}}
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

// The election's times, as fractions of failover_after (see the comment
// at the top): the sum of the two leases and the largest age of a
// heartbeat that renews a follower's must stay below voteSilence.
func (m *Member) beatEvery() int64   { return max(m.after/12, 1) }
func (m *Member) leaseRef() int64    { return m.after / 4 }
func (m *Member) leaseFollow() int64 { return m.after / 4 }
func (m *Member) maxBeatAge() int64  { return m.after / 16 }
func (m *Member) voteSilence() int64 { return m.after * 3 / 4 }

// majority is the number of nodes, this one included, that make a
// reference.
func (m *Member) majority() int { return len(m.cfg.Cluster)/2 + 1 }

// refOf is the reference of term t.
func (m *Member) refOf(t uint32) NodeID { return m.cfg.Order[int(t%uint32(len(m.cfg.Order)))] }

// termFor is the first term after the current one whose reference is
// Order[j].
func (m *Member) termFor(j int) uint32 {
	n := uint32(len(m.cfg.Order))
	t := m.term + 1
	return t + (uint32(j)+n-t%n)%n
}

// Reference is the current reference.
func (m *Member) Reference() NodeID { return m.cfg.Order[m.idx] }

// Term is the current term.
func (m *Member) Term() uint32 { return m.term }

// StaleTerm counts the engine messages refused because they came from an
// older term.
func (m *Member) StaleTerm() uint64 { return m.stale }

// Leased reports whether the member may promise time at local: it is the
// reference and a majority acknowledged it recently, or it follows one
// whose lease it heard of recently. Always true without failover.
func (m *Member) Leased(local int64) bool {
	if !m.failover() {
		return true
	}
	if m.Reference() == m.self {
		return !m.discovering && m.started && local < m.lease
	}
	return local < m.fLease
}

// LeaseEnd is the local time at which the member's lease ends (see
// Leased): a driver that publishes time for later reads (the daemon's
// page) must not let them say synced beyond it. math.MaxInt64 without
// failover.
func (m *Member) LeaseEnd() int64 {
	switch {
	case !m.failover():
		return math.MaxInt64
	case m.Reference() == m.self:
		if m.discovering || !m.started {
			return 0
		}
		return m.lease
	}
	return m.fLease
}

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

// Scale returns the definition of global time in the current term when
// this member is that term's reference and serves it (not while it asks
// who the reference is): global time at local time l is
// fm.Y0 + (l - fm.X0)(1 + fm.Skew). It is the identity for a reference
// that did not take over (global time is its clock) and the frozen line
// for one that did. A follower does not know it exactly: ok is false.
func (m *Member) Scale() (term uint32, fm estimate.Mapping, ok bool) {
	if m.Reference() != m.self || !m.started || m.discovering {
		return m.term, estimate.Mapping{}, false
	}
	if m.view.frozen {
		return m.term, m.view.fm, true
	}
	return m.term, estimate.Mapping{Valid: true}, true
}

// RestoreScale gives a member that has not started the scale it defined
// as the reference of term before a restart (Scale, kept in the daemon's
// state file, on the same local clock): if discovery finds the cluster
// still naming it the reference of that term, it leads it on that scale
// (the frozen line of a takeover) instead of restarting global time from
// its clock, which would give the term two scales.
func (m *Member) RestoreScale(term uint32, fm estimate.Mapping) error {
	if m.started {
		return fmt.Errorf("engine: member %d: restore a scale after the start: %w", m.self, ErrConfig)
	}
	if !fm.Valid || math.IsNaN(fm.Skew) || math.IsInf(fm.Skew, 0) || math.Abs(fm.Skew) > MaxMsgSkew ||
		fm.X0 <= -MaxMsgTime || fm.X0 >= MaxMsgTime || fm.Y0 <= -MaxMsgTime || fm.Y0 >= MaxMsgTime {
		return fmt.Errorf("engine: member %d: scale of term %d %+v: want a valid line within the message limits: %w", m.self, term, fm, ErrConfig)
	}
	m.restored, m.restoredTerm, m.haveRestored = estimate.Mapping{X0: fm.X0, Y0: fm.Y0, Skew: fm.Skew, Valid: true}, term, true
	return nil
}

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
func (m *Member) Estimate(local int64) Time {
	return m.looking(m.promise(m.view.estimate(local), local))
}

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

// promise keeps StatusSynced only under a lease (Leased): a reference cut
// off from the majority, or a follower that no longer hears its leased
// heartbeats, may be on a time scale a newer term has replaced.
func (m *Member) promise(t Time, local int64) Time {
	if t.Status == StatusSynced && !m.Leased(local) {
		t.Status = StatusStale
	}
	return t
}

// Read is Estimate that also advances the monotonic reading of the view
// that answers.
func (m *Member) Read(local int64) Time {
	return m.looking(m.promise(m.view.read(local), local))
}

// ErrStaleTerm is returned by CheckMessage for an engine message of a term
// older than the member's.
var ErrStaleTerm = errors.New("engine: message from an older term")

// CheckMessage is Node.CheckMessage for a message the member would pass to
// its Node (status messages are always accepted here).
func (m *Member) CheckMessage(msg Message, local int64) error {
	switch msg.Type {
	case MsgStatusQuery, MsgStatusReply:
		return nil
	}
	if m.failover() && msg.Term < m.term {
		return fmt.Errorf("member %d: message from %d of term %d, current %d: %w", m.self, msg.From, msg.Term, m.term, ErrStaleTerm)
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
		m.refSince = local
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
	// A vote request or a resignation names a term nobody leads (yet, or
	// any more): it makes nobody follow.
	if m.failover() && msg.Term > m.term && !(msg.Type == MsgStatusQuery && msg.Flags&(FlagVote|FlagResign) != 0) {
		if m.started && !m.discovering {
			m.adopt(msg.Term, local)
		} else {
			m.discTerm = max(m.discTerm, msg.Term)
		}
	}
	switch msg.Type {
	case MsgStatusQuery:
		m.statusQuery(msg, local)
		return
	case MsgStatusReply:
		m.statusReply(msg, local)
		return
	}
	if m.failover() && msg.Term < m.term {
		m.stale++
		m.tell(msg.From, local)
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
	if m.started && m.failover() && !m.discovering {
		switch {
		case m.cand:
			at(m.candEnd)
		case m.Reference() == m.self:
			at(m.beatNext)
		case m.walking:
			at(m.walkEnd)
		case m.qEnd != 0:
			at(min(m.qEnd, max(m.heard+m.after, m.nextWalk)))
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
	for i := range r.Messages {
		r.Messages[i].Term = m.term
	}
	if m.quiet(local) {
		r.Messages = nil
	}
	m.out.Messages = append(m.out.Messages, r.Messages...)
	m.out.Events = append(m.out.Events, r.Events...)
	m.out.Rounds = append(m.out.Rounds, r.Rounds...)
	m.nodeNext = r.NextTick
	m.view.dropPrev(local)
}

// query sends a status query in the current term.
func (m *Member) query(to NodeID, local int64) uint32 {
	return m.send(Message{Type: MsgStatusQuery, To: to, Term: m.term})
}

// send sends a status query (From and Seq filled in).
func (m *Member) send(q Message) uint32 {
	m.seq++
	if m.seq == 0 {
		m.seq++ // 0 answers nothing (a wrapped counter)
	}
	q.From, q.Seq = m.self, m.seq
	m.out.Messages = append(m.out.Messages, q)
	return m.seq
}

// tell sends a node that spoke in an older term a status query in the
// current one, which makes it follow (at most once per query timeout).
func (m *Member) tell(to NodeID, local int64) {
	if at, ok := m.notice[to]; ok && local-at < m.queryTimeout() && local >= at {
		return
	}
	m.notice[to] = local
	m.query(to, local)
}

func (m *Member) heardRef(local int64) {
	m.heard = local
	m.stuck = false
	m.walking = false // the reference is back: no failover
}

// ---- terms ----

// adopt follows the reference of term t, newer than the current one: a
// reference steps down, a candidate gives up.
func (m *Member) adopt(t uint32, local int64) {
	old := m.Reference()
	j := int(t % uint32(len(m.cfg.Order)))
	m.log.Info("newer term: following its reference", "term", t, "old_term", m.term, "old", old, "reference", m.cfg.Order[j])
	if m.cand && m.candTerm <= t {
		m.cand = false
	}
	m.term = t
	m.bind()
	if m.cfg.Order[j] == m.self {
		// This node stood for t and lost its state since (a restart), or
		// won it without hearing so: it leads t, continuing global time
		// from its own estimate as a takeover does (its clock if it has
		// none, logged), under a lease a majority must still grant.
		m.log.Warn("a newer term names this node: leading it, global time continues from this node's estimate", "term", t)
		m.lease, m.acked = 0, map[NodeID]int64{}
		m.rebuild(j, true, local)
		m.fLease = 0
		return
	}
	m.rebuild(j, false, local)
	m.fLease = 0
}

// ---- discovery ----

func (m *Member) startDiscovery(local int64) {
	m.discovering = true
	m.discEnd = local + m.discoverTimeout()
	m.discWait = map[NodeID]uint32{}
	for _, id := range m.cfg.Cluster {
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

// endDiscovery follows the reference of the highest term anyone named.
// With nobody answering (the cluster is starting), term 0: the first of
// the order is the reference.
func (m *Member) endDiscovery(local int64) {
	m.discovering = false
	m.discWait = nil
	m.heard = local
	t := m.discTerm
	if t <= m.term {
		return
	}
	m.term = t
	m.bind()
	best := int(t % uint32(len(m.cfg.Order)))
	if m.cfg.Order[best] == m.self {
		// The others still follow this node: it restarted before they
		// noticed. With the scale it defined for this term (its state
		// file), it continues it; without, global time restarts from its
		// clock (docs/daemon.md).
		if m.haveRestored && m.restoredTerm == t {
			m.log.Info("restarted while still the reference: continuing the term's scale", "term", t,
				"x0", m.restored.X0, "y0", m.restored.Y0, "skew", m.restored.Skew)
			fm := m.restored
			m.continueScale = &fm
		} else {
			m.log.Warn("restarted while still the reference: global time restarts from this node's clock", "term", t)
		}
	} else {
		m.log.Info("joining the current reference", "reference", m.cfg.Order[best], "term", t)
	}
	m.rebuild(best, false, local)
	// The view before discovery followed the default reference, a guess:
	// it must not serve while the new one acquires (for a returning
	// reference it is its own clock, not the cluster's time scale).
	m.view.prev = nil
}

// ---- liveness ----

// watch checks the current reference at local (or, on the reference,
// sends its heartbeats).
func (m *Member) watch(local int64) {
	if !m.failover() {
		return
	}
	if m.cand {
		if local >= m.candEnd {
			m.logIf(!m.stuck, slog.LevelWarn, "no majority for the takeover: waiting (logged again when that changes)",
				"term", m.candTerm, "votes", len(m.votes)+1, "majority", m.majority())
			m.stuck = true
			m.lose(local)
			m.nextWalk = local + m.after/2
		}
		return
	}
	if m.Reference() == m.self {
		m.beat(local)
		return
	}
	if m.walking {
		if local >= m.walkEnd {
			m.logIf(!m.stuck, slog.LevelInfo, "next in reference.order does not answer", "node", m.cfg.Order[m.walk])
			m.walkFrom(m.walkK+1, local)
		}
		return
	}
	if m.qEnd != 0 && local >= m.qEnd {
		m.qEnd = 0 // unanswered: a new query if still quiet
	}
	quiet := local - m.heard
	if quiet >= m.after && local >= m.nextWalk {
		m.qEnd = 0
		m.walkFrom(1, local)
		return
	}
	if quiet >= (m.after+1)/2 && m.qEnd == 0 {
		m.qSeq = m.query(m.Reference(), local)
		m.qEnd = local + m.queryTimeout()
	}
}

// beat sends the reference's heartbeats when due.
func (m *Member) beat(local int64) {
	if local < m.beatNext {
		return
	}
	m.beatNext = local + m.beatEvery()
	if m.quiet(local) {
		return
	}
	for s, at := range m.beats {
		if local-at > m.leaseRef() {
			delete(m.beats, s)
		}
	}
	var flags uint8 = FlagBeat
	if local < m.lease {
		flags |= FlagLease
	}
	sent := m.view.in(local)
	for _, id := range m.cfg.Cluster {
		if id != m.self {
			s := m.send(Message{Type: MsgStatusQuery, To: id, Term: m.term, Flags: flags, Sent: sent})
			m.beats[s] = local
		}
	}
	m.renew()
}

// renew recomputes the reference's lease from the acknowledgements: the
// send time of the newest heartbeat a majority (this node included)
// acknowledged, plus leaseRef.
func (m *Member) renew() {
	need := m.majority() - 1
	if need <= 0 {
		m.lease = math.MaxInt64
		return
	}
	var at []int64
	for _, t := range m.acked {
		at = append(at, t)
	}
	if len(at) < need {
		return
	}
	slices.Sort(at)
	m.lease = max(m.lease, at[len(at)-need]+m.leaseRef())
}

// walkFrom takes the node k places after the reference in the order: this
// node stands for the next term, another is asked for its status (Tick
// moves on to k+1 when it does not answer in time).
func (m *Member) walkFrom(k int, local int64) {
	old := m.Reference()
	n := len(m.cfg.Order)
	if k < n {
		j := (m.idx + k) % n
		id := m.cfg.Order[j]
		if id == m.self {
			m.walking = false
			m.stand(j, local)
			return
		}
		m.walking, m.walk, m.walkK, m.walkEnd = true, j, k, local+m.queryTimeout()
		m.walkSeq = m.query(id, local)
		return
	}
	// Nobody after the reference answers: keep waiting for it.
	m.logIf(!m.stuck, slog.LevelWarn, "reference silent and no other node in reference.order answers (logged again when that changes)", "reference", old)
	m.stuck = true
	m.walking = false
	m.nextWalk = local + m.after/2
}

// stand asks every node for its vote for the next term naming Order[j],
// this node.
func (m *Member) stand(j int, local int64) {
	t := m.termFor(j)
	m.log.Info("reference silent: standing for the next term", "old", m.Reference(), "term", t, "silent_for", time.Duration(local-m.heard))
	m.cand, m.candTerm, m.candIdx, m.candSent, m.candEnd = true, t, j, local, local+m.queryTimeout()
	m.grants[t] = true
	m.bind()
	m.candSeqs = map[NodeID]uint32{}
	m.votes = map[NodeID]bool{}
	flags := FlagVote
	if m.knowsScale(local) {
		flags |= FlagScale
	}
	for _, id := range m.cfg.Cluster {
		if id != m.self {
			m.candSeqs[id] = m.send(Message{Type: MsgStatusQuery, To: id, Term: t, Flags: flags})
		}
	}
	m.tally(local)
}

// tally takes over once a majority voted.
func (m *Member) tally(local int64) {
	if !m.cand || len(m.votes)+1 < m.majority() {
		return
	}
	m.cand = false
	m.stuck = false
	old := m.Reference()
	m.log.Warn("reference silent: taking over", "old", old, "term", m.candTerm, "votes", len(m.votes)+1)
	m.term = m.candTerm
	m.bind()
	m.rebuild(m.candIdx, true, local)
	// The votes acknowledge the request as a heartbeat would.
	m.acked = map[NodeID]int64{}
	for id := range m.votes {
		m.acked[id] = m.candSent
	}
	m.lease = 0
	m.renew()
	m.beatNext = local
	m.beat(local)
}

// grant decides on a vote request for term t from its reference.
func (m *Member) grant(q Message, local int64) bool {
	t := q.Term
	switch {
	case t <= m.term || t < m.voted || m.refOf(t) != q.From:
		return false
	case m.Reference() == m.self:
		if m.Leased(local) {
			return false // alive with a majority: no need of another
		}
	case local-m.heard < m.voteSilence():
		return false // heard the reference recently
	}
	if q.Flags&FlagScale == 0 && m.knowsScale(local) {
		return false // it would restart global time; this node could continue it
	}
	if m.cand && m.candTerm < t {
		m.lose(local)
	}
	m.grants[t] = true
	m.bind()
	return true
}

// knowsScale reports whether the member holds bounded global time at
// local (synced, stale or degraded, or a restored prior): a takeover by it
// continues the scale.
func (m *Member) knowsScale(local int64) bool {
	t := m.view.estimate(local)
	return t.Status != StatusUnsynced && bounded(t)
}

// lose ends this member's candidacy: its own vote no longer binds it, and
// the nodes that voted for it are told (FlagResign).
func (m *Member) lose(local int64) {
	m.cand = false
	delete(m.grants, m.candTerm)
	m.bind()
	for id := range m.votes {
		m.send(Message{Type: MsgStatusQuery, To: id, Term: m.candTerm, Flags: FlagResign})
	}
}

// bind recomputes voted from the term and the votes given above it.
func (m *Member) bind() {
	m.voted = m.term
	for t := range m.grants {
		if t <= m.term {
			delete(m.grants, t)
		} else {
			m.voted = max(m.voted, t)
		}
	}
}

// quiet reports whether this node, the reference, has gone without a
// lease for failover_after: it sends nothing more (no heartbeat, no
// round), so that the followers that still hear it but cannot answer
// fail over to a node that can lead.
func (m *Member) quiet(local int64) bool {
	return m.failover() && m.Reference() == m.self && m.started && !m.discovering &&
		local-max(m.lease, m.refSince) >= m.after
}

// statusQuery answers a status query: a heartbeat, a vote request or a
// plain question (discovery, liveness, the failover walk).
func (m *Member) statusQuery(q Message, local int64) {
	if m.discovering || !m.started {
		// Not knowing the reference yet, it would name the default one:
		// the asker decides without this answer. An asker this member
		// waits for is starting too: it will name nobody either.
		if _, ok := m.discWait[q.From]; ok && m.discovering {
			delete(m.discWait, q.From)
			m.discoveryAnswered(local)
		}
		return
	}
	r := Message{Type: MsgStatusReply, From: m.self, To: q.From, Seq: q.Seq, Reference: m.Reference()}
	if m.Reference() == m.self && m.Leased(local) {
		r.Flags |= FlagLease
	}
	switch {
	case q.Flags&FlagResign != 0:
		if m.refOf(q.Term) == q.From && m.grants[q.Term] {
			delete(m.grants, q.Term)
			m.bind()
		}
		return // no answer
	case q.Flags&FlagVote != 0:
		if m.grant(q, local) {
			r.Flags |= FlagVote
		}
	case q.Flags&FlagBeat != 0:
		if q.Term == m.term && q.From == m.Reference() && q.From != m.self && q.Term >= m.voted {
			r.Flags |= FlagBeat
			m.heardRef(local)
			m.qEnd = 0
			if q.Flags&FlagLease != 0 && m.fresh(q.Sent, local) {
				m.fLease = max(m.fLease, local+m.leaseFollow())
			}
		}
	case q.Term < m.term:
		// A node of an older term asks: the answer's term tells it.
	}
	if q.Flags&(FlagVote|FlagBeat) == 0 && m.Reference() == m.self && q.From != m.self {
		// A plain query (of any term): the asker is starting (a restart)
		// or hears nothing from the reference. A child of this reference
		// gets its rounds again at once, at the initial period, instead of
		// waiting out the long period its old state had earned (a
		// restarted follower took 22-32 s to be synced again at 16 s).
		m.view.cur.ChildReturned(q.From, m.view.in(local))
		m.drain(local)
	}
	r.Term = m.term
	m.out.Messages = append(m.out.Messages, r)
}

// fresh reports whether a heartbeat sent at global time sent is at most
// maxBeatAge old by this member's bounds (a late packet, or one queued
// while this process was stopped, renews no lease).
func (m *Member) fresh(sent, local int64) bool {
	t := m.view.estimate(local)
	if !bounded(t) || t.Status == StatusUnsynced {
		return false
	}
	return t.Latest-sent <= m.maxBeatAge() && sent <= t.Latest
}

func (m *Member) statusReply(r Message, local int64) {
	if r.Term < m.term && !m.discovering {
		return // from an older term: nothing to learn
	}
	switch {
	case m.discovering:
		if seq, ok := m.discWait[r.From]; !ok || seq != r.Seq {
			return
		}
		delete(m.discWait, r.From)
		m.discTerm = max(m.discTerm, r.Term)
		m.discoveryAnswered(local)
	case m.cand && r.Seq != 0 && r.Seq == m.candSeqs[r.From] && r.Flags&FlagVote != 0:
		m.votes[r.From] = true
		m.tally(local)
	case r.Flags&FlagBeat != 0 && m.Reference() == m.self && r.Term == m.term:
		if at, ok := m.beats[r.Seq]; ok {
			m.acked[r.From] = max(m.acked[r.From], at)
			m.renew()
		}
	case m.walking && r.From == m.cfg.Order[m.walk] && r.Seq == m.walkSeq:
		// It answers: it will stand for the next term (or it already
		// leads one, which its answer's term made this member follow).
		m.stuck = false
		m.log.Info("reference silent: the next in order answers, waiting for its term", "old", m.Reference(), "next", r.From)
		m.walking = false
		m.nextWalk = local + m.after/2
	case r.From == m.Reference() && m.Reference() != m.self && r.Flags&FlagLease != 0:
		// Alive and leading: a reference without its lease counts as
		// silent, so that the cluster can elect one that leads.
		m.heardRef(local)
		m.qEnd = 0
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
	} else if c := m.continueScale; c != nil && ref == m.self {
		m.continueScale = nil
		if c.X0 != 0 || c.Y0 != 0 || c.Skew != 0 { // not the identity
			v.frozen, v.fm = true, *c
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
	m.qEnd, m.walking = 0, false
	m.changes++
	if ref == m.self {
		m.beatNext = local
		m.refSince = local
	}
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
