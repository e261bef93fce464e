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
