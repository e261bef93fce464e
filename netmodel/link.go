package netmodel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/internal/quantile"
)

// Dist is the distribution of a link's jitter.
type Dist uint8

// Jitter distributions. Every one is centred on the base delay (its mean is
// the base delay before clamping at zero) and Jitter is its spread.
const (
	// DistNone: no jitter, every frame takes exactly the base delay.
	DistNone Dist = iota
	// DistUniform: base + U(-Jitter, +Jitter).
	DistUniform
	// DistNormal: base + Jitter*N(0,1); Jitter is the standard deviation.
	DistNormal
	// DistPareto: base + Jitter*Z where Z is a Pareto(alpha=3) variable
	// standardised to mean 0 and standard deviation 1, as netem's pareto
	// table is: a hard floor at base-0.577*Jitter and a heavy right tail.
	// It is the package's one pareto (a Lomax tail of mean 0.577*Jitter on
	// that floor; see the package documentation).
	DistPareto
	// DistExponential: base + Jitter*(E - 1), E an exponential variable of
	// mean 1: a hard floor at base-Jitter and a light tail (a queue that is
	// often empty); Jitter is the standard deviation.
	DistExponential
	// DistBimodal: two paths or interrupt coalescing: with probability 1/2
	// base - Jitter, else base + Jitter, each with normal jitter of
	// standard deviation Jitter/4. No sharp floor; mean base.
	DistBimodal
)

// paretoAlpha is the Pareto shape used by DistPareto. 3 is the smallest
// integer shape with a finite variance, so Jitter can be a standard
// deviation, and it keeps the heavy tail that makes pareto links hard.
const paretoAlpha = 3.0

// paretoTailPerJitter is the mean of the Lomax tail of a DistPareto model
// per unit of Jitter: for Pareto(xm=1, alpha), (mean - 1)/sd with mean
// alpha/(alpha-1) and sd sqrt(alpha/((alpha-1)^2 (alpha-2))), which is
// sqrt((alpha-2)/alpha) = 1/sqrt(3) for alpha 3. It is also how far below
// the base delay the floor lies, per unit of Jitter.
var paretoTailPerJitter = math.Sqrt((paretoAlpha - 2) / paretoAlpha)

// String names the distribution as the link syntax spells it.
func (d Dist) String() string {
	switch d {
	case DistUniform:
		return "uniform"
	case DistNormal:
		return "normal"
	case DistPareto:
		return "pareto"
	case DistExponential:
		return "exponential"
	case DistBimodal:
		return "bimodal"
	default:
		return "fixed"
	}
}

// Model is one direction of an emulated link: what happens to each frame
// sent that way. The zero Model forwards every frame at once.
type Model struct {
	Delay   time.Duration // base one-way delay (the mean of the jitter distribution)
	Jitter  time.Duration // spread of the distribution (see Dist)
	Dist    Dist
	Loss    float64 // probability a frame is dropped
	Dup     float64 // probability a frame is delivered twice (each copy with its own delay)
	Reorder float64 // probability a frame skips the delay and overtakes the frames before it (netem's reorder)
}

// Validate reports the first field out of range.
func (m Model) Validate() error {
	switch {
	case m.Delay < 0:
		return fmt.Errorf("delay %v: must not be negative", m.Delay)
	case m.Jitter < 0:
		return fmt.Errorf("jitter %v: must not be negative", m.Jitter)
	case m.Delay > time.Second:
		return fmt.Errorf("delay %v: more than 1s is not a LAN link", m.Delay)
	case m.Jitter > time.Second:
		return fmt.Errorf("jitter %v: more than 1s is not a LAN link", m.Jitter)
	case m.Dist > DistBimodal:
		return fmt.Errorf("distribution %d: unknown", m.Dist)
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", m.Loss}, {"dup", m.Dup}, {"reorder", m.Reorder}} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("%s %v: must be a probability in [0,1]", p.name, p.v)
		}
	}
	return nil
}

// Plan decides the fate of one frame: it appends to dst the delay in ns of
// each copy to deliver (none when the frame is lost, two when duplicated)
// and returns the extended slice. It reads no clock; r is the only source of
// randomness, so a seeded r makes a link reproducible.
func (m Model) Plan(r *rand.Rand, dst []int64) []int64 {
	copies := fate(r, m.Loss, m.Dup)
	for range copies {
		if m.Reorder > 0 && r.Float64() < m.Reorder {
			dst = append(dst, 0)
			continue
		}
		dst = append(dst, m.Sample(r))
	}
	return dst
}

// Sample draws one delay in ns from the delay distribution (no loss, no
// duplication, no reordering), in [0, MaxDelay].
func (m Model) Sample(r *rand.Rand) int64 {
	d := float64(m.Delay)
	j := float64(m.Jitter)
	switch m.Dist {
	case DistUniform:
		d += j * (2*r.Float64() - 1)
	case DistNormal:
		d += j * r.NormFloat64()
	case DistPareto:
		// The package's pareto: a Lomax tail of mean t on a floor at d - t.
		t := j * paretoTailPerJitter
		d += lomax(r, t, paretoAlpha) - t
	case DistExponential:
		d += j * (r.ExpFloat64() - 1)
	case DistBimodal:
		if r.Uint64()&1 == 0 {
			d -= j
		} else {
			d += j
		}
		d += j / 4 * r.NormFloat64()
	}
	if !(d > 0) {
		return 0
	}
	if !(d < float64(MaxDelay)) {
		return MaxDelay
	}
	return int64(math.Round(d))
}

// Loaded is the model under a load that multiplies its spread by k (a
// phase's TailScale): the waiting above the floor grows, the floor stays
// (a busy network queues more; it never carries a frame faster than its
// path). Pareto, exponential and uniform delays keep their lower end and
// stretch what lies above it; normal and two-mode jitter, which have no
// floor, widen about their mean. Before this, every shape widened about
// its configured delay, so a pareto link at 4x load had its floor 1.7
// jitters lower, a path that had got faster, and the centre line's
// frequency breaks (estimate/centerbreak.go) took the bursts for breaks.
func (m Model) Loaded(k float64) Model {
	if !(k > 0) || k == 1 {
		return m
	}
	below, _ := m.floorBelow() // the floor's distance below Delay, before and after
	m.Jitter = time.Duration(float64(m.Jitter) * k)
	m.Delay += time.Duration(below * (k - 1))
	return m
}

// floorBelow is how far (ns) the distribution's lower end lies below
// Delay, and whether it has one: none for normal and two-mode jitter.
func (m Model) floorBelow() (float64, bool) {
	switch m.Dist {
	case DistNone:
		return 0, true
	case DistUniform, DistExponential:
		return float64(m.Jitter), true
	case DistPareto:
		return float64(m.Jitter) * paretoTailPerJitter, true
	}
	return 0, false
}

// Floor is the least delay Plan can give a frame: the distribution's lower
// end (0 for normal jitter, whose tail is unbounded, and for a model that
// reorders, whose held-back frames skip the delay).
func (m Model) Floor() time.Duration {
	if m.Reorder > 0 {
		return 0
	}
	below, ok := m.floorBelow()
	f := float64(m.Delay) - below
	if !ok || !(f > 0) {
		return 0
	}
	return time.Duration(math.Floor(f))
}

// Floor is the least delay of either direction (Model.Floor).
func (l Link) Floor() time.Duration {
	if l.Direct {
		return 0
	}
	return min(l.Forward.Floor(), l.Reverse.Floor())
}

// Quantiles returns the delay quantiles (each q in [0,1]) of the model's
// delay distribution, estimated from n draws of a generator seeded with
// seed. It is what a validation compares the delivered delays with.
func (m Model) Quantiles(n int, seed uint64, qs ...float64) []int64 {
	if n < 1 {
		n = 1
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := make([]int64, n)
	for i := range s {
		s[i] = m.Sample(r)
	}
	return quantile.Of(s, qs...)
}

// String spells the model in the syntax ParseLink reads.
func (m Model) String() string {
	var b strings.Builder
	if m.Dist == DistNone {
		fmt.Fprintf(&b, "fixed:%v", m.Delay)
	} else {
		fmt.Fprintf(&b, "%s:%v:%v", m.Dist, m.Delay, m.Jitter)
	}
	if m.Loss > 0 {
		fmt.Fprintf(&b, ",loss=%g", m.Loss)
	}
	if m.Dup > 0 {
		fmt.Fprintf(&b, ",dup=%g", m.Dup)
	}
	if m.Reorder > 0 {
		fmt.Fprintf(&b, ",reorder=%g", m.Reorder)
	}
	return b.String()
}

// Link is a link of the lab: one Model per direction. Forward applies to
// frames from a lower-numbered host to a higher-numbered one (h0 to h1),
// Reverse to the other way; their difference in Delay is the asymmetry.
// Direct means no switch at all: two hosts joined by one veth pair, the
// models unused.
type Link struct {
	Forward Model
	Reverse Model
	Direct  bool
}

// Model returns the model for a frame from host in to host out.
func (l Link) Model(in, out int) Model {
	if in < out {
		return l.Forward
	}
	return l.Reverse
}

// Validate reports the first invalid direction.
func (l Link) Validate() error {
	if err := l.Forward.Validate(); err != nil {
		return fmt.Errorf("link forward: %w", err)
	}
	if err := l.Reverse.Validate(); err != nil {
		return fmt.Errorf("link reverse: %w", err)
	}
	return nil
}

// String spells the link in the syntax ParseLink reads.
func (l Link) String() string {
	if l.Direct {
		return "direct"
	}
	if l.Forward == l.Reverse {
		return l.Forward.String()
	}
	return l.Forward.String() + "/" + l.Reverse.String()
}

// ErrLinkSyntax is wrapped by every ParseLink error.
var ErrLinkSyntax = errors.New("bad link")

// ParseLink reads a link description:
//
//	direct                          two hosts on one veth pair, no switch
//	fixed:100us                     100 us each way, no jitter
//	pareto:100us:50us               100 us +- 50 us pareto each way
//	normal:100us:10us,loss=1%       options apply to both directions
//	normal:100us:10us/normal:120us:10us   forward (h0->h1) / reverse
//	pareto:100us:50us,asym=20us     forward +10 us, reverse -10 us
//
// Distributions: fixed (or none), uniform, normal, pareto, exponential,
// bimodal (see Dist). Options: loss,
// dup, reorder (a fraction like 0.01 or a percentage like 1%), asym (a
// duration; forward minus reverse base delay).
func ParseLink(s string) (Link, error) {
	s = strings.TrimSpace(s)
	if s == "direct" {
		return Link{Direct: true}, nil
	}
	if s == "" {
		return Link{}, fmt.Errorf("%w: empty (want e.g. pareto:100us:50us)", ErrLinkSyntax)
	}
	parts := strings.Split(s, ",")
	dirs := strings.Split(parts[0], "/")
	if len(dirs) > 2 {
		return Link{}, fmt.Errorf("%w: %q: at most two directions separated by /", ErrLinkSyntax, parts[0])
	}
	fwd, err := parseModel(dirs[0])
	if err != nil {
		return Link{}, err
	}
	rev := fwd
	if len(dirs) == 2 {
		if rev, err = parseModel(dirs[1]); err != nil {
			return Link{}, err
		}
	}
	l := Link{Forward: fwd, Reverse: rev}
	for _, opt := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(opt), "=")
		if !ok {
			return Link{}, fmt.Errorf("%w: option %q: want name=value", ErrLinkSyntax, opt)
		}
		switch k {
		case "loss", "dup", "reorder":
			p, err := parseProb(v)
			if err != nil {
				return Link{}, fmt.Errorf("%w: option %s: %w", ErrLinkSyntax, k, err)
			}
			for _, m := range []*Model{&l.Forward, &l.Reverse} {
				switch k {
				case "loss":
					m.Loss = p
				case "dup":
					m.Dup = p
				case "reorder":
					m.Reorder = p
				}
			}
		case "asym":
			d, err := time.ParseDuration(v)
			if err != nil {
				return Link{}, fmt.Errorf("%w: option asym: %w", ErrLinkSyntax, err)
			}
			l.Forward.Delay += d / 2
			l.Reverse.Delay -= d - d/2
		default:
			return Link{}, fmt.Errorf("%w: option %q: unknown (want loss, dup, reorder or asym)", ErrLinkSyntax, k)
		}
	}
	if err := l.Validate(); err != nil {
		return Link{}, fmt.Errorf("%w: %q: %w", ErrLinkSyntax, s, err)
	}
	return l, nil
}

func parseModel(s string) (Model, error) {
	f := strings.Split(strings.TrimSpace(s), ":")
	var m Model
	switch f[0] {
	case "fixed", "none":
		m.Dist = DistNone
	case "uniform":
		m.Dist = DistUniform
	case "normal":
		m.Dist = DistNormal
	case "pareto":
		m.Dist = DistPareto
	case "exponential":
		m.Dist = DistExponential
	case "bimodal":
		m.Dist = DistBimodal
	default:
		return Model{}, fmt.Errorf("%w: distribution %q: unknown (want fixed, uniform, normal, pareto, exponential or bimodal)", ErrLinkSyntax, f[0])
	}
	want := 3
	if m.Dist == DistNone {
		want = 2
	}
	if len(f) != want {
		return Model{}, fmt.Errorf("%w: %q: want %s", ErrLinkSyntax, s, map[bool]string{true: "fixed:DELAY", false: f[0] + ":DELAY:JITTER"}[m.Dist == DistNone])
	}
	var err error
	if m.Delay, err = time.ParseDuration(f[1]); err != nil {
		return Model{}, fmt.Errorf("%w: %q: delay: %w", ErrLinkSyntax, s, err)
	}
	if want == 3 {
		if m.Jitter, err = time.ParseDuration(f[2]); err != nil {
			return Model{}, fmt.Errorf("%w: %q: jitter: %w", ErrLinkSyntax, s, err)
		}
	}
	return m, nil
}

func parseProb(v string) (float64, error) {
	scale := 1.0
	if t, ok := strings.CutSuffix(v, "%"); ok {
		v, scale = t, 0.01
	}
	p, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, err
	}
	p *= scale
	if !(p >= 0 && p <= 1) {
		return 0, fmt.Errorf("%v: not in [0,1]", p)
	}
	return p, nil
}
