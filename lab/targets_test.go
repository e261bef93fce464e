package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon"
)

func TestTargetsCheck(t *testing.T) {
	good := GclockSummary{Summary: Summary{Evaluations: 100, ErrorP50Ns: 150, ErrorP99Ns: 900}, BoundCoverage: 1,
		ConvergenceRoundsPerNodePerS: 0.8, RoundsPerNodePerS: 0.15}
	chrony := Summary{Evaluations: 10, ErrorP50Ns: 2000, ErrorP99Ns: 7000}
	ptp := Summary{Evaluations: 10, ErrorP50Ns: 15000, ErrorP99Ns: 160000}
	mod := func(f func(*GclockSummary)) GclockSummary { g := good; f(&g); return g }
	tests := []struct {
		name    string
		g       GclockSummary
		peers   map[string]Summary
		checks  int
		failing []string // names (prefixes) of the checks that fail
	}{
		{"all met", good, map[string]Summary{PeerChrony: chrony, PeerPTP4L: ptp}, 8, nil},
		{"no peers", good, nil, 5, nil},
		{"median", mod(func(g *GclockSummary) { g.ErrorP50Ns = 301 }), nil, 5, []string{"median"}},
		{"median at the target", mod(func(g *GclockSummary) { g.ErrorP50Ns = 300 }), nil, 5, nil},
		{"p99", mod(func(g *GclockSummary) { g.ErrorP99Ns = 2001 }), nil, 5, []string{"p99 |error|"}},
		{"coverage", mod(func(g *GclockSummary) { g.BoundCoverage = 0.9999 }), nil, 5, []string{"truth inside"}},
		{"converging traffic", mod(func(g *GclockSummary) { g.ConvergenceRoundsPerNodePerS = 1.01 }), nil, 5, []string{"resyncs/s while"}},
		{"traffic after", mod(func(g *GclockSummary) { g.RoundsPerNodePerS = 0.21 }), nil, 5, []string{"resyncs/s after"}},
		{"ratio", mod(func(g *GclockSummary) { g.ErrorP50Ns = 250 }), map[string]Summary{PeerChrony: chrony}, 7, []string{"chrony median"}},
		{"p99 above ptp4l's", mod(func(g *GclockSummary) { g.ErrorP99Ns = 1999 }), map[string]Summary{PeerPTP4L: {Evaluations: 5, ErrorP99Ns: 1500}}, 6, []string{"p99 below ptp4l"}},
		{"peer without samples", good, map[string]Summary{PeerChrony: {}}, 7, []string{"chrony median", "p99 below chrony"}},
		{"no evaluations", GclockSummary{}, nil, 5, []string{"median", "p99 |error|", "truth inside"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := DefaultTargets().check(tc.g, tc.peers)
			if len(cs) != tc.checks {
				t.Fatalf("%d checks, want %d: %+v", len(cs), tc.checks, cs)
			}
			var failed []string
			for _, c := range cs {
				if !c.Met {
					failed = append(failed, c.Name)
				}
			}
			if len(failed) != len(tc.failing) {
				t.Fatalf("failed %q, want %q", failed, tc.failing)
			}
			for i := range failed {
				if !strings.HasPrefix(failed[i], tc.failing[i]) {
					t.Errorf("failed %q, want %q", failed, tc.failing)
				}
			}
		})
	}
}

// The frugal configuration keeps the budget in single probe/reply
// exchanges by construction: one exchange per resync, never repeated, at
// most one resync a second and, once the period has grown, one per 5 s.
func TestFrugalConfig(t *testing.T) {
	c, err := daemon.Load("testdata/frugal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sync
	if s.PingsPerRound != 1 {
		t.Errorf("pings_per_round %d, want 1", s.PingsPerRound)
	}
	if s.NetworkLatencyErrorThresh < daemon.Duration(time.Second) {
		t.Errorf("network_latency_error_thresh %v: rounds may be repeated (a second exchange)", s.NetworkLatencyErrorThresh)
	}
	if s.InitialGlobalPeriod < daemon.Duration(time.Second) {
		t.Errorf("initial_global_period %v: more than one resync a second", s.InitialGlobalPeriod)
	}
	// Halvings never go below min_global_period once the period has
	// reached it (engine: an initial period below the minimum).
	if s.MinGlobalPeriod < daemon.Duration(5*time.Second) {
		t.Errorf("min_global_period %v: more than 0.2 resyncs a second once converged", s.MinGlobalPeriod)
	}
	if s.Estimator != "center" {
		t.Errorf("estimator %q, want center (the lab's)", s.Estimator)
	}
}

// TestBusyTargetsCheckRun: issue 21's busy targets, and the worst host's
// median (the reference, host 0, never counts).
func TestBusyTargetsCheckRun(t *testing.T) {
	node := func(p50 int64) GclockSummary {
		return GclockSummary{Summary: Summary{Evaluations: 100, ErrorP50Ns: p50}}
	}
	base := RunReport{
		Summary: GclockSummary{Summary: Summary{Evaluations: 300, ErrorP50Ns: 400, ErrorP99Ns: 4000}, BoundCoverage: 1,
			ConvergenceRoundsPerNodePerS: 0.8, RoundsPerNodePerS: 0.15},
		Nodes:   []GclockSummary{node(5000), node(300), node(900), node(400)},
		Compare: map[string]Summary{PeerChrony: {Evaluations: 10, ErrorP50Ns: 2000, ErrorP99Ns: 7000}},
	}
	mod := func(f func(*RunReport)) RunReport {
		r := base
		r.Nodes = append([]GclockSummary(nil), base.Nodes...)
		f(&r)
		return r
	}
	tests := []struct {
		name    string
		r       RunReport
		failing []string
	}{
		{"all met (the reference's 5 us does not count)", base, nil},
		{"median above 0.5 us", mod(func(r *RunReport) { r.Summary.ErrorP50Ns = 501 }), []string{"median", "chrony median"}},
		{"a fifth of chrony's", mod(func(r *RunReport) {
			r.Compare = map[string]Summary{PeerChrony: {Evaluations: 10, ErrorP50Ns: 1999, ErrorP99Ns: 7000}}
		}), []string{"chrony median"}},
		{"p99 above 5 us", mod(func(r *RunReport) { r.Summary.ErrorP99Ns = 5001 }), []string{"p99 |error|"}},
		{"one host above 1 us", mod(func(r *RunReport) { r.Nodes[2] = node(1001) }), []string{"worst host"}},
		{"no hosts", mod(func(r *RunReport) { r.Nodes = r.Nodes[:1] }), []string{"worst host"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var failed []string
			for _, c := range BusyTargets().CheckRun(tc.r) {
				if !c.Met {
					failed = append(failed, c.Name)
				}
			}
			if len(failed) != len(tc.failing) {
				t.Fatalf("failed %q, want %q", failed, tc.failing)
			}
			for i := range failed {
				if !strings.HasPrefix(failed[i], tc.failing[i]) {
					t.Errorf("failed %q, want %q", failed, tc.failing)
				}
			}
		})
	}
	// The default targets do not check the hosts.
	if n, m := len(DefaultTargets().CheckRun(base)), len(DefaultTargets().check(base.Summary, base.Compare)); n != m {
		t.Errorf("DefaultTargets().CheckRun: %d checks, netlab.Check %d", n, m)
	}
	if ns, h := WorstHostMedian(base.Nodes); ns != 900 || h != 2 {
		t.Errorf("WorstHostMedian = %d, h%d; want 900, h2", ns, h)
	}
}
