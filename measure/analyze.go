package measure

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gclock/gclock/gtime"
	"gonum.org/v1/gonum/stat"
)

// The methods of seed 003, side by side.
const (
	// MethodBarrier (a): every node times its part with its own clock from
	// the moment it leaves a message barrier (the MPI_Barrier way).
	MethodBarrier = "barrier"
	// MethodGlobal (b): the nodes start at a scheduled global instant and
	// stamp start and end in global time (the PGCCS way, in software); a
	// node's time runs from the earliest start of any node to its end.
	MethodGlobal = "global"
	// MethodWindow (c): ReproMPI's window, the latest end minus the
	// earliest start in global time; one value per execution.
	MethodWindow = "window"
	// MethodGlobalAtBarrier: the barrier-started executions of (a) timed in
	// global time as (b) does: the same executions, the other clock.
	MethodGlobalAtBarrier = "global@barrier"
	// MethodGlobalRetro: (b) with every stamp read again at the end of the
	// measurement through the page of then (Stamp.Retro), a correction
	// after the fact.
	MethodGlobalRetro = "global-retro"
)

// Truth gives the true global time (the reference's ideal clock, ns) at a
// CLOCK_MONOTONIC_RAW instant. Only an evaluator that knows every clock
// (the lab) has one; nil means unknown.
type Truth func(raw int64) int64

// Value is one measured time: one node's part of one execution, or (Rank
// -1) a whole execution.
type Value struct {
	Exec int
	Rank int
	Ns   int64 // measured
	// DevPct is the deviation of Ns from the mean of the execution's
	// per-node values, in percent (the papers' figures 10-14); 0 for
	// whole-execution values.
	DevPct float64
	// TrueNs is the true time (HasTruth), TrueDevPct its deviation from the
	// mean of the execution's true per-node times.
	HasTruth   bool
	TrueNs     int64
	TrueDevPct float64
	// Lo and Hi bound the true time (HasBounds: from global time's bounds).
	HasBounds bool
	Lo, Hi    int64
}

// ErrSummary condenses the errors (measured - true) of a method.
type ErrSummary struct {
	N         int     `json:"n"`
	MeanNs    float64 `json:"mean_ns"` // signed
	P50AbsNs  float64 `json:"p50_abs_ns"`
	P99AbsNs  float64 `json:"p99_abs_ns"`
	MaxAbsNs  float64 `json:"max_abs_ns"`
	BoundsN   int     `json:"bounds_n"`            // values with bounds
	Coverage  float64 `json:"coverage"`            // share of those with the truth inside; -1 without bounds
	WidthMean float64 `json:"bound_width_mean_ns"` // mean Hi - Lo
}

// RankDev is one node's deviations from the mean under one method.
type RankDev struct {
	Rank       int     `json:"rank"`
	N          int     `json:"n"`
	MeanPct    float64 `json:"mean_pct"`
	MaxAbsPct  float64 `json:"max_abs_pct"`
	TrueMeanPc float64 `json:"true_mean_pct,omitempty"`
}

// MethodResult is one method over every execution it applies to.
type MethodResult struct {
	Name   string  `json:"name"`
	Values []Value `json:"-"`
	N      int     `json:"n"`
	MeanNs float64 `json:"mean_ns"` // mean measured time
	// DevMaxAbsPct and DevP99AbsPct: the spread of the deviations from the
	// mean (the papers' "within +-x%"); TrueDev* the same for the true
	// times of the same executions (what a perfect method would show).
	DevMaxAbsPct     float64     `json:"dev_max_abs_pct"`
	DevP99AbsPct     float64     `json:"dev_p99_abs_pct"`
	TrueDevMaxAbsPct float64     `json:"true_dev_max_abs_pct,omitempty"`
	TrueDevP99AbsPct float64     `json:"true_dev_p99_abs_pct,omitempty"`
	PerRank          []RankDev   `json:"per_rank,omitempty"`
	Err              *ErrSummary `json:"error,omitempty"` // nil without a truth
}

// LatencyMsg is one one-way message.
type LatencyMsg struct {
	Exec, From, To, Size int
	Ns                   int64 // global receive - global send
	Lo, Hi               int64 // bounds from the two readings' bounds
	HasTruth             bool
	TrueNs               int64
}

// LatencyPoint condenses the messages of one direction and size.
type LatencyPoint struct {
	From     int          `json:"from"`
	To       int          `json:"to"`
	Size     int          `json:"size"`
	N        int          `json:"n"`
	MinNs    float64      `json:"min_ns"`
	P10Ns    float64      `json:"p10_ns"`
	P50Ns    float64      `json:"p50_ns"`
	P90Ns    float64      `json:"p90_ns"`
	LoP50Ns  float64      `json:"lo_p50_ns"` // median lower bound
	HiP50Ns  float64      `json:"hi_p50_ns"` // median upper bound
	TrueP50  float64      `json:"true_p50_ns,omitempty"`
	TrueMin  float64      `json:"true_min_ns,omitempty"`
	Err      *ErrSummary  `json:"error,omitempty"`
	Messages []LatencyMsg `json:"-"`
}

// Result is the analysis of one measurement.
type Result struct {
	Nodes int `json:"nodes"`
	// Executions counts the complete executions per mode; Incomplete those
	// missing a node's stamp; Unsynced those with a global reading that
	// was not synced (left out of the global methods).
	Executions map[string]int `json:"executions"`
	Incomplete int            `json:"incomplete"`
	Unsynced   int            `json:"unsynced"`
	// LateP50Ns, LateP99Ns: how late the nodes started after the scheduled
	// instant, in their global time.
	LateP50Ns float64 `json:"late_p50_ns"`
	LateP99Ns float64 `json:"late_p99_ns"`
	// LateExecs counts the scheduled executions in which a node started
	// more than LateLimitNs after the instant. As ReproMPI does, they are
	// invalid: left out of (b), (c) and (b*) and counted here (kept when
	// LateLimitNs is negative).
	LateExecs   int   `json:"late_executions"`
	LateLimitNs int64 `json:"late_limit_ns"`
	KeptLate    bool  `json:"kept_late,omitempty"` // Options.LateLimitNs < 0: late executions kept
	// Scheduled counts the scheduled executions before the late ones were
	// left out.
	Scheduled int            `json:"scheduled_executions"`
	Methods   []MethodResult `json:"methods"`
	// Paper holds the methods as seed 003 presents them: each node's time
	// to a common end, its deviation in percent of the operation.
	Paper    []PaperView    `json:"paper"`
	Latency  []LatencyPoint `json:"latency,omitempty"`
	LostMsgs int            `json:"lost_messages,omitempty"`
	HasTruth bool           `json:"has_truth"`
}

// Method returns the result of the named method (nil when absent).
func (r *Result) Method(name string) *MethodResult {
	for i := range r.Methods {
		if r.Methods[i].Name == name {
			return &r.Methods[i]
		}
	}
	return nil
}

// LateLimitNs is how late after its scheduled instant a node may start
// before the execution counts as late and is left out: 100 us, a tenth of
// the operations the issue has in mind (about 1 ms).
const LateLimitNs = 100_000

// Options tune Analyze.
type Options struct {
	// LateLimitNs: a scheduled execution with a node that started more
	// than this after the instant is invalid (ReproMPI's window) and left
	// out; negative keeps every execution (and counts those more than
	// the constant LateLimitNs late).
	LateLimitNs int64
}

// DefaultOptions leave out executions with a node more than LateLimitNs
// late.
func DefaultOptions() Options { return Options{LateLimitNs: LateLimitNs} }

type execKey struct {
	mode Mode
	exec int
}

type pair struct {
	start, end *Stamp
}

// Analyze is AnalyzeWith and DefaultOptions.
func Analyze(stamps []Stamp, truth Truth) (*Result, error) {
	return AnalyzeWith(stamps, truth, DefaultOptions())
}

// AnalyzeWith computes every method's times from the stamps of all nodes
// and, with a truth, their errors. Stamps of the operations and of the
// latency test may be mixed.
func AnalyzeWith(stamps []Stamp, truth Truth, opt Options) (*Result, error) {
	limit, keepLate := opt.LateLimitNs, opt.LateLimitNs < 0
	if keepLate {
		limit = LateLimitNs
	}
	res := &Result{Executions: map[string]int{}, HasTruth: truth != nil, LateLimitNs: limit, KeptLate: keepLate}
	nodes := 0
	execs := map[execKey]map[int]*pair{}
	var lat []Stamp
	for i := range stamps {
		s := &stamps[i]
		if s.Mode == ModeLatency {
			lat = append(lat, *s)
			continue
		}
		nodes = max(nodes, s.Rank+1)
		k := execKey{s.Mode, s.Exec}
		m := execs[k]
		if m == nil {
			m = map[int]*pair{}
			execs[k] = m
		}
		p := m[s.Rank]
		if p == nil {
			p = &pair{}
			m[s.Rank] = p
		}
		switch s.Event {
		case EventStart:
			if p.start != nil {
				return nil, fmt.Errorf("measure: analyze: two start stamps of rank %d in %s execution %d", s.Rank, s.Mode, s.Exec)
			}
			p.start = s
		case EventEnd:
			if p.end != nil {
				return nil, fmt.Errorf("measure: analyze: two end stamps of rank %d in %s execution %d", s.Rank, s.Mode, s.Exec)
			}
			p.end = s
		}
	}
	res.Nodes = nodes
	keys := make([]execKey, 0, len(execs))
	for k := range execs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].mode != keys[j].mode {
			return keys[i].mode < keys[j].mode
		}
		return keys[i].exec < keys[j].exec
	})
	methods := map[string]*MethodResult{}
	order := []string{MethodBarrier, MethodGlobal, MethodWindow, MethodGlobalAtBarrier, MethodGlobalRetro}
	for _, n := range order {
		methods[n] = &MethodResult{Name: n}
	}
	paper := map[string]*PaperView{}
	for _, n := range order {
		paper[n] = &PaperView{Name: n}
	}
	var late []float64
	for _, k := range keys {
		m := execs[k]
		ps := make([]*pair, nodes)
		complete := true
		for r := range nodes {
			p := m[r]
			if p == nil || p.start == nil || p.end == nil {
				complete = false
				break
			}
			ps[r] = p
		}
		if !complete {
			res.Incomplete++
			continue
		}
		res.Executions[k.mode.String()]++
		var tEnd []int64
		var t0 int64
		if truth != nil {
			t0 = math.MaxInt64
			tEnd = make([]int64, nodes)
			for r, p := range ps {
				t0 = min(t0, truth(p.start.Raw))
				tEnd[r] = truth(p.end.Raw)
			}
		}
		trueOf := func(r int) int64 { return tEnd[r] - t0 }
		if k.mode == ModeBarrier {
			vals := make([]Value, nodes)
			for r, p := range ps {
				vals[r] = Value{Exec: k.exec, Rank: r, Ns: p.end.Local - p.start.Local}
				if truth != nil {
					vals[r].HasTruth, vals[r].TrueNs = true, trueOf(r)
				}
			}
			addExec(methods[MethodBarrier], vals)
			paper[MethodBarrier].add(paperLocal(ps, truth))
		}
		if k.mode == ModeScheduled {
			// ReproMPI's window: an execution with a node that started
			// late is invalid. The window opens at the execution's
			// earliest scheduled instant: a node that fell behind and
			// took a later slot of the grid (nextSlot) started late for
			// this execution however punctual it was for its own slot.
			res.Scheduled++
			isLate := false
			window := int64(math.MaxInt64)
			for _, p := range ps {
				window = min(window, p.start.Target)
			}
			for _, p := range ps {
				d := p.start.Global.Est - window
				late = append(late, float64(d))
				isLate = isLate || d > limit
			}
			if isLate && !keepLate {
				res.LateExecs++
				continue
			}
			if isLate {
				res.LateExecs++
			}
			if x, ok := paperGlobal(ps, func(s *Stamp) gtime.Time { return s.Retro }, truth); ok {
				paper[MethodGlobalRetro].add(x)
			}
			if vals, ok := globalValues(ps, k.exec, func(s *Stamp) gtime.Time { return s.Retro }); ok {
				if truth != nil {
					for r := range vals {
						vals[r].HasTruth, vals[r].TrueNs = true, trueOf(r)
					}
				}
				addExec(methods[MethodGlobalRetro], vals)
			}
		}
		synced := true
		for _, p := range ps {
			if p.start.Global.Status != gtime.StatusSynced || p.end.Global.Status != gtime.StatusSynced ||
				unbounded(p.start.Global) || unbounded(p.end.Global) {
				synced = false
			}
		}
		if !synced {
			res.Unsynced++
			continue
		}
		// The earliest start: its estimate and the bounds of the true
		// earliest start (the minimum of values each inside its bounds
		// lies inside the minima of the bounds).
		var s0, s0lo, s0hi int64 = math.MaxInt64, math.MaxInt64, math.MaxInt64
		var e1, e1lo, e1hi int64 = math.MinInt64, math.MinInt64, math.MinInt64
		for _, p := range ps {
			g := p.start.Global
			s0, s0lo, s0hi = min(s0, g.Est), min(s0lo, g.Earliest), min(s0hi, g.Latest)
			e := p.end.Global
			e1, e1lo, e1hi = max(e1, e.Est), max(e1lo, e.Earliest), max(e1hi, e.Latest)
		}
		vals := make([]Value, nodes)
		for r, p := range ps {
			e := p.end.Global
			vals[r] = Value{Exec: k.exec, Rank: r, Ns: e.Est - s0, HasBounds: true, Lo: e.Earliest - s0hi, Hi: e.Latest - s0lo}
			if truth != nil {
				vals[r].HasTruth, vals[r].TrueNs = true, trueOf(r)
			}
		}
		name := MethodGlobal
		if k.mode == ModeBarrier {
			name = MethodGlobalAtBarrier
		}
		addExec(methods[name], vals)
		if x, ok := paperGlobal(ps, func(s *Stamp) gtime.Time { return s.Global }, truth); ok {
			paper[name].add(x)
		}
		if k.mode == ModeScheduled {
			w := Value{Exec: k.exec, Rank: -1, Ns: e1 - s0, HasBounds: true, Lo: e1lo - s0hi, Hi: e1hi - s0lo}
			if truth != nil {
				w.HasTruth, w.TrueNs = true, slices.Max(tEnd)-t0
			}
			methods[MethodWindow].Values = append(methods[MethodWindow].Values, w)
		}
	}
	if len(late) > 0 {
		slices.Sort(late)
		res.LateP50Ns, res.LateP99Ns = quantile(late, 0.5), quantile(late, 0.99)
	}
	for _, n := range order {
		m := methods[n]
		if len(m.Values) == 0 {
			continue
		}
		summarize(m, nodes, truth != nil)
		res.Methods = append(res.Methods, *m)
	}
	for _, n := range order {
		if pv := paper[n]; pv.N > 0 {
			pv.finish()
			res.Paper = append(res.Paper, *pv)
		}
	}
	var err error
	res.Latency, res.LostMsgs, err = analyzeLatency(lat, truth)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// globalValues is (b)'s arithmetic on the readings read gives; ok false
// when one of them is not synced.
func globalValues(ps []*pair, exec int, read func(*Stamp) gtime.Time) ([]Value, bool) {
	var s0lo, s0hi, s0 int64 = math.MaxInt64, math.MaxInt64, math.MaxInt64
	for _, p := range ps {
		g, e := read(p.start), read(p.end)
		if g.Status != gtime.StatusSynced || e.Status != gtime.StatusSynced || unbounded(g) || unbounded(e) {
			return nil, false
		}
		s0, s0lo, s0hi = min(s0, g.Est), min(s0lo, g.Earliest), min(s0hi, g.Latest)
	}
	vals := make([]Value, len(ps))
	for r, p := range ps {
		e := read(p.end)
		vals[r] = Value{Exec: exec, Rank: r, Ns: e.Est - s0, HasBounds: true, Lo: e.Earliest - s0hi, Hi: e.Latest - s0lo}
	}
	return vals, true
}

// addExec appends one execution's per-node values with their deviations.
func addExec(m *MethodResult, vals []Value) {
	var mean, tmean float64
	for _, v := range vals {
		mean += float64(v.Ns)
		tmean += float64(v.TrueNs)
	}
	mean /= float64(len(vals))
	tmean /= float64(len(vals))
	for i := range vals {
		if mean != 0 {
			vals[i].DevPct = (float64(vals[i].Ns) - mean) / mean * 100
		}
		if vals[i].HasTruth && tmean != 0 {
			vals[i].TrueDevPct = (float64(vals[i].TrueNs) - tmean) / tmean * 100
		}
	}
	m.Values = append(m.Values, vals...)
}

func summarize(m *MethodResult, nodes int, hasTruth bool) {
	m.N = len(m.Values)
	var sum float64
	dev := make([]float64, 0, m.N)
	tdev := make([]float64, 0, m.N)
	perRank := make([]RankDev, nodes)
	for i := range perRank {
		perRank[i].Rank = i
	}
	var errs []float64
	var signed float64
	var boundsN, in int
	var width float64
	for _, v := range m.Values {
		sum += float64(v.Ns)
		dev = append(dev, math.Abs(v.DevPct))
		if v.HasTruth {
			tdev = append(tdev, math.Abs(v.TrueDevPct))
			e := float64(v.Ns - v.TrueNs)
			errs = append(errs, math.Abs(e))
			signed += e
			if v.HasBounds {
				boundsN++
				width += float64(v.Hi - v.Lo)
				if v.Lo <= v.TrueNs && v.TrueNs <= v.Hi {
					in++
				}
			}
		}
		if v.Rank >= 0 && v.Rank < nodes {
			rd := &perRank[v.Rank]
			rd.N++
			rd.MeanPct += v.DevPct
			rd.MaxAbsPct = max(rd.MaxAbsPct, math.Abs(v.DevPct))
			rd.TrueMeanPc += v.TrueDevPct
		}
	}
	m.MeanNs = sum / float64(m.N)
	slices.Sort(dev)
	m.DevMaxAbsPct, m.DevP99AbsPct = dev[len(dev)-1], quantile(dev, 0.99)
	if len(tdev) > 0 {
		slices.Sort(tdev)
		m.TrueDevMaxAbsPct, m.TrueDevP99AbsPct = tdev[len(tdev)-1], quantile(tdev, 0.99)
	}
	for _, rd := range perRank {
		if rd.N > 0 {
			rd.MeanPct /= float64(rd.N)
			rd.TrueMeanPc /= float64(rd.N)
			m.PerRank = append(m.PerRank, rd)
		}
	}
	if hasTruth && len(errs) > 0 {
		m.Err = condense(errs, signed, boundsN, in, width)
	}
}

func condense(abs []float64, signed float64, boundsN, in int, width float64) *ErrSummary {
	slices.Sort(abs)
	e := &ErrSummary{N: len(abs), MeanNs: signed / float64(len(abs)), P50AbsNs: quantile(abs, 0.5),
		P99AbsNs: quantile(abs, 0.99), MaxAbsNs: abs[len(abs)-1], BoundsN: boundsN, Coverage: -1}
	if boundsN > 0 {
		e.Coverage = float64(in) / float64(boundsN)
		e.WidthMean = width / float64(boundsN)
	}
	return e
}

// quantile is the nearest-rank q-quantile of sorted values (NaN for
// none): gonum's stat.Quantile, stat.Empirical, as internal/quantile's Of
// takes it for int64s; these values are float64s (percentages, ns).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return stat.Quantile(min(max(q, 0), 1), stat.Empirical, sorted, nil)
}

type latKey struct{ exec, from int }

// analyzeLatency pairs every message's transmit and receive stamps.
func analyzeLatency(lat []Stamp, truth Truth) ([]LatencyPoint, int, error) {
	if len(lat) == 0 {
		return nil, 0, nil
	}
	tx := map[latKey]Stamp{}
	rx := map[latKey]Stamp{}
	for _, s := range lat {
		switch s.Event {
		case EventTx:
			k := latKey{s.Exec, s.Rank}
			if _, dup := tx[k]; dup {
				return nil, 0, fmt.Errorf("measure: analyze: two tx stamps of message %d from rank %d", s.Exec, s.Rank)
			}
			tx[k] = s
		case EventRx:
			k := latKey{s.Exec, s.Peer}
			if _, dup := rx[k]; dup {
				return nil, 0, fmt.Errorf("measure: analyze: two rx stamps of message %d from rank %d", s.Exec, s.Peer)
			}
			rx[k] = s
		}
	}
	type ptKey struct{ from, to, size int }
	points := map[ptKey]*LatencyPoint{}
	lost := 0
	for k, t := range tx {
		r, ok := rx[k]
		if !ok || r.Rank != t.Peer || r.Size != t.Size {
			lost++
			continue
		}
		if t.Global.Status != gtime.StatusSynced || r.Global.Status != gtime.StatusSynced || unbounded(t.Global) || unbounded(r.Global) {
			lost++
			continue
		}
		m := LatencyMsg{Exec: k.exec, From: t.Rank, To: r.Rank, Size: t.Size, Ns: r.Global.Est - t.Global.Est,
			Lo: r.Global.Earliest - t.Global.Latest, Hi: r.Global.Latest - t.Global.Earliest}
		if truth != nil {
			m.HasTruth, m.TrueNs = true, truth(r.Raw)-truth(t.Raw)
		}
		pk := ptKey{m.From, m.To, m.Size}
		p := points[pk]
		if p == nil {
			p = &LatencyPoint{From: m.From, To: m.To, Size: m.Size}
			points[pk] = p
		}
		p.Messages = append(p.Messages, m)
	}
	var out []LatencyPoint
	for _, p := range points {
		slices.SortFunc(p.Messages, func(a, b LatencyMsg) int { return a.Exec - b.Exec })
		p.N = len(p.Messages)
		var est, lo, hi, tr, errs []float64
		var signed float64
		var in int
		var width float64
		for _, m := range p.Messages {
			est = append(est, float64(m.Ns))
			lo = append(lo, float64(m.Lo))
			hi = append(hi, float64(m.Hi))
			width += float64(m.Hi - m.Lo)
			if m.HasTruth {
				tr = append(tr, float64(m.TrueNs))
				e := float64(m.Ns - m.TrueNs)
				errs = append(errs, math.Abs(e))
				signed += e
				if m.Lo <= m.TrueNs && m.TrueNs <= m.Hi {
					in++
				}
			}
		}
		for _, s := range [][]float64{est, lo, hi, tr} {
			slices.Sort(s)
		}
		p.MinNs, p.P10Ns, p.P50Ns, p.P90Ns = est[0], quantile(est, 0.1), quantile(est, 0.5), quantile(est, 0.9)
		p.LoP50Ns, p.HiP50Ns = quantile(lo, 0.5), quantile(hi, 0.5)
		if len(tr) > 0 {
			p.TrueP50, p.TrueMin = quantile(tr, 0.5), tr[0]
			p.Err = condense(errs, signed, len(errs), in, width)
		}
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b LatencyPoint) int {
		if a.From != b.From {
			return a.From - b.From
		}
		return a.Size - b.Size
	})
	for _, k := range keysOf(rx) {
		if _, ok := tx[k]; !ok {
			lost++ // a receive without its send: the sender's file is missing it
		}
	}
	return out, lost, nil
}

func keysOf(m map[latKey]Stamp) []latKey {
	out := make([]latKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
