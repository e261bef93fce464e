package foreign

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
)

// OffsetRecord is one measured clock offset (OTF2 CLOCK_OFFSET): at local
// time Local the master clock read Local+Offset, with standard deviation
// StdDev (ns).
type OffsetRecord struct {
	Local  int64
	Offset int64
	StdDev float64
}

// Location is one timeline of the trace.
type Location struct {
	Name    string
	Times   []int64 // local timestamps of its events, in record order (non-decreasing)
	Offsets []OffsetRecord
}

// Message is one matched message: event Send of location From and event
// Recv of location To (indices into Trace.Locs and their Times).
type Message struct {
	From, To   int
	Send, Recv int
}

// Trace is the producer-independent model of a foreign trace.
type Trace struct {
	Locs []Location
	Msgs []Message
	// ClockOf, if not nil, says for each location which location's clock
	// it reads (the threads of one process share the process's clock):
	// a location without messages of its own gets that location's
	// refinement. -1 or its own index: its own clock.
	ClockOf []int
}

// Options tune Correct.
type Options struct {
	// Mappers, if not nil, holds one local->global mapper per location (the
	// daemon's recorded mappings); the offset records are then not used
	// for the base mapping.
	Mappers []correct.Mapper
	// Messages refines the base mapping with the messages: MessagesAuto
	// (the default) does so without Mappers only.
	Messages Toggle
	// Reference is the location whose clock is global time for the
	// refinement; -1 picks the first location whose offset records are all
	// zero (Score-P's master), else location 0.
	Reference int
	// Window is the refinement's window length, ns; 0 picks one in which
	// the location with the fewest messages has PerWindow messages each way
	// on average.
	Window int64
	// PerWindow is the messages each way per window for the automatic
	// window (default 16).
	PerWindow int
	// Passes of the refinement (default 3).
	Passes int
	// CLC applies the controlled logical clock after the correction, with
	// MinLatency, Gamma and Amortize as in causality.CLCOptions.
	CLC        bool
	MinLatency int64
	Gamma      float64
	Amortize   float64
}

// Toggle is on, off or automatic.
type Toggle int

// Toggle values.
const (
	MessagesAuto Toggle = iota
	MessagesOn
	MessagesOff
)

// Causality counts the messages received before they were sent.
type Causality struct {
	Raw       int // on the local timestamps as recorded
	Linear    int // on the producer's linear interpolation of the offset records
	Corrected int // after gclock's correction
	CLC       int // after CLC (if run)
}

// LocReport says how one location was corrected.
type LocReport struct {
	Name    string
	Method  string // "daemon", "linear", "spline", "offset", "reference"
	Knots   int    // refinement knots (windows in which it had messages both ways)
	MaxAdj  int64  // the largest |refinement| applied to an event, ns
	Shared  int    // the location whose refinement it shares (no messages of its own), -1 if none
	SkewPPM float64
	Clamped int // events moved forward to keep the location's order
	Moved   int // events moved by CLC
	MaxCLC  int64
}

// Result is the corrected trace.
type Result struct {
	Global    [][]int64 // per location, the global time of each event
	Reference int
	Window    int64
	Locs      []LocReport
	Causality Causality
	Messages  int

	mappers []correct.Mapper
	knots   [][]knot // refinement, per location, in base-mapped time
}

// Map maps a local time of location loc that is not an event's (a clock
// offset record's, a buffer flush's stop time) with the location's base
// mapping and refinement (CLC moves events only).
func (r *Result) Map(loc int, local int64) int64 {
	g := r.mappers[loc].Global(local)
	if r.knots != nil {
		g += int64(math.Round(interp(r.knots[loc], g)))
	}
	return g
}

// Errors matched with errors.Is.
var (
	// ErrNoOffsets: a location has no offset record and no mapper.
	ErrNoOffsets = errors.New("no clock offset record")
	// ErrBadTrace: the model is inconsistent (an index out of range, times
	// going backwards).
	ErrBadTrace = errors.New("inconsistent trace")
)

// Limits of the input: times and offsets below 2^62 keep every sum of two
// in int64; a rate error above 1% between two offset records is a broken
// record, not a clock.
const (
	maxTime = int64(1) << 62
	maxRate = 0.01
)

func (t *Trace) check(opt *Options) error {
	if len(t.Locs) == 0 {
		return fmt.Errorf("%w: no locations", ErrBadTrace)
	}
	if opt.Mappers != nil && len(opt.Mappers) != len(t.Locs) {
		return fmt.Errorf("%w: %d mappers for %d locations", ErrBadTrace, len(opt.Mappers), len(t.Locs))
	}
	for i, l := range t.Locs {
		for j := 1; j < len(l.Times); j++ {
			if l.Times[j] < l.Times[j-1] {
				return fmt.Errorf("%w: location %d (%s): event %d at %d before event %d at %d", ErrBadTrace, i, l.Name, j, l.Times[j], j-1, l.Times[j-1])
			}
		}
		if opt.Mappers == nil && len(l.Offsets) == 0 {
			return fmt.Errorf("location %d (%s): %w (the producer wrote no CLOCK_OFFSET for it; give the daemon's mappings)", i, l.Name, ErrNoOffsets)
		}
		if len(l.Times) > 0 && (l.Times[0] < 0 || l.Times[len(l.Times)-1] >= maxTime) {
			return fmt.Errorf("%w: location %d (%s): times %d .. %d outside [0, 2^62)", ErrBadTrace, i, l.Name, l.Times[0], l.Times[len(l.Times)-1])
		}
		for j, o := range l.Offsets {
			if o.Local < 0 || o.Local >= maxTime || o.Offset <= -maxTime || o.Offset >= maxTime {
				return fmt.Errorf("%w: location %d (%s): clock offset %d (at %d, offset %d) outside 2^62", ErrBadTrace, i, l.Name, j, o.Local, o.Offset)
			}
			if j == 0 {
				continue
			}
			p := l.Offsets[j-1]
			if o.Local <= p.Local {
				return fmt.Errorf("%w: location %d (%s): clock offset %d at local %d not after offset %d at %d", ErrBadTrace, i, l.Name, j, o.Local, j-1, p.Local)
			}
			if rate := float64(o.Offset-p.Offset) / float64(o.Local-p.Local); math.Abs(rate) > maxRate {
				return fmt.Errorf("%w: location %d (%s): clock offsets %d and %d differ by %d over %d: a rate error of %.0f ppm is no clock's", ErrBadTrace, i, l.Name, j-1, j, o.Offset-p.Offset, o.Local-p.Local, rate*1e6)
			}
		}
	}
	if t.ClockOf != nil && len(t.ClockOf) != len(t.Locs) {
		return fmt.Errorf("%w: ClockOf has %d entries for %d locations", ErrBadTrace, len(t.ClockOf), len(t.Locs))
	}
	for i, j := range t.ClockOf {
		if j >= len(t.Locs) {
			return fmt.Errorf("%w: location %d reads the clock of location %d, which does not exist", ErrBadTrace, i, j)
		}
	}
	for k, m := range t.Msgs {
		if m.From < 0 || m.From >= len(t.Locs) || m.To < 0 || m.To >= len(t.Locs) ||
			m.Send < 0 || m.Send >= len(t.Locs[m.From].Times) || m.Recv < 0 || m.Recv >= len(t.Locs[m.To].Times) {
			return fmt.Errorf("%w: message %d (%d:%d -> %d:%d) names an event that does not exist", ErrBadTrace, k, m.From, m.Send, m.To, m.Recv)
		}
	}
	return nil
}

// Linear maps local time with the producer's interpolation, as an OTF2
// reader does: between two offset records linearly, before the first and
// after the last with the nearest interval's line (one record: its offset).
func Linear(offs []OffsetRecord, local int64) int64 {
	if len(offs) == 0 {
		return local
	}
	if len(offs) == 1 {
		return local + offs[0].Offset
	}
	i := sort.Search(len(offs), func(i int) bool { return offs[i].Local >= local })
	i = min(max(i-1, 0), len(offs)-2)
	a, b := offs[i], offs[i+1]
	slope := float64(b.Offset-a.Offset) / float64(b.Local-a.Local)
	return local + a.Offset + int64(math.Round(slope*float64(local-a.Local)))
}

// baseMapper builds the mapper of a location from its offset records.
func baseMapper(l Location) (correct.Mapper, string, float64, error) {
	o := l.Offsets
	switch len(o) {
	case 1:
		return correct.LinearMapper{M: estimate.Mapping{X0: o[0].Local, Y0: o[0].Local + o[0].Offset, Valid: true}}, "offset", 0, nil
	case 2:
		skew := float64(o[1].Offset-o[0].Offset) / float64(o[1].Local-o[0].Local)
		return correct.LinearMapper{M: estimate.Mapping{X0: o[0].Local, Y0: o[0].Local + o[0].Offset, Skew: skew, Valid: true}}, "linear", skew * 1e6, nil
	}
	pts := make([]estimate.Point, len(o))
	for i, r := range o {
		pts[i] = estimate.Point{X: r.Local, Y: r.Local + r.Offset, W: int64(r.StdDev)}
	}
	s, err := estimate.NewSpline(pts)
	if err != nil {
		return nil, "", 0, err
	}
	n := len(o) - 1
	skew := float64(o[n].Offset-o[0].Offset) / float64(o[n].Local-o[0].Local)
	return correct.SplineMapper{S: s}, "spline", skew * 1e6, nil
}

// Correct maps every event of t onto global time.
func Correct(t *Trace, opt Options) (*Result, error) {
	if err := t.check(&opt); err != nil {
		return nil, err
	}
	if opt.PerWindow <= 0 {
		opt.PerWindow = 16
	}
	if opt.Passes <= 0 {
		opt.Passes = 3
	}
	n := len(t.Locs)
	res := &Result{Global: make([][]int64, n), Locs: make([]LocReport, n), Reference: opt.Reference, Messages: len(t.Msgs), mappers: make([]correct.Mapper, n)}
	base := make([][]int64, n)
	for i, l := range t.Locs {
		lr := &res.Locs[i]
		lr.Name, lr.Shared = l.Name, -1
		if t.ClockOf != nil && t.ClockOf[i] >= 0 && t.ClockOf[i] != i {
			lr.Shared = t.ClockOf[i]
		}
		var mp correct.Mapper
		if opt.Mappers != nil {
			mp, lr.Method = opt.Mappers[i], "daemon"
		} else {
			var err error
			if mp, lr.Method, lr.SkewPPM, err = baseMapper(l); err != nil {
				return nil, fmt.Errorf("location %d (%s): clock offsets: %w", i, l.Name, err)
			}
		}
		res.mappers[i] = mp
		base[i] = make([]int64, len(l.Times))
		for j, x := range l.Times {
			base[i][j] = mp.Global(x)
		}
	}
	if opt.Reference < 0 || opt.Reference >= n {
		res.Reference = 0
		for i, l := range t.Locs {
			if len(l.Offsets) > 0 && !slices.ContainsFunc(l.Offsets, func(r OffsetRecord) bool { return r.Offset != 0 }) {
				res.Reference = i
				break
			}
		}
	}
	refine := opt.Messages == MessagesOn || (opt.Messages == MessagesAuto && opt.Mappers == nil)
	if refine && len(t.Msgs) > 0 {
		res.Window = refineAll(t, base, res, opt)
	}
	for i := range base {
		g := base[i]
		for j := 1; j < len(g); j++ {
			if g[j] < g[j-1] {
				g[j] = g[j-1]
				res.Locs[i].Clamped++
			}
		}
		res.Global[i] = g
	}
	if res.Reference >= 0 && res.Reference < n && res.Locs[res.Reference].Method != "daemon" {
		res.Locs[res.Reference].Method = "reference (" + res.Locs[res.Reference].Method + ")"
	}
	for _, m := range t.Msgs {
		if t.Locs[m.To].Times[m.Recv] < t.Locs[m.From].Times[m.Send] {
			res.Causality.Raw++
		}
		if Linear(t.Locs[m.To].Offsets, t.Locs[m.To].Times[m.Recv]) < Linear(t.Locs[m.From].Offsets, t.Locs[m.From].Times[m.Send]) {
			res.Causality.Linear++
		}
		if res.Global[m.To][m.Recv] < res.Global[m.From][m.Send] {
			res.Causality.Corrected++
		}
	}
	if opt.CLC {
		if err := runCLC(t, res, opt); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// knot is a refinement correction at a global time.
type knot struct {
	at int64
	d  float64
}

// orderKnots sorts knots by time and averages those at the same time.
func orderKnots(ks []knot) []knot {
	slices.SortStableFunc(ks, func(a, b knot) int { return cmp.Compare(a.at, b.at) })
	out := ks[:0]
	for i := 0; i < len(ks); {
		j, sum := i, 0.0
		for ; j < len(ks) && ks[j].at == ks[i].at; j++ {
			sum += ks[j].d
		}
		out = append(out, knot{at: ks[i].at, d: sum / float64(j-i)})
		i = j
	}
	return out
}

// interp evaluates the piecewise linear correction at x (constant outside).
func interp(ks []knot, x int64) float64 {
	if len(ks) == 0 {
		return 0
	}
	i := sort.Search(len(ks), func(i int) bool { return ks[i].at > x })
	if i == 0 {
		return ks[0].d
	}
	if i == len(ks) {
		return ks[len(ks)-1].d
	}
	a, b := ks[i-1], ks[i]
	return a.d + (b.d-a.d)*float64(x-a.at)/float64(b.at-a.at)
}

// refineAll applies the message refinement to base (in place) and returns
// the window used.
func refineAll(t *Trace, base [][]int64, res *Result, opt Options) int64 {
	n := len(t.Locs)
	t0, t1 := int64(math.MaxInt64), int64(math.MinInt64)
	for _, g := range base {
		if len(g) > 0 {
			t0, t1 = min(t0, g[0]), max(t1, g[len(g)-1])
		}
	}
	span := t1 - t0 + 1
	w := opt.Window
	if w <= 0 {
		in, out := make([]int, n), make([]int, n)
		for _, m := range t.Msgs {
			out[m.From]++
			in[m.To]++
		}
		fewest := math.MaxInt
		for i := range n {
			if i != res.Reference && (in[i] > 0 || out[i] > 0) {
				fewest = min(fewest, min(in[i], out[i]))
			}
		}
		w = span
		if fewest > 0 && fewest < math.MaxInt {
			w = int64(float64(span) * float64(opt.PerWindow) / float64(fewest))
		}
		w = min(max(w, 1000), span)
	}
	nw := max(int(span/w), 1)  // a partial last window joins the one before
	knots := make([][]knot, n) // per location, in g0 (base) time
	cur := make([][]int64, n)
	for i := range base {
		cur[i] = slices.Clone(base[i])
	}
	win := make([][]int32, nw) // messages per window, by send time
	for k, m := range t.Msgs {
		j := int((base[m.From][m.Send] - t0) / w)
		j = min(max(j, 0), nw-1)
		win[j] = append(win[j], int32(k))
	}
	x := make([]float64, n)
	has := make([]bool, n)
	distUp, distDown := make([]float64, n), make([]float64, n)
	in, out := make([][]int32, n), make([][]int32, n)
	for range opt.Passes {
		next := make([][]knot, n)
		for j, ms := range win {
			if len(ms) == 0 {
				continue
			}
			for i := range n {
				in[i], out[i] = in[i][:0], out[i][:0]
			}
			for _, k := range ms {
				m := t.Msgs[k]
				in[m.To] = append(in[m.To], k)
				out[m.From] = append(out[m.From], k)
			}
			// Each message (from -> to) with apparent latency a says
			// x[to] - x[from] <= a (its true latency is >= 0); with
			// x[ref] = 0 each location's error lies in
			// [-d(p, ref), d(ref, p)], d the shortest paths through those
			// constraints. Only locations with both finite are tied to the
			// reference (others, exchanging only among themselves, could
			// be anywhere): only they get a knot. An estimate outside its
			// interval is pulled to its edge. A negative cycle (drift
			// inside the window, a mismatch) leaves the window without
			// knots.
			r := res.Reference
			up, ok1 := shortest(t, cur, ms, r, n, false, distUp)
			down, ok2 := shortest(t, cur, ms, r, n, true, distDown)
			if !ok1 || !ok2 {
				continue
			}
			any := false
			for i := range n {
				has[i] = i != r && !math.IsInf(up[i], 1) && !math.IsInf(down[i], 1)
				any = any || has[i]
			}
			if !any {
				continue
			}
			// Gauss-Seidel: each location in turn moves to the middle of
			// its window, (fastest apparent latency in - fastest out)/2,
			// with the others' latest estimates; the reference, which
			// cannot move, moves all the others instead (without it they
			// could drift together, held only by their messages among
			// themselves).
			clear(x)
			lat := func(k int32) float64 {
				m := t.Msgs[k]
				return float64(cur[m.To][m.Recv]-cur[m.From][m.Send]) - x[m.To] + x[m.From]
			}
			mid := func(i int) float64 {
				lo, hi := math.Inf(1), math.Inf(1)
				for _, k := range in[i] {
					lo = min(lo, lat(k))
				}
				for _, k := range out[i] {
					hi = min(hi, lat(k))
				}
				return (lo - hi) / 2
			}
			converged := false
			for sweep := 0; sweep < 1000 && !converged; sweep++ {
				worst := 0.0
				for i := range n {
					if has[i] {
						d := mid(i)
						x[i] += d
						worst = max(worst, math.Abs(d))
					}
				}
				d := -mid(r)
				for i := range n {
					if has[i] {
						x[i] += d
					}
				}
				worst = max(worst, math.Abs(d))
				converged = worst < 0.1
			}
			if !converged {
				continue
			}
			for i := range n {
				if has[i] && -down[i] <= up[i] {
					x[i] = min(max(x[i], -down[i]), up[i])
				}
			}
			for i := range n {
				if !has[i] {
					continue
				}
				// the knot sits at the mean time of the location's
				// messages in the window (relative to the window start:
				// no absolute times in float64)
				ws := t0 + int64(j)*w
				var sum float64
				for _, k := range in[i] {
					sum += float64(base[i][t.Msgs[k].Recv] - ws)
				}
				for _, k := range out[i] {
					sum += float64(base[i][t.Msgs[k].Send] - ws)
				}
				at := ws + int64(sum/float64(len(in[i])+len(out[i])))
				next[i] = append(next[i], knot{at: at, d: interp(knots[i], at) - x[i]})
			}
		}
		// A knot sits at the mean time of its messages, and a receive can
		// fall after the next window's start: keep the knots in order, one
		// per time (interp divides by their distance).
		for i := range n {
			next[i] = orderKnots(next[i])
		}
		// Before the first and after the last window the offset records
		// (init, finalize) are the better anchors: the base mapping goes
		// through them, so the correction fades to 0 there.
		if opt.Mappers == nil {
			for i := range n {
				ks := next[i]
				if len(ks) == 0 || i == res.Reference {
					continue
				}
				offs := t.Locs[i].Offsets
				if first := offs[0].Local + offs[0].Offset; first < ks[0].at {
					ks = append([]knot{{at: first}}, ks...)
				}
				if last := offs[len(offs)-1].Local + offs[len(offs)-1].Offset; last > ks[len(ks)-1].at {
					ks = append(ks, knot{at: last})
				}
				next[i] = ks
			}
		}
		// Locations without messages (a process's other threads) share
		// the refinement of the location whose clock they read.
		for i, j := range t.ClockOf {
			if j >= 0 && j != i && len(next[i]) == 0 {
				next[i] = next[j]
			}
		}
		knots = next
		for i := range n {
			for e, g := range base[i] {
				cur[i][e] = g + int64(math.Round(interp(knots[i], g)))
			}
		}
	}
	res.knots = knots
	for i := range n {
		res.Locs[i].Knots = len(knots[i])
		for e, g := range base[i] {
			res.Locs[i].MaxAdj = max(res.Locs[i].MaxAdj, satmath.AbsDiff(cur[i][e], g))
		}
		copy(base[i], cur[i])
	}
	return w
}

// shortest returns the shortest path lengths from the reference (reverse:
// to it) over the difference constraints of the messages ms: an edge
// from -> to of length cur[to][recv] - cur[from][send]. Bellman-Ford; false
// on a negative cycle.
func shortest(t *Trace, cur [][]int64, ms []int32, ref, n int, reverse bool, d []float64) ([]float64, bool) {
	for i := range d {
		d[i] = math.Inf(1)
	}
	d[ref] = 0
	for round := 0; round <= n; round++ {
		changed := false
		for _, k := range ms {
			m := t.Msgs[k]
			a := float64(cur[m.To][m.Recv] - cur[m.From][m.Send])
			u, v := m.From, m.To
			if reverse {
				u, v = v, u
			}
			if !math.IsInf(d[u], 1) && d[u]+a < d[v] {
				d[v] = d[u] + a
				changed = true
			}
		}
		if !changed {
			return d, true
		}
	}
	return d, false
}

// runCLC applies the controlled logical clock to res.Global.
func runCLC(t *Trace, res *Result, opt Options) error {
	total := 0
	for _, g := range res.Global {
		total += len(g)
	}
	ev := make([]format.Merged, 0, total)
	kind := make([][]format.Kind, len(t.Locs))
	peer := make([][]uint32, len(t.Locs))
	id := make([][]uint64, len(t.Locs))
	for i, g := range res.Global {
		kind[i] = make([]format.Kind, len(g))
		peer[i] = make([]uint32, len(g))
		id[i] = make([]uint64, len(g))
	}
	for k, m := range t.Msgs {
		kind[m.From][m.Send], peer[m.From][m.Send], id[m.From][m.Send] = format.Send, uint32(m.To), uint64(k)
		kind[m.To][m.Recv], peer[m.To][m.Recv], id[m.To][m.Recv] = format.Recv, uint32(m.From), uint64(k)
	}
	for i, g := range res.Global {
		for e, tm := range g {
			k := kind[i][e]
			if k == 0 {
				k = format.Enter
			}
			ev = append(ev, format.Merged{Event: format.Event{Time: tm, Kind: k, Peer: peer[i][e], ID: id[i][e], Value: int64(e)}, Raw: t.Locs[i].Times[e], Proc: uint32(i)})
		}
	}
	slices.SortStableFunc(ev, func(a, b format.Merged) int { return cmp.Compare(a.Time, b.Time) })
	moved, err := causality.CLC(ev, causality.CLCOptions{MinLatency: opt.MinLatency, Gamma: opt.Gamma, Amortize: opt.Amortize})
	if err != nil {
		return err
	}
	for _, e := range ev {
		res.Global[e.Proc][e.Value] = e.Time
	}
	for _, m := range moved {
		res.Locs[m.Proc].Moved = int(m.Moved)
		res.Locs[m.Proc].MaxCLC = m.MaxShift
	}
	res.Causality.CLC = 0
	for _, m := range t.Msgs {
		if res.Global[m.To][m.Recv] < res.Global[m.From][m.Send] {
			res.Causality.CLC++
		}
	}
	return nil
}

// sortMessages orders messages by sender and send event (a map's order
// would make the refinement's results vary from run to run).
func sortMessages(ms []Message) {
	slices.SortFunc(ms, func(a, b Message) int {
		if c := cmp.Compare(a.From, b.From); c != 0 {
			return c
		}
		return cmp.Compare(a.Send, b.Send)
	})
}
