package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
//
// This file holds the Member, its loop (Tick, Step, Ready) and the watch
// of the reference with the failover walk; election.go the terms and
// votes, lease.go the heartbeats and leases, discovery.go the discovery
// at start, status.go the status messages that carry them all, and
// view.go the views and the scale a takeover freezes.

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
	term     uint32            // current term
	voted    uint32            // highest term this member is bound to by a vote (max of term and grants)
	grants   map[uint32]bool   // terms voted for, above term
	refSince int64             // reference: local time it became the reference
	stale    uint64            // engine messages refused for an older term
	unproven uint64            // messages of a newer term not adopted (terms.go)
	claims   map[NodeID]uint32 // per node: the term its last status message said it is in
	lease    int64             // reference: local time its majority lease ends
	fLease   int64             // follower: local time its reference's lease ends
	beatNext int64             // reference: next heartbeat
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
	discWait    map[NodeID]bool   // the nodes discovery waits for
	discRetry   int64             // when discovery asks the silent nodes again
	discFrom    uint32            // the query sequence number before discovery's first
	discLeads   map[uint32]bool   // terms whose reference claimed them
	discTerms   map[NodeID]uint32 // the term each answer to discovery named

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
		beats: map[uint32]int64{}, acked: map[NodeID]int64{}, notice: map[NodeID]int64{}, grants: map[uint32]bool{},
		claims: map[NodeID]uint32{}, discLeads: map[uint32]bool{}, discTerms: map[NodeID]uint32{}}
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

// Reference is the current reference.
func (m *Member) Reference() NodeID { return m.cfg.Order[m.idx] }

// Term is the current term.
func (m *Member) Term() uint32 { return m.term }

// StaleTerm counts the engine messages refused because they came from an
// older term.
func (m *Member) StaleTerm() uint64 { return m.stale }

// Changes counts the reference changes so far.
func (m *Member) Changes() uint64 { return m.changes }

// Node is the current view's engine (for snapshots, priors, checks). Its
// local clock is In(local).
func (m *Member) Node() *Node { return m.view.cur }

// Estimate is global time at local: the current view's, or the previous
// view's while the current one is unsynced.
func (m *Member) Estimate(local int64) Time {
	return m.looking(m.promise(m.view.estimate(local), local))
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
	if err := m.checkTerm(msg); err != nil {
		return err
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
			m.retryDiscovery(local)
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
	// A newer term is adopted only on evidence that it was won (terms.go);
	// an engine message never raises a term.
	if m.failover() {
		if t, _, ok := claimOf(msg); ok && t <= MaxTerm {
			m.claims[msg.From] = t
		}
		if msg.Term > m.term {
			m.newer(msg, local)
			if m.checkTerm(msg) != nil && msg.Type != MsgStatusQuery && msg.Type != MsgStatusReply {
				return
			}
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
	v := m.view
	v.stamps(&msg)
	v.unshift(&msg)
	if msg.From == m.Reference() && v.cur.signOfLife(msg) {
		m.heardRef(local)
	}
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
		next = min(m.discEnd, m.discRetry) // the Node is not ticked before
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

// logIf logs at level if loud, at debug level otherwise: a condition that
// persists is logged when it starts, not at every check.
func (m *Member) logIf(loud bool, level slog.Level, msg string, args ...any) {
	if !loud {
		level = slog.LevelDebug
	}
	m.log.Log(context.Background(), level, msg, args...)
}
