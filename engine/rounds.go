package engine

import (
	"container/heap"
	"math"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
)

// The source side (Liao, Figure 1, "On Node 0"): one round per child at a
// time, scheduled on the timer heap (timers.go), a probe at a time until
// the round has its exchanges, then a time diff to the child.

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

	period int64 // global_resync_period[nodeX]
	// early: the round under way or last ended was brought forward by an
	// error report (errReport); earlyNext: the next one is.
	early, earlyNext bool
	// checked: the round under way or last ended was started by the
	// child's checks (followCheck); checkedNext: the next one is.
	checked, checkedNext bool
	errSum               float64
	successes            int
	lastEnd              int64

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

	// started is when the round under way (or last ended) started, pace
	// the time an exchange of this child's rounds takes: their length over
	// their exchanges, smoothed over rounds (0: no round ended yet). The
	// children's paces size the rounds the source's slots can serve
	// (sharedPings).
	started, pace int64

	lastDone uint32 // last round whose TimeDiff was sent; 0: none
	pending  bool   // lastDone's verdict (report or success) not yet counted
	reported bool   // an ErrReport for lastDone arrived

	periodSeq uint32 // MsgPeriodChange messages sent to this child

	// Check exchanges between rounds (checks.go): the next one's time (0:
	// none planned), the one awaiting its reply (seq 0: none) with its
	// send time and transmit stamp, and when the last round a check
	// brought forward started (0: none).
	checkDue, checkSent, checkTx, checkRoundAt int64
	checkSeq                                   uint32
	checkReported                              bool // a CheckErr report about lastDone came
	// brokeReported: a BrokeErr report about lastDone came; followUps:
	// the rounds still to come early after a break (followBroke).
	brokeReported bool
	followUps     int

	// unanswered: the last round ended with its probe retries exhausted
	// and no sample. Logged once when it starts and once when the child
	// answers again, not at every round of a dead child.
	unanswered bool

	stats ChildSnapshot
}

// roundPings is the number of exchanges a round of c asks for:
// Config.RampPingsPerRound while c's period is still on the convergence
// ramp (below MinGlobalPeriod; read after the round's start has counted
// the round before, which may have doubled it), else PingsPerRound, or
// fewer when the source's slots cannot serve every child a round that
// size each MinGlobalPeriod (sharedPings), but never fewer than the ramp's.
func (n *Node) roundPings(c *child) int {
	small := n.cfg.RampPingsPerRound
	if small <= 0 {
		return n.cfg.PingsPerRound
	}
	if n.ramping(c) {
		return small
	}
	return max(min(small, n.cfg.PingsPerRound), min(n.cfg.PingsPerRound, n.sharedPings()))
}

// slotShare is the share of its slots' time (MaxConcurrentRounds x
// MinGlobalPeriod) a source fills with its children's rounds at most
// (sharedPings): the rest is for repeats, rounds a report or a check
// brings forward, and children that fall out of step. The paces are
// measured with the slots busy, so they already count what the rounds
// running at once cost each other.
const slotShare = 0.75

// sharedPings is the largest round that fits every child's one round a
// MinGlobalPeriod into slotShare of the source's slots, from the paces the
// children's rounds measured (a child with none yet counts at the mean of
// the others): math.MaxInt with no slot limit or no pace measured. On 4
// lab hosts an exchange takes about 0.3 ms and three children leave room
// for rounds of thousands; 31 children whose rounds of 960 outran the
// reference (paced above 1 ms, cut by the round budget) get rounds of a
// few hundred (docs/engine.md, Behaviour, "round size").
func (n *Node) sharedPings() int {
	if n.cfg.MaxConcurrentRounds <= 0 || n.cfg.MinGlobalPeriod <= 0 {
		return math.MaxInt
	}
	var sum float64
	measured := 0
	for _, c := range n.children {
		if c.pace > 0 {
			sum += float64(c.pace)
			measured++
		}
	}
	if measured == 0 {
		return math.MaxInt
	}
	demand := sum / float64(measured) * float64(len(n.children)) // ns of slot time an exchange with every child takes
	avail := slotShare * float64(n.cfg.MaxConcurrentRounds) * float64(n.cfg.MinGlobalPeriod)
	return int(min(avail/demand, math.MaxInt32))
}

func (n *Node) slotFree() bool {
	return n.cfg.MaxConcurrentRounds == 0 || n.active < n.cfg.MaxConcurrentRounds
}

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
	c.checkDue, c.checkSeq = 0, 0 // an unanswered check is dropped
	c.early, c.earlyNext = c.earlyNext, false
	c.checked, c.checkedNext = c.checkedNext, false
	n.active++
	c.round++
	c.samples = c.samples[:0]
	c.target = n.roundPings(c)
	c.stats.Pings = c.target
	c.started = now
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
	if c.checkSeq != 0 && m.Seq == c.checkSeq && m.Round == c.round {
		n.checkReply(c, m, now)
		return
	}
	if c.state != probing || m.Seq != c.seq || m.Round != c.round {
		c.stats.Ignored++
		n.ignore(m, "late or duplicate reply")
		return
	}
	if c.unanswered {
		c.unanswered = false
		n.logger.Info("child answering again", "child", c.id, "round", c.round)
	}
	s, stamped := replySample(c.probeSent, c.probeTx, m, now)
	if m.T3 < m.T2 || now < c.probeSent || s.RTT() < 0 {
		// Corrupt timestamps: treat as lost, the timeout retries.
		c.stats.Ignored++
		n.ignore(m, "reply with inconsistent timestamps")
		return
	}
	if c.heapIdx >= 0 {
		heap.Remove(&n.timers, c.heapIdx)
	}
	if m.Resent {
		// Acknowledged, but its times may belong to different copies
		// (Message.Resent): no sample, and it counts as a retry, so that a
		// child whose every reply comes to a resent probe ends its round as
		// a silent one does (MaxProbeRetries). With no sample yet the round
		// probes on past its budget, as after a timeout.
		c.stats.Resent++
		n.stamps.Resent++
		c.retries++
		switch {
		case c.retries > n.cfg.MaxProbeRetries:
			c.stats.Abandoned++
			if len(c.samples) == 0 {
				n.endRound(c, now, false)
				return
			}
		case len(c.samples) == 0 || (len(c.samples) < c.target && !n.overBudget(c, now)):
			n.sendProbe(c, now)
			return
		}
	} else {
		switch {
		case stamped:
			n.stamps.ProbeStamped++
		case c.probeTx != 0:
			n.stamps.Rejected++
			n.stamps.ProbeOwn++
		default:
			n.stamps.ProbeOwn++
		}
		// Karn: only a probe sent once gives the round trip its timeout
		// learns from.
		if raw := now - c.probeSent; c.srtt == 0 {
			c.srtt = raw
		} else {
			c.srtt += (raw - c.srtt) / 8
		}
		c.retries = 0
		c.samples = append(c.samples, s)
		if len(c.samples) < c.target && !n.overBudget(c, now) {
			n.sendProbe(c, now)
			return
		}
	}
	best := bestRTT(c.samples)
	if !c.repeated && c.shortestEver >= 0 && best-c.shortestEver > int64(n.cfg.NetworkLatencyErrorThresh) {
		// Liao: shortest-this-round - shortest-ever > NETWORK_LATENCY_ERROR_THRESH:
		// do the round's pings once more (with the budget again, if any).
		c.repeated = true
		c.target = len(c.samples) + n.roundPings(c)
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
	if k := int64(len(c.samples)); k > 0 && now > c.started {
		// The round's pace, its repeat and waits for retries included:
		// the slot time one exchange with c costs.
		if p := (now - c.started) / k; c.pace == 0 {
			c.pace = p
		} else {
			c.pace += (p - c.pace) / 4
		}
		c.stats.Pace = c.pace
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
		c.lastDone, c.pending, c.reported, c.checkReported, c.brokeReported = c.round, true, false, false, false
	}
	c.due = now + c.period
	if c.followUps > 0 && sent && !n.ramping(c) {
		// The second round after a break: half a period on (followBroke).
		c.followUps--
		c.due = now + c.period/2
	}
	n.planChecks(c, now, sent)
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

// replySample is the exchange of a probe sent at sent (its transmit stamp
// tx, 0: none; TxStamp checked it is after sent) whose reply m was
// stepped at now: the reply's receive stamp T4 when it fits in [sent,
// now], and tx for the departure when it is not after the arrival
// (stamped).
func replySample(sent, tx int64, m Message, now int64) (s estimate.Sample, stamped bool) {
	s = estimate.Sample{SrcSend: sent, LocRecv: m.T2, LocSend: m.T3, SrcRecv: now}
	if m.T4 != 0 && m.T4 >= sent && m.T4 <= now {
		s.SrcRecv = m.T4
	}
	if stamped = tx != 0 && tx <= s.SrcRecv; stamped {
		s.SrcSend = tx
	}
	return s, stamped
}

func bestRTT(ss []estimate.Sample) int64 {
	best := int64(math.MaxInt64)
	for _, s := range ss {
		best = min(best, s.RTT())
	}
	return best
}
