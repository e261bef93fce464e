package estimate

import (
	"cmp"
	"math"
	"slices"
)

// Frequency breaks (HullConfig.CenterBreaks). A clock's frequency can jump:
// a virtual machine migrated, a fan started, a crystal's temperature
// jumped. The centre line remembers CenterMemory rounds, so after a jump of
// 10 ppm it kept extrapolating the old frequency and took four or five
// rounds to follow: with rounds 6 s apart, the simulator's link matrix
// with two hosts' frequencies stepping 10 and -20 ppm (sim scenario
// link-matrix-drift-step) left gclock's p99 at 57-317 us where the chrony
// stand-in, which polls 16 times a second and regresses over seconds, had
// 2.4-12 us.
//
// Before a round's exchanges join the line, the line in use predicts
// them, and the round's miss is read off its breakFastest fastest
// exchanges by round trip: each one's midpoint beyond the line, shrunk
// toward the line by half its round trip's excess over the fastest
// exchange the hull has seen (what queueing can have moved the midpoint
// by, where the two directions' floors are alike), and the median of those.
// A load burst queues the exchanges and they shrink to little; a frequency
// break moves them all one way. A miss beyond breakSigmas times the
// rounds' usual miss (from the newest breakWindow rounds') and the round's
// own noise (the spread of its unshrunk midpoints over the square root of
// their number), and beyond breakMin ns, makes the round a suspect: held
// out of the window, the line served shifted by its miss (Center) until
// the next round's verdict. The engine asks the source for that round
// early (its followBreak), and it is judged against the line from before
// the suspect: if it too lies beyond, on the same side, the frequency
// broke, and the window restarts from the held round, so that the line
// rests on the new frequency's exchanges alone instead of averaging them
// with the old; if not, the suspect was a burst or a wrong reading and its
// round is dropped. The guaranteed bounds are another hull's (the
// engine's), which keeps every exchange.
const (
	// breakSigmas and breakMin: how far beyond its usual misses, its own
	// noise and in ns a round's miss must be to be a suspect.
	breakSigmas = 8
	breakMin    = 1000
	// breakRounds: the rounds judged before a suspect can be found (after a
	// start or a cut, the line's first misses are its own noise).
	breakRounds = 4
	// breakWindow: the newest rounds whose misses set the usual miss.
	breakWindow = 8
	// breakFastest: the exchanges (the fastest by round trip) a round's
	// miss is read from.
	breakFastest = 15
)

// breakOn: frequency breaks cut a CenterBreaks hull's window (tests turn it
// off to compare).
var breakOn = true

// breakState is a hull's record of how well its centre line predicted
// each new round, and the suspect round if one waits for the next round's
// verdict. Reset keeps the misses and the counts (a restart does not make
// the rounds' noise smaller) and forgets a suspect (its round with it).
type breakState struct {
	misses  []float64 // the newest breakWindow rounds' |miss|, ns, oldest first
	judged  int       // rounds judged since the start or the last restart
	rttMin  float64   // the fastest exchange's round trip, ns
	haveMin bool
	// The suspect: its round, held back, its signed miss and the line it
	// missed (relative units, moved with rebase).
	suspect bool
	held    []Sample
	sd      float64
	sc, ss  float64
	// suspects and breaks count the suspects found and the breaks
	// confirmed.
	suspects, breaks uint64
	// expect: check exchanges (Check) missed the line on this side (-1,
	// 1; 0: none) since the last round judged: the next round is judged
	// against breakMin and expectSigmas times its own noise alone, on
	// that side, and so is the verdict on a suspect it makes (ExpectBreak).
	expect int
	// tails: the newest breakWindow rounds' checkTail quantile of one
	// exchange's |shrunk miss| over all the round's exchanges, ns: what a
	// check exchange (Check) misses the line by when it holds, but rarely.
	tails []float64
	// locs: the newest breakWindow rounds' signed location beyond the line
	// (the median of their breakFastest fastest exchanges' midpoints,
	// unshrunk), ns: where a round that holds lies, the two directions'
	// difference of shape included.
	locs []float64
	// alls: the same rounds' median of all their midpoints beyond the
	// line, unshrunk (located).
	alls []float64
	// checks: the check exchanges judged since the last round (Check), at
	// most maxChecksKept: where each put the line's error, for the tilt.
	checks []checkPt
	// byLoc: the suspect is one by its location alone (located), its
	// shrunk miss within its noise.
	byLoc bool
	// The line served while a suspect is held: shifted by serve at the
	// suspect round's time sx (relative) and tilted by tilt (ns per ns)
	// from there (served).
	serve, sx, tilt float64
	// noises: the newest breakWindow rounds' own noise (roundMissed),
	// ns; dropped: the rounds left out as a burst's (burstNoise).
	noises  []float64
	dropped uint64
	// base: the midpoints of the newest trendBase checks judged before
	// rounds that held (keepBase): where the checks lie when the line
	// holds, for their trend.
	base []float64
}

// checkPt is a check exchange judged against the line: its local time
// (relative), its midpoint beyond the line and half its round trip's
// excess over the fastest seen, ns, and its side (CheckSide).
type checkPt struct {
	x, mid, q float64
	side      int
}

// maxChecksKept bounds breakState.checks (a period's checks are at most
// 128: engine's ChecksPerPeriod).
const maxChecksKept = 256

// scale is the rounds' usual miss: 1.4826 times the median |miss| of the
// newest breakWindow rounds (a median, so that the first rounds' misses,
// the line still converging, and a burst's do not make it deaf to a
// break for long).
func (b *breakState) scale() float64 { return 1.4826 * median(slices.Clone(b.misses)) }

// rebase moves the suspect's line, its time and the checks' with the
// hull's origin (misses beyond a line do not move).
func (b *breakState) rebase(dx, dd int64) {
	if b.suspect {
		b.sc += b.ss*float64(dx) - float64(dd)
		b.sx -= float64(dx)
	}
	for i := range b.checks {
		b.checks[i].x -= float64(dx)
	}
}

// served is the offset the line served adds at relative x while a suspect
// is held (0 without one).
func (b *breakState) served(x float64) float64 {
	if !b.suspect {
		return 0
	}
	return b.serve + b.tilt*(x-b.sx)
}

// Breaks is how many frequency breaks restarted the hull's window and
// Suspects how many rounds were suspects (HullConfig.CenterBreaks); a
// suspect the next round did not confirm is one of the second and not of
// the first.
func (h *Hull) Breaks() uint64   { return h.brk.breaks }
func (h *Hull) Suspects() uint64 { return h.brk.suspects }

// BurstDrops counts the rounds the check exchanges asked for that were
// left out of the centre line as a load burst's (burstNoise).
func (h *Hull) BurstDrops() uint64 { return h.brk.dropped }

// What judgeBreak makes of a round.
const (
	breakAdd  = iota // add the round
	breakHold        // a suspect: held back until the next round's verdict
	breakCut         // a confirmed break: restart the window from the held round, then add this one
	breakDrop        // a round the checks asked for in a burst: left out
)

// burstNoise: a round the check exchanges asked for (ExpectBreak) that is
// no suspect and whose own noise is beyond this many times the newest
// rounds' usual is left out of the centre line: the checks' alarm came
// from a load burst, and so does the round. In the simulator's bursts
// (link-matrix-bursts, normal 10 us, seed 10) the checks' trend fired in
// a burst, the round it asked for (noise 4.6 us, where a round's on that
// link is about 1.7) joined the line, and the line stayed 2-3 us off for
// 18 s.
const burstNoise = 2

// judgeBreak judges a round (its samples, and its UP and LOW points
// relative, before they are added) against the centre line in use, or
// against the suspect's line while a suspect is held, and keeps the
// misses' statistics.
func (h *Hull) judgeBreak(round []Sample, ups, lows []pt) int {
	b := &h.brk
	if !breakOn || !h.cfg.CenterBreaks || !h.cfg.Center || len(ups) < floorCurveMinPoints {
		b.suspect, b.held = false, nil
		return breakAdd
	}
	c, s := b.sc, b.ss
	if !b.suspect {
		var ok bool
		if c, s, ok = h.centerLine(); !ok {
			return breakAdd
		}
	}
	rm, ok := h.roundMiss(ups, lows, c, s)
	checks := b.checks
	b.checks = nil // a round judged: the checks were about the line before it
	if !ok {
		b.suspect, b.held, b.expect = false, nil, 0
		return breakAdd
	}
	d, noise := rm.miss, rm.noise
	e := math.Abs(d)
	asked := b.expect != 0 && !b.suspect // a round the checks asked for, not a verdict
	ready := b.judged >= breakRounds && len(b.misses) >= breakRounds
	beyond := ready && e > breakMin && e > breakSigmas*b.scale() && e > breakSigmas*noise
	if b.expect != 0 && ready && (d > 0) == (b.expect > 0) && e > breakMin && e > expectSigmas*noise {
		beyond = true // the checks saw the line missed on this side
	}
	byLoc, burst := false, b.inBurst(noise)
	if b.expect != 0 && ready && !beyond && locateOn && !burst {
		// The round's location, unshrunk (located): on a bell the shrink
		// takes most of a true miss. For the round the checks asked for,
		// and for the verdict on the suspect it made (against the line
		// before it): in the lab on the uniform link a suspect by its
		// location was not confirmed by the next round's shrunk miss, that
		// round joined the line as one that held, and the break waited
		// 10 s, 30 us off.
		if v, sp, ok := b.located(rm); ok && (v > 0) == (b.expect > 0) && math.Abs(v) > breakMin && math.Abs(v) > expectSigmas*sp {
			beyond, byLoc = true, true
			if (d > 0) != (v > 0) || d == 0 {
				d = math.Copysign(breakMin, v) // the suspect's side is the location's
				rm.miss = d
			}
		}
	}
	// The expectation holds for one round, and for the verdict on a
	// suspect that round made: it goes with any outcome but a suspect held.
	defer func() {
		if !b.suspect {
			b.expect = 0
		}
	}()
	switch {
	case b.suspect && beyond && (d > 0) == (b.sd > 0):
		b.suspect = false
		b.breaks++
		b.judged = 0
		return breakCut
	case b.suspect:
		// Not confirmed: the suspect was a wrong reading or a burst, and
		// its round is dropped. This round is judged as any other.
		b.suspect, b.held, b.expect = false, nil, 0
		if !beyond {
			break
		}
		fallthrough // beyond on the other side: a suspect itself
	case beyond:
		b.suspect, b.sd, b.sc, b.ss, b.byLoc = true, d, c, s, byLoc
		b.held = slices.Clone(round)
		b.suspects++
		b.serveSuspect(rm, checks)
		return breakHold
	}
	if asked && burst {
		b.dropped++
		return breakDrop
	}
	b.misses = keepNewest(append(b.misses, e), breakWindow)
	b.locs = keepNewest(append(b.locs, rm.loc), breakWindow)
	b.alls = keepNewest(append(b.alls, rm.all), breakWindow)
	b.noises = keepNewest(append(b.noises, noise), breakWindow)
	b.keepBase(checks)
	b.judged++
	return breakAdd
}

// serveSuspect sets the line served while a suspect is held: through the
// suspect round's location beyond the line (located: its fastest
// exchanges' midpoints or all of them, unshrunk, less where the rounds
// that held lay: the shrunk
// miss that judges a round is short of a break's by its shrink, 10-19 us
// of a 29-us miss on a 10-us bell in the simulator), and, when check
// exchanges since the last round saw the miss coming on its side, tilted
// by the frequency change they and the round say (breakTilt): a break's
// error then stops growing until the verdict, instead of growing at the
// jump's rate for the period/16 it waits.
func (b *breakState) serveSuspect(rm roundMissed, checks []checkPt) {
	b.serve, b.sx, b.tilt = rm.miss, rm.x, 0
	if v, _, ok := b.located(rm); ok && (v > 0) == (rm.miss > 0) && math.Abs(v) > math.Abs(rm.miss) {
		// At most the shrink added back: a round's location is noisier
		// than its shrunk miss, and one far beyond it is no break's.
		b.serve = math.Copysign(min(math.Abs(v), math.Abs(rm.miss)+rm.q), v)
	}
	if b.expect != 0 && (b.expect > 0) == (rm.miss > 0) {
		b.tilt = breakTilt(checks, b.serve, b.sx)
	}
}

// Suspect is the round held back as the suspect of a frequency break, if
// one is: its miss (shrunk) and the line served meanwhile, shifted by
// serve ns at the round and tilted by tilt (ns per ns).
func (h *Hull) Suspect() (miss, serve, tilt float64, ok bool) {
	b := &h.brk
	return b.sd, b.serve, b.tilt, b.suspect
}

// SuspectLocated says the suspect held (Suspect) is one by its location
// alone: a round the checks asked for whose midpoints lie beyond the line
// where its shrunk miss did not (located).
func (h *Hull) SuspectLocated() bool { return h.brk.suspect && h.brk.byLoc }

// located is a round's location beyond the line, unshrunk, less where the
// newest rounds that held lay, read from whichever of two statistics
// places a round the more surely: the median of its breakFastest fastest
// exchanges' midpoints (breakState.locs: on a floor they pin it) or the
// median of all its midpoints (breakState.alls: on a bell the round trip
// says nothing of an exchange's midpoint, and 240 place the round four
// times as surely as 15). spread is that statistic's: the round's own
// noise or the held rounds' spread about their median (1.4826 MAD),
// whichever is more. ok is false before breakRounds rounds held.
//
// The shrunk miss that judges a round (roundMiss) is short of a break's
// by its shrink: on a 10-us bell in the simulator a round the checks'
// trend asked for 0.9 s after a 10-ppm jump, the line 9 us off, missed by
// 0 us shrunk and 1.4 us by its fastest midpoints (noise 1.2) and was no
// suspect; the error grew to 17 us before the next.
func (b *breakState) located(rm roundMissed) (v, spread float64, ok bool) {
	if len(b.locs) < breakRounds || len(b.alls) < breakRounds {
		return 0, 0, false
	}
	v = rm.loc - median(slices.Clone(b.locs))
	spread = max(rm.noise, madScale(b.locs))
	if va, sa := rm.all-median(slices.Clone(b.alls)), max(rm.allNoise, madScale(b.alls)); sa < spread {
		v, spread = va, sa
	}
	return v, spread, !math.IsNaN(v) && !math.IsInf(v, 0) && !math.IsNaN(spread) && !math.IsInf(spread, 0)
}

// inBurst says a round's own noise is beyond burstNoise times the newest
// rounds' usual (false before breakRounds of them).
func (b *breakState) inBurst(noise float64) bool {
	return len(b.noises) >= breakRounds && noise > burstNoise*median(slices.Clone(b.noises))
}

// breakTilt is the frequency change (ns per ns) of a break whose error is
// m at relative time sx, from the check exchanges before it: the error
// was 0 until the jump at some time tj and grew linearly to m at sx, and
// tj is where that hinge lies closest to the checks: the sum of how far
// it passes outside each one's interval [mid - q, mid + q] (where
// queueing leaves the line's error: on a link with a floor, a check near
// it pins the hinge) and a tenth of its distance from each midpoint (what
// the checks say where their intervals are wide, as on bells), tj before
// the first check beyond the line on m's side. 0 with fewer than
// minTiltChecks checks; at most maxTilt.
func breakTilt(checks []checkPt, m, sx float64) float64 {
	var cs []checkPt
	for _, c := range checks {
		if c.x < sx && !math.IsNaN(c.mid) && !math.IsNaN(c.q) {
			cs = append(cs, c)
		}
	}
	if len(cs) < minTiltChecks {
		return 0
	}
	// The jump came after the round before (the first check at the
	// latest) and before the first check beyond the line on m's side.
	first, last := cs[0].x, sx-minTiltSpan
	for _, c := range cs {
		first = min(first, c.x)
		if c.side != 0 && (c.side > 0) == (m > 0) {
			last = min(last, c.x)
		}
	}
	if last <= first {
		return 0
	}
	best, bestCost := math.NaN(), math.Inf(1)
	const steps = 64
	for i := 0; i <= steps; i++ {
		tj := first + (last-first)*float64(i)/steps
		cost := 0.0
		for _, c := range cs {
			e := m * max(0, c.x-tj) / (sx - tj)
			cost += max(0, math.Abs(c.mid-e)-c.q) + math.Abs(c.mid-e)/10
		}
		if cost < bestCost {
			best, bestCost = tj, cost
		}
	}
	if math.IsNaN(best) {
		return 0
	}
	// At most tiltOver times the slope of a jump right after the first
	// check: the checks' intervals on a bell are wide, and a hinge placed
	// late overshot there.
	t := m / (sx - best)
	lim := min(maxTilt, tiltOver*math.Abs(m)/(sx-first))
	return max(-lim, min(lim, t))
}

// The tilt: at least minTiltChecks checks before the suspect round, a jump
// at least minTiltSpan ns (100 ms) before it, a tilt of at most maxTilt
// (100 ppm: more than any crystal's jump) and at most tiltOver times the
// least a jump after the first check can have.
const (
	minTiltChecks = 3
	minTiltSpan   = 100e6
	maxTilt       = 100e-6
	tiltOver      = 3
)

// keepNewest drops v's oldest values beyond n.
func keepNewest(v []float64, n int) []float64 {
	if len(v) > n {
		v = slices.Delete(v, 0, len(v)-n)
	}
	return v
}

// roundMissed is what roundMiss reads off a round: its miss (the median
// of its breakFastest fastest exchanges' midpoints beyond the line, each
// shrunk toward it by half its round trip's excess over the fastest seen),
// its own noise, its location (the same midpoints' median, unshrunk), its
// time (relative: the median of theirs; a round lasts up to a second, in
// which a break's error grows 10 us at 10 ppm) and their median shrink;
// and the median of all its midpoints beyond the line, unshrunk, with its
// noise (located).
type roundMissed struct{ miss, noise, loc, x, q, all, allNoise float64 }

// roundMiss is a round's miss against the line (c, s) (roundMissed); it
// keeps the fastest round trip and the rounds' tails.
func (h *Hull) roundMiss(ups, lows []pt, c, s float64) (rm roundMissed, ok bool) {
	type ex struct{ mid, rtt, x float64 }
	xs := make([]ex, len(ups))
	for i := range ups {
		xs[i].mid, xs[i].rtt = beyondLine(ups[i], lows[i], c, s)
		xs[i].x = float64(ups[i].x+lows[i].x) / 2
	}
	slices.SortFunc(xs, func(a, b ex) int { return cmp.Compare(a.rtt, b.rtt) })
	b := &h.brk
	if !b.haveMin || xs[0].rtt < b.rttMin {
		b.rttMin, b.haveMin = xs[0].rtt, true
	}
	k := min(breakFastest, len(xs))
	shrunk, mids, all := make([]float64, k), make([]float64, k), make([]float64, len(xs))
	at, qs := make([]float64, k), make([]float64, k)
	for i, x := range xs {
		all[i] = shrinkMiss(x.mid, x.rtt, b.rttMin)
	}
	for i, x := range xs[:k] {
		shrunk[i], mids[i], at[i], qs[i] = all[i], x.mid, x.x, queueSlack(x.rtt, b.rttMin)
	}
	rm.miss = median(shrunk)
	rm.noise = madScale(mids) / math.Sqrt(float64(k))
	rm.loc = median(mids)
	rm.x, rm.q = median(at), median(qs)
	am := make([]float64, len(xs))
	for i, x := range xs {
		am[i] = x.mid
	}
	rm.allNoise = madScale(am) / math.Sqrt(float64(len(am)))
	rm.all = median(am)
	ok = !math.IsNaN(rm.miss) && !math.IsInf(rm.miss, 0) && !math.IsNaN(rm.noise) && !math.IsNaN(rm.loc) && !math.IsInf(rm.loc, 0) &&
		!math.IsNaN(rm.all) && !math.IsInf(rm.all, 0) && !math.IsNaN(rm.allNoise)
	if ok && len(xs) >= breakFastest {
		abs := make([]float64, len(all))
		for i, v := range all {
			abs[i] = math.Abs(v)
		}
		if t := selectKth(abs, int(checkTail*float64(len(abs)-1))); !math.IsNaN(t) && !math.IsInf(t, 0) {
			b.tails = keepNewest(append(b.tails, t), breakWindow)
		}
	}
	return rm, ok
}

// beyondLine is an exchange's midpoint beyond the line (c, s) and its
// round trip, ns, from its UP and LOW points (relative).
func beyondLine(up, low pt, c, s float64) (mid, rtt float64) {
	u := float64(up.d) - (c + s*float64(up.x))   // delay up + the line's error
	l := float64(low.d) + (c + s*float64(low.x)) // delay down - the line's error (LOW stores -d)
	return (u - l) / 2, u + l
}

// queueSlack is half an exchange's round trip's excess over the fastest
// seen (ns): what queueing on either way can have moved its midpoint by.
func queueSlack(rtt, rttMin float64) float64 { return max(0, rtt-rttMin) / 2 }

// shrinkMiss is an exchange's midpoint beyond the line (mid, ns) shrunk
// toward it by its queueSlack.
func shrinkMiss(mid, rtt, rttMin float64) float64 {
	q := queueSlack(rtt, rttMin)
	switch {
	case mid > q:
		return mid - q
	case mid < -q:
		return mid + q
	}
	return 0
}

// CheckSide is what a check exchange's verdict (Hull.Check's lo, hi and
// thresh) says: 1 or -1, the line missed on that side (the source's time
// ahead of it or behind it); 0, it holds or queueing can explain the miss.
func CheckSide(lo, hi, thresh float64) int {
	switch {
	case lo > thresh:
		return 1
	case hi < -thresh:
		return -1
	}
	return 0
}

// expectSigmas: how far beyond its own noise a round must miss the line,
// on the side check exchanges saw it missed (ExpectBreak), to be a
// suspect (or to confirm one): the checks are the evidence the rounds'
// usual misses would otherwise have to give. On a 10-us bell in the lab a
// round the checks asked for missed by 12 us where 8 times its noise was
// more, and the line went on at the old frequency until the next round.
// 3 since the checks' trend (stop 44): in the simulator a round its checks
// asked for 0.9 s after a 20-ppm jump on a 10-us bell missed by 3.8 times
// its noise (its shrunk miss 7.9 us, the line 18 us off), and the error
// grew to 36 us before the next; a suspect also needs the next round
// beyond on its side to be confirmed.
const expectSigmas = 3

// locateOn: a round the checks asked for is also a suspect when its
// location (located) lies beyond expectSigmas times its spread on their
// side (tests turn it off to compare).
var locateOn = true

// ExpectBreak tells the hull that check exchanges missed its line on side
// (1: the source's time ahead of the line, -1: behind), so that the next
// round is judged a suspect (and its verdict given) on a miss beyond its
// own noise on that side, not beyond the rounds' usual misses too. The
// engine calls it when it asks for a round on its checks' evidence.
func (h *Hull) ExpectBreak(side int) {
	switch {
	case side > 0:
		h.brk.expect = 1
	case side < 0:
		h.brk.expect = -1
	}
}

// checkTail: a check exchange (Check) is beyond the line when it misses
// it by more than this quantile of the |shrunk misses| of a round's
// exchanges (the median of the newest rounds'): one exchange in a hundred
// where the line holds, and the engine asks for several in a row, on one
// side.
const checkTail = 0.99

// Check judges one exchange taken between rounds (the engine's check
// exchanges) against the centre line served now. [lo, hi] is where the
// line's error lies by this exchange: its midpoint beyond the line, give
// or take half its round trip's excess over the fastest the hull has seen
// (what queueing on either way can have moved the midpoint by, where the
// two directions' floors are alike, as a round's fastest are shrunk in
// roundMiss). A check can be faster than any round's exchange (a lone
// packet queues behind none of the round's): its interval is its
// midpoint. thresh is the error beyond which it counts as a miss:
// breakMin, breakSigmas times the rounds' usual miss, and the checkTail
// quantile of one exchange's shrunk miss in the newest rounds. An
// exchange whose [lo, hi] lies beyond thresh on one side says the line
// missed; one within (-thresh, thresh) that it holds; any other (most, on
// a link whose delays have a long tail) says nothing. ok is false where
// the hull finds no breaks (HullConfig.CenterBreaks off, no centre line
// yet, fewer than breakRounds rounds judged) or the exchange is outside
// its range. Check changes nothing in the hull's lines: the exchange is no
// round of it; the hull keeps where it put the error until the next round,
// for the tilt of a suspect that round may make (serveSuspect).
func (h *Hull) Check(s Sample) (lo, hi, thresh float64, ok bool) {
	b := &h.brk
	if !breakOn || !h.cfg.CenterBreaks || !h.cfg.Center || !b.haveMin ||
		b.judged < breakRounds || len(b.misses) < breakRounds || len(b.tails) == 0 {
		return 0, 0, 0, false
	}
	if err := ValidateRound([]Sample{s}); err != nil {
		return 0, 0, 0, false
	}
	c, sk, ok := h.centerLine()
	if !ok {
		return 0, 0, 0, false
	}
	ups, lows, ok := h.convert([]Sample{s})
	if !ok {
		return 0, 0, 0, false
	}
	x := float64(ups[0].x+lows[0].x) / 2
	mid, rtt := beyondLine(ups[0], lows[0], c+b.served(x), sk) // the line served (Center)
	q := queueSlack(rtt, b.rttMin)
	thresh = max(breakMin, breakSigmas*b.scale(), median(slices.Clone(b.tails)))
	if math.IsNaN(mid) || math.IsNaN(q) || math.IsNaN(thresh) {
		return 0, 0, 0, false
	}
	if !b.suspect && len(b.checks) < maxChecksKept {
		b.checks = append(b.checks, checkPt{x: x, mid: mid, q: q, side: CheckSide(mid-q, mid+q, thresh)})
	}
	return mid - q, mid + q, thresh, true
}

// CheckBeyond check exchanges must miss the centre line beyond its
// threshold, on one side, within CheckSpan checks, with none between them
// within the line or beyond it on the other side, for a CheckTally to say
// the line broke. Checks that say nothing (queueing can explain their
// miss: most on a link with a long tail) neither count nor end the run: on
// a Pareto link in the simulator two in a row that each said something
// came 2 s after a 20-ppm jump, the error 41 us.
const (
	CheckBeyond = 2
	CheckSpan   = 8
)

// CheckTally is the run of check exchanges (Hull.Check's verdicts) beyond
// the line on one side; its zero value is an empty run.
type CheckTally struct {
	side   int // the run's side: -1, 1; 0: no run
	beyond int // checks of the run beyond the line
	span   int // checks judged since the run's first
}

// Add tallies a check's verdict (Hull.Check's lo, hi and thresh) and
// returns the run's side once it holds CheckBeyond checks beyond the line
// (and on every check after, until Reset), else 0; beyond is how many it
// holds and span how many checks it covers.
func (t *CheckTally) Add(lo, hi, thresh float64) (side, beyond, span int) {
	s := CheckSide(lo, hi, thresh)
	if t.side != 0 {
		t.span++
	}
	if s == 0 && lo > -thresh && hi < thresh || s != 0 && s != t.side || t.span >= CheckSpan {
		// Within the line, beyond it on the other side, or the run's
		// first miss too many checks ago: the run ends (a miss starts
		// a new one).
		*t = CheckTally{side: s}
	}
	if s != 0 {
		t.beyond++
	}
	if t.side != 0 && t.beyond >= CheckBeyond {
		return t.side, t.beyond, t.span + 1
	}
	return 0, t.beyond, t.span + 1
}

// Reset empties the run (a new round: the line changed).
func (t *CheckTally) Reset() { *t = CheckTally{} }

// median is the median of v (NaN for none); it sorts v.
func median(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
