// Package linkmatrix runs the link matrix (issue 28) in the simulator: for
// every class of netmodel.Matrix and every seed, the same scenario three
// times: gclock as shipped, gclock with its centre line on the fastest
// exchanges alone (the estimator before the body line), and the chrony
// stand-in (sim.NewChronyNode); the first run also computes every host's
// limit (sim.Options.Limit). The report holds, per class, the medians of
// the runs' figures and how many runs met issue 28's ordering: gclock's
// median at most a third of chrony's, its p99 below chrony's, its median
// within 1.5x of what the data allowed, every synced read inside its
// bounds.
//
//	rep, err := linkmatrix.Run(ctx, linkmatrix.Spec{Seeds: seeds})
//	rep.WriteMarkdown(os.Stdout)
//
// `gclock sim matrix` is its command.
package linkmatrix

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gclock/gclock/eval/limit"
	"github.com/gclock/gclock/netmodel"
	"github.com/gclock/gclock/sim"
)

// Spec is one matrix run.
type Spec struct {
	// Base is the scenario every class runs on (its links.model replaced);
	// zero: the shipped link-matrix scenario.
	Base *sim.Scenario
	// Classes to run; nil: all of netmodel.Matrix.
	Classes []netmodel.LinkClass
	// Seeds of each class's runs.
	Seeds []uint64
	// Workers run in parallel; 0: GOMAXPROCS.
	Workers int
	// Duration, when positive, replaces the base scenario's simulated
	// duration (runs longer than the lab bench's, where the wander counts).
	Duration time.Duration
}

// Host is one host of one run.
type Host struct {
	Node int `json:"node"`
	// gclock as shipped, gclock floor-only, chrony stand-in: median and
	// p99 |error| (ns).
	Median, P99           float64
	FloorMedian, FloorP99 float64
	ChronyMedian          float64
	ChronyP99             float64
	// Limit is the host's median (ns) under the run's best textbook
	// estimator (limit.Common), Luckiest the least of its own medians and
	// LuckiestName that estimator's.
	Limit        float64
	Luckiest     float64
	LuckiestName string
	// Oracle is the median of the Kalman filter told the clocks' true
	// wander (eval/limit's oracle), ns.
	Oracle float64
}

// Row is one class and seed.
type Row struct {
	Class string `json:"class"`
	Seed  uint64 `json:"seed"`
	// Cluster figures (every host but the reference): gclock, floor-only,
	// chrony, median and p99 |error| (ns); synced coverage.
	Median, P99           float64
	FloorMedian, FloorP99 float64
	ChronyMedian          float64
	ChronyP99             float64
	Coverage              float64
	// Limit is the run's limit (ns): the mean over hosts of the medians
	// of the one textbook estimator whose mean is least (limit.Common),
	// LimitName it; the cluster's median on the same footing. Luckiest
	// is the mean over hosts of each host's own best (the limit before
	// stop 46).
	Limit     float64
	LimitName string
	Luckiest  float64
	// Oracle is the mean over hosts of each host's oracle (ns).
	Oracle float64
	Hosts  []Host `json:"hosts"`
}

// Met says which of issue 28's targets the run met.
func (r Row) Met() (vsChrony, p99, limit, coverage bool) {
	return r.Median <= r.ChronyMedian/3, r.P99 < r.ChronyP99, r.Median <= 1.5*r.Limit, r.Coverage >= 1
}

// OracleMet says whether the run's median was within 1.5x of its oracle,
// and whether the oracle itself was at most a third of chrony's median:
// whether the exchanges allowed that target at all.
func (r Row) OracleMet() (near, allowed bool) {
	return r.Median <= 1.5*r.Oracle, r.Oracle <= r.ChronyMedian/3
}

// Class is one class's summary over its runs.
type Class struct {
	netmodel.LinkClass
	Runs int
	// Medians over the runs of the runs' figures (ns).
	Median, P99, FloorMedian, ChronyMedian, ChronyP99, Limit, Luckiest, Oracle float64
	// Runs that met each target.
	VsChrony, BelowChronyP99, NearLimit, Covered int
	// Runs within 1.5x of the oracle, and runs whose oracle was at most
	// a third of chrony's median.
	NearOracle, OracleVsChrony int
	// LimitBest counts which textbook estimator was the runs' best.
	LimitBest map[string]int
}

// Report is a matrix run's result.
type Report struct {
	Seeds   []uint64
	Classes []Class
	Runs    []Row
}

// Run runs the matrix.
func Run(ctx context.Context, spec Spec) (*Report, error) {
	base := spec.Base
	if base == nil {
		sc, err := sim.Shipped("link-matrix")
		if err != nil {
			return nil, err
		}
		base = &sc
	}
	if len(base.Faults) > 0 || len(base.Failover.Order) > 0 {
		return nil, fmt.Errorf("linkmatrix: scenario %s stops, pauses or fails over nodes (faults, failover): the chrony stand-in runs none of that; run it with gclock sim", base.Name)
	}
	if spec.Duration < 0 {
		return nil, fmt.Errorf("linkmatrix: duration %v: want a positive duration (or 0: the scenario's)", spec.Duration)
	}
	if spec.Duration > 0 {
		sc := *base
		sc.Duration = sim.Duration(spec.Duration)
		base = &sc
	}
	classes := spec.Classes
	if classes == nil {
		classes = netmodel.Matrix()
	}
	if len(spec.Seeds) == 0 {
		return nil, fmt.Errorf("linkmatrix: no seeds")
	}
	type job struct {
		class netmodel.LinkClass
		seed  uint64
		i     int
	}
	runs := make([]Row, len(classes)*len(spec.Seeds))
	errs := make([]error, len(runs))
	jobs := make(chan job)
	workers := spec.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				runs[j.i], errs[j.i] = runOne(ctx, *base, j.class, j.seed)
			}
		}()
	}
	i := 0
	for _, c := range classes {
		for _, s := range spec.Seeds {
			select {
			case jobs <- job{c, s, i}:
			case <-ctx.Done():
			}
			i++
		}
	}
	close(jobs)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("linkmatrix: class %s seed %d: %w", runs[i].Class, runs[i].Seed, err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &Report{Seeds: spec.Seeds, Runs: runs}
	for ci, c := range classes {
		rep.Classes = append(rep.Classes, summarise(c, runs[ci*len(spec.Seeds):(ci+1)*len(spec.Seeds)]))
	}
	return rep, nil
}

// runOne runs one class and seed three ways.
func runOne(ctx context.Context, base sim.Scenario, c netmodel.LinkClass, seed uint64) (Row, error) {
	out := Row{Class: c.Name, Seed: seed}
	sc := base
	sc.Seed = seed
	sc.Links = netmodel.Spec{Model: c.Link, Loss: base.Links.Loss, Duplicate: base.Links.Duplicate, Reorder: base.Links.Reorder, ReorderDelay: base.Links.ReorderDelay}
	g, err := sim.Run(ctx, sc, sim.Options{Limit: true})
	if err != nil {
		return out, err
	}
	fl := sc
	fl.Engine.CenterFloorOnly = true
	f, err := sim.Run(ctx, fl, sim.Options{})
	if err != nil {
		return out, fmt.Errorf("floor-only: %w", err)
	}
	ch, err := sim.Run(ctx, sc, sim.Options{NewNode: sim.NewChronyNode})
	if err != nil {
		return out, fmt.Errorf("chrony: %w", err)
	}
	out.Median, out.P99 = float64(g.Others.ErrorP50Ns), float64(g.Others.ErrorP99Ns)
	out.FloorMedian, out.FloorP99 = float64(f.Others.ErrorP50Ns), float64(f.Others.ErrorP99Ns)
	out.ChronyMedian, out.ChronyP99 = float64(ch.Others.ErrorP50Ns), float64(ch.Others.ErrorP99Ns)
	out.Coverage = g.Others.BoundCoverage
	var osum float64
	common, ok := limit.Common(g.Limits)
	if ok {
		out.Limit, out.LimitName, out.Luckiest = common.Mean, common.Name, common.Luckiest
	}
	for k, l := range g.Limits {
		h := Host{Node: l.Node, Luckiest: l.Best, LuckiestName: l.BestName, Oracle: l.Oracle}
		if ok {
			h.Limit = common.PerHost[k]
		}
		if n := nodeSummary(g, l.Node); n != nil {
			h.Median, h.P99 = float64(n.ErrorP50Ns), float64(n.ErrorP99Ns)
		}
		if n := nodeSummary(f, l.Node); n != nil {
			h.FloorMedian, h.FloorP99 = float64(n.ErrorP50Ns), float64(n.ErrorP99Ns)
		}
		if n := nodeSummary(ch, l.Node); n != nil {
			h.ChronyMedian, h.ChronyP99 = float64(n.ErrorP50Ns), float64(n.ErrorP99Ns)
		}
		out.Hosts = append(out.Hosts, h)
		osum += l.Oracle
	}
	if len(g.Limits) > 0 {
		out.Oracle = osum / float64(len(g.Limits))
	}
	return out, nil
}

func nodeSummary(r *sim.Result, node int) *sim.Summary {
	for i := range r.Nodes {
		if r.Nodes[i].ID == node {
			return &r.Nodes[i]
		}
	}
	return nil
}

func summarise(c netmodel.LinkClass, runs []Row) Class {
	out := Class{LinkClass: c, Runs: len(runs), LimitBest: map[string]int{}}
	med := func(f func(Row) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v) == 0 {
			return math.NaN()
		}
		return v[len(v)/2]
	}
	out.Median = med(func(r Row) float64 { return r.Median })
	out.P99 = med(func(r Row) float64 { return r.P99 })
	out.FloorMedian = med(func(r Row) float64 { return r.FloorMedian })
	out.ChronyMedian = med(func(r Row) float64 { return r.ChronyMedian })
	out.ChronyP99 = med(func(r Row) float64 { return r.ChronyP99 })
	out.Limit = med(func(r Row) float64 { return r.Limit })
	out.Luckiest = med(func(r Row) float64 { return r.Luckiest })
	out.Oracle = med(func(r Row) float64 { return r.Oracle })
	for _, r := range runs {
		near, allowed := r.OracleMet()
		out.NearOracle += b2i(near)
		out.OracleVsChrony += b2i(allowed)
		a, b, l, cv := r.Met()
		out.VsChrony += b2i(a)
		out.BelowChronyP99 += b2i(b)
		out.NearLimit += b2i(l)
		out.Covered += b2i(cv)
		if r.LimitName != "" {
			out.LimitBest[r.LimitName]++
		}
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// WriteMarkdown writes the report's class table.
func (r *Report) WriteMarkdown(w io.Writer) {
	us := func(ns float64) string { return fmt.Sprintf("%.3f", ns/1e3) }
	fmt.Fprintf(w, "| class | link | runs | gclock median / p99 us | floor-only median | chrony median / p99 us | limit us | gclock / limit | hosts' luckiest us | oracle us | gclock / oracle | chrony / gclock | median <= chrony/3 | oracle <= chrony/3 | p99 < chrony's | within 1.5x of limit | within 1.5x of oracle | coverage 1 | best textbook estimator (runs) |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Classes {
		names := make([]string, 0, len(c.LimitBest))
		for n := range c.LimitBest {
			names = append(names, n)
		}
		slices.SortFunc(names, func(a, b string) int { // most runs first; a tie by name, not map order
			return cmp.Or(c.LimitBest[b]-c.LimitBest[a], strings.Compare(a, b))
		})
		best := ""
		for i, n := range names {
			if i == 2 {
				break
			}
			if i > 0 {
				best += ", "
			}
			best += fmt.Sprintf("%s %d", n, c.LimitBest[n])
		}
		fmt.Fprintf(w, "| %s | `%s` | %d | %s / %s | %s | %s / %s | %s | %.2fx | %s | %s | %.2fx | %.1fx | %d | %d | %d | %d | %d | %d | %s |\n",
			c.Name, c.Link, c.Runs, us(c.Median), us(c.P99), us(c.FloorMedian), us(c.ChronyMedian), us(c.ChronyP99), us(c.Limit),
			c.Median/c.Limit, us(c.Luckiest), us(c.Oracle), c.Median/c.Oracle, c.ChronyMedian/c.Median, c.VsChrony, c.OracleVsChrony, c.BelowChronyP99,
			c.NearLimit, c.NearOracle, c.Covered, best)
	}
}
