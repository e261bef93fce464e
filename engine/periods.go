package engine

import (
	"container/heap"
	"math"
)

// Liao's adaptive global period, per child (Config.Adaptive): SuccessThresh
// quiet rounds double it, error reports summing past ErrorThresh halve it,
// and every change is announced to the child (MsgPeriodChange, silence.go).

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
	// The child's checks missed its line (checks.go), or its line
	// restarted at a break (followBroke): beside the round's own report,
	// if it sent one, once a round; no Liao error (the round had its
	// verdict).
	if n.sideReport(c, m, now, CheckErr, &c.checkReported, n.followCheck) ||
		n.sideReport(c, m, now, BrokeErr, &c.brokeReported, n.followBroke) {
		return
	}
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
	n.followBreak(c, m.Err, now)
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

// sideReport takes a report saying want (CheckErr, BrokeErr) about the
// child's last round, once (seen), and acts on it with follow when
// Adaptive; it reports whether m was such a report.
func (n *Node) sideReport(c *child, m Message, now int64, want float64, seen *bool, follow func(*child, int64)) bool {
	if m.Err != want || m.Round != c.lastDone || c.lastDone == 0 || *seen {
		return false
	}
	*seen = true
	c.stats.Reports++
	n.event(now, EvErrReport, c.id, m.Err)
	if n.cfg.Adaptive {
		follow(c, now)
	}
	return true
}

// earlyDiv: a round brought forward by followBreak starts 1/earlyDiv of
// the period after the round the report was about.
const earlyDiv = 8

// BreakErr is the error report (Message.Err, in DifferenceThresh units) a
// child sends when its centre line found a round suspect of a frequency
// break (estimate's CenterBreaks): at least this much asks the source for
// the next round soon (followBreak). 2^20 (2 s at the default 2 us) is
// beyond any error the rounds report from their noise; a lower threshold,
// 4 or 64 times ErrorThresh, let the frugal profile's noisy first reports
// bring rounds forward in every adaptive row of gclock sim --report trust,
// to mixed effect. A source that does not know it takes the report as a
// large error (Liao: the period halves).
const BreakErr = 1 << 20

// followBreak brings the next round forward when an error report says
// BreakErr: the child's centre line missed the round as a clock that
// changed would (its frequency jumped: a VM migrated, a fan started).
// Halving the period, as the sum past ErrorThresh does, is no help where
// the period is at MinGlobalPeriod already (the precise profile's 6 s),
// and the child then extrapolates from one round of the new frequency
// until the next: in the simulator's
// link matrix with two hosts' frequencies stepping 10 and -20 ppm
// (link-matrix-drift-step) gclock's p99 was 57-317 us against the chrony
// stand-in's 2.4-12 us. A round 1/earlyDiv of the period after the one
// reported on measures the new frequency over that gap, where the next
// regular round would come a period later. A round so brought forward
// brings none forward itself (no chain of them: a child whose reports
// stay large gets one early round per period at most).
func (n *Node) followBreak(c *child, e float64, now int64) {
	if !(e >= BreakErr) || c.early || !n.mayFollow(c) {
		return
	}
	div := int64(earlyDiv)
	if c.checked {
		// The checks found the break before this round did: confirm it
		// twice as soon (the line served, shifted by the round's miss,
		// still runs at the old frequency until then).
		div *= 2
	}
	if n.bringForward(c, now, max(now, c.lastEnd+c.period/div)) {
		c.earlyNext = true
		c.stats.Early++
	}
}

// mayFollow reports whether a child's next round may be brought forward
// (followBreak, followBroke, followCheck): off the ramp, idle and waiting
// on the timer heap.
func (n *Node) mayFollow(c *child) bool {
	return !n.ramping(c) && c.state == idle && c.heapIdx >= 0
}

// bringForward moves a child's next round to at if that is sooner than it
// is due, and says so (EvEarlyRound, Value the wait from now).
func (n *Node) bringForward(c *child, now, at int64) bool {
	if at >= c.due {
		return false
	}
	c.due = at
	heap.Fix(&n.timers, c.heapIdx)
	n.event(now, EvEarlyRound, c.id, float64(at-now))
	return true
}

// BrokeErr is the error report (Message.Err) of a child whose centre line
// restarted at a frequency break on the round reported (estimate's
// CenterBreaks, confirmed): -2, no error a round reports, beside the
// round's own report. A source that does not know it ignores it as an
// invalid value.
const BrokeErr = -2

// followBroke brings the next two rounds forward after a child's centre
// line restarted at a frequency break: the line then rests on two rounds
// period/16 or period/8 apart, and its frequency on that short a span is
// off by a few ppm on a link whose delays are a bell (in the lab, a 10-us
// bell: 2.5 ppm, 12 us before the next round 6 s on). The next round
// comes a quarter period after the one reported on, the one after it half
// a period after that (endRound), so that the new frequency rests on
// spans 4 and 12 times as long within a period. None on the ramp, while a
// round is under way, or with a round due sooner.
func (n *Node) followBroke(c *child, now int64) {
	if !n.mayFollow(c) {
		return
	}
	c.followUps = 1
	if n.bringForward(c, now, max(now, c.lastEnd+c.period/4)) {
		c.stats.Early++
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
