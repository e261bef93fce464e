package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// FormatNs writes a nanosecond quantity with a readable unit: 850ns,
// 1.25us, 3.40ms, 2.0s.
func FormatNs(v float64) string {
	a := math.Abs(v)
	switch {
	case math.IsInf(v, 0) || math.IsNaN(v):
		return fmt.Sprint(v)
	case a < 1e3:
		return fmt.Sprintf("%.0fns", v)
	case a < 1e6:
		return fmt.Sprintf("%.3gus", v/1e3)
	case a < 1e9:
		return fmt.Sprintf("%.3gms", v/1e6)
	default:
		return fmt.Sprintf("%.3gs", v/1e9)
	}
}

// maxTableNodes is the number of node rows the table prints: all nodes up
// to it, else the worst by p99 error.
const maxTableNodes = 32

// WriteTable prints a readable report of the run.
func WriteTable(w io.Writer, res *Result) error {
	sc := &res.Scenario
	mode := "adaptive"
	if !sc.Engine.Adaptive {
		mode = "non-adaptive"
	}
	fmt.Fprintf(w, "scenario %s: %d nodes, %s, %v simulated, seed %d, estimator %s, %s\n",
		sc.Name, sc.Nodes, sc.Topology.Kind, time.Duration(sc.Duration), sc.Seed, sc.Engine.Estimator, mode)
	rate := 0.0
	if res.Wall > 0 {
		rate = float64(res.Events) / res.Wall.Seconds()
	}
	fmt.Fprintf(w, "%d events in %v (%.3g events/s), %d messages; statistics after %v of warm-up\n\n",
		res.Events, res.Wall.Round(time.Millisecond), rate, res.Messages, time.Duration(sc.Eval.Warmup))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\terr mean\terr std\tp50\tp99\tmax\tcoverage (synced)\t(all)\twidth mean\tmono mean\tsynced\tstale\tdegraded\tunsynced\tmsgs/s\t")
	row := func(name string, s Summary) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%.4f\t%s\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.2f\t\n", name,
			FormatNs(s.ErrorMeanNs), FormatNs(s.ErrorStdNs), FormatNs(float64(s.ErrorP50Ns)), FormatNs(float64(s.ErrorP99Ns)),
			FormatNs(float64(s.ErrorMaxNs)), s.BoundCoverage, s.BoundCoverageAll, FormatNs(s.BoundWidthMeanNs), FormatNs(s.MonoErrorMeanNs),
			s.StatusShare["synced"], s.StatusShare["stale"], s.StatusShare["degraded"], s.StatusShare["unsynced"], s.MessagesPerNodePerS)
	}
	row("all", res.Summary)
	nodes := res.Nodes
	title := ""
	if len(nodes) > maxTableNodes {
		nodes = append([]Summary(nil), nodes...)
		sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].ErrorP99Ns > nodes[j].ErrorP99Ns })
		nodes = nodes[:maxTableNodes]
		title = fmt.Sprintf("(the %d nodes with the largest p99 error)", maxTableNodes)
	}
	for _, n := range nodes {
		name := fmt.Sprint(n.ID)
		if n.ID == sc.Reference {
			name += " (ref)"
		}
		row(name, n)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("writing the table: %w", err)
	}
	if title != "" {
		fmt.Fprintln(w, title)
	}
	quantiles := "p50/p99 exact (empirical quantiles)"
	if r := res.Summary.QuantileResolution; r > 0 {
		quantiles = fmt.Sprintf("p50/p99 within %.1f%%", 100*r/2)
	}
	fmt.Fprintf(w, "\nerror = Est - truth (reference's ideal clock); mean/p50/p99/max of |error|, std of error;\n"+
		"%s; coverage (synced) = share of the reads claiming synced with the truth inside\n"+
		"[Earliest, Latest] (a synced read is a promise), (all) = the same over every read with an estimate;\n"+
		"synced/stale/degraded/unsynced = share of reads in each status;\n"+
		"\"all\" includes the reference, whose reads differ from its ideal clock by read jitter and granularity.\n",
		quantiles)
	a := res.Agreement
	fmt.Fprintf(w, "\none time (no truth needed): %d of %d instants with synced reads sharing no point", a.Violations, a.Instants)
	if a.Violations > 0 {
		fmt.Fprintf(w, " (gap up to %s, first at %v)", FormatNs(float64(a.MaxGap)), time.Duration(a.First-Origin))
	}
	fmt.Fprintln(w)
	if f := res.Failover; f != nil {
		var back []string
		for _, d := range f.BackInSync {
			back = append(back, time.Duration(d).String())
		}
		fmt.Fprintf(w, "failover: %d reference changes, last term %d, %d evaluations with two leased references, %d messages of an older term refused;\n"+
			"back in sync after each fault %v, largest jump of served time %s, %d reads backwards\n",
			f.Changes, f.Terms, f.TwoReferences, f.StaleTerm, back, FormatNs(float64(f.MaxJump)), f.Backwards)
	}
	if rt := res.RealTime; rt != nil {
		fmt.Fprintf(w, "\nreal time (%s): %d synced served reads, coverage %.6f against the true served scale, %d blind (after a CLOCK_REALTIME step, before the next model), %d unserved;\n"+
			"max |served - truth| %s, max width %s, served rate per local ns [%.6f, %.6f], %d backward; %d jumps detected, %d polls (%d failed), %d segments, %d messages\n",
			rt.Mode, rt.Reads, rt.Coverage, rt.Blind, rt.Unserved, FormatNs(float64(rt.MaxAbsErr)), FormatNs(float64(rt.MaxWidth)),
			rt.MinRate, rt.MaxRate, rt.Backward, rt.Jumps, rt.Polls, rt.PollFails, rt.Segments, rt.Messages)
		if rt.UpstreamUnserved+rt.UpstreamLate+rt.LeapNodes > 0 {
			fmt.Fprintf(w, "upstream: %d synced engine reads unserved (the reference's CLOCK_REALTIME unsynchronised), %d served late in an unsynced span, %d nodes know the leap second\n",
				rt.UpstreamUnserved, rt.UpstreamLate, rt.LeapNodes)
		}
		if rt.Mode == "mean-drift" {
			fmt.Fprintf(w, "mean rate 1%+.4f ppm, the clocks' mean 1%+.4f ppm\n", (rt.Mean-1)*1e6, (rt.TrueMean-1)*1e6)
		}
	}
	return nil
}

// WriteJSON prints the result as indented JSON.
func WriteJSON(w io.Writer, res *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Errorf("encoding the result as JSON: %w", err)
	}
	return nil
}

// Describe is a one-line account of a scenario for lists.
func Describe(s Scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-32s %s", s.Name, s.Description)
	return b.String()
}
