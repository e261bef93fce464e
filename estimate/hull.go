package estimate

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/gclock/gclock/internal/satmath"
)

// maxRel bounds every coordinate the hull stores relative to its origin
// (2^46 ns, about 19.5 hours, and 2^46 ns of offset change): it keeps every
// product of the exact orientation and bound tests far inside 128 bits.
const maxRel = 1 << 46

// maxQuery bounds |x - origin| for Bounds (2^52 ns, about 52 days): beyond
// it the bound would not fit the exact arithmetic and Bounds says !ok.
const maxQuery = 1 << 52

// maxShift bounds |HullConfig.Shift| (2^40 ns, about 18 minutes).
const maxShift = 1 << 40

// HullConfig configures a Hull.
type HullConfig struct {
	// Window is the number of samples kept (between Window and 2*Window are
	// held; the oldest are dropped Window at a time). At least 2.
	Window int
	// Shift is Jezequel's nu, ns: UP points are moved up and LOW points down
	// by it to absorb granularity and read jitter (nu = delta - mu, 4.3).
	// Negative values tighten the bounds while the sets stay separated.
	Shift int64
	// MaxWander is the worst-case |d skew / dx| per ns of local time. The
	// point sets are widened by MaxWander*span^2/2 (span: the window's
	// extent) so that the tangent of the true, curving, offset at the newest
	// sample stays feasible; it becomes Mapping.Wander.
	MaxWander float64
	// MaxStep is the largest jump of the skew (|Δskew|, dimensionless:
	// 1e-6 is 1 ppm) the bounds allow at any instant: a frequency step of
	// the oscillator (a load or temperature change, a slewing source) that
	// MaxWander's smooth change does not cover. With it the true offset
	// stays within MaxStep*|x-x'| + MaxWander*(x-x')^2/2 of its tangent at
	// any x', so the point sets are widened by MaxStep*span on top of the
	// wander term and Bounds by MaxStep*|x-newest|; Mapping's SkewErr
	// carries it. 0: the skew changes only by MaxWander.
	MaxStep float64
	// MaxSpan, ns, if positive, drops the samples older than the newest
	// minus MaxSpan, so that the wander widening stays below
	// MaxWander*MaxSpan^2/2 however long the window runs: with wander, a
	// longer span narrows the skew by 2*delta/span but widens both sets by
	// the square of the span, and the bounds are tightest at a span of the
	// order of sqrt(delta/MaxWander) (delta: the exchanges' half round
	// trip); see the engine's HullMaxSpan. 0: no limit but Window.
	MaxSpan int64
	// Center makes Mapping's estimate the centre line (see Hull.Center)
	// instead of the middle of the bounds at the newest sample. The bounds
	// it reports still contain every feasible line.
	Center bool
	// CenterPoints and CenterBand (ns) choose the exchanges the centre line
	// is fitted to: on each side, those within CenterBand of the line's
	// margin, or more to hold the CenterPoints fastest. 0: the defaults
	// (15 and 500 ns; see centerPoints).
	CenterPoints int
	CenterBand   int64
	// CenterAdapt lets a Center hull fit its line over a shorter span of
	// its window when that predicts better (a changing frequency curves
	// the exchanges away from any one line over a long span): besides the
	// whole window, lines over its newest 1/2, 1/4 and 1/8 (in time) are
	// kept as candidates; before every round each candidate predicts the
	// offset of the round's fastest exchange, an average of each one's
	// recent |prediction error| is kept, and Center uses the candidate
	// whose average is smallest. Steady drift keeps the whole window (its
	// line averages most exchanges); wander or a frequency step moves the
	// choice to a shorter span within a few rounds. This is cross-
	// validation on the next round, in the spirit of chrony's runs test
	// (which shortens its regression when residuals show a trend). It
	// changes only the estimate; the bounds use every sample.
	CenterAdapt bool
	// CenterMemory (rounds) gives a Center hull's line a memory: each
	// exchange counts exp(-age/tau) in the fit, tau being CenterMemory
	// average gaps between rounds, and those older than 4 tau not at all,
	// so that a wandering frequency is followed instead of averaged over
	// the window (see centerMemory). 0: every exchange of the window counts
	// the same (the line converges on a constant drift). The bounds use
	// every sample either way.
	CenterMemory float64
	// CenterFloorOnly keeps a Center hull's line on the fastest exchanges
	// alone (the line before the body candidate of centerbody.go): for
	// comparisons. false: the line blends the floor and the body of the
	// delays by their measured variances.
	CenterFloorOnly bool
	// CenterBreaks lets a Center hull restart its window from a round
	// that its centre line missed far beyond its usual misses: the clock's
	// frequency jumped (centerbreak.go). Only for a hull whose bounds
	// nobody reads (the engine's separate centre hull): a restarted window
	// forgets the exchanges the bounds rest on.
	CenterBreaks bool
}

// DefaultHullConfig is a 256-sample window without shift or wander.
func DefaultHullConfig() HullConfig { return HullConfig{Window: 256} }

// Validate checks c and names the first bad field.
func (c HullConfig) Validate() error {
	if c.Window < 2 || c.Window > 1<<20 {
		return fmt.Errorf("estimate: HullConfig.Window = %d: must be in [2, 2^20]", c.Window)
	}
	if c.Shift < -maxShift || c.Shift > maxShift {
		return fmt.Errorf("estimate: HullConfig.Shift = %d: must be within ±2^40 ns", c.Shift)
	}
	if math.IsNaN(c.MaxWander) || math.IsInf(c.MaxWander, 0) || c.MaxWander < 0 || c.MaxWander > 1e-6 {
		return fmt.Errorf("estimate: HullConfig.MaxWander = %v: must be in [0, 1e-6] per ns", c.MaxWander)
	}
	if math.IsNaN(c.MaxStep) || math.IsInf(c.MaxStep, 0) || c.MaxStep < 0 || c.MaxStep > 1e-3 {
		return fmt.Errorf("estimate: HullConfig.MaxStep = %v: must be in [0, 1e-3]", c.MaxStep)
	}
	if c.MaxSpan < 0 {
		return fmt.Errorf("estimate: HullConfig.MaxSpan = %d: must be >= 0 (0: no limit)", c.MaxSpan)
	}
	if c.CenterPoints < 0 || c.CenterPoints == 1 || c.CenterPoints == 2 || c.CenterPoints > c.Window {
		return fmt.Errorf("estimate: HullConfig.CenterPoints = %d: must be 0 (default) or in [3, Window]", c.CenterPoints)
	}
	if c.CenterBand < 0 {
		return fmt.Errorf("estimate: HullConfig.CenterBand = %d: must be >= 0 (0: default)", c.CenterBand)
	}
	if math.IsNaN(c.CenterMemory) || c.CenterMemory < 0 || c.CenterMemory > 1e6 {
		return fmt.Errorf("estimate: HullConfig.CenterMemory = %v: must be in [0, 1e6] rounds (0: none)", c.CenterMemory)
	}
	return nil
}

// pt is a point relative to the hull's origin: x - x0 and (y - x) - c.
type pt struct{ x, d int64 }

// chain holds one point set sorted by x and its lower convex hull. The LOW
// set is stored with d negated, so its upper hull is the chain's lower hull.
//
// The set is a queue: points arrive at the right (the newest local time)
// and leave at the left (the oldest, when HullConfig.MaxSpan drops them).
// Its hull is kept in two parts, as a queue is built from two stacks: the
// back (pts[nfront:]) is a monotone chain grown at its right end, the front
// (pts[:nfront]) a monotone chain built from right to left whose every step
// is logged so that removing its leftmost point is an undo. When the front
// is empty and a point must leave, every point becomes front (one rebuild).
// Each point is moved to the front once and each pop is undone once, so a
// sample costs amortized O(1); the full hull is merged from the two parts'
// vertices after every change, O(|front hull| + |back hull|).
type chain struct {
	pts    []pt // held points, sorted by x; pts[:nfront] are the front
	nfront int
	front  []pt        // lower hull of the front, front[len-1] its leftmost vertex
	popped []pt        // vertices popped while the front was built, LIFO
	steps  []frontStep // one per front point, pts[0]'s last
	back   []pt        // lower hull of pts[nfront:], left to right
	hull   []pt        // lower hull of pts, left to right
}

// frontStep is how adding one point to the front changed its hull.
type frontStep struct {
	popped int  // vertices it popped (the last ones in chain.popped)
	pushed bool // whether the point itself became a vertex
}

// cross is the orientation of o->a->b: > 0 for a left (counter-clockwise)
// turn, exact in 128 bits.
func cross(o, a, b pt) int {
	l := satmath.Mul(a.x-o.x, b.d-o.d)
	r := satmath.Mul(a.d-o.d, b.x-o.x)
	return l.Cmp(r)
}

// pushHull appends p (p.x >= the last vertex's x) to the lower hull h.
func pushHull(h []pt, p pt) []pt {
	for len(h) > 0 {
		last := h[len(h)-1]
		if p.x == last.x {
			if p.d >= last.d {
				return h
			}
			h = h[:len(h)-1]
			continue
		}
		if len(h) >= 2 && cross(h[len(h)-2], last, p) <= 0 {
			h = h[:len(h)-1]
			continue
		}
		break
	}
	return append(h, p)
}

// pushFront adds p (p.x <= the front's leftmost x) to the front's hull and
// logs what changed: the mirror image of pushHull.
func (c *chain) pushFront(p pt) {
	st := frontStep{pushed: true}
	for len(c.front) > 0 {
		last := c.front[len(c.front)-1]
		if p.x == last.x {
			if p.d >= last.d {
				st.pushed = false
				break
			}
		} else if len(c.front) < 2 || cross(p, last, c.front[len(c.front)-2]) > 0 {
			break
		}
		c.front = c.front[:len(c.front)-1]
		c.popped = append(c.popped, last)
		st.popped++
	}
	if st.pushed {
		c.front = append(c.front, p)
	}
	c.steps = append(c.steps, st)
}

// popFront undoes the last pushFront: the front without its leftmost point.
func (c *chain) popFront() {
	st := c.steps[len(c.steps)-1]
	c.steps = c.steps[:len(c.steps)-1]
	if st.pushed {
		c.front = c.front[:len(c.front)-1]
	}
	for i := 0; i < st.popped; i++ {
		c.front = append(c.front, c.popped[len(c.popped)-1])
		c.popped = c.popped[:len(c.popped)-1]
	}
}

// merge recomputes the full hull from the front's and the back's vertices
// (the hull of a union is the hull of the parts' hulls).
func (c *chain) merge() {
	c.hull = c.hull[:0]
	for i := len(c.front) - 1; i >= 0; i-- {
		c.hull = pushHull(c.hull, c.front[i])
	}
	for _, p := range c.back {
		c.hull = pushHull(c.hull, p)
	}
}

// add inserts p keeping pts sorted: the back's hull is extended in
// amortized O(1) when p is the newest, everything is rebuilt as back
// otherwise. Call merge before reading hull.
func (c *chain) add(p pt) {
	n := len(c.pts)
	if n == 0 || p.x >= c.pts[n-1].x {
		c.pts = append(c.pts, p)
		c.back = pushHull(c.back, p)
		return
	}
	i := sort.Search(n, func(i int) bool { return c.pts[i].x > p.x })
	c.pts = append(c.pts, pt{})
	copy(c.pts[i+1:], c.pts[i:])
	c.pts[i] = p
	c.rebuild()
}

// rebuild makes every held point back and recomputes the hulls.
func (c *chain) rebuild() {
	c.nfront = 0
	c.front, c.popped, c.steps = c.front[:0], c.popped[:0], c.steps[:0]
	c.back = c.back[:0]
	for _, p := range c.pts {
		c.back = pushHull(c.back, p)
	}
	c.merge()
}

// dropOldest removes the oldest held point, amortized O(1). Call merge
// before reading hull.
func (c *chain) dropOldest() {
	if c.nfront == 0 {
		// Every held point becomes front, built from the right.
		c.front, c.popped, c.steps = c.front[:0], c.popped[:0], c.steps[:0]
		for i := len(c.pts) - 1; i >= 0; i-- {
			c.pushFront(c.pts[i])
		}
		c.nfront = len(c.pts)
		c.back = c.back[:0]
	}
	c.popFront()
	c.nfront--
	c.pts = c.pts[1:] // append reallocates once the slack is used: O(held) memory
}

// dropBefore removes the points with x < cut, keeping at least one.
func (c *chain) dropBefore(cut int64) bool {
	dropped := false
	for len(c.pts) > 1 && c.pts[0].x < cut {
		c.dropOldest()
		dropped = true
	}
	return dropped
}

// keepNewest drops all but the newest k points and rebuilds the hull.
func (c *chain) keepNewest(k int) {
	if len(c.pts) > k {
		n := copy(c.pts, c.pts[len(c.pts)-k:])
		c.pts = c.pts[:n]
	}
	c.rebuild()
}

// shift moves every stored point by (-dx, -dd): a new origin.
func (c *chain) shift(dx, dd int64) {
	for _, s := range [][]pt{c.pts, c.front, c.popped, c.back, c.hull} {
		for i := range s {
			s[i].x -= dx
			s[i].d -= dd
		}
	}
}

// reset empties the chain, keeping its buffers.
func (c *chain) reset() {
	c.pts, c.nfront = c.pts[:0], 0
	c.front, c.popped, c.steps = c.front[:0], c.popped[:0], c.steps[:0]
	c.back, c.hull = c.back[:0], c.hull[:0]
}

// Hull is Jezequel's geometric estimator (RR-1177, 4.2-4.3): the true line
// y = a + b*x lies on or below every UP = (LocSend, SrcRecv) point and on or
// above every LOW = (LocRecv, SrcSend) point, so the feasible lines form a
// convex polygon in (a, b) and give guaranteed bounds on the offset and the
// skew. The hull keeps the lower convex hull of UP and the upper convex hull
// of LOW incrementally (monotone chains, amortized O(1) per sample for
// increasing local times), over a window bounded in samples (Window) and
// optionally in time (MaxSpan), and computes every bound exactly in integer
// arithmetic relative to an origin. Not safe for concurrent use.
type Hull struct {
	cfg     HullConfig
	x0, c   int64 // origin: local time and offset y-x
	have    bool  // origin set, at least one sample
	up, low chain
	newest  int64 // largest local time held (relative)
	minX    int64 // smallest local time held (relative)

	// cache of skewRange, valid until the point sets change.
	cached           bool
	cacheLo, cacheHi rat
	cacheOK          bool

	// cache of centerLine, valid until the point sets change (cached
	// false clears it too).
	centerCached     bool
	centerC, centerS float64
	centerOK         bool
	wholeCached      bool
	wholeC, wholeS   float64
	wholeOK          bool

	// HullConfig.CenterAdapt: each span candidate's average |error| and
	// the one Center uses (0: the whole window).
	// noRefine: a scoring copy (centerOver) takes the max-margin line
	// alone, which is cheaper and ranks spans as well.
	noRefine bool
	spanErr  [spanCands]float64
	spanSeen [spanCands]bool
	spanSel  int
	cands    []*Hull // candidate k+1's hull

	// The centre line's memory (see centerMemory): the local time at which
	// the last round began (haveRound: one was seen) and the average gap
	// between rounds (ns, 0 until two were seen). Reset keeps them: the
	// rounds go on at their pace when the window restarts.
	lastRound int64
	haveRound bool
	roundGap  float64

	// body is the centre line's choice between floor and body, mids
	// every held exchange's midpoint (centerbody.go).
	body bodyState
	mids []midPt
	// floor: the rounds' own floor locations, for the floor line's memory
	// (floorcurve.go).
	floor floorState
	// brk: the centre line's misses, for HullConfig.CenterBreaks
	// (centerbreak.go).
	brk breakState
}

// NewHull validates cfg and returns an empty Hull.
func NewHull(cfg HullConfig) (*Hull, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Hull{cfg: cfg}
	if cfg.Center && cfg.CenterAdapt {
		// The span candidates: hulls over the newest 1/2, 1/4, 1/8 of the
		// window, fed the same points and trimmed to their span as a queue
		// (amortized O(1) a sample), so that judging them costs no rebuild.
		cc := cfg
		cc.CenterAdapt, cc.MaxSpan, cc.Window = false, 0, 1<<30
		for range spanCands - 1 {
			h.cands = append(h.cands, &Hull{cfg: cc})
		}
	}
	return h, nil
}

// Reset forgets every sample.
func (h *Hull) Reset() {
	h.have, h.cached, h.centerCached, h.wholeCached = false, false, false, false
	h.up.reset()
	h.low.reset()
	h.mids = h.mids[:0]
	for _, c := range h.cands {
		c.Reset()
	}
	h.spanErr, h.spanSeen, h.spanSel = [spanCands]float64{}, [spanCands]bool{}, 0
	h.body.lines = false // the remembered lines' units are gone with the origin
	h.body.roundTrack.reset()
	h.body.kalman.forget()
	h.floor.reset()
	h.brk.suspect, h.brk.held, h.brk.checks = false, nil, nil
}

// SetMaxSpan changes HullConfig.MaxSpan (ns, 0: no limit; negative values
// are taken as 0); it takes effect at the next AddRound. The engine sets it
// after every round from the period it observes.
func (h *Hull) SetMaxSpan(ns int64) { h.cfg.MaxSpan = max(ns, 0) }

// Len returns the number of samples held (between Window and 2*Window once
// full).
func (h *Hull) Len() int { return len(h.up.pts) }

// rel converts an absolute (x, y) to origin-relative coordinates; ok is
// false when they would leave ±maxRel.
func (h *Hull) rel(x, y int64) (pt, bool) {
	dx, ok1 := satmath.SubChecked(x, h.x0)
	off, ok2 := satmath.SubChecked(y, x)
	dd, ok3 := satmath.SubChecked(off, h.c)
	if !ok1 || !ok2 || !ok3 || dx < -maxRel || dx > maxRel || dd < -maxRel || dd > maxRel {
		return pt{}, false
	}
	return pt{dx, dd}, true
}

// errRange reports a sample outside the hull's exact range.
var errRange = errors.New("sample too far from the window origin (more than 2^46 ns)")

// AddRound adds the exchanges of one round. A wrapped ErrInconsistent means
// that no line separated the sets any more (a drift change or a step): the
// window has been restarted from this round (or, if the round itself is
// inconsistent, from its last sample). Other errors reject the round.
func (h *Hull) AddRound(round []Sample) error {
	if err := ValidateRound(round); err != nil {
		return fmt.Errorf("estimate: Hull.AddRound: %w", err)
	}
	defer h.noteRound(round)
	if !h.have {
		return h.restart(round, nil)
	}
	ups, lows, ok := h.convert(round)
	if !ok {
		return h.farRound(round)
	}
	switch h.judgeBreak(round, ups, lows) {
	case breakHold:
		return nil // a suspect of a frequency break: the next round decides
	case breakDrop:
		return nil // asked for by the checks in a load burst: left out
	case breakCut:
		// A break: the window restarts from the held suspect round.
		held := h.brk.held
		h.brk.held = nil
		if err := h.restart(held, nil); err != nil {
			return err
		}
		if ups, lows, ok = h.convert(round); !ok {
			return h.farRound(round)
		}
	}
	if h.cfg.Center && h.cfg.CenterAdapt {
		h.scoreSpans(ups, lows)
	}
	for i := range ups {
		h.addPoints(ups[i], lows[i])
	}
	h.trim()
	if !h.feasible() {
		return h.restart(round, fmt.Errorf("estimate: Hull.AddRound: %w", ErrInconsistent))
	}
	return nil
}

// farRound handles a round outside the window's exact range: a round far
// newer (a long gap) restarts the window silently, as trimming would have
// dropped the old samples anyway; an offset jump of more than 2^46 ns is a
// step (ErrInconsistent, restarted); a round far older is rejected.
func (h *Hull) farRound(round []Sample) error {
	for i, s := range round {
		for _, x := range []int64{s.LocSend, s.LocRecv} {
			dx, ok := satmath.SubChecked(x, h.x0)
			if ok && dx < -maxRel {
				return fmt.Errorf("estimate: Hull.AddRound: round[%d]: local time %d is more than 2^46 ns before the window: %w", i, x, errRange)
			}
		}
	}
	newer := true
	for _, s := range round {
		dx, ok := satmath.SubChecked(min(s.LocSend, s.LocRecv), h.x0)
		if ok && dx <= maxRel {
			newer = false
		}
	}
	if newer {
		return h.restart(round, nil)
	}
	return h.restart(round, fmt.Errorf("estimate: Hull.AddRound: offset jumped by more than 2^46 ns: window restarted: %w", ErrInconsistent))
}

// convert turns a round into relative UP and LOW points.
func (h *Hull) convert(round []Sample) (ups, lows []pt, ok bool) {
	ups = make([]pt, len(round))
	lows = make([]pt, len(round))
	for i, s := range round {
		u, ok1 := h.rel(s.LocSend, s.SrcRecv)
		l, ok2 := h.rel(s.LocRecv, s.SrcSend)
		if !ok1 || !ok2 {
			return nil, nil, false
		}
		ups[i], lows[i] = u, pt{l.x, -l.d}
	}
	return ups, lows, true
}

func (h *Hull) addPoints(u, l pt) {
	h.cached, h.centerCached, h.wholeCached = false, false, false
	h.up.add(u)
	h.low.add(l)
	if h.cfg.Center && !h.cfg.CenterFloorOnly {
		// The exchange's midpoint, absolute, for the body line.
		// The exchange's round trip less the source's hold: LOW stores -d,
		// so u.d + l.d = (SrcRecv - LocSend) - (SrcSend - LocRecv).
		h.mids = append(h.mids, midPt{x: h.x0 + (u.x+l.x)/2, off: h.c + (u.d-l.d)/2, rtt: u.d + l.d})
	}
	h.newest = max(h.newest, u.x, l.x)
	h.minX = min(h.minX, u.x, l.x)
	for _, c := range h.cands {
		if !c.have {
			c.x0, c.c, c.have, c.newest, c.minX = h.x0, h.c, true, u.x, u.x
		}
		c.addPoints(u, l)
	}
}

// rebaseAfter is how far (ns) the oldest held sample may move past the
// origin before the origin follows it (2^40 ns, about 18 minutes): often
// enough that coordinates stay far inside maxRel, rarely enough that the
// O(window) shift is negligible.
const rebaseAfter = 1 << 40

// trim applies the window's limits after samples were added, then merges
// the hulls: the newest Window samples are kept once 2*Window are held,
// and none older than MaxSpan before the newest (each set keeps at least
// one point).
func (h *Hull) trim() {
	if len(h.up.pts) >= 2*h.cfg.Window {
		h.up.keepNewest(h.cfg.Window)
		h.low.keepNewest(h.cfg.Window)
		h.minX = min(h.up.pts[0].x, h.low.pts[0].x)
		// Move the origin to the oldest kept sample so coordinates stay small.
		h.rebase(h.minX, h.up.pts[0].d)
	}
	if sp := h.cfg.MaxSpan; sp > 0 && h.newest-h.minX > sp {
		cut := h.newest - sp
		h.up.dropBefore(cut)
		h.low.dropBefore(cut)
		h.minX = min(h.up.pts[0].x, h.low.pts[0].x)
		if h.minX > rebaseAfter {
			h.rebase(h.minX, h.up.pts[0].d)
		}
	}
	h.up.merge()
	h.low.merge()
	h.trimMids()
	h.cached, h.centerCached, h.wholeCached = false, false, false
	for k, c := range h.cands {
		if !c.have {
			continue
		}
		cut := h.spanCut(k + 1)
		c.up.dropBefore(cut)
		c.low.dropBefore(cut)
		c.minX = min(c.up.pts[0].x, c.low.pts[0].x)
		c.up.merge()
		c.low.merge()
		c.trimMids()
		c.cached, c.centerCached, c.wholeCached = false, false, false
	}
}

// rebase moves the origin by (dx, dd) in relative units.
func (h *Hull) rebase(dx, dd int64) {
	h.up.shift(dx, dd)
	h.low.shift(dx, -dd) // LOW stores -d
	h.cached, h.centerCached, h.wholeCached = false, false, false
	h.x0 += dx
	h.c += dd
	h.newest -= dx
	h.minX -= dx
	h.body.rebase(dx, dd)
	h.floor.rebase(dx, dd)
	h.brk.rebase(dx, dd)
	for _, c := range h.cands {
		if c.have {
			c.rebase(dx, dd)
		}
	}
}

// restart empties the window and refills it from round (or only its last
// sample if the round alone is not consistent). cause, if not nil, is
// returned; if even the last sample is inconsistent the window stays empty.
func (h *Hull) restart(round []Sample, cause error) error {
	for _, r := range [][]Sample{round, round[len(round)-1:]} {
		h.Reset()
		s := r[0]
		x0 := min(s.LocSend, s.LocRecv)
		off, ok := satmath.SubChecked(s.SrcSend, s.LocRecv)
		if !ok {
			return fmt.Errorf("estimate: Hull.AddRound: round[0]: offset overflows int64")
		}
		h.x0, h.c, h.have = x0, off, true
		h.newest, h.minX = 0, 0
		ups, lows, _ := h.convert(r) // cannot fail: ValidateRound bounds the spread
		for i := range ups {
			h.addPoints(ups[i], lows[i])
		}
		h.trim()
		if h.feasible() {
			return cause
		}
		if cause == nil {
			cause = fmt.Errorf("estimate: Hull.AddRound: round is not consistent with one line: %w", ErrInconsistent)
		}
	}
	h.Reset()
	return fmt.Errorf("%w (its last sample alone is inconsistent: window empty)", cause)
}

// sigma is the total shift: Shift plus the step and wander widening over
// the span.
func (h *Hull) sigma() int64 {
	return h.cfg.Shift + h.drift(h.newest-h.minX)
}

// drift is how far the true offset may leave its tangent dx ns away:
// MaxStep*|dx| + MaxWander*dx^2/2, rounded up, at most maxRel.
func (h *Hull) drift(dx int64) int64 {
	if h.cfg.MaxWander <= 0 && h.cfg.MaxStep <= 0 {
		return 0
	}
	f := math.Abs(float64(dx))
	w := math.Ceil(h.cfg.MaxStep*f + h.cfg.MaxWander*f*f/2)
	if w > maxRel {
		return maxRel
	}
	return int64(w)
}

// skewRange returns the feasible [s-, s+] of d = y - x slopes (the skews)
// as exact rationals (q == 0: infinite), and whether the sets are separable.
func (h *Hull) skewRange() (lo, hi rat, ok bool) {
	if h.cached {
		return h.cacheLo, h.cacheHi, h.cacheOK
	}
	lo, hi, ok = h.computeSkewRange()
	h.cached, h.cacheLo, h.cacheHi, h.cacheOK = true, lo, hi, ok
	return lo, hi, ok
}

func (h *Hull) computeSkewRange() (lo, hi rat, ok bool) {
	lo, hi = rat{-1, 0}, rat{1, 0}
	loF, hiF := math.Inf(-1), math.Inf(1)
	sig2 := 2 * h.sigma()
	for _, l := range h.low.hull {
		for _, u := range h.up.hull {
			den := u.x - l.x
			num := u.d + l.d + sig2 // U - L + 2 sigma (l.d holds -L)
			switch {
			case den > 0:
				// float64 prefilter: num and den are below 2^53, so the
				// quotient is within 1e-16 relative; only near-ties need
				// the exact 128-bit comparison.
				f := float64(num) / float64(den)
				if f > hiF+1e-12*math.Abs(hiF) {
					continue
				}
				if r := (rat{num, den}); cmpRat(r, hi) < 0 {
					hi, hiF = r, f
				}
			case den < 0:
				f := float64(num) / float64(den)
				if f < loF-1e-12*math.Abs(loF) {
					continue
				}
				if r := (rat{-num, -den}); cmpRat(r, lo) > 0 {
					lo, loF = r, f
				}
			default:
				if num < 0 {
					return lo, hi, false
				}
			}
		}
	}
	return lo, hi, cmpRat(lo, hi) <= 0
}

func (h *Hull) feasible() bool {
	_, _, ok := h.skewRange()
	return ok
}

// SkewBounds returns the guaranteed range of the skew (dy/dx - 1); ok is
// false while it is unbounded or the window is empty.
func (h *Hull) SkewBounds() (lo, hi float64, ok bool) {
	if !h.have || len(h.up.pts) == 0 {
		return 0, 0, false
	}
	l, u, ok := h.skewRange()
	if !ok || l.q == 0 || u.q == 0 {
		return 0, 0, false
	}
	return l.float(), u.float(), true
}

// edgeSlope returns the slope of the hull edge of c spanning x (clamped to
// [lo, hi]); beyond the ends it is the matching end of [lo, hi].
func edgeSlope(hull []pt, x int64, lo, hi rat) rat {
	n := len(hull)
	if x < hull[0].x {
		return lo
	}
	if x > hull[n-1].x {
		return hi
	}
	var s rat
	if n == 1 {
		s = rat{0, 1} // the hull's value there does not depend on the slope
	} else {
		i := sort.Search(n, func(i int) bool { return hull[i].x >= x })
		if i == 0 {
			i = 1
		}
		// hull[i-1].x <= x <= hull[i].x
		s = rat{hull[i].d - hull[i-1].d, hull[i].x - hull[i-1].x}
	}
	if cmpRat(s, lo) < 0 {
		return lo
	}
	if cmpRat(s, hi) > 0 {
		return hi
	}
	return s
}

// relBounds returns the exact bounds of d at relative x, without wander.
func (h *Hull) relBounds(x int64) (lo, hi int64, ok bool) {
	sl, sh, ok := h.skewRange()
	if !ok {
		return 0, 0, false
	}
	sig := h.sigma()
	// hi: max over s in [sl, sh] of min_u (U + sig + s (x - xu)); concave in
	// s, maximal at the UP lower hull's edge slope spanning x.
	s := edgeSlope(h.up.hull, x, sl, sh)
	if s.q == 0 {
		return 0, 0, false
	}
	var best satmath.Int128
	for i, u := range h.up.hull {
		v := satmath.Mul(u.d+sig, s.q).Add(satmath.Mul(s.p, x-u.x))
		if i == 0 || v.Cmp(best) < 0 {
			best = v
		}
	}
	hi = best.DivCeil(s.q)
	// lo: min over s of max_l (L - sig + s (x - xl)); convex, minimal at the
	// LOW upper hull's edge slope spanning x (the chain stores -L).
	neg := rat{-sh.p, sh.q}
	negHi := rat{-sl.p, sl.q}
	t := edgeSlope(h.low.hull, x, neg, negHi) // slope of -L
	if t.q == 0 {
		return 0, 0, false
	}
	s = rat{-t.p, t.q}
	for i, l := range h.low.hull {
		v := satmath.Mul(-l.d-sig, s.q).Add(satmath.Mul(s.p, x-l.x))
		if i == 0 || v.Cmp(best) > 0 {
			best = v
		}
	}
	lo = best.DivFloor(s.q)
	return lo, hi, true
}

// Bounds returns the exact guaranteed interval of the source time at local
// time x (Jezequel's [a- + b- x, a+ + b+ x] made exact: the extremes of
// a+b*x over the feasible polygon), widened by MaxStep*|x-newest| + MaxWander*(x-newest)^2/2;
// ok is false while the bounds are unbounded, the window is empty or x is
// more than 2^52 ns from the window.
func (h *Hull) Bounds(x int64) (lo, hi int64, ok bool) {
	if !h.have || len(h.up.pts) == 0 {
		return 0, 0, false
	}
	rx, okx := satmath.SubChecked(x, h.x0)
	if !okx || rx < -maxQuery || rx > maxQuery {
		return 0, 0, false
	}
	dlo, dhi, ok := h.relBounds(rx)
	if !ok {
		return 0, 0, false
	}
	w := h.drift(rx - h.newest)
	base, ok1 := satmath.AddChecked(x, h.c)
	lo, ok2 := satmath.AddChecked(base, dlo-w)
	hi, ok3 := satmath.AddChecked(base, dhi+w)
	if !ok1 || !ok2 || !ok3 || dlo < -maxQuery || dhi > maxQuery {
		return 0, 0, false
	}
	return lo, hi, true
}

// Estimate returns the middle of Bounds(x): the paper's LC estimate.
func (h *Hull) Estimate(x int64) (int64, bool) {
	lo, hi, ok := h.Bounds(x)
	if !ok {
		return 0, false
	}
	return Midpoint(lo, hi), true
}

// Mapping returns the current estimate anchored at the newest sample's local
// time: Y0 and W0 are the middle and half-width of the exact bounds there,
// Skew and SkewErr the middle and half-width of [s-, s+], Wander the
// configured MaxWander. Not Valid while the bounds are unbounded.
func (h *Hull) Mapping() Mapping {
	if !h.have || len(h.up.pts) == 0 {
		return Mapping{}
	}
	sl, sh, ok := h.skewRange()
	if !ok || sl.q == 0 || sh.q == 0 {
		return Mapping{}
	}
	x0 := h.x0 + h.newest
	lo, hi, ok := h.Bounds(x0)
	if !ok {
		return Mapping{}
	}
	mid := Midpoint(lo, hi)
	fl, fh := sl.float(), sh.float()
	skewErr := (fh - fl) / 2
	if h.cfg.Center {
		if cy, cs, ok := h.Center(x0); ok {
			cy = max(lo, min(hi, cy))
			cs = max(fl, min(fh, cs))
			skewErr = max(fh-cs, cs-fl)
			skewErr = skewErr*(1+1e-9) + 1e-15*(1+math.Abs(fl)+math.Abs(fh)) + h.cfg.MaxStep
			return Mapping{X0: x0, Y0: cy, Skew: cs, W0: max(hi-cy, cy-lo) + 1,
				SkewErr: skewErr, Wander: h.cfg.MaxWander, Valid: true}
		}
	}
	// Cover float64 rounding of the slopes so the linear bound stays outside
	// the exact one.
	skewErr = skewErr*(1+1e-9) + 1e-15*(1+math.Abs(fl)+math.Abs(fh)) + h.cfg.MaxStep
	return Mapping{
		X0:      x0,
		Y0:      mid,
		Skew:    (fl + fh) / 2,
		W0:      max(hi-mid, mid-lo) + 1, // +1: Mapping.At rounds the estimate to the ns
		SkewErr: skewErr,
		Wander:  h.cfg.MaxWander,
		Valid:   true,
	}
}

var _ Estimator = (*Hull)(nil)
