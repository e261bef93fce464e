package estimate

import (
	"cmp"
	"math"
	"slices"
)

// The centre line's second candidate: the body of the delay distribution.
//
// The centre line of center.go rests on the fastest exchanges each way.
// Where the delays have a sharp floor (a path that is sometimes empty:
// propagation plus queueing) the fastest exchanges are the best
// information there is: the lowest of n delays scatters by about 1/n of the
// tail, far less than an average, which scatters by 1/sqrt(n) of it. Where
// the delays are a bell around a mean (a virtual NIC, a busy hypervisor, an
// interrupt-moderation timer) the fastest exchange is itself a noisy
// statistic (the lowest of 240 normal delays of sigma 10 us is spread over
// several us), and the exchanges above it, which the floor line throws
// away, hold most of the information.
//
// So the hull fits a second line, the body line, through the midpoint
// offsets of every exchange of its memory (twice the floor line's):
// Huber's M-estimate of a line, with the constant (nearly the median,
// between, nearly the mean) and the set of exchanges (all, or the faster
// half by round trip) of least estimated variance, midpoints beyond
// bodyReject robust standard deviations skipped. Its offset is unbiased
// whenever the two directions' delays have the same shape, whatever that
// shape is; a midpoint pairs the two directions of one exchange, so that
// where both met the same delay (one mode of two) the noise cancels.
//
// Where the two directions' spreads agree, the body line's offset is not
// the midpoints' centre but the lower body: the offset where the lower
// tenth of each direction's delays beyond the line meet (bodyQuantile). A
// midpoint is unbiased only where both directions' whole delay
// distributions have the same shape; the matched tenth only needs their
// lower parts to, which is what one-way waiting (a busy stack, a
// scheduler, a queue building one way) leaves alone. Where the floor is
// no sharper than that tenth (a bell's thinning tail) the lower body
// stands alone (bodyLowerBell).
//
// Which line to trust is decided from the data, by the variance each
// line's offset has on this data where it is read (after the newest
// exchange): for the body, the M-estimator's sandwich covariance; for the
// floor line, the variance of a low quantile, p(1-p) S(p)^2/n, S the
// sparsity (dQ/dp) read off each side's own order statistics around the
// share p of the exchanges the floor line rests on; for both, the larger
// of that and how far the line moved when the next round came. A sharp
// floor has a small sparsity there and the floor line wins by orders of
// magnitude (the body is then not even fitted: bodyVarLow); a bell has a
// large one and the body wins by 5-10x. The log of the ratio is smoothed
// over rounds; a body 4x better stands alone, a closer one is blended by
// inverse variance where the two lines agree.
//
// When the two directions' delays have different shapes (one way queues
// more, or jitters more), neither the body nor the floor is unbiased in
// general, and the offset cannot be known from two-way exchanges: only the
// bounds are safe. The hull then leans on the line whose physical model
// fits the shape it sees (CenterShape.Asymmetric says it is guessing): a
// delay with a sharp floor is a fixed path plus waiting, and waiting is
// what differs between directions, so there the floor alone; a bell is
// jitter about the path's delay, whose floor is no floor, so there the
// body alone. The shapes differ when each side's robust spread differs by
// more than bodyAsymRatio, or when the two lines disagree beyond their
// noise.

// CenterShape says what the centre line rests on, for the metrics and logs.
type CenterShape struct {
	// BodyWeight is the weight of the body line in the centre line: 0 the
	// fastest exchanges alone (the floor line), 1 the body alone.
	BodyWeight float64
	// FloorSD and BodySD (ns) are the standard deviations of each line's
	// offset estimated from the exchanges (0: not computed).
	FloorSD, BodySD float64
	// SpreadUp and SpreadDown (ns) are the robust spreads (1.4826 MAD) of
	// each direction's delays in the memory's span: UP is the local
	// node's messages to its source, down the source's replies.
	SpreadUp, SpreadDown float64
	// Asymmetric is true when the two directions' delays differ in shape:
	// their spreads differ by more than bodyAsymRatio, or the two lines
	// disagree beyond their noise. The line then rests on the floor where
	// the floor is sharp, on the body where the delays are bells.
	Asymmetric bool
	// Points is the number of exchanges (midpoints) the body line weighed.
	Points int
	// Disagree is the distance between the two lines at the newest
	// exchange in standard deviations of their difference.
	Disagree float64
	// Memory is the body line's memory (ns) where the rounds' locations
	// curved enough to shorten it (bodyCurve); 0: the default memory.
	Memory float64
	// Stretch is the body line's memory over the centre line's, chosen
	// from the noise of the rounds' own locations (bodyNoise: about 1 on
	// a 3-us bell, 1.8 on a 10-us one, on the lab's clocks), and of the
	// wander the rounds show (bodyWander); 0 where no body line was
	// fitted (a sharp floor: bodyVarLow).
	Stretch float64
	// Wander is the clocks' wander the body's rounds show (bodyWander),
	// as a random walk of the frequency, ppm/sqrt(s) (the lab's clocks:
	// about 0.008 with their temperature cycle); 0: not measured.
	Wander float64
	// FloorMemory is the floor line's memory (ns) where the rounds' own
	// floor locations curved enough to shorten it (floorCurve); 0: the
	// default memory.
	FloorMemory float64
	// Kalman is the Kalman line's weight in the body line (bodyKalman:
	// the filter of the rounds' own locations against the exponentially
	// weighted line, by how well each predicted the rounds); 0 before
	// kalmanMinRounds rounds, or where no body line was fitted.
	Kalman float64
	// Span is the share of the window the line rests on where the span
	// adapts (HullConfig.CenterAdapt): 1 the whole window, 0.5, 0.25 or
	// 0.125 its newest part, chosen by how well each predicted the newest
	// rounds (span.go); 0 where the span does not adapt.
	Span float64
	// Body names the body line: "lower" (the lower tenth of each
	// direction's delays, matched: the directions' spreads agree) or
	// "midpoints" (the exchanges' midpoints: the spreads differ); "" when
	// no body line was fitted.
	Body string
}

// Kind names what the line rests on: "floor" (the body's weight under
// 5%), "body" (over 95%) or "blend"; Asymmetric says whether the
// directions' shapes differ besides.
func (c CenterShape) Kind() string {
	switch {
	case c.BodyWeight < 0.05:
		return "floor"
	case c.BodyWeight > 0.95:
		return "body"
	}
	return "blend"
}

const (
	// bodyHuber is Huber's constant in robust standard deviations: 1.5 is
	// 96% efficient on a normal distribution and caps what one exchange of
	// a heavy tail can pull.
	bodyHuber = 1.5
	// bodyReject: midpoints farther than this many robust standard
	// deviations from the line count nothing (Huber's estimate "skipped").
	// Under load the lab's delays carry a one-sided tail of tens of us,
	// heavier one way (the reference's replies wait behind its other
	// children's rounds); clipped at the Huber constant, each tail exchange
	// still pulls, and the two directions' tails differ, so the line moved
	// by hundreds of ns. A bell loses 0.05% of its exchanges at 3.5.
	bodyReject = 3.5
	// bodyRefits: reweighting passes of the Huber fit.
	bodyRefits = 4
	// bodyMinPoints is the fewest exchanges per side for a body line: with
	// fewer the spreads and variances are too noisy to compare.
	bodyMinPoints = 48
	// bodyAsymRatio: the two directions' robust spreads differ by more
	// than this factor: their shapes differ. With 240 exchanges a side the
	// spread's own scatter is about 8%, so 1.35 is four of them.
	bodyAsymRatio = 1.35
	// bodyAgreeLo and bodyAgreeHi: the body's weight fades from its
	// inverse-variance share to 0 as the two lines' distance grows from
	// bodyAgreeLo to bodyAgreeHi standard deviations.
	bodyAgreeLo = 1.0
	bodyAgreeHi = 2.0
	// bodyClear: a body line this many times less variable than the floor
	// line is judged by the spreads alone (see fuseBody).
	bodyClear = 4.0
	// bodyMemoryScale: the body line remembers this many times longer than
	// the floor line until bodyNoiseRounds rounds' own locations were kept
	// (then their noise and wander choose: memoryScale; a round's location
	// is kept where the body is the lower body). The centre line's memory
	// (2.5 rounds in the lab's daemons) balances the floor's noise, a few
	// hundred ns per round, against the wander of the frequency; a bell's
	// midpoints scatter by
	// microseconds, so their line wants more rounds before the wander
	// counts. In the simulator's matrix (seeds 1-6) 2 against 1 and 4: runs
	// within 1.5x of the limit, normal 3 us 5 (4, 3) of 6, normal 10 us 5
	// (2, 4), bimodal 5 (3, 6), and p99 on normal 10 us 1.6 us against 3.8.
	bodyMemoryScale = 2.0
	// bodySkipRatio: the body line is not fitted while the floor line's
	// variance is below 1/bodySkipRatio of an optimistic guess at the
	// body's (bodyVarLow); the blend gives the body nothing below 1/1.
	bodySkipRatio = 4.0
	// bodySharpDecay is the weight of the newest round in sharp: about
	// ten rounds count, so a burst of one or two does not turn a bell into
	// a floor.
	bodySharpDecay = 0.1
	// bodyMinMoves: rounds of measured moves before they count.
	bodyMinMoves = 3
	// bodyDecay is the weight of the newest round in the smoothed log
	// ratio of the two variances.
	bodyDecay = 0.3
	// bodyQuantile: the lower body line matches this quantile of each
	// direction's delays. A midpoint is unbiased only where the two
	// directions' whole delay distributions have the same shape; the
	// matched tenth only where their lower parts do, which is what one-way
	// waiting leaves alone: on the lab's raw-clock runs (exact truth) the
	// midpoints were 0.1-0.9 us off per host on every bell, the stacks
	// and the reference's scheduling delaying one direction's bulk more,
	// and the lower tenth cut the replayed medians from 0.22 / 0.28 to
	// 0.17 / 0.19 us on normal 3 us, 0.60 / 0.71 to 0.43 / 0.43 on normal
	// 10 us and 1.31 / 0.83 to 0.54 / 0.32 on two modes (the fast mode's
	// lower part each way). On a symmetric bell it costs efficiency (the
	// tenth of a normal has about 3x the mean's variance), little beside
	// the wander: in the simulator's matrix (30 seeds) normal 3 us 133 ns
	// against 130, normal 10 us 307 against 293, two modes 293 against
	// 501. The twentieth did better on the lab's bells and worse in the
	// simulator (normal 10 us 357 ns); the fifth worse on two modes.
	bodyQuantile = 0.1
	// bodyLowerBell: the lower body stands alone once the floor line's
	// variance, by the formulas, is at least this times the lower body's
	// (smoothed: sharp); on the lab's bells the ratio was 1.7-3, on
	// uniform delays 0.25.
	bodyLowerBell = 1.0
)

// bodyState is a hull's memory of the choice: the smoothed log of
// Var(floor)/Var(body), the same of the formulas alone (sharp), and the
// last shape.
type bodyState struct {
	ratio, sharp smoothed
	shape        CenterShape
	weighed      bool // shape holds a weighing
	// The last round's lines (floor c, s; body a, sk) and reading point,
	// and the smoothed squares of each line's move there.
	c, s, a, sk, xe float64
	lines           bool
	moveF, moveB    smoothed
	// The Kalman line's record: both lines as of the last round and
	// their misses (bodyKalman).
	kalman kalmanTrack
	// The newest rounds' own lower-body locations (wanderRounds of them
	// for the wander, bodyWander; the newest bodyCurveRounds for the
	// curvature and the noise: curveRounds) and the memory they chose
	// (bodyCurve).
	roundTrack
}

// roundLoc is one round's own location (bodyCurve: where the lower tenth
// of each direction's delays of that round alone meet; floorCurve: where
// its fastest exchanges each way meet), at the round's mean local time x
// (relative units), and the variance of that estimate (bodyCurve only).
type roundLoc struct{ x, y, v float64 }

// roundTrack is a line's record of the newest rounds' own locations (as
// many as note is told to keep), the round the last was taken from, and the memory
// (ns) they chose; 0: the default (bodyCurve, floorCurve).
type roundTrack struct {
	rounds    []roundLoc
	lastRound int64
	memory    float64
	// means: the locations are shareMeet's (lower means), not
	// lowerMeet's (the tenth); a track keeps one kind (keepKind).
	means bool
}

// keepKind forgets the kept locations when the kind of location changes:
// where the directions' lower parts differ a little, the two kinds differ
// by as much, and a parabola through both would see a curve.
func (r *roundTrack) keepKind(means bool) {
	if r.means != means {
		r.rounds, r.means = r.rounds[:0], means
	}
}

// curveRounds is the newest bodyCurveRounds of the body's kept locations,
// what its curvature and noise are read from (the whole track, the
// wander).
func (b *bodyState) curveRounds() []roundLoc {
	return b.rounds[max(0, len(b.rounds)-bodyCurveRounds):]
}

// due says whether the hull's newest round is yet to be kept, and where
// its exchanges begin (relative local time: a quarter of a gap before the
// round's start, as its first exchanges may precede it).
func (r *roundTrack) due(h *Hull) (start int64, ok bool) {
	if !h.haveRound || (len(r.rounds) > 0 && r.lastRound == h.lastRound) {
		return 0, false
	}
	start = h.lastRound - h.x0
	if h.roundGap > 0 {
		start -= int64(h.roundGap / 4)
	}
	return start, true
}

// keep adds a round's location, forgetting the oldest beyond n.
func (r *roundTrack) keep(loc roundLoc, n int) {
	r.rounds = append(r.rounds, loc)
	if len(r.rounds) > n {
		r.rounds = slices.Delete(r.rounds, 0, len(r.rounds)-n)
	}
}

// rebase moves the kept locations with the hull's origin.
func (r *roundTrack) rebase(dx, dd int64) {
	for i := range r.rounds {
		r.rounds[i].x -= float64(dx)
		r.rounds[i].y -= float64(dd)
	}
}

// reset forgets the kept locations and the chosen memory.
func (r *roundTrack) reset() { r.rounds, r.memory = r.rounds[:0], 0 }

// note keeps the hull's newest round's own location once: where locate
// says each direction's delays of that round alone, beyond the line
// (c, s), meet (an offset from the line, and its variance), keeping the
// newest n; kept says whether it kept one this time. A round with fewer
// than minPoints exchanges either way is not kept; one locate refuses is
// not tried again.
func (r *roundTrack) note(h *Hull, c, s float64, minPoints, n int, locate func(up, low []wv) (d, v float64, ok bool)) (kept bool) {
	start, ok := r.due(h)
	if !ok {
		return false
	}
	up, low := h.beyond(h.up.pts, 1, c, s, 0, start), h.beyond(h.low.pts, -1, c, s, 0, start)
	if len(up) < minPoints || len(low) < minPoints {
		return false
	}
	r.lastRound = h.lastRound
	x := h.meanX(start)
	d, v, ok := locate(up, low)
	if !ok {
		return false
	}
	r.keep(roundLoc{x: x, y: c + d + s*x, v: v}, n)
	return true
}

// meanX is the mean relative local time of the exchanges from start on,
// both directions'.
func (h *Hull) meanX(start int64) float64 {
	var sx float64
	n := 0
	for _, ps := range [2][]pt{h.up.pts, h.low.pts} {
		i0, _ := slices.BinarySearchFunc(ps, start, func(p pt, x int64) int { return cmp.Compare(p.x, x) })
		for _, p := range ps[i0:] {
			sx += float64(p.x)
			n++
		}
	}
	return sx / float64(n)
}

// beyond is each of a direction's delays beyond the line (c, s) (ps: the
// hull's UP points, sign 1, or its LOW points, sign -1), from relative
// local time from on, weighted by a memory of tau (0: every one alike).
func (h *Hull) beyond(ps []pt, sign, c, s, tau float64, from int64) []wv {
	i0, _ := slices.BinarySearchFunc(ps, from, func(p pt, x int64) int { return cmp.Compare(p.x, x) })
	out := make([]wv, 0, len(ps)-i0)
	for _, p := range ps[i0:] {
		x := float64(p.x)
		out = append(out, wv{sign * (sign*float64(p.d) - (c + s*x)), h.memWeight(p.x, tau)})
	}
	return out
}

// memWeight is the weight of an exchange at relative local time x in a
// memory of tau: exp(-age/tau), 1 for every one when tau is 0.
func (h *Hull) memWeight(x int64, tau float64) float64 {
	if tau > 0 {
		return math.Exp(-float64(h.newest-x) / tau)
	}
	return 1
}

// rebase moves the remembered lines with the hull's origin (Hull.rebase:
// x' = x - dx, d' = d - dd), so that the next round's measured moves
// compare lines in the same units.
func (b *bodyState) rebase(dx, dd int64) {
	b.c, b.a, b.xe = rebaseLine(b.c, b.s, dx, dd), rebaseLine(b.a, b.sk, dx, dd), b.xe-float64(dx)
	b.kalman.rebase(dx, dd)
	b.roundTrack.rebase(dx, dd)
}

// rebaseLine is the offset a of a line of slope s (relative units) moved
// with the hull's origin (Hull.rebase: x' = x - dx, d' = d - dd).
func rebaseLine(a, s float64, dx, dd int64) float64 { return a + s*float64(dx) - float64(dd) }

// smoothed is an exponentially weighted average that takes its first
// value whole; n counts the values added.
type smoothed struct {
	v float64
	n int
}

// add adds x with weight decay (the first x is taken as it is).
func (a *smoothed) add(x, decay float64) {
	if a.n == 0 {
		a.v = x
	} else {
		a.v += decay * (x - a.v)
	}
	a.n++
}

// spreadsDiffer says whether two directions' robust spreads differ by
// more than bodyAsymRatio (NaN or 0 spreads count as differing).
func spreadsDiffer(up, down float64) bool {
	return !(max(up, down)/min(up, down) <= bodyAsymRatio)
}

// CenterShape returns what the centre line rests on (the hull whose line
// Center uses); ok is false before a body line was ever weighed.
func (h *Hull) CenterShape() (CenterShape, bool) {
	h.centerLine()
	src := h
	if h.cfg.CenterAdapt && h.spanSel > 0 {
		src = h.cands[h.spanSel-1]
	}
	shape := src.body.shape
	if h.cfg.CenterAdapt {
		shape.Span = 1 / float64(int(1)<<h.spanSel)
	}
	return shape, src.body.weighed
}

// midPt is an exchange's midpoint: local time and offset y - x, absolute.
type midPt struct{ x, off, rtt int64 }

// trimMids drops the midpoints older than the hull's oldest point (they
// are in arrival order, not always in x order: one pass over them).
func (h *Hull) trimMids() {
	cut := h.x0 + h.minX
	h.mids = slices.DeleteFunc(h.mids, func(m midPt) bool { return m.x < cut })
}

// fuseBody weighs the floor line (c, s, in relative d units) against the
// body line and returns the blended line; lo and hi are the feasible skew
// range. floorK is the number of fastest exchanges per side the floor line
// rested on.
func (h *Hull) fuseBody(c, s float64, floorK int, lo, hi float64) (float64, float64) {
	tau, from := h.centerMemory()
	stretch, wander, q := h.body.memoryScale()
	tau, from = h.bodyMemory(tau, from, stretch)
	// Each direction's delay beyond the line (c, s) (h.beyond: for the
	// floor line's variance, and the lower body), and the exchanges'
	// midpoints (for the body line), weighted by a memory of tau from from
	// on.
	mids := func(tau float64, from int64) (mx, md, mw, mr []float64) {
		for _, m := range h.mids {
			x := m.x - h.x0
			if x < from || x < h.minX {
				continue
			}
			mx, md, mw = append(mx, float64(x)), append(md, float64(m.off-h.c)), append(mw, h.memWeight(x, tau))
			mr = append(mr, float64(m.rtt))
		}
		return mx, md, mw, mr
	}
	qUp, qLow := h.beyond(h.up.pts, 1, c, s, tau, from), h.beyond(h.low.pts, -1, c, s, tau, from)
	mx, md, mw, mr := mids(tau, from)
	if len(qUp) < bodyMinPoints || len(qLow) < bodyMinPoints || len(mx) < bodyMinPoints {
		return c, s
	}
	// Spreads of each direction about its own median (the floor line's
	// residuals: the line does not change a spread).
	spreadUp, spreadLow := madScaleWV(qUp), madScaleWV(qLow)
	vFloor := (quantileVar(qUp, floorK) + quantileVar(qLow, floorK)) / 4

	shape := CenterShape{SpreadUp: spreadUp, SpreadDown: spreadLow, Points: len(mx), FloorMemory: h.floor.memory, Stretch: stretch, Wander: wander}
	b := &h.body
	// Where the floor is far the better line even against an optimistic
	// body (the floor links: most of them), the body's fits are not worth
	// their cost (a dozen reweighted fits of thousands of midpoints, 10x
	// the rest of the centre line): its weight would be 0 anyway.
	if vLow := bodyVarLow(mx, md, mw, mr, c, s); vLow > 0 && max(vFloor, b.moveF.v) < vLow/bodySkipRatio {
		b.lines = false // no body line this round: no move to measure next
		b.kalman.forget()
		shape.FloorSD, shape.BodySD = math.Sqrt(vFloor), math.Sqrt(vLow)
		shape.Stretch, shape.Wander = 0, 0 // no body line: no memory of its own
		shape.Asymmetric = spreadsDiffer(spreadUp, spreadLow)
		b.shape, b.weighed = shape, true
		return c, s
	}
	// Both lines are judged where they are read: after the newest
	// exchange, half a gap between rounds on. The floor line's variance
	// there is its variance at the points' centre grown as the body's
	// grows (the same exchanges, the same lever).
	xe := float64(h.newest) + h.roundGap/2
	lower := !spreadsDiffer(spreadUp, spreadLow)
	// fit (below) is the body line with a memory of tau from from on: the
	// midpoints' M-estimate, and where the two directions' spreads agree
	// the lower body (its offset where the lowest delays of each direction
	// beyond the line meet, its skew the midpoints' fit's, not the
	// midpoints' centre: see bodyQuantile). vBody is its variance where it
	// is read, vCentre at the points' centre.
	//
	// Where the floor has been no sharper than the lower tenth (a bell:
	// the lower body then stands alone, below) the lower body rests on
	// the share of each side's lowest delays of least variance
	// (shareMeet), elsewhere on the tenth (lowerMeet): where the floor is
	// sharp the body is weighed against it, and under load one
	// direction's waiting reaches into the lower half (on a busy lab run's
	// exchanges, TestHullCenterAdaptLoadedLab, a half, its variance small
	// and its offset a microsecond off, took half the weight from a floor
	// line that was right). A round's
	// own location (bodyCurve) rests on the share the whole memory chose:
	// chosen per round, the least of five variances is too low, and the
	// curvature read off them too sure. vSharp is the variance the
	// floor's sharpness is judged against: the tenth's (lowerMeet's) where
	// the body is the lower body, else vCentre.
	means := b.sharp.n > 0 && math.Exp(b.sharp.v) >= bodyLowerBell
	share := 0.0
	meet := func(up, low []wv) (d, v float64, ok bool) {
		if !means {
			return lowerMeet(up, low)
		}
		d, v, _, ok = shareMeet(up, low, []float64{share})
		return d, v, ok
	}
	fit := func(mx, md, mw, mr []float64, tau float64, from int64) (a, sk, vBody, vCentre, vSharp float64, lowerOK, ok bool) {
		a, sk, vAt, xm, ok := fitBody(mx, md, mw, mr, xe)
		if !ok || sk < lo || sk > hi {
			return 0, 0, 0, 0, 0, false, false
		}
		vBody, vCentre = vAt(xe-xm), vAt(0)
		if !(vBody > 0) || !(vCentre > 0) {
			return 0, 0, 0, 0, 0, false, false
		}
		if lower {
			up, low := h.beyond(h.up.pts, 1, c, sk, tau, from), h.beyond(h.low.pts, -1, c, sk, tau, from)
			// The tenth's variance is the sharpness's yardstick whichever
			// statistic the body rests on (0 when it has none).
			d, vq, ok := lowerMeet(up, low)
			vt := vq
			if means {
				d, vq, share, ok = shareMeet(up, low, bodyLowerShares)
			}
			if ok {
				if !(vt > 0) {
					vt = vq
				}
				return c + d, sk, vq + (vBody - vCentre), vq, vt, true, true
			}
		}
		return a, sk, vBody, vCentre, vCentre, false, true
	}
	a, sk, vBody, vCentre, vSharp, lowerOK, ok := fit(mx, md, mw, mr, tau, from)
	if !ok || !(vFloor > 0) {
		b.shape = shape
		b.kalman.forget()
		return c, s
	}
	// The clocks' frequencies wander: a line remembers the average
	// frequency of its memory and lags a frequency that moves on. Where the
	// rounds' own locations curve measurably, a shorter memory (bodyCurve).
	// The rounds' own locations are kept either way: their noise and
	// wander set the memory's stretch (bodyNoise, bodyWander).
	if lowerOK {
		b.keepKind(means)
		if b.note(h, c, sk, bodyCurveMinPoints, wanderRounds, meet) { // the round's own lower body
			b.kalman.score(b.rounds[len(b.rounds)-1]) // the lines of the round before, on this one
		}
	} else {
		b.kalman.forget()
	}
	if lowerOK && bodyCurveOn {
		if tb := b.curveMemory(h, tau, vBody, xe); tb < tau*bodyCurveMinCut {
			from2 := h.memoryFrom(tb)
			mx2, md2, mw2, mr2 := mids(tb, from2)
			if len(mx2) >= bodyMinPoints {
				if a2, sk2, vB2, vC2, vS2, l2, ok2 := fit(mx2, md2, mw2, mr2, tb, from2); ok2 && l2 {
					a, sk, vBody, vCentre, vSharp = a2, sk2, vB2, vC2, vS2
					shape.Points = len(mx2)
				}
			}
		}
		shape.Memory = b.memory
	}
	if lowerOK {
		// The Kalman line of the rounds' own locations, blended by how
		// well each line predicted the rounds (bodyKalman).
		a, sk, shape.Kalman = b.kalmanBlend(a, sk, q, lo, hi)
	}
	shape.Body = "midpoints"
	if lowerOK {
		shape.Body = "lower"
	}
	lower = lowerOK
	vFloor0 := vFloor
	vFloor *= vBody / vCentre
	// The shape's long-run sharpness: the formulas alone (no measured
	// moves, which a load burst inflates for a round or two), smoothed
	// slowly. It says whether the floor is a floor, for the asymmetric
	// case below.
	b.sharp.add(math.Log(vFloor0/vSharp), bodySharpDecay)
	// Measured: how far each line moved at the last round's reading point
	// since that round. A line's move from one round to the next is about
	// its error (the centre line forgets over a few rounds), and it counts
	// what the formulas leave out: the max-margin line's skew rests on a
	// few extreme exchanges, so its error grows faster than the body's
	// away from the points' centre.
	if b.lines {
		jf := (c + s*b.xe) - (b.c + b.s*b.xe)
		jb := (a + sk*b.xe) - (b.a + b.sk*b.xe)
		b.moveF.add(jf*jf, bodyDecay)
		b.moveB.add(jb*jb, bodyDecay)
	}
	b.c, b.s, b.a, b.sk, b.xe, b.lines = c, s, a, sk, xe, true
	fv, bv := vFloor, vBody // the formulas' alone
	if b.moveF.n >= bodyMinMoves {
		vFloor, vBody = max(vFloor, b.moveF.v), max(vBody, b.moveB.v)
	}
	shape.FloorSD, shape.BodySD = math.Sqrt(vFloor), math.Sqrt(vBody)
	b.ratio.add(math.Log(vFloor/vBody), bodyDecay)
	// The two lines must agree within their noise: where both sides have
	// the same shape, each is unbiased and their difference is noise; a
	// difference beyond it means the directions' delays differ in shape
	// (their bodies lie at different heights above their floors).
	z := math.Abs((a+sk*xe)-(c+s*xe)) / math.Sqrt(vFloor+vBody)
	shape.Disagree = z
	// Var(floor) / Var(body): the long-run ratio, or this round's by the
	// formulas where the floor line is now the worse by more. The long run
	// lags: after a gap (a host paused 10 s, link-matrix-pause seed 5) the
	// floor line, whose memory is 3 s, rested on the one round since, its
	// skew on 0.3 s of exchanges (sd by the formulas 0.86 us against the
	// body's 0.26, ratio 11; by the lines' moves 7.9 against 0.37), while
	// the long-run ratio, 2.2, still gave it 31% of the centre line: the
	// host ran 0.45 ppm off for 5 s until its checks caught it (p99 2.21
	// us). The formulas alone, not the measured moves: after a frequency
	// step the floor line, the quicker to follow it, moves the more, and
	// the body alone then held the step's error longer (gclock sim
	// --report trust, step-10ppm adaptive, p99 73.8 -> 158 us).
	rho := math.Exp(b.ratio.v)
	if now := fv / bv; now > rho {
		rho = now
	}
	// Where the body is far the better line (rho >= bodyClear) the floor
	// line's noise is what the formulas grasp least (a bell's extreme
	// exchanges), and the lines' distance says little: only the spreads
	// judge the shapes there.
	if rho >= bodyClear {
		z = 0
	}
	shape.Asymmetric = spreadsDiffer(spreadUp, spreadLow) || !(z < bodyAgreeHi)
	switch {
	case lower && math.Exp(b.sharp.v) >= bodyLowerBell:
		// The lower body alone where the fastest exchanges are no sharper
		// than the lower tenth (a bell's tail: the density thins out
		// toward the fastest), whatever the lines' distance: the lower
		// tenth is where the directions' waiting, which differs between
		// them, has reached least, so it is the safer line of the two
		// there, and blending in the floor's extreme exchanges only adds
		// their noise. Where the floor is a hard edge (uniform delays, a
		// path that is often empty) its few exchanges are sharper than
		// the tenth and the cases below weigh the two.
		shape.BodyWeight = 1
	case shape.Asymmetric && (rho >= bodyClear || math.Exp(b.sharp.v) >= bodyClear):
		// Shapes differ and neither has a sharp floor (bells of different
		// widths, or a bell whose one direction a load burst widened): a
		// bell is jitter about a path's delay, so the centres are the
		// better guess; the floor of a bell is no floor. Judged by the
		// long-run sharpness too: in the lab a burst made a 3-us bell's
		// spreads 12 against 9 us and inflated the body's measured moves,
		// and the floor line it then leaned on was 2-8 us off for 12 s.
		shape.BodyWeight = 1
	case rho >= bodyClear:
		// The body alone: the two lines rest on the same exchanges, so
		// the floor line's error is largely the body's plus its own, and a
		// share of it only adds noise (2-7% of a bell's floor line cost a
		// third of the error in the simulator's matrix).
		shape.BodyWeight = 1
	case !shape.Asymmetric:
		// Inverse-variance weights: wBody = vFloor / (vFloor + vBody),
		// fading out as the lines' disagreement nears bodyAgreeHi.
		// The floor is the physically safer line (waiting is what differs
		// between directions), so the body is blended in only where it is
		// clearly the better one: from nothing at equal variances to its
		// full share at half the floor's.
		fade := min(1, max(0, (bodyAgreeHi-z)/(bodyAgreeHi-bodyAgreeLo)))
		gate := min(1, max(0, rho-1))
		shape.BodyWeight = fade * gate * rho / (1 + rho)
	}
	b.shape, b.weighed = shape, true
	wb := shape.BodyWeight
	return c + wb*(a-c), s + wb*(sk-s)
}

// lowerMeet is where the lower tenth (bodyQuantile) of each direction's
// delays beyond a line meet, as an offset from that line, and its
// variance; ok is false when the variance is not a finite positive number.
func lowerMeet(up, low []wv) (d, v float64, ok bool) {
	qu, vu := weightedQuantile(up, bodyQuantile)
	ql, vl := weightedQuantile(low, bodyQuantile)
	v = (vu + vl) / 4
	if !(v > 0) || math.IsInf(v, 0) {
		return 0, 0, false
	}
	return (qu - ql) / 2, v, true
}

// shareMeet is where the lowest delays of each direction beyond a line
// meet: for each share b of shares the weighted mean of each side's lowest
// b of its delays, matched, (mu_up - mu_low) / 2, at the share whose
// variance is least; it returns that offset from the line, its variance
// and the share. ok is false when no variance is a finite positive number.
//
// The variance of a mean of the lowest b of n values (a trimmed mean) is
// Var(min(X, Q_b)) / (b^2 n), from its influence function (the values
// clamped at the share's quantile): it needs no density, so it holds on a
// bell (where the lower half wins: 1.16x the midpoints' mean against the
// tenth quantile's 1.7x), on two modes (where it grows with the share that
// reaches past the fast mode: a third wins) and on a hard edge (a tenth).
func shareMeet(up, low []wv, shares []float64) (d, v, share float64, ok bool) {
	su, nu := sortWeighted(up)
	sl, nl := sortWeighted(low)
	if !(su > 0) || !(sl > 0) {
		return 0, 0, 0, false
	}
	v = math.Inf(1)
	for _, b := range shares {
		mu, vu := lowerShare(up, su, nu, b)
		ml, vl := lowerShare(low, sl, nl, b)
		if vb := (vu + vl) / 4; vb > 0 && vb < v {
			d, v, share = (mu-ml)/2, vb, b
		}
	}
	if math.IsInf(v, 0) {
		return 0, 0, 0, false
	}
	return d, v, share, true
}

// bodyLowerShares are the shares of each direction's lowest delays the
// lower body of a bell may rest on (shareMeet). The tenth quantile was its
// only point before (the lab's raw-clock bells, bodyQuantile's note);
// where a direction's waiting reaches into the lower half the variance
// grows and a smaller share wins. On 1500 rounds of 240 exchanges each way
// (TestShareMeetEfficiency) the rms of where they meet was 0.68x the tenth
// quantile's on a 10-us bell, 0.85x on two even modes 40 us apart, 0.91x
// when the slow mode takes 70%, 0.62x on uniform delays and 0.89x with a
// fifth of one direction's delays waiting 15 us on average.
var bodyLowerShares = []float64{0.1, 0.2, 0.3, 0.4, 0.5}

// lowerShare is the weighted mean of the lowest share b of sorted weighted
// values (total weight sw, effective number n) and its variance as an
// estimate: the weighted variance of the values clamped at the share's
// quantile, over b^2 n. The value at the share's edge counts with the part
// of its weight inside the share.
func lowerShare(q []wv, sw, n, b float64) (mean, variance float64) {
	target := b * sw
	var cum, s, edge float64
	for _, e := range q {
		w := min(e.w, target-cum)
		if w <= 0 {
			break
		}
		cum += w
		s += w * e.v
		edge = e.v
	}
	if !(cum > 0) {
		return 0, math.NaN()
	}
	mean = s / cum
	var cm, c2 float64
	for _, e := range q {
		c := min(e.v, edge)
		cm += e.w * c
		c2 += e.w * c * c
	}
	cm /= sw
	return mean, max(0, c2/sw-cm*cm) / (b * b * n)
}

// wv is a value and its weight.
type wv struct{ v, w float64 }

// quantileVar is the variance of the k-th lowest of a side's weighted
// values as an estimate of that quantile (quantileVarAt with p = k/n, n
// the effective number of values). It sorts q.
func quantileVar(q []wv, k int) float64 {
	sw, n := sortWeighted(q)
	if !(sw > 0) {
		return math.NaN()
	}
	return quantileVarAt(q, sw, n, max(float64(k), 1)/n)
}

// weightedQuantile returns the p quantile of a side's weighted values and
// its variance as an estimate of that quantile (quantileVarAt). It sorts
// q.
func weightedQuantile(q []wv, p float64) (v, variance float64) {
	sw, n := sortWeighted(q)
	if !(sw > 0) {
		return 0, math.NaN()
	}
	return sortedQuantile(q, sw, p), quantileVarAt(q, sw, n, p)
}

// sortWeighted sorts a side's weighted values by value and returns their
// total weight and effective number, sw^2 / sum(w^2).
func sortWeighted(q []wv) (sw, n float64) {
	slices.SortFunc(q, func(a, b wv) int { return cmp.Compare(a.v, b.v) })
	var sw2 float64
	for _, e := range q {
		sw += e.w
		sw2 += e.w * e.w
	}
	return sw, sw * sw / sw2
}

// quantileVarAt is the variance of the p quantile (at most 0.25) of sorted
// weighted values (total weight sw, effective number n) as an estimate of
// that quantile: p(1-p) S(p)^2 / n, the sparsity S read off the weighted
// quantiles at p/2 and 2p.
func quantileVarAt(q []wv, sw, n, p float64) float64 {
	p = min(p, 0.25)
	sp := (sortedQuantile(q, sw, 2*p) - sortedQuantile(q, sw, p/2)) / (1.5 * p)
	return p * (1 - p) * sp * sp / n
}

// sortedQuantile is the pp quantile of sorted weighted values of total
// weight sw.
func sortedQuantile(q []wv, sw, pp float64) float64 {
	target, cum := pp*sw, 0.0
	for _, e := range q {
		cum += e.w
		if cum >= target {
			return e.v
		}
	}
	return q[len(q)-1].v
}

// bodyHubers are the Huber constants (in robust standard deviations of
// the midpoint offsets) fitBody chooses from: the smallest is nearly the
// median, right where many exchanges met the same delay both ways (two
// modes: their midpoints pile up where the modes cancel), the largest
// nearly the mean, right for a bell.
var bodyHubers = []float64{0.25, 0.6, bodyHuber}

// fitBody fits a line through the exchanges' midpoint offsets (x, d
// relative, memory weights w0, round trips rtt) by Huber's M-estimate,
// with the constant of bodyHubers and the set of exchanges (all, or the
// faster half by round trip, as Intel's collector drops its slowest)
// whose estimated variance at xe is least. It returns the line (relative
// d at x = 0, skew), the variance of the line's offset at a local time
// after the weighted centre xm of the points it used (the sandwich
// covariance, so the skew's error counts), and xm.
//
// The faster half matters where the delays have modes: an exchange whose
// round trip is short went out and back on the fast mode, so its midpoint
// is near the truth, while one that took the slow mode one way is off by
// half the modes' distance; on a bell the round trip says nothing of the
// midpoint, the half has twice the variance and is not chosen.
func fitBody(xs, ds, w0, rtt []float64, xe float64) (a, skew float64, v func(at float64) float64, xm float64, ok bool) {
	sets := [][3][]float64{{xs, ds, w0}}
	if len(rtt) >= 2*bodyMinPoints {
		lim := selectKth(slices.Clone(rtt), len(rtt)/2)
		var fx, fd, fw []float64
		for i, r := range rtt {
			if r <= lim {
				fx, fd, fw = append(fx, xs[i]), append(fd, ds[i]), append(fw, w0[i])
			}
		}
		sets = append(sets, [3][]float64{fx, fd, fw})
	}
	best := math.Inf(1)
	for _, set := range sets {
		sx, sd, sw := set[0], set[1], set[2]
		cm := weightedMean(sx, sw)
		for _, hk := range bodyHubers {
			ca, cs, cv, good := huberLine(sx, sd, sw, cm, hk)
			if !good {
				continue
			}
			if ve := cv(xe - cm); ve < best {
				best, a, skew, v, xm, ok = ve, ca, cs, cv, cm, true
			}
		}
	}
	return a, skew, v, xm, ok
}

// huberLine is one Huber fit of d = a' + s' X (X: (x - xm) in seconds)
// with constant hk robust standard deviations; it returns the line at
// x = 0, its skew and its offset's variance at xm + at.
func huberLine(xs, ds, w0 []float64, xm, hk float64) (a, skew float64, v func(at float64) float64, ok bool) {
	n := len(xs)
	w := slices.Clone(w0)
	res := make([]float64, n)
	var sol [2]float64
	var sc float64
	for it := 0; ; it++ {
		next, good := solve2(xs, ds, w, xm)
		if !good {
			if it == 0 {
				return 0, 0, nil, false
			}
			break
		}
		sol = next
		for i := range xs {
			res[i] = ds[i] - (sol[0] + sol[1]*(xs[i]-xm)/1e9)
		}
		sc = madScale(res)
		if it == bodyRefits {
			break
		}
		k := hk * sc
		for i := range xs {
			w[i] = w0[i]
			if r := math.Abs(res[i]); sc > 0 && r > bodyReject*sc {
				w[i] = 0
			} else if sc > 0 && r > k {
				w[i] *= k / r
			}
		}
	}
	// The sandwich covariance A^-1 B A^-1 of (a', s').
	k := hk * sc
	var A, B [2][2]float64
	for i := range xs {
		r, wi := res[i], w0[i]
		psi, dpsi := r, 1.0
		if sc > 0 && math.Abs(r) > bodyReject*sc {
			psi, dpsi = 0, 0
		} else if sc > 0 && math.Abs(r) > k {
			psi, dpsi = math.Copysign(k, r), 0
		}
		row := [2]float64{1, (xs[i] - xm) / 1e9}
		for p := range 2 {
			for q := range 2 {
				A[p][q] += wi * dpsi * row[p] * row[q]
				B[p][q] += wi * wi * psi * psi * row[p] * row[q]
			}
		}
	}
	det := A[0][0]*A[1][1] - A[0][1]*A[1][0]
	if !(det > 0) || math.IsInf(det, 0) {
		return 0, 0, nil, false
	}
	inv := [2][2]float64{{A[1][1] / det, -A[0][1] / det}, {-A[1][0] / det, A[0][0] / det}}
	var cov [2][2]float64
	for p := range 2 {
		for q := range 2 {
			for r := range 2 {
				for t := range 2 {
					cov[p][q] += inv[p][r] * B[r][t] * inv[t][q]
				}
			}
		}
	}
	v = func(at float64) float64 {
		t := at / 1e9
		return cov[0][0] + 2*t*cov[0][1] + t*t*cov[1][1]
	}
	skew = sol[1] / 1e9
	return sol[0] - skew*xm, skew, v, true
}

// solve2 is the weighted least-squares line d = a' + s' (x - xm)/1e9.
func solve2(xs, ds, w []float64, xm float64) ([2]float64, bool) {
	var sw, sx, sxx, sd, sxd float64
	for i := range xs {
		X := (xs[i] - xm) / 1e9
		sw += w[i]
		sx += w[i] * X
		sxx += w[i] * X * X
		sd += w[i] * ds[i]
		sxd += w[i] * X * ds[i]
	}
	det := sw*sxx - sx*sx
	if !(det > 0) || math.IsInf(det, 0) {
		if sw > 0 {
			return [2]float64{sd / sw, 0}, true
		}
		return [2]float64{}, false
	}
	return [2]float64{(sd*sxx - sx*sxd) / det, (sw*sxd - sx*sd) / det}, true
}

// madScale is 1.4826 times the median absolute deviation from the median:
// a normal distribution's standard deviation, robust to a tail.
func madScale(r []float64) float64 {
	if len(r) == 0 {
		return 0
	}
	c := slices.Clone(r)
	med := selectKth(c, len(c)/2)
	for i, v := range c {
		c[i] = math.Abs(v - med)
	}
	return 1.4826 * selectKth(c, len(c)/2)
}

// selectKth returns the k-th smallest value of a (0-based), reordering a
// (Hoare's selection with the middle element as pivot: O(len(a)) on the
// average, where a sort would be O(len(a) log len(a)); the body line takes
// a median in every reweighting pass).
func selectKth(a []float64, k int) float64 {
	lo, hi := 0, len(a)-1
	for lo < hi {
		p := a[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return a[k]
		}
	}
	return a[k]
}

func weightedMean(xs, w []float64) float64 {
	var s, sw float64
	for i, x := range xs {
		s += w[i] * x
		sw += w[i]
	}
	if sw == 0 {
		return 0
	}
	return s / sw
}

// madScaleWV is madScale of weighted values (the weights ignored: a
// spread, not a fit).
func madScaleWV(q []wv) float64 {
	r := make([]float64, len(q))
	for i, e := range q {
		r[i] = e.v
	}
	return madScale(r)
}

// bodyMemory is the body line's memory: the centre line's (tau, and the
// relative local time from which points count) stretched by stretch
// (memoryScale).
func (h *Hull) bodyMemory(tau float64, from int64, stretch float64) (float64, int64) {
	if tau == 0 {
		return tau, from
	}
	tau *= stretch
	return tau, h.memoryFrom(tau)
}

// The body line's memory and the rounds' noise (bodyNoise). A line
// through rounds of noise r each (the variance of one round's own
// location), read after its newest round while the frequency wanders as a
// random walk of intensity q, errs by about r/N (N the rounds it
// remembers) plus q (N T)^3 (T the gap between rounds): the least at N^4 ~
// r / (q T^3), so with the same clocks a memory in rounds grows as the
// fourth root of a round's noise. The centre line's memory (centerMemory)
// fits the floor's noise, a few hundred ns a round on the lab's links; a
// bell's rounds scatter from under 0.2 us (3 us of jitter) to over 0.5 us
// (10 us), and one fixed stretch served neither: in the simulator's
// matrix (60 seeds) a stretch of 1 gave normal 3 us 0.116 us against 0.123
// at 2, normal 10 us 0.307 against 0.286 (3: 0.280). So the stretch is
// (r / bodyNoiseRef)^(1/4), r the median of the kept rounds' variances
// (bodyCurve's locations), within [bodyScaleMin, bodyScaleMax].
const (
	// bodyNoiseRef: the variance (ns^2) of a round's location at which
	// the body line remembers as long as the centre line.
	bodyNoiseRef = 170 * 170
	// bodyNoiseRounds: kept rounds before their noise sets the stretch.
	bodyNoiseRounds = 3
	bodyScaleMin    = 0.75
	bodyScaleMax    = 4
)

// bodyNoiseOn: the body line's memory follows its rounds' noise (tests
// turn it off to compare with the fixed stretch).
var bodyNoiseOn = true

// memoryScale is the body line's memory over the centre line's:
// bodyMemoryScale, or, once bodyNoiseRounds rounds' own locations were
// kept, the fourth root of their noise over bodyNoiseRef and of
// wanderRef over the measured wander (bodyNoise, bodyWander); and the
// measured wander as a random walk of the frequency (ppm/sqrt(s); 0:
// not measured).
func (b *bodyState) memoryScale() (stretch, wander, q float64) {
	rs := b.curveRounds()
	if len(rs) >= bodyNoiseRounds {
		q = wanderQ(b.rounds)
	}
	if !bodyNoiseOn || len(rs) < bodyNoiseRounds {
		return bodyMemoryScale, 0, q
	}
	v := make([]float64, len(rs))
	for i, p := range rs {
		v[i] = p.v
	}
	r := selectKth(v, len(v)/2)
	if !(r > 0) || math.IsInf(r, 0) {
		return bodyMemoryScale, 0, q
	}
	ratio := r / bodyNoiseRef * wanderRef / q
	wander = math.Sqrt(q) / 1e3 // ns/s per sqrt(s) -> ppm/sqrt(s)
	return min(bodyScaleMax, max(bodyScaleMin, math.Sqrt(math.Sqrt(ratio)))), wander, q
}

// bodyVarLow is an optimistic guess at the body line's offset variance,
// cheap beside fitting it: the midpoints detrended by the floor line
// (c, s), and the least of the mean's variance (the robust spread squared
// over the effective number) and the median's (1/(4 f^2 n), f the density
// of the central tenth), for all the exchanges and for the faster half by
// round trip, halved.
func bodyVarLow(xs, ds, w, rtt []float64, c, s float64) float64 {
	var sw, sw2 float64
	for _, v := range w {
		sw += v
		sw2 += v * v
	}
	if !(sw2 > 0) {
		return 0
	}
	n := sw * sw / sw2
	r := make([]float64, len(xs))
	for i := range xs {
		r[i] = ds[i] - (c + s*xs[i])
	}
	guess := func(r []float64, n float64) float64 {
		if len(r) < bodyMinPoints {
			return math.Inf(1)
		}
		sc := madScale(r)
		k := len(r) / 10
		slices.Sort(r)
		m := len(r) / 2
		width := r[min(len(r)-1, m+k/2)] - r[max(0, m-k/2)]
		vMean := sc * sc / n
		if !(width > 0) {
			return vMean
		}
		f := (float64(k) / float64(len(r))) / width
		return min(vMean, 1/(4*f*f*n))
	}
	v := guess(slices.Clone(r), n)
	if len(rtt) >= 2*bodyMinPoints {
		lim := selectKth(slices.Clone(rtt), len(rtt)/2)
		var half []float64
		for i, t := range rtt {
			if t <= lim {
				half = append(half, r[i])
			}
		}
		v = min(v, guess(half, n/2))
	}
	return v / 2
}

// The body line's memory and the wander (bodyCurve). A line through the
// exchanges of a memory tau is the memory's average frequency: where the
// frequency moves at a rate a (a crystal's temperature cycle, a random
// walk) the line read after its newest exchange lags by about a*tau^2 (for
// exponential weights: the line through a parabola a/2*t^2 is off by
// a*tau^2 at its newest end). Its noise shrinks as the memory grows, about
// as vBody*tau0/tau. So each round's own location (the lower tenth of each
// direction's delays of that round alone, matched) is kept, a parabola is
// fitted through the last bodyCurveRounds of them by weighted least
// squares, and its curvature, less bodyCurveZ standard errors (so that
// noise alone shortens nothing), gives the memory of least expected
// error, (vBody*tau0 / (4 a^2))^(1/5); never longer than the default, never
// under half a gap between rounds. In the simulator's link matrix run for
// 20 minutes with the lab's wander, the mean per-host median went from 264
// to 171 ns on a 3-us bell, 355 to 317 on a 10-us one and 388 to 299 on two
// modes; in 60-s runs the curvature shows too late to matter (about the
// 10th round), and the lab's kept runs replayed were within 3%
// (docs/estimators.md, "The bells' last misses, taken apart").
const (
	bodyCurveRounds = 24
	// bodyCurveMinRounds: rounds of locations before the curvature counts.
	bodyCurveMinRounds = 6
	// bodyCurveZ: the curvature counts beyond this many standard errors.
	// At 2 a steady clock's line (TestCenterBodyFollowsCurvature) lost 18%
	// in one seed of three to a curvature that was noise.
	bodyCurveZ = 2.5
	// bodyCurveMinCut: a memory under this share of the default replaces
	// it (a shorter one by a few percent is not worth a second fit).
	bodyCurveMinCut = 0.9
	// bodyCurveMinPoints: the fewest exchanges per side of a round whose
	// location is kept.
	bodyCurveMinPoints = 24
)

// bodyCurveOn: the body line's memory follows the curvature (tests turn
// it off to compare with the default memory).
var bodyCurveOn = true

// curveMemory is the body line's memory given the curvature of the kept
// rounds' locations (see bodyCurve): tau (the default) where they show
// none beyond their noise. vBody is the body line's variance at xe with
// the default memory.
func (b *bodyState) curveMemory(h *Hull, tau, vBody, xe float64) float64 {
	b.memory = 0
	if tau <= 0 || !(vBody > 0) {
		return tau
	}
	// Weighted least squares of y = b0 + b1 t + b2 t^2, t in seconds
	// before xe; the weights are the rounds' inverse variances (floored at
	// (20 ns)^2, a round's own scatter beside the stamps').
	rs := b.curveRounds()
	var m [3][3]float64
	var r [3]float64
	n := 0
	for _, p := range rs {
		if p.x < float64(h.minX) {
			continue
		}
		t := (p.x - xe) / 1e9
		w := 1 / max(p.v, 400)
		f := [3]float64{1, t, t * t}
		for i := range 3 {
			for j := range 3 {
				m[i][j] += w * f[i] * f[j]
			}
			r[i] += w * f[i] * p.y
		}
		n++
	}
	if n < bodyCurveMinRounds {
		return tau
	}
	inv, ok := inv3(m)
	if !ok {
		return tau
	}
	var coef [3]float64
	for i := range 3 {
		for j := range 3 {
			coef[i] += inv[i][j] * r[j]
		}
	}
	// The residuals' scatter beyond the rounds' own variances (a stack's
	// bursts, a wander the parabola does not follow) widens the error.
	var chi float64
	for _, p := range rs {
		if p.x < float64(h.minX) {
			continue
		}
		t := (p.x - xe) / 1e9
		e := p.y - (coef[0] + coef[1]*t + coef[2]*t*t)
		chi += e * e / max(p.v, 400)
	}
	scale := max(1, chi/float64(n-3))
	a2 := coef[2]*coef[2] - bodyCurveZ*bodyCurveZ*inv[2][2]*scale
	if !(a2 > 0) {
		return tau
	}
	// MSE(T) = vBody*tau/T + (2 b2 T^2)^2 with T in seconds: least at
	// T^5 = vBody*tau / (16 b2^2).
	ts := tau / 1e9
	best := math.Pow(vBody*ts/(16*a2), 0.2) * 1e9
	out := min(tau, max(best, h.roundGap/2))
	if out < tau*bodyCurveMinCut {
		b.memory = out
	}
	return out
}

// inv3 inverts a symmetric 3x3 matrix; ok is false when it is singular.
func inv3(m [3][3]float64) (inv [3][3]float64, ok bool) {
	det := m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) -
		m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
		m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
	if !(math.Abs(det) > 0) || math.IsInf(det, 0) {
		return inv, false
	}
	inv[0][0] = (m[1][1]*m[2][2] - m[1][2]*m[2][1]) / det
	inv[0][1] = (m[0][2]*m[2][1] - m[0][1]*m[2][2]) / det
	inv[0][2] = (m[0][1]*m[1][2] - m[0][2]*m[1][1]) / det
	inv[1][0] = (m[1][2]*m[2][0] - m[1][0]*m[2][2]) / det
	inv[1][1] = (m[0][0]*m[2][2] - m[0][2]*m[2][0]) / det
	inv[1][2] = (m[0][2]*m[1][0] - m[0][0]*m[1][2]) / det
	inv[2][0] = (m[1][0]*m[2][1] - m[1][1]*m[2][0]) / det
	inv[2][1] = (m[0][1]*m[2][0] - m[0][0]*m[2][1]) / det
	inv[2][2] = (m[0][0]*m[1][1] - m[0][1]*m[1][0]) / det
	return inv, true
}

// memoryFrom is the relative local time from which a memory of tau counts:
// centerMemorySpans of it before the newest exchange, or everything
// (math.MinInt64) when the window is shorter than that.
func (h *Hull) memoryFrom(tau float64) int64 {
	if span := centerMemorySpans * tau; span < float64(h.newest-h.minX) {
		return h.newest - int64(span)
	}
	return math.MinInt64
}
