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
}

// scale is the rounds' usual miss: 1.4826 times the median |miss| of the
// newest breakWindow rounds (a median, so that the first rounds' misses,
// the line still converging, and a burst's do not make it deaf to a
// break for long).
func (b *breakState) scale() float64 { return 1.4826 * median(slices.Clone(b.misses)) }

// rebase moves the suspect's line with the hull's origin.
func (b *breakState) rebase(dx, dd int64) {
	if b.suspect {
		b.sc += b.ss*float64(dx) - float64(dd)
	}
}

// Breaks is how many frequency breaks restarted the hull's window and
// Suspects how many rounds were suspects (HullConfig.CenterBreaks); a
// suspect the next round did not confirm is one of the second and not of
// the first.
func (h *Hull) Breaks() uint64   { return h.brk.breaks }
func (h *Hull) Suspects() uint64 { return h.brk.suspects }

// What judgeBreak makes of a round.
const (
	breakAdd  = iota // add the round
	breakHold        // a suspect: held back until the next round's verdict
	breakCut         // a confirmed break: restart the window from the held round, then add this one
)

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
	d, noise, ok := h.roundMiss(ups, lows, c, s)
	if !ok {
		b.suspect, b.held, b.expect = false, nil, 0
		return breakAdd
	}
	e := math.Abs(d)
	ready := b.judged >= breakRounds && len(b.misses) >= breakRounds
	beyond := ready && e > breakMin && e > breakSigmas*b.scale() && e > breakSigmas*noise
	if b.expect != 0 && ready && (d > 0) == (b.expect > 0) && e > breakMin && e > expectSigmas*noise {
		beyond = true // the checks saw the line missed on this side
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
		b.suspect, b.sd, b.sc, b.ss = true, d, c, s
		b.held = slices.Clone(round)
		b.suspects++
		return breakHold
	}
	b.misses = keepNewest(append(b.misses, e), breakWindow)
	b.judged++
	return breakAdd
}

// keepNewest drops v's oldest values beyond n.
func keepNewest(v []float64, n int) []float64 {
	if len(v) > n {
		v = slices.Delete(v, 0, len(v)-n)
	}
	return v
}

// roundMiss is a round's miss against the line (c, s): the median of its
// breakFastest fastest exchanges' midpoints beyond the line, each shrunk
// toward it by half its round trip's excess over the fastest seen, and the
// round's own noise; it keeps the fastest round trip.
func (h *Hull) roundMiss(ups, lows []pt, c, s float64) (d, noise float64, ok bool) {
	type ex struct{ mid, rtt float64 }
	xs := make([]ex, len(ups))
	for i := range ups {
		xs[i].mid, xs[i].rtt = beyondLine(ups[i], lows[i], c, s)
	}
	slices.SortFunc(xs, func(a, b ex) int { return cmp.Compare(a.rtt, b.rtt) })
	b := &h.brk
	if !b.haveMin || xs[0].rtt < b.rttMin {
		b.rttMin, b.haveMin = xs[0].rtt, true
	}
	k := min(breakFastest, len(xs))
	shrunk, mids, all := make([]float64, k), make([]float64, k), make([]float64, len(xs))
	for i, x := range xs {
		all[i] = shrinkMiss(x.mid, x.rtt, b.rttMin)
	}
	for i, x := range xs[:k] {
		shrunk[i], mids[i] = all[i], x.mid
	}
	d = median(shrunk)
	noise = madScale(mids) / math.Sqrt(float64(k))
	ok = !math.IsNaN(d) && !math.IsInf(d, 0) && !math.IsNaN(noise)
	if ok && len(xs) >= breakFastest {
		abs := make([]float64, len(all))
		for i, v := range all {
			abs[i] = math.Abs(v)
		}
		if t := selectKth(abs, int(checkTail*float64(len(abs)-1))); !math.IsNaN(t) && !math.IsInf(t, 0) {
			b.tails = keepNewest(append(b.tails, t), breakWindow)
		}
	}
	return d, noise, ok
}

// beyondLine is an exchange's midpoint beyond the line (c, s) and its
// round trip, ns, from its UP and LOW points (relative).
func beyondLine(up, low pt, c, s float64) (mid, rtt float64) {
	u := float64(up.d) - (c + s*float64(up.x))   // delay up + the line's error
	l := float64(low.d) + (c + s*float64(low.x)) // delay down - the line's error (LOW stores -d)
	return (u - l) / 2, u + l
}

// shrinkMiss is an exchange's midpoint beyond the line (mid, ns) shrunk
// toward it by half its round trip's excess over the fastest seen: what
// queueing on either way can have moved it by.
func shrinkMiss(mid, rtt, rttMin float64) float64 {
	q := max(0, rtt-rttMin) / 2
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
const expectSigmas = 4

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
// roundMiss). thresh is the error beyond which it counts as a miss:
// breakMin, breakSigmas times the rounds' usual miss, and the checkTail
// quantile of one exchange's shrunk miss in the newest rounds. An
// exchange whose [lo, hi] lies beyond thresh on one side says the line
// missed; one within (-thresh, thresh) that it holds; any other (most, on
// a link whose delays have a long tail) says nothing. ok is false where
// the hull finds no breaks (HullConfig.CenterBreaks off, no centre line
// yet, fewer than breakRounds rounds judged) or the exchange is outside
// its range. Check changes nothing in the hull: the exchange is no round
// of it.
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
	if b.suspect {
		c += b.sd // the line served (Center)
	}
	ups, lows, ok := h.convert([]Sample{s})
	if !ok {
		return 0, 0, 0, false
	}
	mid, rtt := beyondLine(ups[0], lows[0], c, sk)
	q := max(0, rtt-b.rttMin) / 2
	thresh = max(breakMin, breakSigmas*b.scale(), median(slices.Clone(b.tails)))
	if math.IsNaN(mid) || math.IsNaN(q) || math.IsNaN(thresh) {
		return 0, 0, 0, false
	}
	return mid - q, mid + q, thresh, true
}

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
