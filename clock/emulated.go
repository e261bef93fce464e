package clock

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/gclock/gclock/internal/satmath"
)

// MaxTime bounds every truth time and offset an Emulated accepts: |t| <=
// MaxTime (just under 2^62 ns, 146 years). Keeping truth and offset inside
// ±2^62 leaves headroom so that local times never wrap; they saturate at the
// int64 limits instead.
const MaxTime = 1<<62 - 1

// MaxDriftPPM bounds |drift| (DriftPPM, each step's DriftPPM, and the
// drift plus accumulated wander): 10%, far beyond any quartz, so that the
// local clock always runs forward (rate 1+skew > 0) and the drift term of
// any span fits in an int64.
const MaxDriftPPM = 1e5

// lookBackSegments is how many constant-rate segments an Emulated keeps. It
// bounds memory (O(1) per clock) and sets the look-back window: truth times
// older than the oldest kept segment cannot be answered (see Oldest).
const lookBackSegments = 64

// MinWanderStep is the shortest WanderStep accepted: 1 ms. Every step costs
// a segment, so shorter steps would make long runs slow (an hour at 1 us
// would be 3.6e9 segments per clock), and oscillator wander is a
// phenomenon of seconds and longer anyway.
const MinWanderStep = 1_000_000

// ppmUnits converts ppm to the 1e-18 fixed point used internally (exact for
// ppm values with at most 12 decimals).
const ppmUnits = 1e12

// maxSkewUnits is MaxDriftPPM in 1e-18 units.
const maxSkewUnits = int64(MaxDriftPPM * ppmUnits)

// ErrLookBack is recorded (see Emulated.Err) when a query reaches further
// into the past than the kept segments; the query was answered at the
// oldest kept time instead.
var ErrLookBack = errors.New("query older than the look-back window")

// ErrRange is recorded (see Emulated.Err) when a truth time is outside
// ±MaxTime; it was clamped into the range.
var ErrRange = errors.New("time outside ±MaxTime")

// DriftStep changes a clock's base drift at truth time At (ns) to DriftPPM.
// Accumulated wander is kept across the step.
type DriftStep struct {
	At       int64
	DriftPPM float64
}

// EmuParams are the parameters of an emulated clock. Times are ns.
type EmuParams struct {
	// Origin is the truth time at which the clock starts: Ideal(Origin) =
	// Origin + Offset and wander steps are counted from it. 0 suits the
	// simulator; in the lab set it to Raw.Now() at start.
	Origin int64
	// Offset is local - truth at Origin, |Offset| <= MaxTime.
	Offset int64
	// DriftPPM is the frequency error from Origin on: the local clock
	// advances (1 + DriftPPM*1e-6) ns per truth ns.
	DriftPPM float64
	// Steps change the base drift at given truth times (strictly
	// increasing, not before Origin).
	Steps []DriftStep
	// WanderPPM is the standard deviation of the random-walk change of the
	// frequency per WanderStep, in ppm (0: no wander).
	WanderPPM float64
	// WanderStep is the truth interval between frequency changes; at least
	// MinWanderStep when WanderPPM or SinePPM > 0.
	WanderStep int64
	// SinePPM and SinePeriod (ns) add a sinusoidal frequency change, as a
	// room's temperature cycle drives a crystal: SinePPM*sin(2*pi*(t -
	// Origin)/SinePeriod + phase), the phase drawn from Seed, sampled at
	// every WanderStep boundary. 0: none.
	SinePPM    float64
	SinePeriod int64
	// Granularity: every Read is a multiple of it (0 or 1: none).
	Granularity int64
	// JitterNs is the read jitter: uniform in [-JitterNs, +JitterNs].
	JitterNs int64
	// Seed seeds the wander and the jitter (two independent streams, so the
	// wander does not depend on how often the clock is read).
	Seed int64
}

// Validate checks the parameters and names the first bad field.
func (p EmuParams) Validate() error {
	ppm := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > MaxDriftPPM {
			return fmt.Errorf("clock: EmuParams.%s = %v: must be finite with |v| <= %g ppm", name, v, float64(MaxDriftPPM))
		}
		return nil
	}
	if p.Origin < -MaxTime || p.Origin > MaxTime {
		return fmt.Errorf("clock: EmuParams.Origin = %d: %w", p.Origin, ErrRange)
	}
	if p.Offset < -MaxTime || p.Offset > MaxTime {
		return fmt.Errorf("clock: EmuParams.Offset = %d: %w", p.Offset, ErrRange)
	}
	if err := ppm("DriftPPM", p.DriftPPM); err != nil {
		return err
	}
	prev := p.Origin
	for i, s := range p.Steps {
		if s.At < prev || (i > 0 && s.At == prev) || s.At > MaxTime {
			return fmt.Errorf("clock: EmuParams.Steps[%d].At = %d: must be >= Origin, strictly increasing and <= MaxTime", i, s.At)
		}
		if err := ppm(fmt.Sprintf("Steps[%d].DriftPPM", i), s.DriftPPM); err != nil {
			return err
		}
		prev = s.At
	}
	if math.IsNaN(p.WanderPPM) || math.IsInf(p.WanderPPM, 0) || p.WanderPPM < 0 || p.WanderPPM > MaxDriftPPM {
		return fmt.Errorf("clock: EmuParams.WanderPPM = %v: must be in [0, %g]", p.WanderPPM, float64(MaxDriftPPM))
	}
	if p.WanderStep < 0 || (p.wanders() && p.WanderStep < MinWanderStep) {
		return fmt.Errorf("clock: EmuParams.WanderStep = %d: must be >= %d ns (1 ms) when WanderPPM or SinePPM > 0, and never negative", p.WanderStep, MinWanderStep)
	}
	if math.IsNaN(p.SinePPM) || math.IsInf(p.SinePPM, 0) || p.SinePPM < 0 || p.SinePPM > MaxDriftPPM {
		return fmt.Errorf("clock: EmuParams.SinePPM = %v: must be in [0, %g]", p.SinePPM, float64(MaxDriftPPM))
	}
	if p.SinePPM > 0 && p.SinePeriod < 2*p.WanderStep {
		return fmt.Errorf("clock: EmuParams.SinePeriod = %d: must be at least two WanderSteps (%d ns) when SinePPM > 0", p.SinePeriod, 2*p.WanderStep)
	}
	if p.Granularity < 0 || p.Granularity > MaxTime {
		return fmt.Errorf("clock: EmuParams.Granularity = %d: must be in [0, MaxTime]", p.Granularity)
	}
	if p.JitterNs < 0 || p.JitterNs > MaxTime/2 {
		return fmt.Errorf("clock: EmuParams.JitterNs = %d: must be in [0, MaxTime/2]", p.JitterNs)
	}
	return nil
}

// wanders reports whether the frequency changes every WanderStep.
func (p *EmuParams) wanders() bool { return p.WanderPPM > 0 || p.SinePPM > 0 }

// sineUnits is the sinusoidal frequency term at truth t, in 1e-18 units.
func (g *gen) sineUnits(p *EmuParams, t int64) int64 {
	if p.SinePPM <= 0 {
		return 0
	}
	ph := 2*math.Pi*float64((t-p.Origin)%p.SinePeriod)/float64(p.SinePeriod) + g.sinePhase
	return int64(math.Round(p.SinePPM * math.Sin(ph) * ppmUnits))
}

// segment is a stretch of truth time at constant rate: from truth t0 the
// local time is l0 + lf*1e-18 + (t-t0)*(1 + k*1e-18), all exact.
type segment struct {
	t0, l0, lf, k int64
}

// Emulated is a local clock derived from truth time: offset, drift, drift
// steps, random-walk wander, granularity and read jitter. It is
// deterministic for a seed and uses O(1) memory however long it runs: the
// wander is generated lazily, segment by segment, as truth time advances,
// and only the newest segments are kept.
//
// Queries (Ideal, Read, TruthAt, Skew) may go back in truth time, but only
// as far as Oldest: the last 64 segment boundaries (wander steps and drift
// steps), and without limit while the first segment is still kept. A query
// further back, or outside ±MaxTime, is answered at the nearest answerable
// time and the error is recorded (Err); evaluators should check Err at the
// end of a run. An Emulated is not safe for concurrent use (On's Clock is).
type Emulated struct {
	p         EmuParams
	ring      []segment // circular, newest at head
	head      int
	firstKept bool // ring still holds the first segment, which extends to -inf
	gen       gen  // generator of the segments after the newest
	jrng      *rand.Rand
	lastRead  int64
	haveRead  bool
	err       error
}

// NewEmulated validates p and builds the clock.
func NewEmulated(p EmuParams) (*Emulated, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.Steps = append([]DriftStep(nil), p.Steps...)
	e := &Emulated{
		p:         p,
		ring:      make([]segment, 0, 4),
		firstKept: true,
		jrng:      rand.New(rand.NewPCG(uint64(p.Seed), 0xd1b54a32d192ed03)),
	}
	g := &e.gen
	g.nextWander = math.MaxInt64
	g.baseK = toUnits(p.DriftPPM)
	g.pcg = *rand.NewPCG(uint64(p.Seed), 0x9e3779b97f4a7c15)
	if p.SinePPM > 0 {
		// From its own stream, so that adding a sine leaves the wander's
		// draws as they were.
		g.sinePhase = 2 * math.Pi * float64(rand.NewPCG(uint64(p.Seed), 0x5151e).Uint64()>>11) / (1 << 53)
	}
	if p.wanders() {
		g.nextWander = satmath.Add(p.Origin, p.WanderStep)
		if g.nextWander > MaxTime {
			g.nextWander = math.MaxInt64
		}
	}
	for g.stepIdx < len(p.Steps) && p.Steps[g.stepIdx].At == p.Origin {
		g.baseK = toUnits(p.Steps[g.stepIdx].DriftPPM)
		g.stepIdx++
	}
	g.cur = segment{t0: p.Origin, l0: p.Origin + p.Offset, k: max(-maxSkewUnits, min(maxSkewUnits, g.baseK+g.sineUnits(&p, p.Origin)))}
	e.ring = append(e.ring, g.cur)
	return e, nil
}

// toUnits converts ppm to 1e-18 units, rounded.
func toUnits(ppm float64) int64 { return int64(math.Round(ppm * ppmUnits)) }

// Params returns the clock's parameters (for evaluators).
func (e *Emulated) Params() EmuParams { return e.p }

// Err returns the first recorded query error (ErrLookBack or ErrRange,
// wrapped with the offending time), or nil.
func (e *Emulated) Err() error { return e.err }

// Oldest returns the earliest truth time the clock can still answer
// exactly; math.MinInt64 while the first segment is kept.
func (e *Emulated) Oldest() int64 {
	if e.firstKept {
		return math.MinInt64
	}
	return e.ring[e.oldestIdx()].t0
}

func (e *Emulated) record(err error) {
	if e.err == nil {
		e.err = err
	}
}

func (e *Emulated) newest() *segment { return &e.ring[e.head] }

func (e *Emulated) oldestIdx() int {
	if len(e.ring) < lookBackSegments {
		return 0
	}
	return (e.head + 1) % lookBackSegments
}

// gen generates segments: the newest one and the state that decides the
// next. It is a plain value, so TruthAt can look ahead on a copy without
// committing anything.
type gen struct {
	cur        segment
	nextWander int64 // truth of the next wander change; math.MaxInt64: none
	stepIdx    int
	baseK      int64
	wanderK    int64
	sinePhase  float64
	pcg        rand.PCG // the wander's random stream
}

// boundary is the truth time at which the current segment ends.
func (g *gen) boundary(p *EmuParams) int64 {
	b := g.nextWander
	if g.stepIdx < len(p.Steps) && p.Steps[g.stepIdx].At < b {
		b = p.Steps[g.stepIdx].At
	}
	return b
}

// norm draws a standard normal deviate from the wander stream (Box-Muller).
func (g *gen) norm() float64 {
	u1 := float64(g.pcg.Uint64()>>11+1) / (1 << 53) // (0, 1]
	u2 := float64(g.pcg.Uint64()>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// advance starts the next segment at the boundary.
func (g *gen) advance(p *EmuParams) {
	cur := g.cur
	b := g.boundary(p)
	dt := b - cur.t0
	q, r := satmath.MulAddFloorDiv(dt, cur.k, cur.lf, fracUnit)
	next := segment{t0: b, l0: satmath.Add(satmath.Add(cur.l0, dt), q), lf: r}
	if b == g.nextWander {
		if p.WanderPPM > 0 {
			g.wanderK += int64(math.Round(g.norm() * p.WanderPPM * ppmUnits))
		}
		g.wanderK = max(-2*maxSkewUnits, min(2*maxSkewUnits, g.wanderK))
		g.nextWander = satmath.Add(b, p.WanderStep)
		if g.nextWander > MaxTime {
			g.nextWander = math.MaxInt64
		}
	}
	for g.stepIdx < len(p.Steps) && p.Steps[g.stepIdx].At == b {
		g.baseK = toUnits(p.Steps[g.stepIdx].DriftPPM)
		g.stepIdx++
	}
	next.k = max(-maxSkewUnits, min(maxSkewUnits, g.baseK+g.wanderK+g.sineUnits(p, b)))
	g.cur = next
}

// boundary is the truth time at which the newest segment ends.
func (e *Emulated) boundary() int64 { return e.gen.boundary(&e.p) }

// advance commits the next segment to the ring.
func (e *Emulated) advance() {
	e.gen.advance(&e.p)
	next := e.gen.cur
	if len(e.ring) < lookBackSegments {
		e.ring = append(e.ring, next)
		e.head = len(e.ring) - 1
		return
	}
	e.head = (e.head + 1) % lookBackSegments
	e.ring[e.head] = next
	e.firstKept = false
}

// clampTruth keeps t inside ±MaxTime, recording ErrRange.
func (e *Emulated) clampTruth(t int64) int64 {
	if t > MaxTime || t < -MaxTime {
		e.record(fmt.Errorf("clock: truth %d: %w", t, ErrRange))
		return max(-MaxTime, min(MaxTime, t))
	}
	return t
}

// find returns the segment holding truth t (advancing as needed) and t,
// clamped to what can be answered.
func (e *Emulated) find(t int64) (segment, int64) {
	t = e.clampTruth(t)
	if t >= e.newest().t0 {
		for t >= e.boundary() {
			e.advance()
		}
		return *e.newest(), t
	}
	n := len(e.ring)
	for i := 1; i < n; i++ {
		s := e.ring[(e.head-i+n)%n]
		if s.t0 <= t {
			return s, t
		}
	}
	s := e.ring[e.oldestIdx()]
	if e.firstKept {
		return s, t
	}
	e.record(fmt.Errorf("clock: truth %d before %d: %w", t, s.t0, ErrLookBack))
	return s, s.t0
}

// eval is the (floored) local time of segment s at truth t.
func eval(s segment, t int64) int64 {
	dt := t - s.t0
	q, _ := satmath.MulAddFloorDiv(dt, s.k, s.lf, fracUnit)
	return satmath.Add(satmath.Add(s.l0, dt), q)
}

// Ideal returns the continuous local time at truth t (floored to the ns),
// without granularity or jitter: the evaluator's truth for this clock.
// It is non-decreasing in t.
func (e *Emulated) Ideal(t int64) int64 {
	s, t := e.find(t)
	return eval(s, t)
}

// Peek is Ideal without committing anything: a time after the newest
// segment is evaluated on a copy of the generator, so that looking minutes
// ahead (a daemon extrapolating its bounds) does not push the present out
// of the look-back window. Same value as Ideal (the generator is
// deterministic); it costs one step per WanderStep ahead.
func (e *Emulated) Peek(t int64) int64 {
	t = e.clampTruth(t)
	if t < e.boundary() {
		return e.Ideal(t)
	}
	g := e.gen
	for t >= g.boundary(&e.p) {
		g.advance(&e.p)
	}
	return eval(g.cur, t)
}

// MaxDeviation returns how far Ideal strays, over truth [t0, t2], from the
// line through (t0, Ideal(t0)) and (t1, Ideal(t1)), rounded up: the error
// of treating this clock as linear over that span (a daemon whose local
// clock is emulated on top of CLOCK_MONOTONIC_RAW publishes a linear
// raw->global mapping and must widen it by this). Ideal is piecewise
// linear, so the maximum is at t0, t2 or a segment boundary between them:
// the result is exact. Nothing is committed (a copy of the generator walks
// ahead); t0 < t1 <= t2.
func (e *Emulated) MaxDeviation(t0, t1, t2 int64) int64 {
	if !(t0 < t1 && t1 <= t2) {
		return 0
	}
	y0, y1 := e.Peek(t0), e.Peek(t1)
	return e.maxDeviation(t0, y0, float64(y1-y0)/float64(t1-t0), t2)
}

// Tangent returns Ideal at t0 (not committing a time after the newest
// segment, as Peek) and the clock's rate there, local ns per truth ns: the
// line along which one who knows the clock's present but not its future
// (its wander to come, a frequency step to come) extrapolates it. For the
// daemon's page (a line from CLOCK_MONOTONIC_RAW to global time): a line
// through a point minutes ahead bent the page's slope toward a frequency
// step before the step came.
func (e *Emulated) Tangent(t0 int64) (y0 int64, rate float64) {
	t0 = e.clampTruth(t0)
	if t0 < e.boundary() {
		s, t := e.find(t0)
		return eval(s, t), 1 + float64(s.k)/fracUnit
	}
	g := e.gen
	for t0 >= g.boundary(&e.p) {
		g.advance(&e.p)
	}
	return eval(g.cur, t0), 1 + float64(g.cur.k)/fracUnit
}

// MaxDeviationTangent is MaxDeviation from the tangent at t0 (Tangent)
// over [t0, t2], rounded up; nothing is committed.
func (e *Emulated) MaxDeviationTangent(t0, t2 int64) int64 {
	if !(t0 < t2) {
		return 0
	}
	y0, rate := e.Tangent(t0)
	return e.maxDeviation(t0, y0, rate, t2)
}

// maxDeviation is how far Ideal strays over [t0, t2] from the line through
// (t0, y0) with the given slope (local ns per truth ns), rounded up.
func (e *Emulated) maxDeviation(t0, y0 int64, slope float64, t2 int64) int64 {
	dev := func(t, y int64) float64 { return math.Abs(float64(y-y0) - slope*float64(t-t0)) }
	worst := dev(t2, e.Peek(t2))
	// Walk the boundaries from t0 on a copy of the generator (or the ring
	// for the part already committed).
	s, _ := e.find(t0)
	g := e.gen
	if s.t0 != g.cur.t0 {
		// t0 is in a committed segment older than the newest: visit the
		// ring's later boundaries first.
		n := len(e.ring)
		for i := n - 1; i >= 1; i-- {
			seg := e.ring[(e.head-i+n)%n]
			if seg.t0 > t0 && seg.t0 <= t2 {
				worst = max(worst, dev(seg.t0, eval(seg, seg.t0)))
			}
		}
		worst = max(worst, dev(g.cur.t0, eval(g.cur, g.cur.t0)))
	}
	for {
		b := g.boundary(&e.p)
		if b == math.MaxInt64 || b > t2 {
			break
		}
		g.advance(&e.p)
		worst = max(worst, dev(b, eval(g.cur, b)))
	}
	return int64(math.Ceil(worst)) + 1
}

// Skew returns the clock's rate error at truth t (local ns per truth ns,
// minus 1). For evaluators only.
func (e *Emulated) Skew(t int64) float64 {
	s, _ := e.find(t)
	return float64(s.k) / fracUnit
}

// Read returns what the node's software sees at truth t: Ideal plus jitter,
// quantized down to the granularity, and never less than the previous Read.
func (e *Emulated) Read(t int64) int64 {
	v := e.Ideal(t)
	if j := e.p.JitterNs; j > 0 {
		v = satmath.Add(v, e.jrng.Int64N(2*j+1)-j)
	}
	if g := e.p.Granularity; g > 1 {
		m := v - floorDiv(v, g)*g
		if v-m > v { // would wrap below MinInt64
			v += g - m
		} else {
			v -= m
		}
	}
	if e.haveRead && v < e.lastRead {
		v = e.lastRead
	}
	e.lastRead, e.haveRead = v, true
	return v
}

// TruthAt returns the first truth time at which Ideal reaches local: the
// inverse of Ideal (Ideal(TruthAt(l)) >= l > Ideal(TruthAt(l)-1)). The
// simulator turns a node's local timer deadline into truth time with it.
// A deadline in the future is found on a copy of the wander generator, so
// it costs one step per WanderStep ahead but never uses up the look-back.
func (e *Emulated) TruthAt(local int64) int64 {
	if local > e.newest().l0 {
		// Look ahead on a copy of the generator: a far deadline must not
		// push the present out of the look-back window.
		g := e.gen
		for {
			b := g.boundary(&e.p)
			if b == math.MaxInt64 || eval(g.cur, b) >= local {
				break
			}
			g.advance(&e.p)
		}
		s := g.cur
		hi := g.boundary(&e.p)
		if hi == math.MaxInt64 {
			hi = MaxTime
			if eval(s, hi) < local {
				e.record(fmt.Errorf("clock: local %d after truth MaxTime: %w", local, ErrRange))
				return MaxTime
			}
		}
		return search(s, s.t0, hi, local)
	}
	n := len(e.ring)
	for i := 1; i < n; i++ {
		s := e.ring[(e.head-i+n)%n]
		if s.l0 < local {
			hi := e.ring[(e.head-i+1+n)%n].t0
			return search(s, s.t0, hi, local)
		}
	}
	s := e.ring[e.oldestIdx()]
	if !e.firstKept {
		e.record(fmt.Errorf("clock: local %d before the look-back window (truth %d): %w", local, s.t0, ErrLookBack))
		return s.t0
	}
	lo := int64(-MaxTime)
	if eval(s, lo) >= local {
		e.record(fmt.Errorf("clock: local %d before truth -MaxTime: %w", local, ErrRange))
		return lo
	}
	return search(s, lo, s.t0, local)
}

// search returns the smallest t in (lo, hi] with eval(s, t) >= local, given
// eval(s, lo) < local <= eval(s, hi). It starts from a float64 guess on
// segment-relative values and brackets it, so it usually takes a few steps.
func search(s segment, lo, hi, local int64) int64 {
	rate := 1 + float64(s.k)/fracUnit
	rel := float64(local-eval(s, s.t0)) / rate
	g := lo + 1
	if rel > float64(hi-s.t0) {
		g = hi
	} else if c := s.t0 + int64(rel); c > lo && c <= hi {
		g = c
	}
	if eval(s, g) >= local {
		hi = g
		for step := int64(1); ; step *= 2 {
			c := g - step
			if step >= g-lo || c <= lo {
				break
			}
			if eval(s, c) < local {
				lo = c
				break
			}
			hi = c
		}
	} else {
		lo = g
		for step := int64(1); ; step *= 2 {
			c := g + step
			if step >= hi-g || c >= hi {
				break
			}
			if eval(s, c) >= local {
				hi = c
				break
			}
			lo = c
		}
	}
	for hi-lo > 1 {
		m := lo + (hi-lo)/2
		if eval(s, m) >= local {
			hi = m
		} else {
			lo = m
		}
	}
	return hi
}

// On returns a Clock that reads e at base's time: an Emulated on top of Raw
// is a lab node's clock. The returned Clock serializes its calls, so it is
// safe for concurrent use as long as e is not used directly at the same
// time.
func (e *Emulated) On(base Clock) Clock {
	var mu sync.Mutex
	return Func(func() int64 {
		t := base.Now()
		mu.Lock()
		defer mu.Unlock()
		return e.Read(t)
	})
}

// Knot is where an emulated clock's rate changes: from truth T until the
// next knot its ideal local time is Local + (t-T)*(1+Skew), to within a
// nanosecond (Local is floored; the dropped fraction is under 1 ns).
type Knot struct {
	T, Local int64
	Skew     float64
}

// Knots returns p's clock as its rate changes from p.Origin up to truth
// to (the first knot is at Origin, then one per wander step or drift step
// up to and including to): a table another program can evaluate, as the
// lab's clock shim does for chronyd. The clock before Origin is the first
// knot's line, as Ideal extends it. At most maxKnots knots are made; more
// is an error naming the count, not a silently short table.
func (p EmuParams) Knots(to int64, maxKnots int) ([]Knot, error) {
	e, err := NewEmulated(p)
	if err != nil {
		return nil, err
	}
	g := e.gen
	knot := func(s segment) Knot { return Knot{T: s.t0, Local: eval(s, s.t0), Skew: float64(s.k) / fracUnit} }
	out := []Knot{knot(g.cur)}
	for {
		b := g.boundary(&p)
		if b == math.MaxInt64 || b > to {
			return out, nil
		}
		if len(out) >= maxKnots {
			return nil, fmt.Errorf("clock: knots up to truth %d: more than %d (wander step %d ns)", to, maxKnots, p.WanderStep)
		}
		g.advance(&p)
		out = append(out, knot(g.cur))
	}
}
