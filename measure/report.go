package measure

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Targets are the targets for the execution-time methods (in the
// lab, an operation of about 1 ms).
type Targets struct {
	// GlobalP99Ns: the global-time method's |error| p99 at most this.
	GlobalP99Ns float64 `json:"global_p99_ns"`
	// Ratio: the barrier-aligned method's |error| p99 at least this many
	// times the global-time method's.
	Ratio float64 `json:"ratio"`
	// Coverage: the share of executions whose true time lies inside the
	// global-time method's bounds, at least this.
	Coverage float64 `json:"coverage"`
}

// DefaultTargets: p99 <= 1 us, 10x below the barrier-aligned method, the
// bounds hold every time.
func DefaultTargets() Targets { return Targets{GlobalP99Ns: 1000, Ratio: 10, Coverage: 1} }

// Check is one target held against a measurement.
type Check struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	OK   bool   `json:"ok"`
}

// Check holds the result to the targets; it needs a truth (the lab).
func (r *Result) Check(t Targets) []Check {
	g, b := r.Method(MethodGlobal), r.Method(MethodBarrier)
	var out []Check
	if g == nil || g.Err == nil {
		return []Check{{Name: "global-time method measured against the truth", Want: "yes", Got: "no", OK: false}}
	}
	out = append(out, Check{Name: "global-time method |error| p99", Want: fmt.Sprintf("<= %s", ns(t.GlobalP99Ns)),
		Got: ns(g.Err.P99AbsNs), OK: g.Err.P99AbsNs <= t.GlobalP99Ns})
	if b != nil && b.Err != nil {
		ratio := b.Err.P99AbsNs / math.Max(g.Err.P99AbsNs, 1)
		out = append(out, Check{Name: "barrier-aligned p99 / global-time p99", Want: fmt.Sprintf(">= %.0fx", t.Ratio),
			Got: fmt.Sprintf("%.1fx (%s / %s)", ratio, ns(b.Err.P99AbsNs), ns(g.Err.P99AbsNs)), OK: ratio >= t.Ratio})
	}
	out = append(out, Check{Name: "true time inside the global-time bounds", Want: fmt.Sprintf(">= %.0f%%", 100*t.Coverage),
		Got: fmt.Sprintf("%.2f%% of %d", 100*g.Err.Coverage, g.Err.BoundsN), OK: g.Err.Coverage >= t.Coverage})
	if w := r.Method(MethodWindow); w != nil && w.Err != nil {
		out = append(out, Check{Name: "true window inside the window's bounds", Want: fmt.Sprintf(">= %.0f%%", 100*t.Coverage),
			Got: fmt.Sprintf("%.2f%% of %d", 100*w.Err.Coverage, w.Err.BoundsN), OK: w.Err.Coverage >= t.Coverage})
	}
	return out
}

// LatencyCheck: every message's true latency inside its bounds.
func (r *Result) LatencyCheck() Check {
	n, in := 0, 0.0
	for _, p := range r.Latency {
		if p.Err != nil {
			n += p.Err.BoundsN
			in += p.Err.Coverage * float64(p.Err.BoundsN)
		}
	}
	if n == 0 {
		return Check{Name: "true latency inside the bounds", Want: "100%", Got: "no truth", OK: false}
	}
	return Check{Name: "true latency inside the bounds", Want: "100%", Got: fmt.Sprintf("%.2f%% of %d", 100*in/float64(n), n),
		OK: math.Round(in) == float64(n)}
}

// ns formats a duration in ns with a readable unit.
func ns(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a >= 1e6:
		return fmt.Sprintf("%.3f ms", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.2f us", v/1e3)
	default:
		return fmt.Sprintf("%.0f ns", v)
	}
}

// methodTitle says what each method is, for tables.
var methodTitle = map[string]string{
	MethodBarrier:         "(a) barrier-aligned, own clock (MPI_Barrier way)",
	MethodGlobal:          "(b) scheduled start, global stamps (PGCCS way)",
	MethodWindow:          "(c) ReproMPI window (latest end - earliest start)",
	MethodGlobalAtBarrier: "(b') the barrier-started executions in global time",
	MethodGlobalRetro:     "(b*) (b) with the stamps read again at the end (after the fact)",
}

// paperPct are seed 003's deviations (MPI_Reduce, 16 nodes).
var paperPct = map[string]string{
	MethodBarrier: "+-1.8% (MPI_Barrier over Ethernet)",
	MethodGlobal:  "+-0.04% (PGCCS global counter)",
}

// WriteMarkdown writes the report of the execution-time methods (when the
// result has executions) and of the latency test (when it has messages).
// targets nil: no target table.
func WriteMarkdown(w io.Writer, r *Result, targets *Targets) error {
	var b strings.Builder
	if len(r.Methods) > 0 {
		writeMethods(&b, r, targets)
	}
	if len(r.Latency) > 0 {
		writeLatency(&b, r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMethods(b *strings.Builder, r *Result, targets *Targets) {
	fmt.Fprintf(b, "Executions: %d scheduled, %d barrier-started on %d nodes (%d incomplete, %d with a global reading not synced).",
		r.Executions[ModeScheduled.String()], r.Executions[ModeBarrier.String()], r.Nodes, r.Incomplete, r.Unsynced)
	if r.Scheduled > 0 {
		fmt.Fprintf(b, " Scheduled starts: the nodes started %s late (median; p99 %s) in their global time; %d of %d scheduled executions had a node more than %s late",
			ns(r.LateP50Ns), ns(r.LateP99Ns), r.LateExecs, r.Scheduled, ns(float64(r.LateLimitNs)))
		if !r.KeptLate {
			b.WriteString(" and were left out as ReproMPI leaves them out (invalid: the window started without them).")
		} else {
			b.WriteString(" (kept).")
		}
	}
	b.WriteString("\n\n")
	writePaper(b, r)
	b.WriteString("Deviation of each node's time from the mean of its execution (the paper's figures 10-14):\n\n")
	b.WriteString("| method | values | mean time | deviation max / p99 | paper | true spread max / p99 |\n|---|---|---|---|---|---|\n")
	for _, m := range r.Methods {
		if m.Name == MethodWindow {
			fmt.Fprintf(b, "| %s | %d | %s | (one value per execution) | | |\n", methodTitle[m.Name], m.N, ns(m.MeanNs))
			continue
		}
		truth := ""
		if r.HasTruth {
			truth = fmt.Sprintf("+-%.3f%% / %.3f%%", m.TrueDevMaxAbsPct, m.TrueDevP99AbsPct)
		}
		fmt.Fprintf(b, "| %s | %d | %s | +-%.3f%% / %.3f%% | %s | %s |\n", methodTitle[m.Name], m.N, ns(m.MeanNs),
			m.DevMaxAbsPct, m.DevP99AbsPct, paperPct[m.Name], truth)
	}
	b.WriteString("| hardware barrier (SCC_Barrier) | | | no such hardware here | +-0.24% | |\n")
	b.WriteString("\nPer node, mean deviation (max |deviation|), %:\n\n| rank |")
	var per []MethodResult
	for _, m := range r.Methods {
		if m.Name != MethodWindow {
			per = append(per, m)
			fmt.Fprintf(b, " %s |", m.Name)
		}
	}
	if r.HasTruth && len(per) > 0 {
		b.WriteString(" true (same executions as global) |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(per)+map[bool]int{true: 1}[r.HasTruth && len(per) > 0]) + "\n")
	for rank := range r.Nodes {
		fmt.Fprintf(b, "| %d |", rank)
		var trueMean float64
		for _, m := range per {
			for _, rd := range m.PerRank {
				if rd.Rank == rank {
					fmt.Fprintf(b, " %+.3f (%.3f) |", rd.MeanPct, rd.MaxAbsPct)
					if m.Name == MethodGlobal {
						trueMean = rd.TrueMeanPc
					}
				}
			}
		}
		if r.HasTruth && len(per) > 0 {
			fmt.Fprintf(b, " %+.3f |", trueMean)
		}
		b.WriteString("\n")
	}
	if !r.HasTruth {
		return
	}
	b.WriteString("\nError of each method's time against the true time (the lab knows every clock):\n\n")
	b.WriteString("| method | values | error mean | abs p50 | abs p99 | abs max | truth inside the bounds | mean bound width |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range r.Methods {
		e := m.Err
		if e == nil {
			continue
		}
		cov, width := "no bounds", ""
		if e.Coverage >= 0 {
			cov, width = fmt.Sprintf("%.2f%% of %d", 100*e.Coverage, e.BoundsN), ns(e.WidthMean)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", methodTitle[m.Name], e.N, ns(e.MeanNs), ns(e.P50AbsNs),
			ns(e.P99AbsNs), ns(e.MaxAbsNs), cov, width)
	}
	if targets != nil {
		b.WriteString("\nTargets:\n\n| target | want | measured | met |\n|---|---|---|---|\n")
		for _, c := range r.Check(*targets) {
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", c.Name, c.Want, c.Got, map[bool]string{true: "yes", false: "**no**"}[c.OK])
		}
	}
}

// paperOf is seed 003's figure for a method's paper view.
var paperOf = map[string]string{
	MethodBarrier: "+-1.8% (MPI_Barrier)",
	MethodGlobal:  "+-0.04% (PGCCS)",
}

func pct(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

func bands(w [3]float64) string { return pct(w[0]) + " / " + pct(w[1]) + " / " + pct(w[2]) }

// writePaper is the table of the methods as seed 003 presents them.
func writePaper(b *strings.Builder, r *Result) {
	if len(r.Paper) == 0 {
		return
	}
	b.WriteString("As seed 003 presents it (figures 10-14): each node's time to the operation's common end " +
		"(global methods: max_j global(end_j) - global(start_i); (a): its own clock from barrier exit to barrier exit), " +
		"its deviation from the mean of the execution in % of the operation, and the share of node times within the paper's " +
		"+-1.8% (MPI_Barrier) / +-0.24% (hardware barrier) / +-0.04% (PGCCS):\n\n")
	b.WriteString("| method | node times | operation (mean) | deviation p99 / max | within +-1.8 / 0.24 / 0.04% | paper | bounds: mean width (% of the op), p99 half-width |")
	if r.HasTruth {
		b.WriteString(" true times within +-1.8 / 0.24 / 0.04% | clock-only error in % of the op, abs p50 / p99 / max | clock-only error within +-1.8 / 0.24 / 0.04% |" +
			" start skew in % of the op (true, no clock's doing), p50 / p99 / max | error against the whole op in % (clock + start skew), abs p50 / p99 / max | truth inside the bounds |")
	}
	b.WriteString("\n|---|---|---|---|---|---|---|")
	if r.HasTruth {
		b.WriteString("---|---|---|---|---|---|")
	}
	b.WriteString("\n")
	for _, m := range r.Paper {
		bnd := "no bounds (own clock)"
		if m.BoundsN > 0 {
			bnd = fmt.Sprintf("%s (%.3f%%), +-%.3f%%", ns(m.WidthMeanNs), m.WidthMeanPct, m.BoundHalfP99)
		}
		fmt.Fprintf(b, "| %s | %d | %s | +-%.3f%% / +-%.3f%% | %s | %s | %s |", methodTitle[m.Name], m.N, ns(m.MeanNs),
			m.DevP99AbsPct, m.DevMaxAbsPct, bands(m.Within), paperOf[m.Name], bnd)
		if r.HasTruth {
			if m.HasTruth {
				cov := "no bounds"
				if m.Coverage >= 0 {
					cov = fmt.Sprintf("%.2f%%", 100*m.Coverage)
				}
				fmt.Fprintf(b, " %s | %.4f%% / %.4f%% / %.4f%% | %s | %.4f%% / %.4f%% / %.4f%% | %.4f%% / %.4f%% / %.4f%% | %s |", bands(m.TrueWithin),
					m.ClockErrP50Pct, m.ClockErrP99Pct, m.ClockErrMaxPct, bands(m.ClockErrWithin),
					m.SkewP50Pct, m.SkewP99Pct, m.SkewMaxPct, m.ErrP50Pct, m.ErrP99Pct, m.ErrMaxPct, cov)
			} else {
				b.WriteString(" | | | | | |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("| hardware barrier (SCC_Barrier) | | | | | +-0.24% | |")
	if r.HasTruth {
		b.WriteString(" | | | | | |")
	}
	b.WriteString("\n\n")
	if r.HasTruth {
		b.WriteString("The error against the whole operation (latest true end - earliest true start) is two things added: the clock-only error, " +
			"what the stamps get wrong against the truth (global methods: the global-time stamps of the node's start and of the common end; " +
			"(a): the node's own clock over its interval), and the start skew, how much later than the first node this node really started. " +
			"For the global methods the start skew is real, the stamps see it and no clock causes it: compare their clock-only error with the paper's " +
			"+-0.04% (PGCCS). For (a) the start skew is the spread of the barrier's exits, which the method takes as zero: it is (a)'s error, " +
			"as the paper's +-1.8% (MPI_Barrier) counts it.\n\n")
	}
}

func writeLatency(b *strings.Builder, r *Result) {
	b.WriteString("\nOne-way latency from global timestamps (kernel transmit stamp of the first datagram to kernel receive stamp of the last), per size and direction:\n\n")
	b.WriteString("| direction | size | messages | estimate p50 (p10..p90) | bounds (medians) |")
	if r.HasTruth {
		b.WriteString(" true p50 | error mean | abs p99 | truth inside the bounds |")
	}
	b.WriteString("\n|---|---|---|---|---|")
	if r.HasTruth {
		b.WriteString("---|---|---|---|")
	}
	b.WriteString("\n")
	for _, p := range r.Latency {
		fmt.Fprintf(b, "| %d->%d | %s | %d | %s (%s..%s) | [%s, %s] |", p.From, p.To, bytesStr(p.Size), p.N, ns(p.P50Ns), ns(p.P10Ns), ns(p.P90Ns),
			ns(p.LoP50Ns), ns(p.HiP50Ns))
		if p.Err != nil {
			fmt.Fprintf(b, " %s | %s | %s | %.1f%% |", ns(p.TrueP50), ns(p.Err.MeanNs), ns(p.Err.P99AbsNs), 100*p.Err.Coverage)
		}
		b.WriteString("\n")
	}
	if r.LostMsgs > 0 {
		fmt.Fprintf(b, "\n%d messages lost or not synced (left out).\n", r.LostMsgs)
	}
	if !r.HasTruth {
		return
	}
	est, tru, ok := r.Asymmetry()
	if !ok {
		return
	}
	c := r.LatencyCheck()
	fmt.Fprintf(b, "\nAsymmetry (half the difference of the fastest message each way, 0->1 minus 1->0, median over sizes): estimated %s, true %s. %s: %s.\n",
		ns(est), ns(tru), c.Name, c.Got)
	b.WriteString("\nWhy the point estimate cannot see an asymmetry: global time comes from two-way exchanges, which measure only the sum of the two one-way delays. " +
		"A link that is d slower one way than the other and a clock that is d/2 off produce exactly the same exchanges, so the synchronization puts the clock d/2 off " +
		"and every one-way estimate is biased by d/2: the slow direction looks d/2 faster, the fast one d/2 slower, and the two estimates come out equal. " +
		"The bounds do not assume symmetry (they only use causality: a message arrives after it leaves), so the truth stays inside them; their width, about the round trip, " +
		"is the price of not knowing the split.\n")
}

// Asymmetry returns half the difference of the two directions' fastest
// messages (0->1 minus 1->0), estimated and true, as medians over sizes.
// The fastest message each way shows the link's floor, which jitter does
// not blur as it blurs a median of a few tens of messages.
func (r *Result) Asymmetry() (est, truth float64, ok bool) {
	type pair struct{ f, rv *LatencyPoint }
	bySize := map[int]*pair{}
	for i := range r.Latency {
		p := &r.Latency[i]
		q := bySize[p.Size]
		if q == nil {
			q = &pair{}
			bySize[p.Size] = q
		}
		if p.From == 0 {
			q.f = p
		} else {
			q.rv = p
		}
	}
	var es, ts []float64
	for _, q := range bySize {
		if q.f != nil && q.rv != nil {
			es = append(es, (q.f.MinNs-q.rv.MinNs)/2)
			ts = append(ts, (q.f.TrueMin-q.rv.TrueMin)/2)
		}
	}
	if len(es) == 0 {
		return 0, 0, false
	}
	sortF(es)
	sortF(ts)
	return quantile(es, 0.5), quantile(ts, 0.5), true
}

func bytesStr(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

func sortF(v []float64) { slices.Sort(v) }
