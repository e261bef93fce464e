package measure

import (
	"math"
	"slices"

	"github.com/gclock/gclock/gtime"
)

// PaperBands are seed 003's figures, in percent of the operation: every
// node's time within +-1.8% of the mean with MPI_Barrier over Ethernet,
// +-0.24% with the SCC hardware barrier, +-0.04% with PGCCS's global
// counter.
var PaperBands = [3]float64{1.8, 0.24, 0.04}

// PaperView is one method as seed 003 presents it (figures 10-14): every
// node times the same interval, from the start as it saw it to a common
// end, and the figure is each node's deviation from the mean of its
// execution in percent of the operation. With a global clock the common
// end is the operation's own end, the last node's completion in global
// time: (b), (b') and (b*) take T_i = max_j global(e_j) - global(s_i), so
// what spreads them is how far apart the nodes' start stamps are (their
// clocks' errors and how late each really started). A node on its own
// clock cannot see the others' completion; (a) takes T_i = local(e_i) -
// local(s_i), whose end is, as in the paper's MPI_Barrier method, the
// node's exit from a barrier after the operation (gclock measure runs one
// in every barrier-started execution).
type PaperView struct {
	Name   string  `json:"name"`
	N      int     `json:"n"`       // node times
	MeanNs float64 `json:"mean_ns"` // mean node time: the operation
	// Devs are the deviations from the mean, in percent, one per node
	// time; DevMaxAbsPct and DevP99AbsPct their spread; Within the share
	// of |deviation| within each of PaperBands.
	Devs         []float64  `json:"-"`
	DevMaxAbsPct float64    `json:"dev_max_abs_pct"`
	DevP99AbsPct float64    `json:"dev_p99_abs_pct"`
	Within       [3]float64 `json:"within"`
	// Bounds of each node's time from global time's bounds (global methods,
	// off the lab too): the mean width in percent of the operation and in
	// ns. BoundsN is 0 for (a).
	BoundsN       int        `json:"bounds_n"`
	WidthMeanPct  float64    `json:"bound_width_mean_pct,omitempty"`
	WidthMeanNs   float64    `json:"bound_width_mean_ns,omitempty"`
	WidthMaxPct   float64    `json:"bound_width_max_pct,omitempty"`
	BoundHalfP99  float64    `json:"bound_half_width_p99_pct,omitempty"` // p99 of half the width, %: the deviation the bounds allow
	HasTruth      bool       `json:"has_truth"`
	TrueDevs      []float64  `json:"-"`           // the true times' deviations, %
	TrueWithin    [3]float64 `json:"true_within"` // their shares within PaperBands
	TrueDevP99Pct float64    `json:"true_dev_p99_abs_pct,omitempty"`
	// ErrPcts are (measured - the true operation) / the true operation *
	// 100, the true operation being the latest true end minus the earliest
	// true start: how far each node's figure is from the operation's time,
	// as the paper counts the skew of a node's start as error. The true
	// node times (TrueDevs) keep what the node itself went through.
	ErrPcts   []float64  `json:"-"`
	ErrP50Pct float64    `json:"err_p50_abs_pct,omitempty"`
	ErrP99Pct float64    `json:"err_p99_abs_pct,omitempty"`
	ErrMaxPct float64    `json:"err_max_abs_pct,omitempty"`
	ErrWithin [3]float64 `json:"err_within"`
	// ErrPcts splits in two: ClockErrPcts, (measured - the node's true
	// time) / the true operation * 100, is what the stamps get wrong (for
	// the global methods the global-time stamps of the node's start and of
	// the common end against the truth; for (a) the node's own clock over
	// its interval); SkewPcts, (the node's true start - the earliest true
	// start) / the true operation * 100, is how late the node really
	// started, which the truth shows and no clock causes (for (a) the
	// spread of the barrier's exits). ErrPcts = ClockErrPcts - SkewPcts
	// for the global methods.
	ClockErrPcts   []float64  `json:"-"`
	ClockErrP50Pct float64    `json:"clock_err_p50_abs_pct,omitempty"`
	ClockErrP99Pct float64    `json:"clock_err_p99_abs_pct,omitempty"`
	ClockErrMaxPct float64    `json:"clock_err_max_abs_pct,omitempty"`
	ClockErrWithin [3]float64 `json:"clock_err_within"`
	SkewPcts       []float64  `json:"-"`
	SkewP50Pct     float64    `json:"start_skew_p50_pct,omitempty"`
	SkewP99Pct     float64    `json:"start_skew_p99_pct,omitempty"`
	SkewMaxPct     float64    `json:"start_skew_max_pct,omitempty"`
	Coverage       float64    `json:"coverage"` // share of values whose true time is inside the bounds; -1 without bounds
	boundsIn       int
	widths         []float64
}

// paperExec is one execution's node times under one method.
type paperExec struct {
	ns, lo, hi, trueNs []int64
	skewNs             []int64 // each node's true start - the earliest true start
	bounds, truth      bool
	trueOp             int64
}

// paperGlobal is the common-end arithmetic in the readings read gives
// (ok false when one is not synced).
func paperGlobal(ps []*pair, read func(*Stamp) gtime.Time, truth Truth) (paperExec, bool) {
	var e, elo, ehi int64 = math.MinInt64, math.MinInt64, math.MinInt64
	for _, p := range ps {
		g, x := read(p.start), read(p.end)
		if g.Status != gtime.StatusSynced || x.Status != gtime.StatusSynced || unbounded(g) || unbounded(x) {
			return paperExec{}, false
		}
		e, elo, ehi = max(e, x.Est), max(elo, x.Earliest), max(ehi, x.Latest)
	}
	x := paperExec{bounds: true}
	for _, p := range ps {
		s := read(p.start)
		x.ns = append(x.ns, e-s.Est)
		x.lo = append(x.lo, elo-s.Latest)
		x.hi = append(x.hi, ehi-s.Earliest)
	}
	if truth != nil {
		x.truth = true
		var te, t0 int64 = math.MinInt64, math.MaxInt64
		for _, p := range ps {
			te, t0 = max(te, truth(p.end.Raw)), min(t0, truth(p.start.Raw))
		}
		for _, p := range ps {
			x.trueNs = append(x.trueNs, te-truth(p.start.Raw))
			x.skewNs = append(x.skewNs, truth(p.start.Raw)-t0)
		}
		x.trueOp = te - t0
	}
	return x, true
}

// paperLocal is (a): each node's own clock from its barrier exit to its
// end.
func paperLocal(ps []*pair, truth Truth) paperExec {
	var x paperExec
	for _, p := range ps {
		x.ns = append(x.ns, p.end.Local-p.start.Local)
	}
	if truth != nil {
		x.truth = true
		var te, t0 int64 = math.MinInt64, math.MaxInt64
		for _, p := range ps {
			ts, tend := truth(p.start.Raw), truth(p.end.Raw)
			x.trueNs = append(x.trueNs, tend-ts)
			te, t0 = max(te, tend), min(t0, ts)
		}
		for _, p := range ps {
			x.skewNs = append(x.skewNs, truth(p.start.Raw)-t0)
		}
		x.trueOp = te - t0
	}
	return x
}

func meanOf(v []int64) float64 {
	var s float64
	for _, x := range v {
		s += float64(x)
	}
	return s / float64(len(v))
}

// add appends one execution.
func (m *PaperView) add(x paperExec) {
	mean := meanOf(x.ns)
	if mean <= 0 {
		return
	}
	var tmean float64
	if x.truth {
		tmean = meanOf(x.trueNs)
	}
	for i, v := range x.ns {
		m.N++
		m.MeanNs += float64(v)
		m.Devs = append(m.Devs, (float64(v)-mean)/mean*100)
		if x.bounds {
			m.BoundsN++
			m.widths = append(m.widths, float64(x.hi[i]-x.lo[i]))
			m.WidthMeanPct += float64(x.hi[i]-x.lo[i]) / mean * 100
			m.WidthMaxPct = max(m.WidthMaxPct, float64(x.hi[i]-x.lo[i])/mean*100)
		}
		if x.truth && x.trueOp > 0 && tmean > 0 {
			m.HasTruth = true
			m.TrueDevs = append(m.TrueDevs, (float64(x.trueNs[i])-tmean)/tmean*100)
			m.ErrPcts = append(m.ErrPcts, float64(v-x.trueOp)/float64(x.trueOp)*100)
			m.ClockErrPcts = append(m.ClockErrPcts, float64(v-x.trueNs[i])/float64(x.trueOp)*100)
			m.SkewPcts = append(m.SkewPcts, float64(x.skewNs[i])/float64(x.trueOp)*100)
			if x.bounds && x.lo[i] <= x.trueNs[i] && x.trueNs[i] <= x.hi[i] {
				m.boundsIn++
			}
		}
	}
}

// within returns the shares of |v| within each of PaperBands.
func within(v []float64) [3]float64 {
	var out [3]float64
	if len(v) == 0 {
		return out
	}
	for _, x := range v {
		for i, b := range PaperBands {
			if math.Abs(x) <= b {
				out[i]++
			}
		}
	}
	for i := range out {
		out[i] /= float64(len(v))
	}
	return out
}

// absSorted returns |v| sorted.
func absSorted(v []float64) []float64 {
	a := make([]float64, len(v))
	for i, x := range v {
		a[i] = math.Abs(x)
	}
	slices.Sort(a)
	return a
}

func (m *PaperView) finish() {
	if m.N == 0 {
		return
	}
	m.MeanNs /= float64(m.N)
	a := absSorted(m.Devs)
	m.DevMaxAbsPct, m.DevP99AbsPct = a[len(a)-1], quantile(a, 0.99)
	m.Within = within(m.Devs)
	m.Coverage = -1
	if m.BoundsN > 0 {
		m.WidthMeanPct /= float64(m.BoundsN)
		var s float64
		half := make([]float64, len(m.widths))
		for i, w := range m.widths {
			s += w
			half[i] = w / 2
		}
		m.WidthMeanNs = s / float64(len(m.widths))
		slices.Sort(half)
		m.BoundHalfP99 = quantile(half, 0.99) / m.MeanNs * 100
	}
	if m.HasTruth {
		t := absSorted(m.TrueDevs)
		m.TrueDevP99Pct = quantile(t, 0.99)
		m.TrueWithin = within(m.TrueDevs)
		e := absSorted(m.ErrPcts)
		m.ErrP50Pct, m.ErrP99Pct, m.ErrMaxPct = quantile(e, 0.5), quantile(e, 0.99), e[len(e)-1]
		m.ErrWithin = within(m.ErrPcts)
		c := absSorted(m.ClockErrPcts)
		m.ClockErrP50Pct, m.ClockErrP99Pct, m.ClockErrMaxPct = quantile(c, 0.5), quantile(c, 0.99), c[len(c)-1]
		m.ClockErrWithin = within(m.ClockErrPcts)
		k := absSorted(m.SkewPcts)
		m.SkewP50Pct, m.SkewP99Pct, m.SkewMaxPct = quantile(k, 0.5), quantile(k, 0.99), k[len(k)-1]
		if m.BoundsN > 0 {
			m.Coverage = float64(m.boundsIn) / float64(len(m.ErrPcts))
		}
	}
}

// Paper returns the paper view of the named method (nil when absent).
func (r *Result) PaperMethod(name string) *PaperView {
	for i := range r.Paper {
		if r.Paper[i].Name == name {
			return &r.Paper[i]
		}
	}
	return nil
}
