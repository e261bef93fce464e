package engine

import (
	"container/heap"
	"fmt"
	"log/slog"

	"github.com/gclock/gclock/estimate"
)

// Estimators builds, for one source, the Hull that gives the guaranteed
// bounds and the estimator selected by cfg.Estimator for the point estimate.
// The two may be the same object (cfg.Estimator == "hull"). New uses
// DefaultEstimators; tests and experiments may pass their own to
// NewWithEstimators.
type Estimators func(cfg Config) (hull, selected estimate.Estimator, err error)

// Node is the synchronization state machine of one cluster node (Liao et
// al., Figure 1, composed over any topology as in Jezequel's A3). It is
// driven by Tick and Step, its output is collected with Ready, and global
// time is read with Read. It starts no goroutine, reads no clock and draws
// no random number: the same calls give the same outputs. A Node is not safe
// for concurrent use.
type Node struct {
	cfg    Config
	logger *slog.Logger

	// Source side: one entry per child, scheduled by a heap on due time.
	children   []*child
	childIndex map[NodeID]int32
	timers     timerHeap
	waiting    []*child // due, but no free round slot
	active     int      // rounds in progress
	started    bool
	seq        uint32

	// Child side: one entry per source.
	sources     []*source
	sourceIndex map[NodeID]int32

	// Self resync (Liao: apply the drift every self period).
	selfPeriod int64
	selfAnchor int64
	selfNext   int64 // next self-resync tick, 0 if none
	selfSet    bool
	lastOffset int64 // global-local at the previous self resync

	// Read's monotonic clock.
	monoSet   bool
	monoLocal int64
	monoValue int64

	lastLocal int64
	haveLocal bool

	out     Ready
	ignored uint64

	// Transmit stamps (stamps.go): the replies kept for theirs, and counts.
	replies replyStamps
	stamps  StampSnapshot

	// A restored prior (prior.go), used until a source is trusted.
	prior     Prior
	havePrior bool
}

// New builds a node from cfg (validated) with the estimators of package
// estimate. A nil logger discards. Call Tick once to start the node.
func New(cfg Config, logger *slog.Logger) (*Node, error) {
	return NewWithEstimators(cfg, logger, DefaultEstimators)
}

// NewWithEstimators is New with a custom estimator factory.
func NewWithEstimators(cfg Config, logger *slog.Logger, est Estimators) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if est == nil {
		return nil, fmt.Errorf("engine: node %d: nil estimator factory: %w", cfg.ID, ErrConfig)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{
		cfg:         cfg,
		logger:      logger.With("node", cfg.ID),
		childIndex:  make(map[NodeID]int32, len(cfg.Children)),
		sourceIndex: make(map[NodeID]int32, len(cfg.Sources)),
		selfPeriod:  int64(cfg.MaxSelfPeriod),
	}
	n.cfg.Sources = append([]NodeID(nil), cfg.Sources...)
	n.cfg.Children = append([]NodeID(nil), cfg.Children...)
	for i, id := range n.cfg.Children {
		n.childIndex[id] = int32(i)
		n.children = append(n.children, &child{
			id:           id,
			heapIdx:      -1,
			period:       int64(cfg.InitialGlobalPeriod),
			shortestEver: -1,
			stats:        ChildSnapshot{Child: id},
		})
	}
	for i, id := range n.cfg.Sources {
		h, sel, err := est(cfg)
		if err != nil {
			return nil, fmt.Errorf("engine: node %d: estimators for source %d: %w", cfg.ID, id, err)
		}
		if h == nil || sel == nil {
			return nil, fmt.Errorf("engine: node %d: estimator factory returned nil for source %d: %w", cfg.ID, id, ErrConfig)
		}
		n.sourceIndex[id] = int32(i)
		src := &source{id: id, hull: h, sel: sel, period: int64(cfg.InitialGlobalPeriod), stats: SourceSnapshot{Source: id}}
		if cfg.FloorSlack > 0 {
			src.floor, err = estimate.NewFloorFilter(cfg.FloorConfig())
			if err != nil {
				return nil, fmt.Errorf("engine: node %d: floor filter for source %d: %w: %w", cfg.ID, id, err, ErrConfig)
			}
		}
		n.sources = append(n.sources, src)
	}
	return n, nil
}

// ID returns the node's id.
func (n *Node) ID() NodeID { return n.cfg.ID }

// IsReference reports whether the node has no source: its clock is global
// time.
func (n *Node) IsReference() bool { return len(n.sources) == 0 }

// advance records the local time of a call and returns the time to use:
// a local clock never goes back, so an earlier time is taken as the latest.
func (n *Node) advance(local int64, what string) int64 {
	if n.haveLocal && local < n.lastLocal {
		n.logger.Debug("local time went backwards; using the latest", "call", what, "local", local, "latest", n.lastLocal)
		return n.lastLocal
	}
	n.lastLocal, n.haveLocal = local, true
	return local
}

// Tick tells the node its local clock reads local. Call it once to start the
// node and then at (or after) every Ready().NextTick.
func (n *Node) Tick(local int64) {
	now := n.advance(local, "tick")
	if !n.started {
		n.started = true
		for _, c := range n.children {
			c.due = now
			heap.Push(&n.timers, c)
		}
		for _, s := range n.sources {
			if s.heardAt == 0 {
				s.heardAt = now // the silence clock starts with the node
			}
		}
	}
	n.checkSilence(now)
	for n.timers.Len() > 0 && n.timers[0].due <= now {
		c := heap.Pop(&n.timers).(*child)
		switch c.state {
		case probing:
			n.probeTimeout(c, now)
		case idle:
			if n.slotFree() {
				n.startRound(c, now)
			} else {
				c.state = waitingSlot
				n.waiting = append(n.waiting, c)
			}
		}
	}
	n.sendChecks(now)
	n.selfResync(now)
	n.settlePrior(now)
	n.expireReplies(now)
}

// Step delivers a message that arrived when the local clock read recvLocal.
// Messages for another node, from a node that is neither a source nor a
// child, late or duplicated ones are ignored (and counted in Snapshot).
func (n *Node) Step(m Message, recvLocal int64) {
	if !n.admit(m, recvLocal) { // validate_msg.go
		return
	}
	now := n.advance(recvLocal, "step")
	n.selfResync(now)
	n.checkSilence(now)
	if m.To != n.cfg.ID {
		n.ignore(m, "addressed to another node")
		return
	}
	switch m.Type {
	case MsgProbe:
		if _, ok := n.sourceIndex[m.From]; !ok {
			n.ignore(m, "probe from a node that is not a source")
			return
		}
		if n.signOfLife(m) {
			n.heard(n.sources[n.sourceIndex[m.From]], now)
		}
		// The reply is the acknowledgement; a duplicated probe gets a
		// duplicated reply, which the source ignores by Seq. T2 is the
		// probe's receive stamp when the driver has one (stamps.go).
		t2 := n.probeRecv(m, now)
		n.send(Message{Type: MsgProbeReply, From: n.cfg.ID, To: m.From, Round: m.Round, Seq: m.Seq, T2: t2, T3: now})
		n.keepReply(m.From, m.Seq, t2, now)
	case MsgProbeReply:
		i, ok := n.childIndex[m.From]
		if !ok {
			n.ignore(m, "reply from a node that is not a child")
			return
		}
		n.probeReply(n.children[i], m, now)
	case MsgTimeDiff:
		i, ok := n.sourceIndex[m.From]
		if !ok {
			n.ignore(m, "time diff from a node that is not a source")
			return
		}
		if m.Check {
			n.checkDiff(n.sources[i], m, now) // heard there, once fresh
			break
		}
		n.heard(n.sources[i], now)
		n.timeDiff(n.sources[i], m, now)
	case MsgErrReport:
		i, ok := n.childIndex[m.From]
		if !ok {
			n.ignore(m, "error report from a node that is not a child")
			return
		}
		n.errReport(n.children[i], m, now)
	case MsgPeriodChange:
		i, ok := n.sourceIndex[m.From]
		if !ok {
			n.ignore(m, "period change from a node that is not a source")
			return
		}
		n.heard(n.sources[i], now)
		n.periodChange(n.sources[i], m, now)
	default:
		n.ignore(m, "unknown message type")
	}
	n.settlePrior(now)
}

func (n *Node) ignore(m Message, why string) {
	n.ignored++
	n.logger.Debug("message ignored", "why", why, "type", m.Type, "from", m.From, "to", m.To, "round", m.Round, "seq", m.Seq)
}

func (n *Node) send(m Message) { n.out.Messages = append(n.out.Messages, m) }

func (n *Node) event(local int64, k EventKind, peer NodeID, v float64) {
	n.out.Events = append(n.out.Events, Event{Local: local, Kind: k, Peer: peer, Value: v})
}

// Ready returns the messages and events produced since the last call and
// the local time of the next Tick wanted (0: none).
func (n *Node) Ready() Ready {
	r := n.out
	n.out = Ready{}
	next := int64(0)
	have := false
	if n.timers.Len() > 0 {
		next, have = n.timers[0].due, true
	}
	if at, ok := n.nextCheck(); ok && (!have || at < next) {
		next, have = at, true
	}

	if have && next == 0 {
		next = 1 // 0 means "no timer"; one nanosecond late is harmless
	}
	r.NextTick = next
	return r
}
