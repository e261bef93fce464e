package engine

import (
	"container/heap"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
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

type childState uint8

const (
	idle childState = iota
	waitingSlot
	probing
)

// child is a source's view of one child (Liao's per-nodeX variables).
type child struct {
	id      NodeID
	state   childState
	heapIdx int
	due     int64 // next round (idle) or probe deadline (probing)

	period    int64 // global_resync_period[nodeX]
	errSum    float64
	successes int
	lastEnd   int64

	round     uint32
	seq       uint32
	probeSent int64
	probeTx   int64 // the probe's transmit stamp (TxStamp); 0: none
	target    int
	deadline  int64 // Config.RoundBudget: no probe sent after this
	repeated  bool
	retries   int
	samples   []estimate.Sample

	shortestEver int64 // -1 until the first completed round
	srtt         int64

	lastDone uint32 // last round whose TimeDiff was sent; 0: none
	pending  bool   // lastDone's verdict (report or success) not yet counted
	reported bool   // an ErrReport for lastDone arrived

	periodSeq uint32 // MsgPeriodChange messages sent to this child

	// unanswered: the last round ended with its probe retries exhausted
	// and no sample. Logged once when it starts and once when the child
	// answers again, not at every round of a dead child.
	unanswered bool

	stats ChildSnapshot
}

// source is a child's view of one of its sources.
type source struct {
	id       NodeID
	hull     estimate.Estimator
	sel      estimate.Estimator
	floor    *estimate.FloorFilter // nil: Config.FloorSlack is 0
	g        estimate.Mapping      // the source's local->global mapping
	best     estimate.Sample       // best exchange of the last accepted round
	haveBest bool
	round    uint32
	haveRnd  bool
	lastAt   int64
	prevAt   int64
	minRTT   int64 // shortest exchange ever received from this source (0: none yet)

	// Liveness: the source's announced global period (MsgPeriodChange),
	// the last change seen, when anything last came from it, and whether
	// it is silent (see Config.SilentPeriods).
	period    int64
	periodSeq uint32
	heardAt   int64
	silent    bool

	// Trust (trust.go): what reads through this source may promise, the
	// rounds in a row without a contradiction, and whether the source said
	// its own mapping was not synced (Message.Unsure).
	trust    trust
	good     int
	upUnsure bool
	warnedAt int64 // local time of the last contradiction warning

	// A round that contradicts the bounds already held (or the restored
	// prior) is held, not used, until the next round says whether the
	// data moved (it contradicts them too) or the held one was an outlier
	// (trust.go, hold): one forged datagram must not throw away what the
	// node knows.
	haveHeld  bool
	heldTrust trust
	heldGood  int

	stats SourceSnapshot
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
			src.floor, err = estimate.NewFloorFilter(estimate.FloorConfig{Slack: int64(cfg.FloorSlack), MaxSkew: cfg.MaxDrift, Granularity: int64(cfg.Granularity)})
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
	n.selfResync(now)
	n.settlePrior(now)
	n.expireReplies(now)
}

func (n *Node) slotFree() bool {
	return n.cfg.MaxConcurrentRounds == 0 || n.active < n.cfg.MaxConcurrentRounds
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
		n.heard(n.sources[n.sourceIndex[m.From]], now)
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

	if have && next == 0 {
		next = 1 // 0 means "no timer"; one nanosecond late is harmless
	}
	r.NextTick = next
	return r
}

// ---- source side (Liao, Figure 1, "On Node 0") ----

func (n *Node) startRound(c *child, now int64) {
	if c.pending {
		// The previous round ended without an error report: a success.
		// On the convergence ramp every round counts, quiet or not.
		c.pending = false
		if !c.reported || n.ramping(c) {
			n.success(c, now)
		}
	}
	c.state = probing
	n.active++
	c.round++
	c.samples = c.samples[:0]
	c.target = n.cfg.PingsPerRound
	c.deadline = n.roundDeadline(now)
	c.repeated = false
	c.retries = 0
	n.sendProbe(c, now)
}

// roundDeadline is the local time after which a round (or its repeat)
// started at now sends no further probe: Config.RoundBudget later (read
// only when there is a budget: overBudget).
func (n *Node) roundDeadline(now int64) int64 {
	return satmath.Add(now, int64(n.cfg.RoundBudget))
}

// overBudget reports whether c's round has spent its Config.RoundBudget
// (never without a budget: a deadline of 0 is also a local time).
func (n *Node) overBudget(c *child, now int64) bool {
	return n.cfg.RoundBudget > 0 && now >= c.deadline
}

func (n *Node) timeout(c *child) int64 {
	t := int64(n.cfg.ProbeTimeout)
	if r := int64(n.cfg.RetryRTTs * float64(c.srtt)); r > t {
		t = r
	}
	return t
}

func (n *Node) sendProbe(c *child, now int64) {
	n.seq++
	c.seq = n.seq
	c.probeSent, c.probeTx = now, 0
	c.due = now + n.timeout(c)
	heap.Push(&n.timers, c)
	n.send(Message{Type: MsgProbe, From: n.cfg.ID, To: c.id, Round: c.round, Seq: c.seq})
}

func (n *Node) probeTimeout(c *child, now int64) {
	c.retries++
	c.stats.Retries++
	if c.retries > n.cfg.MaxProbeRetries {
		c.stats.Abandoned++
		switch {
		case len(c.samples) > 0:
			n.logger.Debug("probe retries exhausted; ending the round with the samples it has", "child", c.id, "round", c.round, "samples", len(c.samples))
		case !c.unanswered:
			c.unanswered = true
			n.logger.Warn("child not answering: its rounds end without samples until it answers (logged again only then)",
				"child", c.id, "round", c.round, "retries", n.cfg.MaxProbeRetries)
		default:
			n.logger.Debug("child still not answering", "child", c.id, "round", c.round)
		}
		if len(c.samples) > 0 {
			n.finishRound(c, now)
		} else {
			n.endRound(c, now, false)
		}
		return
	}
	if n.overBudget(c, now) && len(c.samples) > 0 {
		// The round's time is spent and a reply is late: end it with
		// what it has rather than wait out the retries.
		c.stats.Cut++
		n.finishRound(c, now)
		return
	}
	n.sendProbe(c, now)
}

func (n *Node) probeReply(c *child, m Message, now int64) {
	if c.state != probing || m.Seq != c.seq || m.Round != c.round {
		c.stats.Ignored++
		n.ignore(m, "late or duplicate reply")
		return
	}
	if c.unanswered {
		c.unanswered = false
		n.logger.Info("child answering again", "child", c.id, "round", c.round)
	}
	s := estimate.Sample{SrcSend: c.probeSent, LocRecv: m.T2, LocSend: m.T3, SrcRecv: now}
	if m.T4 != 0 && m.T4 >= c.probeSent && m.T4 <= now {
		s.SrcRecv = m.T4
	}
	stamped := c.probeTx != 0 && c.probeTx <= s.SrcRecv // TxStamp checked it is after probeSent
	if stamped {
		s.SrcSend = c.probeTx
	}
	if m.T3 < m.T2 || now < c.probeSent || s.RTT() < 0 {
		// Corrupt timestamps: treat as lost, the timeout retries.
		c.stats.Ignored++
		n.ignore(m, "reply with inconsistent timestamps")
		return
	}
	if c.heapIdx >= 0 {
		heap.Remove(&n.timers, c.heapIdx)
	}
	c.retries = 0
	switch {
	case stamped:
		n.stamps.ProbeStamped++
	case c.probeTx != 0:
		n.stamps.Rejected++
		n.stamps.ProbeOwn++
	default:
		n.stamps.ProbeOwn++
	}
	raw := now - c.probeSent
	if c.srtt == 0 {
		c.srtt = raw
	} else {
		c.srtt += (raw - c.srtt) / 8
	}
	c.samples = append(c.samples, s)
	if len(c.samples) < c.target && !n.overBudget(c, now) {
		n.sendProbe(c, now)
		return
	}
	best := bestRTT(c.samples)
	if !c.repeated && c.shortestEver >= 0 && best-c.shortestEver > int64(n.cfg.NetworkLatencyErrorThresh) {
		// Liao: shortest-this-round - shortest-ever > NETWORK_LATENCY_ERROR_THRESH:
		// do the round's pings once more (with the budget again, if any).
		c.repeated = true
		c.target = len(c.samples) + n.cfg.PingsPerRound
		c.deadline = n.roundDeadline(now)
		c.stats.Repeats++
		n.event(now, EvRoundRepeated, c.id, float64(best-c.shortestEver))
		n.sendProbe(c, now)
		return
	}
	if len(c.samples) < c.target {
		c.stats.Cut++
	}
	n.finishRound(c, now)
}

// finishRound sends MyriTimeDiff with the round's exchanges and the node's
// own mapping to global time.
func (n *Node) finishRound(c *child, now int64) {
	if c.heapIdx >= 0 {
		heap.Remove(&n.timers, c.heapIdx)
	}
	best := bestRTT(c.samples)
	if c.shortestEver < 0 || best < c.shortestEver {
		c.shortestEver = best
	}
	n.send(Message{
		Type:    MsgTimeDiff,
		From:    n.cfg.ID,
		To:      c.id,
		Round:   c.round,
		Samples: append([]estimate.Sample(nil), c.samples...),
		Mapping: n.globalMapping(now, c.period),
		Unsure:  n.unsure(now),
	})
	c.stats.Rounds++
	n.endRound(c, now, true)
}

func (n *Node) endRound(c *child, now int64, sent bool) {
	if c.heapIdx >= 0 {
		heap.Remove(&n.timers, c.heapIdx)
	}
	n.active--
	c.state = idle
	c.lastEnd = now
	if sent {
		c.lastDone, c.pending, c.reported = c.round, true, false
	}
	c.due = now + c.period
	heap.Push(&n.timers, c)
	for len(n.waiting) > 0 && n.slotFree() {
		w := n.waiting[0]
		n.waiting = n.waiting[1:]
		n.startRound(w, now)
	}
	if len(n.waiting) == 0 {
		n.waiting = nil // let the backing array go
	}
}

func bestRTT(ss []estimate.Sample) int64 {
	best := int64(math.MaxInt64)
	for _, s := range ss {
		best = min(best, s.RTT())
	}
	return best
}

// ramping reports whether c's period is still on the convergence ramp: below
// MinGlobalPeriod, where only an InitialGlobalPeriod below it can put it
// (halvings stop at MinGlobalPeriod).
func (n *Node) ramping(c *child) bool { return c.period < int64(n.cfg.MinGlobalPeriod) }

// success counts a quiet round; SUCCESS_THRESH of them double the period.
func (n *Node) success(c *child, now int64) {
	c.successes++
	if c.successes < n.cfg.SuccessThresh {
		return
	}
	c.successes = 0
	if n.cfg.Adaptive && c.period < int64(n.cfg.MaxGlobalPeriod) {
		c.period = min(2*c.period, int64(n.cfg.MaxGlobalPeriod))
		n.event(now, EvPeriodChange, c.id, float64(c.period))
		n.announcePeriod(c)
	}
}

func (n *Node) errReport(c *child, m Message, now int64) {
	if m.Round != c.lastDone || c.lastDone == 0 || c.reported {
		c.stats.Ignored++
		n.ignore(m, "late or duplicate error report")
		return
	}
	if math.IsNaN(m.Err) || math.IsInf(m.Err, 0) || m.Err < 0 {
		c.stats.Ignored++
		n.ignore(m, "error report with an invalid value")
		return
	}
	c.reported = true
	if !n.ramping(c) {
		c.successes = 0 // a report breaks the run of quiet rounds (not the ramp)
	}
	c.stats.Reports++
	n.event(now, EvErrReport, c.id, m.Err)
	if !n.cfg.Adaptive {
		return
	}
	c.errSum += m.Err
	if c.errSum <= n.cfg.ErrorThresh {
		return
	}
	c.errSum = 0
	if c.period > int64(n.cfg.MinGlobalPeriod) {
		c.period = max(c.period/2, int64(n.cfg.MinGlobalPeriod))
		n.event(now, EvPeriodChange, c.id, float64(c.period))
		n.announcePeriod(c)
		if c.state == idle && c.heapIdx >= 0 {
			c.due = min(c.due, c.lastEnd+c.period)
			heap.Fix(&n.timers, c.heapIdx)
		}
	}
}

// ChildReturned tells the node that child id has just started again, or
// come back (it asked who the reference is, as a node does when it starts
// or hears nothing): the long period it had earned with its old state is no
// longer right for it, since a restarted child needs rounds to trust its
// source again. Its period goes back to InitialGlobalPeriod (if longer),
// announced, and an idle child gets a round at once. Not a child: nothing.
func (n *Node) ChildReturned(id NodeID, local int64) {
	i, ok := n.childIndex[id]
	if !ok || !n.started {
		return
	}
	now := n.advance(local, "child returned")
	c := n.children[i]
	if init := int64(n.cfg.InitialGlobalPeriod); c.period > init {
		c.period = init
		n.event(now, EvPeriodChange, c.id, float64(c.period))
		n.announcePeriod(c)
	}
	if c.state == idle && c.heapIdx >= 0 && c.due > now {
		c.due = now
		heap.Fix(&n.timers, c.heapIdx)
	}
}

// announcePeriod tells a child its new global period (MsgPeriodChange).
func (n *Node) announcePeriod(c *child) {
	c.periodSeq++
	n.send(Message{Type: MsgPeriodChange, From: n.cfg.ID, To: c.id, Round: c.round, Seq: c.periodSeq, Period: c.period})
}

// ---- child side (Liao, Figure 1, "On other Nodes") ----

// maxAnnouncedPeriod bounds an announced period so that the silence
// deadline cannot overflow (about 3.6 years).
const maxAnnouncedPeriod = int64(1) << 56

// periodChange keeps the source's newest announced period.
func (n *Node) periodChange(s *source, m Message, now int64) {
	if m.Seq <= s.periodSeq {
		s.stats.Ignored++
		n.ignore(m, "late or duplicate period change")
		return
	}
	if m.Period <= 0 || m.Period > maxAnnouncedPeriod {
		s.stats.Ignored++
		n.ignore(m, "period change with an invalid period")
		return
	}
	s.period, s.periodSeq = m.Period, m.Seq
	n.event(now, EvSourcePeriod, s.id, float64(m.Period))
}

// heard notes that something came from s at now: a silent source is alive
// again.
func (n *Node) heard(s *source, now int64) {
	if s.silent {
		s.silent = false
		n.event(now, EvSourceAlive, s.id, float64(now-s.heardAt))
		n.logger.Info("source heard again", "source", s.id, "silent_for", now-s.heardAt)
	}
	s.heardAt = now
}

// silentAt is the local time at which s becomes silent if nothing comes
// from it: SilentPeriods announced periods (or the last interval between
// rounds, if longer; at up to MaxDrift faster on this clock) plus a
// round's worth of probe retries.
func (n *Node) silentAt(s *source) int64 {
	wait := n.silenceWait(s)
	if wait >= float64(math.MaxInt64)/2 || (s.heardAt > 0 && int64(wait) > math.MaxInt64-s.heardAt) {
		return math.MaxInt64
	}
	return s.heardAt + int64(wait)
}

// silenceWait is the engine's silence rule, the one wait (ns, on this
// clock) after which a source is silent: SilentPeriods of its period (the
// announced one, or the last interval between rounds if longer) at up to
// MaxDrift faster, plus a round's worth of probe retries. silentAt counts
// it from anything heard, renumberable from the last accepted round.
func (n *Node) silenceWait(s *source) float64 {
	k := n.cfg.SilentPeriods
	if k == 0 {
		k = 3
	}
	p := s.period
	if s.stats.Rounds >= 2 && s.lastAt-s.prevAt > p {
		// The last rounds came further apart than announced: a lost
		// announcement of a longer period, or a source busy with other
		// children. Wait by what was seen.
		p = s.lastAt - s.prevAt
	}
	return math.Ceil(k*float64(p)*(1+n.cfg.MaxDrift)) +
		float64(n.cfg.ProbeTimeout)*float64(n.cfg.MaxProbeRetries+1)
}

// checkSilence marks the sources not heard from in time. Like the self
// resync, it asks for no timer of its own: so that a simulator pays no
// extra wake-up per node, silence is noticed at the next Tick or Step at
// or after the deadline (a driver that must know sooner ticks the engine
// at the pace it needs; the daemon ticks at least every second).
func (n *Node) checkSilence(now int64) {
	if !n.started {
		return
	}
	for _, s := range n.sources {
		if !s.silent && now >= n.silentAt(s) {
			s.silent = true
			s.stats.Silences++
			n.event(now, EvSourceSilent, s.id, float64(now-s.heardAt))
			n.logger.Info("source silent", "source", s.id, "last_heard", s.heardAt, "period", s.period)
		}
	}
}

// SourceSilent reports whether source id has been silent (see
// Config.SilentPeriods) as of the last Tick; false for a node that is not
// a source.
func (n *Node) SourceSilent(id NodeID) bool {
	i, ok := n.sourceIndex[id]
	return ok && n.sources[i].silent
}

func (n *Node) timeDiff(s *source, m Message, now int64) {
	if s.haveRnd && m.Round <= s.round {
		s.stats.Ignored++
		n.ignore(m, "late or duplicate time diff")
		return
	}
	prevG, prevRound, prevHaveRnd := s.g, s.round, s.haveRnd
	s.round, s.haveRnd = m.Round, true
	if m.Mapping.Valid {
		s.g = m.Mapping
	}
	s.upUnsure = m.Unsure
	samples := make([]estimate.Sample, 0, len(m.Samples))
	for _, x := range m.Samples {
		n.replySent(s.id, &x, now) // the reply's transmit stamp (stamps.go)
		if x.LocSend < x.LocRecv || x.SrcRecv < x.SrcSend || x.RTT() < 0 || x.LocSend > now {
			s.stats.Ignored++
			s.stats.Corrupt++
			n.logger.Warn("time diff sample rejected", "source", s.id, "round", m.Round, "sample", x)
			continue
		}
		samples = append(samples, x)
	}
	if len(samples) == 0 {
		return
	}
	// Ready.Rounds has every exchange with a consistent order (the
	// measurements log), the rejected ones below included.
	n.out.Rounds = append(n.out.Rounds, RoundSamples{Source: s.id, Round: m.Round, Samples: samples})
	if s.floor != nil {
		kept, rejected := s.floor.Filter(make([]estimate.Sample, 0, len(samples)), samples)
		if rejected > 0 {
			floor, _ := s.floor.Floor()
			long, _ := s.floor.LongFloor()
			s.stats.BelowFloor += uint64(rejected)
			n.logger.Info("exchanges faster than the path's floor rejected", "source", s.id, "round", m.Round,
				"rejected", rejected, "of", len(samples), "floor_rtt", floor, "long_floor_rtt", long)
		}
		samples = kept
	}
	if len(samples) == 0 {
		return
	}
	best := samples[0]
	for _, x := range samples[1:] {
		if x.RTT() < best.RTT() {
			best = x
		}
	}
	// Liao: err = |Tdiff-from-source - Tdiff-projected|, the projection
	// being the offset extrapolated with the drift measured before this
	// round (at the exchange's own time, not the value held since the last
	// self resync: the held sawtooth is the self period's business, and
	// reporting it would halve the global period for an error a shorter
	// global period cannot remove).
	bx, _ := best.Mid()
	projected, haveProj := n.sourceOffset(s, bx)
	contra := 0
	if n.outsideClaim(s, samples) || n.outsidePrior(s, samples) {
		contra = ContraOutside
	}
	if n.hold(s, samples, contra, now) { // trust.go
		s.g, s.round, s.haveRnd = prevG, prevRound, prevHaveRnd // nothing of it is taken
		return
	}
	n.setHullSpan(s, best, now)
	hullErr := n.feed(s, s.hull, samples, now)
	if s.sel != s.hull {
		n.feed(s, s.sel, samples, now)
	}
	n.judge(s, samples, contra, hullErr, now)
	s.best, s.haveBest = best, true
	s.prevAt, s.lastAt = s.lastAt, now
	s.stats.Rounds++
	if r := best.RTT(); s.minRTT == 0 || r < s.minRTT {
		s.minRTT = max(1, r)
	}
	diff := float64(best.Offset() - projected)
	if haveProj {
		sig := math.Abs(diff)
		if n.cfg.DiscountDelay {
			// The best exchange's offset is off by at most half its
			// round trip's excess over the shortest one ever (when the
			// shortest delays are symmetric): only what is left is evidence
			// that the projection was wrong.
			sig = max(0, sig-float64(best.RTT()-s.minRTT)/2)
		}
		if sig > float64(n.cfg.DifferenceThresh) {
			e := sig / float64(n.cfg.DifferenceThresh)
			s.stats.Reports++
			n.send(Message{Type: MsgErrReport, From: n.cfg.ID, To: s.id, Round: m.Round, Err: e})
			n.event(now, EvErrReport, s.id, e)
		}
	} else {
		diff = 0
	}
	n.event(now, EvGlobalResync, s.id, diff)
	// Liao: calculate drift rate; if too large, reduce the self period.
	// Too large: above LargeDrift, or so large that the offset held between
	// two self resyncs drifts by more than DIFFERENCE_THRESH/2 (the self
	// resync must be "frequent enough to keep the synchronized clock
	// accurate", and DIFFERENCE_THRESH is what the engine calls accurate).
	if _, skew, ok := n.line(now); ok && (math.Abs(skew) > n.cfg.LargeDrift || math.Abs(skew)*float64(n.selfPeriod) > float64(n.cfg.DifferenceThresh)/2) && n.selfPeriod > int64(n.cfg.MinSelfPeriod) {
		n.selfPeriod = max(n.selfPeriod/2, int64(n.cfg.MinSelfPeriod))
		n.event(now, EvSelfPeriodChange, s.id, float64(n.selfPeriod))
	}
	n.selfAnchor, n.selfSet = now, true
	if !n.cfg.ContinuousDrift {
		n.selfNext = now + n.selfPeriod
		n.lastOffset, _ = n.offsetAt(now)
	}
}

func (n *Node) feed(s *source, e estimate.Estimator, samples []estimate.Sample, now int64) error {
	err := e.AddRound(samples)
	switch {
	case err == nil:
	case errors.Is(err, estimate.ErrInconsistent):
		s.stats.Restarts++
		n.event(now, EvEstimatorRestart, s.id, 0)
		n.logger.Info("estimator restarted", "source", s.id, "err", err)
	default:
		s.stats.Rejected++
		n.logger.Warn("estimator rejected a round", "source", s.id, "err", err)
	}
	return err
}

// selfResync reports Liao's "apply drift rate to Tdiff every
// self_resync_period". The projection itself needs no timer: Read holds the
// offset of the last self-resync instant (selfGrid). So that a simulator
// does not pay one wake-up per node per self period, the event is reported
// at the next Tick or Step after one or more self-resync instants passed,
// stamped with the latest of them, Value = the offset change in ns.
func (n *Node) selfResync(now int64) {
	if n.cfg.ContinuousDrift || n.selfNext == 0 || now < n.selfNext {
		return
	}
	g := n.selfGrid(now)
	off, ok := n.offsetAt(g)
	if ok {
		n.event(g, EvSelfResync, 0, float64(off-n.lastOffset))
		n.lastOffset = off
	}
	n.selfNext = g + n.selfPeriod
}

// selfGrid returns the last self-resync instant at or before x: the
// projection Liao holds between self resyncs.
func (n *Node) selfGrid(x int64) int64 {
	if n.cfg.ContinuousDrift || !n.selfSet || x < n.selfAnchor {
		return x
	}
	return n.selfAnchor + (x-n.selfAnchor)/n.selfPeriod*n.selfPeriod
}

// lineMapping is the source's point-estimate line: the selected estimator,
// else the Hull, else the last exchange alone.
func (n *Node) lineMapping(s *source) (estimate.Mapping, bool) {
	if m := s.sel.Mapping(); m.Valid {
		return m, true
	}
	if m := s.hull.Mapping(); m.Valid {
		return m, true
	}
	if s.haveBest {
		return n.fallback(s), true
	}
	return estimate.Mapping{}, false
}

// It widens at MaxDrift, or faster when the Hull's data allow a larger
// skew: a clock drifting beyond the stated limit is caught (ContraDrift)
// only once the Hull's whole skew range lies beyond it, and until then
// the bound must not rest on the limit the data put in doubt.
func (n *Node) fallback(s *source) estimate.Mapping {
	md := n.cfg.MaxDrift
	if m := s.hull.Mapping(); m.Valid {
		md = max(md, min(math.Abs(m.Skew)+m.SkewErr, 0.5))
	}
	return sampleMapping(s.best, md, n.cfg.MaxWander, int64(n.cfg.Granularity), int64(n.cfg.HullMinDelay))
}

// sourceOffset is the source-minus-local offset the node projects at x
// with the drift it measured (Liao's Tdiff-projected, "the T_diff
// extrapolated locally").
func (n *Node) sourceOffset(s *source, x int64) (int64, bool) {
	m, ok := n.lineMapping(s)
	if !ok {
		return 0, false
	}
	est, _, _ := m.At(x)
	return est - x, true
}

// bounder is implemented by estimators that give exact bounds at any x
// (estimate.Hull); the Mapping form is a looser linear-quadratic envelope.
type bounder interface {
	Bounds(x int64) (lo, hi int64, ok bool)
}

// localBoundsChecked is what the node knows of its source's clock at x:
// the intersection of the Hull's guaranteed bounds and the last exchange's
// own bound, and the point estimate clamped into them; consistent says
// whether the two agreed: when they do not, some assumption of the clock
// model is wrong and the union is returned.
func (n *Node) localBoundsChecked(s *source, x int64) (est, lo, hi int64, ok, consistent bool) {
	consistent = true
	lo, hi = math.MinInt64, math.MaxInt64
	have := false
	if b, isB := s.hull.(bounder); isB {
		// The exact bounds (Jezequel's polygon), tighter than the Mapping.
		lo, hi, have = b.Bounds(x)
	} else if m := s.hull.Mapping(); m.Valid {
		_, lo, hi = m.At(x)
		have = true
	}
	if s.haveBest {
		_, flo, fhi := n.fallback(s).At(x)
		if have {
			l, h, ok := estimate.Intersect(lo, hi, flo, fhi)
			if !ok {
				// Contradiction: some assumption (MaxDrift, MaxWander, the
				// Hull's model) is wrong. Claim only the union.
				n.logger.Debug("hull and exchange bounds disagree", "source", s.id, "local", x)
				l, h = min(lo, flo), max(hi, fhi)
				consistent = false
			}
			lo, hi = l, h
		} else {
			lo, hi = flo, fhi
		}
		have = true
	}
	if !have {
		return 0, 0, 0, false, false
	}
	m, _ := n.lineMapping(s)
	est, _, _ = m.At(x)
	return clamp(est, lo, hi), lo, hi, true, consistent
}

// viaSource is global time at x through source s: estimate and bounds.
func (n *Node) viaSource(s *source, x int64) (est, lo, hi int64, ok bool) {
	est, lo, hi, ok, _ = n.viaSourceChecked(s, x)
	return est, lo, hi, ok
}

// viaSourceChecked is viaSource with localBoundsChecked's consistency.
func (n *Node) viaSourceChecked(s *source, x int64) (est, lo, hi int64, ok, consistent bool) {
	if !s.g.Valid {
		return 0, 0, 0, false, false
	}
	le, llo, lhi, ok, consistent := n.localBoundsChecked(s, x)
	if !ok {
		return 0, 0, 0, false, false
	}
	est, lo, hi, ok = estimate.MapInterval(s.g, le, llo, lhi)
	return est, lo, hi, ok, consistent
}

// bestSource returns the source giving the narrowest global bounds at x.
func (n *Node) bestSource(x int64) (*source, int64, int64, int64, bool) {
	var bs *source
	var be, bl, bh int64
	for _, s := range n.sources {
		e, l, h, ok := n.viaSource(s, x)
		if !ok {
			continue
		}
		if bs == nil || h-l < bh-bl {
			bs, be, bl, bh = s, e, l, h
		}
	}
	return bs, be, bl, bh, bs != nil
}

// line returns the continuous global estimate at x and the node's skew
// against global time (the "drift rate" of Liao).
func (n *Node) line(x int64) (est int64, skew float64, ok bool) {
	if n.IsReference() {
		return x, 0, true
	}
	s, e, _, _, ok := n.bestSource(x)
	if !ok {
		return 0, 0, false
	}
	m, _ := n.lineMapping(s)
	return e, m.Skew + s.g.Skew + m.Skew*s.g.Skew, true
}

// offsetAt is global minus local at x, continuous.
func (n *Node) offsetAt(x int64) (int64, bool) {
	e, _, ok := n.line(x)
	return e - x, ok
}

// globalMapping is the node's local->global mapping sent to its children:
// the reference's identity, or the tightest source's mapping composed with
// the node's own (Jezequel A3, step 3). Its line is the selected estimate,
// its width covers the guaranteed bounds.
//
// The child uses it until its next round, so among the bounds the one that
// is tightest one period ahead is chosen: the last exchange's bound is the
// tightest now but grows at MaxDrift, the Hull's grows at its SkewErr.
func (n *Node) globalMapping(now, period int64) estimate.Mapping {
	if n.IsReference() {
		return estimate.Identity(now)
	}
	s, _, _, _, ok := n.bestSource(now)
	if !ok {
		return estimate.Mapping{}
	}
	line, _ := n.lineMapping(s)
	bound := n.fallback(s)
	if h := s.hull.Mapping(); h.Valid && h.HalfWidth(now+period) <= bound.HalfWidth(now+period) {
		bound = h
	}
	l := estimate.Reanchor(line, now)
	b := estimate.Reanchor(bound, now)
	// The line may sit off the bound's centre: widen by the gap, which
	// grows at most with the skew difference.
	inner := estimate.Mapping{
		X0:      now,
		Y0:      l.Y0,
		Skew:    l.Skew,
		W0:      min(satmath.Add(b.W0, satmath.AbsDiff(l.Y0, b.Y0)), estimate.MaxWidth),
		SkewErr: b.SkewErr + math.Abs(l.Skew-b.Skew),
		Wander:  b.Wander,
		Valid:   true,
	}
	return sendable(estimate.Compose(s.g, inner, now))
}

// sendable brings a mapping within what InvalidFields lets through: early
// in a hull's life its skew range is wide and its middle can lie beyond
// MaxMsgSkew. The skew is clamped into ±MaxMsgSkew and SkewErr widened by
// the shift, so the bounds stay outside the old ones; a mapping whose
// bounds are wider than any message may carry is sent as not valid (the
// child keeps the last valid one).
func sendable(m estimate.Mapping) estimate.Mapping {
	if !m.Valid {
		return m
	}
	if c := max(-MaxMsgSkew, min(MaxMsgSkew, m.Skew)); c != m.Skew {
		m.SkewErr += math.Abs(m.Skew - c)
		m.Skew = c
	}
	if f, _ := InvalidFields(&Message{Mapping: m}, MsgTimeDiff); f != "" {
		return estimate.Mapping{}
	}
	return m
}

// ---- reading global time ----

// Estimate returns global time at local without changing any state (Mono is
// what Read would return).
func (n *Node) Estimate(local int64) Time {
	t, _ := n.read(local)
	return t
}

// Read returns global time at local and advances the monotonic reading.
func (n *Node) Read(local int64) Time {
	t, _ := n.read(local)
	if !n.monoSet || local > n.monoLocal {
		n.monoLocal = local
	}
	n.monoSet, n.monoValue = true, t.Mono
	return t
}

func (n *Node) read(x int64) (Time, float64) {
	var t Time
	skew := 0.0
	switch {
	case n.IsReference():
		t = Time{Est: x, Earliest: x, Latest: x, Status: StatusSynced}
	default:
		t = Time{Est: x, Earliest: math.MinInt64, Latest: math.MaxInt64, Status: StatusUnsynced}
		lo, hi, newest, st, have := n.sourceBounds(x)
		if have {
			e, sk, _ := n.line(x)
			if g := n.selfGrid(x); g != x {
				if ge, gsk, ok := n.line(g); ok {
					e, sk = x+(ge-g), gsk
				}
			}
			skew = sk
			t = Time{Est: clamp(e, lo, hi), Earliest: lo, Latest: hi, Status: st}
			if st == StatusSynced && x-newest > int64(n.cfg.StaleAfter) {
				t.Status = StatusStale
			}
		}
		if t2, sk2, contra := n.withPrior(x, t, skew); !contra { // prior.go
			t, skew = t2, sk2
		}
		t.Earliest, t.Latest = n.widenRead(t.Earliest, t.Latest) // saturates when unbounded
	}
	if n.IsReference() {
		t.Earliest, t.Latest = n.widenRead(t.Earliest, t.Latest)
	}
	t.Mono = n.mono(x, t, skew)
	return t, skew
}

// widenRead adds the uncertainty of the local reading itself
// (ReadUncertainty, converted to the global scale at up to MaxDrift) to
// bounds computed for that reading: the truth is the ideal clock, the
// reading carries granularity and jitter.
func (n *Node) widenRead(lo, hi int64) (int64, int64) {
	u := int64(n.cfg.ReadUncertainty)
	if u == 0 {
		u = int64(n.cfg.Granularity)
	}
	if u <= 0 {
		return lo, hi
	}
	if !n.IsReference() {
		u += int64(math.Ceil(float64(u) * n.cfg.MaxDrift))
	}
	return satmath.Sub(lo, u), satmath.Add(hi, u)
}

// mono is Read's never-decreasing value: it runs at the estimated rate,
// slews toward Est by at most MaxSlewRate, and steps forward only to stay
// at or above Earliest.
func (n *Node) mono(x int64, t Time, skew float64) int64 {
	if !n.monoSet {
		return t.Est
	}
	v := n.monoValue
	if dx := x - n.monoLocal; dx > 0 {
		fdx := float64(dx)
		// The line's skew is only an estimate: early in a hull's life its
		// middle can be far beyond any crystal (0.3), and a monotonic
		// reading that ran at that rate would be hundreds of ms ahead
		// after a second, unable to come back. The model bounds it.
		skew = max(-n.cfg.MaxDrift, min(n.cfg.MaxDrift, skew))
		nat := n.monoValue + dx + int64(skew*fdx)
		limit := int64(n.cfg.MaxSlewRate * fdx)
		v = nat + clamp(t.Est-nat, -limit, limit)
	}
	if t.Status != StatusUnsynced && v < t.Earliest {
		v = t.Earliest
	}
	return max(v, n.monoValue)
}
