package estimate

import (
	"cmp"
	"math"
	"slices"

	"github.com/gclock/gclock/internal/satmath"
)

// The centre line (HullConfig.Center): a point estimate inside the hull's
// guaranteed bounds, and its memory (HullConfig.CenterMemory). The hull
// itself (hull.go) keeps the point sets this file reads.

// noteRound keeps the average gap between the starts of rounds (the
// centre line's memory is a number of them), for h and its span
// candidates. A round not newer than the last is no gap and is not kept
// as the last; one gap counts at most roundGapMax times the average, so
// that a pause (a node stopped for an hour) does not switch the memory
// off for the rounds after it.
func (h *Hull) noteRound(round []Sample) {
	x := round[0].LocRecv
	if h.haveRound {
		d, ok := satmath.SubChecked(x, h.lastRound)
		if !ok || d <= 0 {
			return
		}
		if gap := float64(d); h.roundGap == 0 {
			h.roundGap = gap
		} else {
			h.roundGap += roundGapDecay * (min(gap, roundGapMax*h.roundGap) - h.roundGap)
		}
	}
	h.lastRound, h.haveRound = x, true
	for _, c := range h.cands {
		c.roundGap = h.roundGap
		c.lastRound, c.haveRound = h.lastRound, h.haveRound
	}
}

// Center returns the centre line of the window at local time x: the line
// that lies farthest from both point sets, with the largest equal vertical
// margin below every UP point and above every LOW point. Where the
// shortest delays are the same both ways (a symmetric link) it converges
// on the true line as exchanges accumulate: it rests on the fastest
// exchange in each direction separately, over the whole window, instead of
// on the few near the newest sample that the middle of the bounds there
// depends on. It returns the source time on that line at x and its skew;
// ok is false while the window is empty or the sets are not separable.
//
// The margin at skew s, g(s) = min_UP(d - s x) - max_LOW(d - s x), is
// concave and piecewise linear with breakpoints at the two hulls' edge
// slopes: the maximum is at one of them (or at a feasible-range end).
// Float64 on window-relative coordinates (below 2^46) is exact enough for
// an estimate; the guaranteed bounds stay with Bounds.
func (h *Hull) Center(x int64) (y int64, skew float64, ok bool) {
	c, best, ok := h.centerLine()
	if !ok {
		return 0, 0, false
	}
	rx, okx := satmath.SubChecked(x, h.x0)
	if !okx || rx < -maxQuery || rx > maxQuery {
		return 0, 0, false
	}
	// A round held back as the suspect of a frequency break: its fastest
	// exchanges put the line off by its location, and the checks before it
	// say how fast the error grew; that line is served until the next
	// round's verdict (a break, or a burst or a wrong reading dropped):
	// the error of a break stops growing from there (serveSuspect).
	d := c + best*float64(rx) + h.brk.served(float64(rx))
	if h.brk.suspect {
		best += h.brk.tilt
	}
	base, ok1 := satmath.AddChecked(x, h.c)
	y, ok2 := satmath.AddChecked(base, int64(math.Round(d)))
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	return y, best, true
}

// centerLine is the centre line in window-relative coordinates (d at
// relative x = 0, and the skew), computed once per change of the point
// sets: readers ask for it far more often than rounds arrive.
func (h *Hull) centerLine() (c, skew float64, ok bool) {
	if !h.centerCached {
		h.centerC, h.centerS, h.centerOK = h.wholeCenter()
		if h.cfg.CenterAdapt && h.spanSel > 0 {
			if c, s, ok := h.centerOver(h.spanSel, false); ok {
				h.centerC, h.centerS, h.centerOK = c, s, ok
			}
		}
		h.centerCached = true
	}
	return h.centerC, h.centerS, h.centerOK
}

// wholeCenter is the centre line of the whole window, cached.
func (h *Hull) wholeCenter() (c, skew float64, ok bool) {
	if !h.wholeCached {
		h.wholeC, h.wholeS, h.wholeOK = h.computeCenterLine()
		h.wholeCached = true
	}
	return h.wholeC, h.wholeS, h.wholeOK
}

func (h *Hull) computeCenterLine() (c, skew float64, ok bool) {
	if !h.have || len(h.up.hull) == 0 || len(h.low.hull) == 0 {
		return 0, 0, false
	}
	sl, sh, ok := h.skewRange()
	if !ok {
		return 0, 0, false
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if sl.q != 0 {
		lo = sl.float()
	}
	if sh.q != 0 {
		hi = sh.float()
	}
	// minUp(s) and maxLow(s) over the hull vertices (LOW stores -d).
	minUp := func(s float64) float64 {
		m := math.Inf(1)
		for _, u := range h.up.hull {
			m = min(m, float64(u.d)-s*float64(u.x))
		}
		return m
	}
	maxLow := func(s float64) float64 {
		m := math.Inf(-1)
		for _, l := range h.low.hull {
			m = max(m, float64(-l.d)-s*float64(l.x))
		}
		return m
	}
	var cands []float64
	for _, c := range []*chain{&h.up, &h.low} {
		sign := 1.0
		if c == &h.low {
			sign = -1
		}
		for i := 1; i < len(c.hull); i++ {
			a, b := c.hull[i-1], c.hull[i]
			if b.x != a.x {
				cands = append(cands, sign*float64(b.d-a.d)/float64(b.x-a.x))
			}
		}
	}
	if !math.IsInf(lo, 0) {
		cands = append(cands, lo)
	}
	if !math.IsInf(hi, 0) {
		cands = append(cands, hi)
	}
	best, bestG := 0.0, math.Inf(-1)
	for _, s := range cands {
		if s < lo || s > hi {
			continue
		}
		if g := minUp(s) - maxLow(s); g > bestG {
			best, bestG = s, g
		}
	}
	if math.IsInf(bestG, -1) {
		return 0, 0, false
	}
	c = (minUp(best) + maxLow(best)) / 2
	if h.noRefine {
		return c, best, true
	}
	floorK := 1
	if floorCurveOn && h.cfg.CenterMemory > 0 {
		h.floor.note(h, c, best, floorCurveMinPoints, bodyCurveRounds, fastMeet) // the round's own floor
	}
	if a, sk, k, ok := h.refineCenter(c, best, bestG/2); ok && sk >= lo && sk <= hi {
		c, best, floorK = a, sk, k
	}
	if !h.cfg.CenterFloorOnly {
		c, best = h.fuseBody(c, best, floorK, lo, hi)
	}
	return c, best, true
}

// centerBand and centerPoints choose the exchanges refineCenter averages:
// on each side, those within centerBand of the centre line's margin, or
// more if needed to hold the centerPoints fastest. A sharp delay floor
// (ideal timestamps) wants few, a soft one (scheduling noise where stamps
// are taken) many. On a simulated 71 us + pareto link, 30 exchanges per
// round, six seeds, median / p99 |error| in ns, sharp floor then 700 ns of
// exponential timestamp noise: 3 points 84/853 and 438/1755, 8 points
// 110/737 and 582/1652, 15 points 167/641 and 459/1771, 30 points 193/719
// and 332/1228 (go run ./cmd/gclock sim on that scenario, docs/lab.md).
//
// With few exchanges the default takes fewer: the fastest 1/centerShare of
// each side's exchanges, at most centerPoints, and none below 3 (under 75
// exchanges the max-margin line stands alone), so that a short window is
// not averaged with exchanges far above the floor (15 of 25 would reach
// their median; see docs/lab.md, the frugal configuration).
const (
	centerBand   = 500 // ns
	centerPoints = 15
	centerShare  = 25
	// centerQuarters: refineCenter chooses each side's points in each of
	// this many equal parts of the window's span; centerCap: none beyond
	// the centerCap*centerPoints fastest of the whole window.
	centerQuarters = 4
	centerCap      = 4
	// centerSoft (ns) and centerRefits: the least-squares fit of the
	// chosen points is redone centerRefits times with each point weighted
	// 1/(1+(q/centerSoft)^2), q being how far it lies beyond the fitted
	// margin on its side (0 for points at or inside it): how much queueing
	// it carries by the fit's own account. Under load only 0.2-0.8% of a
	// lab host's exchanges each way came within 1 us of the floor, so most
	// of a quarter's chosen points had queued 2-20 us, and a stretch where
	// one direction's fastest had queued more than the other's tilted the
	// line (docs/lab.md, "What limits the per-host median"); a point 5 us
	// beyond the margin now counts 1/52 of one at it. 700 ns is about the
	// spread of the stamps near the floor (the lab's kernel stamps, 0.6-1.3
	// us above their floor at the median under load): exchanges within it
	// keep at least half their weight, so a clean window's line moves by a
	// few ns. Chosen on 108 host-runs of logged lab exchanges (raw clocks,
	// busy and cross70) and the simulator's lab-like scenarios: 300-1000 ns
	// and 3-8 refits did about as well; 500 ns left 6 hosts of 108 above
	// 0.5 us instead of 10 but put 2.2% of the reads of the recorded stall
	// run (TestHullCenterAdaptLoadedLab) above 1 us, 700 ns 0.7% (docs/lab.md,
	// "Soft weights on queued points").
	centerSoft   = 700 // ns
	centerRefits = 3
	// centerMemorySpans: see centerMemory; roundGapDecay is the weight of
	// the newest gap in the average, roundGapMax the most one gap counts
	// (times the average; see noteRound).
	centerMemorySpans = 4
	roundGapDecay     = 0.25
	roundGapMax       = 4
)

// centerMemory is the time constant (ns) of the centre line's memory and
// the relative local time from which its points are chosen: a point's
// weight in the fit falls as exp(-age/tau), tau being HullConfig.CenterMemory
// average gaps between rounds, and points older than centerMemorySpans
// tau (weights below 2%) are left out. tau is 0 (every point of the
// window counts the same) until two rounds were seen.
//
// A clock's frequency wanders (a crystal's random walk, its temperature),
// so the line through a minute of exchanges is the minute's average
// frequency, and its extrapolation to the newest end is off by the
// curvature: in the simulator's lab-like scenario (0.005 ppm/sqrt(s) of
// random walk, a 0.1-ppm temperature cycle, rounds of 120 every 6 s; 24
// seeds) the mean per-host median |error| was 208 ns with every point
// weighted the same, 194 / 185 / 184 / 186 ns with tau 30 / 15 / 10 / 6 s
// (126 ns with no wander at all: the exchanges' own noise), and the
// 90th percentile of the host medians 389 -> 299 ns at 15 s. Where the
// clocks do not wander, a shorter memory only adds noise (126 -> 134 ns at
// 15 s without wander). In the rounds of the filter's optimum for a random
// walk of the frequency seen through white noise, tau grows as the cube
// root of the gap between rounds; a fixed number of rounds is the simpler
// rule and keeps the memory's share of the data the same at every pace.
func (h *Hull) centerMemory() (tau float64, from int64) {
	if h.cfg.CenterMemory == 0 || h.roundGap <= 0 {
		return 0, math.MinInt64
	}
	tau = h.cfg.CenterMemory * h.roundGap
	return tau, h.memoryFrom(tau)
}

// floorMemory is the floor line's memory (refineCenter): centerMemory's,
// or shorter where the rounds' own floor locations curve (floorCurve).
func (h *Hull) floorMemory() (tau float64, from int64) {
	tau, from = h.centerMemory()
	if !floorCurveOn || tau <= 0 {
		return tau, from
	}
	if t := h.floor.curveMemory(h, tau); t < tau {
		return t, h.memoryFrom(t)
	}
	return tau, from
}

// refineCenter averages the exchanges near the centre line instead of
// resting on the extreme ones: the UP points within centerBand of the
// line's margin (the fastest exchanges one way) and the LOW points
// likewise (the other way), at least the fastest few in every quarter of
// the window's span, are fitted by least squares with one common
// line and one common margin (UP = line + m, LOW = line - m), the points
// that queued beyond that margin weighted down (fitCenter). The extreme
// points' own noise (a timestamp a few hundred ns early) then counts once
// among many instead of deciding the line. It returns the line at relative
// x = 0 (d units) and its skew; ok is false with fewer than three points to
// average on either side (see centerShare) or a singular fit.
func (h *Hull) refineCenter(c, s, margin float64) (a, skew float64, k int, ok bool) {
	// Distance of every point beyond the centre line's margin, per side.
	var ru, rl []float64
	for _, p := range h.up.pts {
		ru = append(ru, float64(p.d)-(c+s*float64(p.x))-margin)
	}
	for _, p := range h.low.pts {
		rl = append(rl, (c+s*float64(p.x))-float64(-p.d)-margin)
	}
	pts, bw := min(centerPoints, min(len(ru), len(rl))/centerShare), float64(centerBand)
	if h.cfg.CenterPoints > 0 {
		pts = h.cfg.CenterPoints
	}
	if pts < 3 {
		return 0, 0, 0, false // too few exchanges to average: the extremes decide
	}
	if h.cfg.CenterBand > 0 {
		bw = float64(h.cfg.CenterBand)
	}
	if len(ru) < pts || len(rl) < pts {
		return 0, 0, 0, false
	}
	// Each side's points are chosen per quarter of the window's span:
	// those within the band of the margin, or more to hold the quarter's
	// centerPoints/2 fastest. Taking the fastest over the whole window
	// instead put most of them where exchanges were dense (a convergence
	// ramp's first seconds), so that the skew rested on a short stretch and
	// the line was extrapolated from its early centroid: on raw lab clocks
	// (true skew 0) the fitted skew was 0.01-0.02 ppm off, 0.3-0.8 us over
	// the 40 s to the newest exchange (docs/lab.md, "What limits the
	// per-host median").
	kq := max((pts+1)/2, 2)
	// The memory: only the newest centerMemorySpans time constants count,
	// each point weighted by its age (see centerMemory).
	tau, from := h.floorMemory()
	var xs, ds, sg []float64
	pick := func(ps []pt, r []float64, sign float64) {
		i0, _ := slices.BinarySearchFunc(ps, from, func(p pt, x int64) int { return cmp.Compare(p.x, x) })
		ps, r = ps[i0:], r[i0:]
		if len(ps) == 0 {
			return
		}
		first := max(h.minX, from)
		span := h.newest - first
		// A quarter of slow exchanges only (a stall) gives none of its
		// slowest: nothing beyond the window's centerCap*pts fastest.
		capAll := kthSmallest(r, min(len(r), centerCap*pts))
		for i0, q := 0, 1; i0 < len(ps); q++ {
			i1 := i0
			for i1 < len(ps) && (q == centerQuarters || (ps[i1].x-first)*centerQuarters < span*int64(q)) {
				i1++
			}
			if i1 == i0 {
				continue
			}
			lim := max(bw, min(capAll, kthSmallest(r[i0:i1], min(kq, i1-i0))))
			for i := i0; i < i1; i++ {
				if r[i] <= lim {
					xs, ds, sg = append(xs, float64(ps[i].x)), append(ds, sign*float64(ps[i].d)), append(sg, sign)
				}
			}
			i0 = i1
		}
	}
	pick(h.up.pts, ru, 1)
	pick(h.low.pts, rl, -1)
	var w0 []float64
	if tau > 0 {
		w0 = make([]float64, len(xs))
		for i, x := range xs {
			w0[i] = math.Exp(-(float64(h.newest) - x) / tau)
		}
	}
	a, skew, ok = fitCenter(xs, ds, sg, w0, centerRefits)
	return a, skew, centerQuarters * kq, ok
}

// fitCenter fits one line and one margin to points (xs, ds) of sides sg
// (+1 UP: d = line + m; -1 LOW: d = line - m) by least squares, then
// refits refits times with every point weighted down by its queueing
// beyond the fitted margin (see centerSoft), each weight times the
// point's prior weight w0[i] (the centre line's memory; nil: 1). It
// returns the line at x = 0 and its skew; ok is false for a singular fit.
func fitCenter(xs, ds, sg, w0 []float64, refits int) (a, skew float64, ok bool) {
	if len(xs) == 0 {
		return 0, 0, false
	}
	// Centre and scale x (to seconds) so the normal equations stay well
	// conditioned: unknowns (a', s', m) with d = a' + s' X + sg*m.
	var xm float64
	for _, x := range xs {
		xm += x
	}
	xm /= float64(len(xs))
	// prior is point i's weight before the soft weights (its age's).
	prior := func(i int) float64 {
		if w0 == nil {
			return 1
		}
		return w0[i]
	}
	w := make([]float64, len(xs))
	for i := range w {
		w[i] = prior(i)
	}
	var sol [3]float64
	for it := 0; ; it++ {
		next, ok := solveLine(xs, ds, sg, w, xm)
		if !ok {
			if it == 0 {
				return 0, 0, false
			}
			break // keep the previous fit
		}
		sol = next
		if it == refits {
			break
		}
		for i := range xs {
			// Queueing beyond the margin: UP points lie above line + m,
			// LOW points below line - m.
			q := sg[i] * (ds[i] - (sol[0] + sol[1]*(xs[i]-xm)/1e9 + sg[i]*sol[2]))
			q = max(q, 0) / centerSoft
			w[i] = prior(i) / (1 + q*q)
		}
	}
	skew = sol[1] / 1e9
	return sol[0] - skew*xm, skew, true
}

// solveLine is the weighted least-squares fit of d = a' + s' X + sg*m, X
// being (x - xm) in seconds: it returns (a', s', m); ok is false for a
// singular fit.
func solveLine(xs, ds, sg, w []float64, xm float64) ([3]float64, bool) {
	var A [3][3]float64
	var B [3]float64
	for i := range xs {
		row := [3]float64{1, (xs[i] - xm) / 1e9, sg[i]}
		for r := range 3 {
			for k := range 3 {
				A[r][k] += w[i] * row[r] * row[k]
			}
			B[r] += w[i] * row[r] * ds[i]
		}
	}
	return solve3(A, B)
}

// kthSmallest returns the k-th smallest value of r (1-based, k <= len(r))
// without sorting r: a sorted buffer of the k smallest, O(len(r) k) for
// the small k refineCenter uses.
func kthSmallest(r []float64, k int) float64 {
	buf := make([]float64, 0, k)
	for _, v := range r {
		buf = keepSmallest(buf, k, v)
	}
	return buf[k-1]
}

// keepSmallest adds v to buf, the sorted k smallest values seen so far,
// and returns it (at most k long: v is dropped if it is not among them).
func keepSmallest[T cmp.Ordered](buf []T, k int, v T) []T {
	if len(buf) == k && v >= buf[k-1] {
		return buf
	}
	i, _ := slices.BinarySearch(buf, v)
	if len(buf) < k {
		buf = append(buf, v)
	}
	copy(buf[i+1:], buf[i:len(buf)-1])
	buf[i] = v
	return buf
}

// solve3 solves A v = b by Cramer's rule; ok is false when A is singular.
func solve3(A [3][3]float64, b [3]float64) (v [3]float64, ok bool) {
	det := func(m [3][3]float64) float64 {
		return m[0][0]*(m[1][1]*m[2][2]-m[1][2]*m[2][1]) -
			m[0][1]*(m[1][0]*m[2][2]-m[1][2]*m[2][0]) +
			m[0][2]*(m[1][0]*m[2][1]-m[1][1]*m[2][0])
	}
	d := det(A)
	if d == 0 || math.IsNaN(d) || math.IsInf(d, 0) {
		return v, false
	}
	for c := range 3 {
		m := A
		for r := range 3 {
			m[r][c] = b[r]
		}
		v[c] = det(m) / d
	}
	return v, true
}
