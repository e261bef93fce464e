package engine

import (
	"math"

	"github.com/gclock/gclock/estimate"
)

// Check exchanges (Config.ChecksPerPeriod). A frequency break (a clock's
// frequency jumping: a VM migrated, a fan started) is found by the centre
// line when the next round misses it (estimate's CenterBreaks), and the
// error grows until then: with rounds 6 s apart, a 10-ppm jump right after
// a round reached 60 us before it was seen. In the lab, every host's
// frequency jumping 10 ppm left gclock's p99 at 44-57 us against chronyd's
// 6.6-13, chronyd polling 16 times a second.
//
// Between a child's rounds its source sends ChecksPerPeriod single probes
// a period, spread over it, never retried (a lost one is simply missing),
// and sends each answered one to the child as a TimeDiff marked Check. The
// child judges it against the line it serves (estimate.Hull.Check: its
// midpoint beyond the line, less what queueing can explain, against a
// threshold from the rounds' own misses and spread) and takes nothing of
// it into an estimator. estimate.CheckBeyond checks beyond the line on one
// side, within estimate.CheckSpan checks and none within or beyond the
// other side between them (estimate.CheckTally), or the checks' midpoints
// since the round drifting away from the line (estimate.Hull.CheckTrend:
// on a bell or a uniform link a check's interval is tens of us wide and
// says little alone), and the child reports CheckErr for the round it
// last took; the source starts a round at once (followCheck), which the
// centre line then judges as any other: a suspect, the line served
// shifted by its miss, and a round early after it to confirm
// (followBreak). So a break is found within a few checks (one every 50 ms
// at the precise profile's 128 a period of 6 s) instead of at the next
// round.

// CheckErr is the error report (Message.Err) of a child whose check
// exchanges missed its line: -1, no error a round reports (those are >=
// 0), so that the source tells it from the round's own report, and takes
// it beside that one. A source that does not know it ignores it as an
// invalid value.
const CheckErr = -1

// planChecks plans a child's check exchanges after a round ended: none
// without ChecksPerPeriod, Adaptive (only followCheck acts on them), a
// round that reached the child, or on the convergence ramp.
func (n *Node) planChecks(c *child, now int64, sent bool) {
	c.checkDue, c.checkSeq = 0, 0
	if n.cfg.ChecksPerPeriod <= 0 || !n.cfg.Adaptive || !sent || n.ramping(c) {
		return
	}
	c.checkDue = now + n.checkGap(c)
}

// minCheckGap: checks come no closer than this (ns of the source's local
// clock), whatever the period: with rounds every second (the lab's spoof
// runs) 32 a period were one every 30 ms, three times the rounds' own
// exchanges. 100 ms until stop 45: on a bell the checks' trend finds a
// frequency jump as the cube root of their rate, and 20 a second took
// the simulator's p99 under a jump on a 10-us bell from 6.4 to 3.3 us
// (with the round's location judged: estimate's located).
const minCheckGap = 50_000_000

// checkGap is the time between a child's checks: its period over
// ChecksPerPeriod+1, so that the checks fall between the rounds, and at
// least minCheckGap.
func (n *Node) checkGap(c *child) int64 {
	return max(minCheckGap, c.period/int64(n.cfg.ChecksPerPeriod+1))
}

// nextCheck is the earliest planned check (for Ready.NextTick).
func (n *Node) nextCheck() (int64, bool) {
	var at int64
	have := false
	for _, c := range n.children {
		if c.checkDue != 0 && (!have || c.checkDue < at) {
			at, have = c.checkDue, true
		}
	}
	return at, have
}

// sendChecks sends the checks due: one probe each to an idle child whose
// next round is more than half a gap away (else none until that round).
func (n *Node) sendChecks(now int64) {
	for _, c := range n.children {
		if c.checkDue == 0 || c.checkDue > now {
			continue
		}
		gap := n.checkGap(c)
		if c.state != idle || c.due-now < gap/2 {
			c.checkDue, c.checkSeq = 0, 0
			continue
		}
		n.seq++
		c.checkSeq, c.checkSent, c.checkTx = n.seq, now, 0
		c.checkDue = now + gap
		n.send(Message{Type: MsgProbe, From: n.cfg.ID, To: c.id, Round: c.round, Seq: c.checkSeq})
	}
}

// checkReply takes the reply to a check probe: the exchange goes to the
// child as a TimeDiff marked Check, about its last round.
func (n *Node) checkReply(c *child, m Message, now int64) {
	s, _ := replySample(c.checkSent, c.checkTx, m, now)
	c.checkSeq = 0
	if m.Resent || m.T3 < m.T2 || s.RTT() < 0 || c.lastDone != c.round {
		c.stats.Ignored++
		n.ignore(m, "check reply resent, inconsistent or after a round that reached no one")
		return
	}
	c.stats.Checks++
	n.send(Message{Type: MsgTimeDiff, From: n.cfg.ID, To: c.id, Round: c.round, Samples: []estimate.Sample{s}, Check: true})
}

// checkRoundsDiv: a source starts at most this many rounds a period on
// its child's checks (followCheck). One was too few: on a 10-us bell in
// the lab a round asked for by the checks did not move the line enough,
// the checks missed it again 2.7 s later, and the next round came 4 s
// after that, the error grown to 60 us. 8 since the checks' trend (stop
// 44), which finds a jump sooner and so also asks again sooner when its
// first round was no suspect: gclock sim matrix --base
// link-matrix-drift-step --seeds 1-30, uniform p99 11.0 -> 9.9 us against
// 4, the bursts base unchanged.
const checkRoundsDiv = 8

// followCheck starts a child's round now when its report says CheckErr
// (its checks missed its line): at most checkRoundsDiv such rounds a
// period (a report sooner puts the round off until the limit allows it),
// and none on the ramp or while a round is under way or waits.
func (n *Node) followCheck(c *child, now int64) {
	if !n.mayFollow(c) {
		return
	}
	at := now
	if c.checkRoundAt != 0 {
		// Within the limit the round is put off to it, not dropped: in
		// the lab a round the checks asked for did not move a 10-us
		// bell's line enough, the checks missed it again 1.1 s later,
		// and the next round came 6 s after, the error grown to 64 us.
		at = max(now, c.checkRoundAt+c.period/checkRoundsDiv)
	}
	if !n.bringForward(c, now, at) {
		return
	}
	c.checkRoundAt = at
	// Not early: its own suspect brings the confirming round forward, the
	// sooner as the checks found the break already (followBreak).
	c.earlyNext, c.checkedNext = false, true
	c.stats.CheckRounds++
}

// checker is an estimator that judges check exchanges (estimate.Hull).
type checker interface {
	Check(estimate.Sample) (lo, hi, thresh float64, ok bool)
	CheckTrend() (side int, z float64)
}

// checkDiff is the child's side: a check exchange about the round last
// taken from s is judged against the line served, and a run of misses on
// one side (estimate.CheckTally), or the checks' midpoints since the round
// drifting away from the line (estimate.Hull.CheckTrend), makes the child
// report CheckErr (once a round).
func (n *Node) checkDiff(s *source, m Message, now int64) {
	if !s.haveRnd || m.Round != s.round || len(m.Samples) != 1 || m.Samples[0].LocRecv <= s.checkRecv {
		s.stats.Ignored++
		n.ignore(m, "check not about the round last taken, or not after the newest exchange")
		return
	}
	x := m.Samples[0]
	s.checkRecv = x.LocRecv
	n.heard(s, now)
	n.replySent(s.id, &x, now)
	if !usable(x, now) {
		s.stats.Ignored++
		s.stats.Corrupt++
		return
	}
	ch, ok := s.sel.(checker)
	if !ok {
		return
	}
	lo, hi, thresh, ok := ch.Check(x)
	if !ok {
		return
	}
	s.stats.Checks++
	side, beyond, span := s.checks.Add(lo, hi, thresh)
	if s.checkReported {
		return
	}
	var z float64
	if side == 0 {
		if side, z = ch.CheckTrend(); side != 0 {
			s.stats.CheckTrends++
		}
	}
	if side == 0 {
		return
	}
	s.checkReported = true
	s.stats.CheckBreaks++
	if e, ok := s.sel.(interface{ ExpectBreak(side int) }); ok {
		e.ExpectBreak(side) // the round asked for is judged on this evidence
	}
	miss := lo
	if side < 0 {
		miss = hi
	}
	n.logger.Info("check exchanges missed the centre line: asking the source for a round now", "source", s.id, "round", s.round,
		"miss_ns", int64(miss), "threshold_ns", int64(thresh), "beyond", beyond, "of_checks", span, "trend_z", math.Round(z*100)/100)
	n.report(s, s.round, CheckErr, now)
}
