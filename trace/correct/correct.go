package correct

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
	"github.com/gclock/gclock/trace/format"
)

// Method is a correction method.
type Method string

// Methods.
const (
	Auto   Method = "auto"   // the best the data allows, per process
	Linear Method = "linear" // regression over all exchanges (2 sessions)
	Spline Method = "spline" // monotone spline through condensed sessions (3+)
	Daemon Method = "daemon" // the daemon's recorded mappings
	Offset Method = "offset" // one session: offset only
	None   Method = "none"   // identity (the reference)
)

// ErrNoSyncData is wrapped by the errors of an explicit method the trace's
// sync data cannot support (daemon without mappings, linear without two
// sessions, ...): the fix is another -method, not a damaged file.
var ErrNoSyncData = errors.New("not enough sync data for this method")

// DropFrac is the share of exchanges with the highest round trip ignored by
// the linear fit: seed 001 drops 10% because those most likely waited for a
// descheduled process.
const DropFrac = 0.1

// ParseMethod checks a method name.
func ParseMethod(s string) (Method, error) {
	switch m := Method(strings.ToLower(s)); m {
	case Auto, Linear, Spline, Daemon, Offset, None:
		return m, nil
	}
	return "", fmt.Errorf("unknown correction method %q (want auto, linear, spline, daemon, offset or none)", s)
}

// Mapper maps local time to global time; it is non-decreasing.
type Mapper interface {
	Global(local int64) int64
}

// Choice reports how one process was corrected.
type Choice struct {
	Proc     uint32
	Name     string
	Method   Method
	Reason   string
	Sessions int     // sessions used
	Samples  int     // exchanges in them
	Mappings int     // daemon mappings used
	SharedOf int64   // the process whose sessions were borrowed (SYNCED-HOST), -1 if none
	SkewPPM  float64 // the estimated rate error of the local clock against global time
	// Bounded says that the mapper is a Bounder whose bounds hold: the
	// daemon's mappings, or sessions whose exchanges fit one rate
	// (SessionMapper). NoBound says why a session-based correction has none.
	Bounded bool
	NoBound string
}

// Identity maps local to local (the reference).
type Identity struct{}

// Global returns local.
func (Identity) Global(local int64) int64 { return local }

// LinearMapper applies an estimate.Mapping's point estimate.
type LinearMapper struct{ M estimate.Mapping }

// Global returns Y0 + dx + round(Skew*dx), dx = local - X0.
func (l LinearMapper) Global(local int64) int64 {
	dx := local - l.M.X0
	return l.M.Y0 + dx + int64(math.Round(l.M.Skew*float64(dx)))
}

// SplineMapper applies a monotone spline through condensed sessions.
type SplineMapper struct{ S *estimate.Spline }

// Global returns the spline's value at local.
func (s SplineMapper) Global(local int64) int64 { return s.S.Map(local) }

// DaemonMapper applies the recorded daemon mappings piecewise: the last
// mapping whose From is at or before the local time (the first one before
// all of them). Not safe for concurrent use: it caches the current piece.
type DaemonMapper struct {
	from []int64
	maps []LinearMapper
	cur  int
}

// NewDaemonMapper builds the piecewise mapper from the valid mappings.
func NewDaemonMapper(ms []format.DaemonMapping) (*DaemonMapper, error) {
	v := make([]format.DaemonMapping, 0, len(ms))
	for _, m := range ms {
		if m.Mapping.Valid {
			v = append(v, m)
		}
	}
	if len(v) == 0 {
		return nil, errors.New("no valid daemon mapping")
	}
	sort.SliceStable(v, func(i, j int) bool { return v[i].From < v[j].From })
	d := &DaemonMapper{}
	for _, m := range v {
		if m.Mapping.Skew <= -1 {
			return nil, fmt.Errorf("daemon mapping from %d: skew %g runs time backwards", m.From, m.Mapping.Skew)
		}
		d.from = append(d.from, m.From)
		d.maps = append(d.maps, LinearMapper{m.Mapping})
	}
	return d, nil
}

// Global maps local time with the mapping in force at that time.
func (d *DaemonMapper) Global(local int64) int64 {
	c := d.cur
	if !(local >= d.from[c] && (c+1 == len(d.from) || local < d.from[c+1])) {
		// Usually the next piece; binary search otherwise.
		if c+1 < len(d.from) && local >= d.from[c+1] && (c+2 == len(d.from) || local < d.from[c+2]) {
			c++
		} else {
			c = sort.Search(len(d.from), func(i int) bool { return d.from[i] > local }) - 1
			if c < 0 {
				c = 0
			}
		}
		d.cur = c
	}
	return d.maps[c].Global(local)
}

// Bounder is a Mapper that also knows how far its estimate may be from
// global time (the daemon's mappings carry their bounds).
type Bounder interface {
	// Bound returns the half-width (ns) of the bound on Global(local).
	Bound(local int64) (halfWidth int64, ok bool)
}

// Bound returns the half-width of the bound of the mapping in force at
// local. Unlike Global it touches no cache, so it may run beside Global.
func (d *DaemonMapper) Bound(local int64) (int64, bool) {
	c := max(sort.Search(len(d.from), func(i int) bool { return d.from[i] > local })-1, 0)
	est, lo, _ := d.maps[c].M.At(local)
	return est - lo, true
}

// SessionMapper is a correction built from sync sessions (offset, linear,
// spline) with the bound the sessions guarantee. Each exchange confines
// the true line y = f(x) of global time against the local clock: below
// UP = (LocSend, SrcRecv) and above LOW = (LocRecv, SrcSend) (Jezequel's
// convex hull, estimate.Hull). Bound is the farthest any line through
// every exchange's interval lies from the correction's estimate at x:
// between the sessions, where it is about the exchanges' half round trip,
// and outside them, where the correction extrapolates and the bound widens
// with the distance times the rates the exchanges allow. It holds while the
// local clock's rate against the reference is constant over the sessions
// (the model the linear fit assumes, and the emulated clocks of the MPI
// tests have); exchanges that fit no single rate (a rate that changed
// during a long trace, a step) leave the correction without a bound
// (Choice.NoBound says so). Half the longest round trip is no such bound:
// an event before the first session or after the last is extrapolated
// with the fit's slope, whose error grows with the distance
// (TestSessionBoundExtrapolated).
type SessionMapper struct {
	Mapper                // the method's estimate: LinearMapper or SplineMapper
	hull   *estimate.Hull // nil: no bound
}

// Bound returns the half-width of the guaranteed interval around
// Global(local): the farther of the feasible lines' extremes at local. It
// touches no cache (the hull's is filled when the mapper is built), so it
// may run beside Global.
func (s SessionMapper) Bound(local int64) (int64, bool) {
	if s.hull == nil {
		return 0, false
	}
	lo, hi, ok := s.hull.Bounds(local)
	if !ok {
		return 0, false
	}
	g := s.Mapper.Global(local)
	d1, ok1 := satmath.SubChecked(g, lo)
	d2, ok2 := satmath.SubChecked(hi, g)
	if !ok1 || !ok2 {
		return 0, false
	}
	return max(d1, d2), true
}

// boundShift (ns) widens every exchange's interval by the stamps' integer
// nanoseconds: a stamp is its clock read to the ns (truncated, and the
// emulated clocks of the MPI tests truncate their rate term too), on both
// sides of the exchange.
const boundShift = 2

// maxBoundExchanges is the most exchanges a SessionMapper's hull holds
// (estimate.HullConfig.Window's limit).
const maxBoundExchanges = 1 << 20

// sessionHull builds the convex hull of every exchange of the sessions, in
// local-time order. A nil hull comes with the reason there is no bound.
func sessionHull(sessions []format.Session) (*estimate.Hull, string) {
	var ss []format.Session
	n := 0
	for _, s := range sessions {
		if len(s.Samples) > 0 {
			x := append([]estimate.Sample(nil), s.Samples...)
			sort.SliceStable(x, func(i, j int) bool { return x[i].LocRecv < x[j].LocRecv })
			ss = append(ss, format.Session{Index: s.Index, Samples: x})
			n += len(x)
		}
	}
	if n == 0 {
		return nil, "no exchanges"
	}
	if n > maxBoundExchanges {
		return nil, fmt.Sprintf("%d exchanges: the bound's hull holds at most %d", n, maxBoundExchanges)
	}
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].Samples[0].LocRecv < ss[j].Samples[0].LocRecv })
	h, err := estimate.NewHull(estimate.HullConfig{Window: max(n, 2), Shift: boundShift})
	if err != nil {
		return nil, err.Error()
	}
	for _, s := range ss {
		if err := h.AddRound(s.Samples); err != nil {
			if errors.Is(err, estimate.ErrInconsistent) {
				return nil, fmt.Sprintf("session %d: the exchanges fit no single rate against the reference (%v)", s.Index, err)
			}
			return nil, fmt.Sprintf("session %d: %v", s.Index, err)
		}
	}
	// Fill the hull's cache now, so that Bound only reads it.
	if _, _, ok := h.Bounds(ss[0].Samples[0].LocRecv); !ok {
		return nil, "the exchanges leave the rate unbounded"
	}
	return h, ""
}

// bounded wraps a session-based mapper with its sessions' bound and
// records in c whether it has one.
func bounded(m Mapper, sessions []format.Session, c *Choice) SessionMapper {
	h, why := sessionHull(sessions)
	c.Bounded, c.NoBound = h != nil, why
	return SessionMapper{Mapper: m, hull: h}
}

// Input is what correction needs from one trace file.
type Input struct {
	Meta     format.Meta
	Sessions []format.Session
	Mappings []format.DaemonMapping
}

// InputOf extracts the correction input of a summarised file.
func InputOf(s *format.Summary) Input {
	return Input{Meta: s.Meta, Sessions: s.Sessions, Mappings: s.Mappings}
}

// Config tunes Build.
type Config struct {
	Method Method // Auto if empty
	// BestRTT in (0, 1] keeps only that fraction of each session's
	// exchanges, those with the lowest round trip, before the estimators
	// apply seed 001's own 10% drop. 0 or 1 keeps them all (seed 001). The
	// exchanges with the shortest round trips have the most symmetric
	// delays, so their midpoints are the most accurate.
	BestRTT float64
}

// Build chooses and builds a Mapper per input with method m (Auto: the best
// the data allows). SYNCED-HOST inputs without sessions borrow those of a
// process with the same Host. An explicit method the data cannot support is
// an error naming the process.
func Build(in []Input, m Method) ([]Mapper, []Choice, error) {
	return BuildConfig(in, Config{Method: m})
}

// BuildConfig is Build with options.
func BuildConfig(in []Input, cfg Config) ([]Mapper, []Choice, error) {
	m := cfg.Method
	if m == "" {
		m = Auto
	}
	if _, err := ParseMethod(string(m)); err != nil {
		return nil, nil, err
	}
	if !(cfg.BestRTT >= 0 && cfg.BestRTT <= 1) {
		return nil, nil, fmt.Errorf("correct: BestRTT %v outside [0, 1]", cfg.BestRTT)
	}
	mappers := make([]Mapper, len(in))
	choices := make([]Choice, len(in))
	// refOf counts, per process, the other inputs whose sessions name it
	// as their reference: a process without sessions of its own that
	// others synced against is the timescale of session-based corrections
	// (the C/MPI tracer's rank 0, which cannot know at MPI_Init whether a
	// daemon will be used instead).
	refOf := map[uint32]int{}
	for _, y := range in {
		for _, s := range y.Sessions {
			if s.Ref != y.Meta.Proc {
				refOf[s.Ref]++
				break
			}
		}
	}
	for i, x := range in {
		c := Choice{Proc: x.Meta.Proc, Name: x.Meta.Name, SharedOf: -1}
		sessions := x.Sessions
		sessRef := 0
		if len(sessions) == 0 {
			sessRef = refOf[x.Meta.Proc]
		}
		if len(sessions) == 0 && sessRef == 0 && x.Meta.Flags&format.FlagReference == 0 {
			for j, y := range in {
				if j != i && y.Meta.Host == x.Meta.Host && len(y.Sessions) > 0 {
					sessions = y.Sessions
					c.SharedOf = int64(y.Meta.Proc)
					break
				}
			}
		}
		if cfg.BestRTT > 0 && cfg.BestRTT < 1 {
			sessions = bestRTT(sessions, cfg.BestRTT)
		}
		mp, err := build(x, sessions, m, sessRef, &c)
		if err != nil {
			return nil, nil, fmt.Errorf("correct process %d (%s): %w", x.Meta.Proc, x.Meta.Name, err)
		}
		mappers[i], choices[i] = mp, c
	}
	return mappers, choices, nil
}

// bestRTT returns copies of the sessions holding the fraction f of each
// session's exchanges with the lowest RTT (at least 2, or all if fewer).
func bestRTT(sessions []format.Session, f float64) []format.Session {
	out := make([]format.Session, len(sessions))
	for i, s := range sessions {
		ss := append([]estimate.Sample(nil), s.Samples...)
		sort.SliceStable(ss, func(a, b int) bool { return ss[a].RTT() < ss[b].RTT() })
		n := int(math.Ceil(f * float64(len(ss))))
		s.Samples = ss[:min(len(ss), max(n, 2))]
		out[i] = s
	}
	return out
}

func countSamples(ss []format.Session) int {
	n := 0
	for _, s := range ss {
		n += len(s.Samples)
	}
	return n
}

// build makes the mapper of x; sessRef > 0 says that x has no sessions and
// that sessRef other processes synced against it.
func build(x Input, sessions []format.Session, m Method, sessRef int, c *Choice) (Mapper, error) {
	ref := x.Meta.Flags&format.FlagReference != 0
	refReason := fmt.Sprintf("reference of the sync sessions of %d processes", sessRef)
	if m == Auto {
		switch {
		case ref:
			m, c.Reason = None, "reference clock"
		case len(x.Mappings) > 0:
			m, c.Reason = Daemon, fmt.Sprintf("%d daemon mappings recorded", len(x.Mappings))
		case sessRef > 0:
			m, c.Reason = None, refReason
		case len(sessions) >= 3:
			m, c.Reason = Spline, fmt.Sprintf("%d sync sessions", len(sessions))
		case len(sessions) == 2:
			m, c.Reason = Linear, "2 sync sessions"
		case len(sessions) == 1:
			m, c.Reason = Offset, "1 sync session: offset only, drift not corrected"
		default:
			m, c.Reason = None, "NO SYNC DATA: timestamps left uncorrected"
		}
	} else if sessRef > 0 && (m == Linear || m == Spline || m == Offset) {
		m, c.Reason = None, refReason
	} else {
		c.Reason = "chosen by flag"
	}
	if ref && m != None {
		// The reference's clock is global time whatever the method.
		m, c.Reason = None, "reference clock"
	}
	c.Method = m
	if m == None || m == Daemon {
		c.SharedOf = -1 // no sessions used
	}
	switch m {
	case None:
		return Identity{}, nil
	case Daemon:
		d, err := NewDaemonMapper(x.Mappings)
		if err != nil {
			return nil, fmt.Errorf("daemon mapping: %w (%w)", err, ErrNoSyncData)
		}
		c.Mappings = len(d.from)
		c.SkewPPM = d.maps[len(d.maps)-1].M.Skew * 1e6
		c.Bounded = true
		return d, nil
	case Offset:
		if len(sessions) == 0 {
			return nil, fmt.Errorf("offset correction needs a sync session, the trace has none: %w", ErrNoSyncData)
		}
		p, err := estimate.Condense(sessions[0].Samples)
		if err != nil {
			return nil, fmt.Errorf("session 0: %w", err)
		}
		c.Sessions, c.Samples = 1, len(sessions[0].Samples)
		return bounded(LinearMapper{estimate.Mapping{X0: p.X, Y0: p.Y, Valid: true}}, sessions[:1], c), nil
	case Linear:
		if len(sessions) < 2 {
			return nil, fmt.Errorf("linear correction needs 2 sync sessions, the trace has %d: %w", len(sessions), ErrNoSyncData)
		}
		var all []estimate.Sample
		for _, s := range sessions {
			all = append(all, s.Samples...)
		}
		mp, err := estimate.FitLine(all, DropFrac)
		if err != nil {
			return nil, fmt.Errorf("linear fit over %d exchanges: %w", len(all), err)
		}
		if mp.Skew <= -1 || math.IsNaN(mp.Skew) {
			return nil, fmt.Errorf("linear fit gives skew %g: time would run backwards", mp.Skew)
		}
		c.Sessions, c.Samples, c.SkewPPM = len(sessions), len(all), mp.Skew*1e6
		return bounded(LinearMapper{mp}, sessions, c), nil
	case Spline:
		if len(sessions) < 2 {
			return nil, fmt.Errorf("spline correction needs at least 2 sync sessions, the trace has %d: %w", len(sessions), ErrNoSyncData)
		}
		pts := make([]estimate.Point, 0, len(sessions))
		for _, s := range sessions {
			p, err := estimate.Condense(s.Samples)
			if err != nil {
				return nil, fmt.Errorf("condense session %d: %w", s.Index, err)
			}
			pts = append(pts, p)
		}
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		sp, err := estimate.NewSpline(pts)
		if err != nil {
			return nil, fmt.Errorf("spline through %d points: %w", len(pts), err)
		}
		c.Sessions, c.Samples = len(sessions), countSamples(sessions)
		first, last := pts[0], pts[len(pts)-1]
		if dx := last.X - first.X; dx != 0 {
			c.SkewPPM = float64((last.Y-first.Y)-dx) / float64(dx) * 1e6
		}
		return bounded(SplineMapper{sp}, sessions, c), nil
	}
	return nil, fmt.Errorf("method %q not handled", m)
}
