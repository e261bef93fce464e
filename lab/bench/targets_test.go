package bench

import (
	"strings"
	"testing"

	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/netmodel"
)

func TestTargetsCheck(t *testing.T) {
	good := lab.GclockSummary{Summary: lab.Summary{Evaluations: 100, ErrorP50Ns: 150, ErrorP99Ns: 900}, BoundCoverage: 1,
		ConvergenceRoundsPerNodePerS: 0.8, RoundsPerNodePerS: 0.15}
	chrony := lab.Summary{Evaluations: 10, ErrorP50Ns: 2000, ErrorP99Ns: 7000}
	ptp := lab.Summary{Evaluations: 10, ErrorP50Ns: 15000, ErrorP99Ns: 160000}
	mod := func(f func(*lab.GclockSummary)) lab.GclockSummary { g := good; f(&g); return g }
	tests := []struct {
		name    string
		g       lab.GclockSummary
		peers   map[string]lab.Summary
		checks  int
		failing []string // names (prefixes) of the checks that fail
	}{
		{"all met", good, map[string]lab.Summary{lab.PeerChrony: chrony, lab.PeerPTP4L: ptp}, 8, nil},
		{"no peers", good, nil, 5, nil},
		{"median", mod(func(g *lab.GclockSummary) { g.ErrorP50Ns = 301 }), nil, 5, []string{"median"}},
		{"median at the target", mod(func(g *lab.GclockSummary) { g.ErrorP50Ns = 300 }), nil, 5, nil},
		{"p99", mod(func(g *lab.GclockSummary) { g.ErrorP99Ns = 2001 }), nil, 5, []string{"p99 |error|"}},
		{"coverage", mod(func(g *lab.GclockSummary) { g.BoundCoverage = 0.9999 }), nil, 5, []string{"truth inside"}},
		{"converging traffic", mod(func(g *lab.GclockSummary) { g.ConvergenceRoundsPerNodePerS = 1.01 }), nil, 5, []string{"resyncs/s while"}},
		{"traffic after", mod(func(g *lab.GclockSummary) { g.RoundsPerNodePerS = 0.21 }), nil, 5, []string{"resyncs/s after"}},
		{"ratio", mod(func(g *lab.GclockSummary) { g.ErrorP50Ns = 250 }), map[string]lab.Summary{lab.PeerChrony: chrony}, 7, []string{"chrony median"}},
		{"p99 above ptp4l's", mod(func(g *lab.GclockSummary) { g.ErrorP99Ns = 1999 }), map[string]lab.Summary{lab.PeerPTP4L: {Evaluations: 5, ErrorP99Ns: 1500}}, 6, []string{"p99 below ptp4l"}},
		{"peer without samples", good, map[string]lab.Summary{lab.PeerChrony: {}}, 7, []string{"chrony median", "p99 below chrony"}},
		{"no evaluations", lab.GclockSummary{}, nil, 5, []string{"median", "p99 |error|", "truth inside"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cs := defaultTargets().check(tc.g, tc.peers)
			if len(cs) != tc.checks {
				t.Fatalf("%d checks, want %d: %+v", len(cs), tc.checks, cs)
			}
			wantFailed(t, cs, tc.failing)
		})
	}
}

// TestBusyTargetsCheckRun: issue 21's busy targets, and the worst host's
// median (the reference, host 0, never counts).
func TestBusyTargetsCheckRun(t *testing.T) {
	node := func(p50 int64) lab.GclockSummary {
		return lab.GclockSummary{Summary: lab.Summary{Evaluations: 100, ErrorP50Ns: p50}}
	}
	base := lab.RunReport{
		Summary: lab.GclockSummary{Summary: lab.Summary{Evaluations: 300, ErrorP50Ns: 400, ErrorP99Ns: 4000}, BoundCoverage: 1,
			ConvergenceRoundsPerNodePerS: 0.8, RoundsPerNodePerS: 0.15},
		Nodes:   []lab.GclockSummary{node(5000), node(300), node(900), node(400)},
		Compare: map[string]lab.Summary{lab.PeerChrony: {Evaluations: 10, ErrorP50Ns: 2000, ErrorP99Ns: 7000}},
	}
	mod := func(f func(*lab.RunReport)) lab.RunReport {
		r := base
		r.Nodes = append([]lab.GclockSummary(nil), base.Nodes...)
		f(&r)
		return r
	}
	tests := []struct {
		name    string
		r       lab.RunReport
		failing []string
	}{
		{"all met (the reference's 5 us does not count)", base, nil},
		{"median above 0.5 us", mod(func(r *lab.RunReport) { r.Summary.ErrorP50Ns = 501 }), []string{"median", "chrony median"}},
		{"a fifth of chrony's", mod(func(r *lab.RunReport) {
			r.Compare = map[string]lab.Summary{lab.PeerChrony: {Evaluations: 10, ErrorP50Ns: 1999, ErrorP99Ns: 7000}}
		}), []string{"chrony median"}},
		{"p99 above 5 us", mod(func(r *lab.RunReport) { r.Summary.ErrorP99Ns = 5001 }), []string{"p99 |error|"}},
		{"one host above 1 us", mod(func(r *lab.RunReport) { r.Nodes[2] = node(1001) }), []string{"worst host"}},
		{"no hosts", mod(func(r *lab.RunReport) { r.Nodes = r.Nodes[:1] }), []string{"worst host"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantFailed(t, busyTargets().checkRun(tc.r), tc.failing)
		})
	}
	// The default targets do not check the hosts.
	if n, m := len(defaultTargets().checkRun(base)), len(defaultTargets().check(base.Summary, base.Compare)); n != m {
		t.Errorf("defaultTargets().checkRun: %d checks, netlab.Check %d", n, m)
	}
	if ns, h := WorstHostMedian(base.Nodes); ns != 900 || h != 2 {
		t.Errorf("WorstHostMedian = %d, h%d; want 900, h2", ns, h)
	}
}

// wantFailed checks that the checks cs not met are, in order, the ones
// whose names start with failing's.
func wantFailed(t *testing.T, cs []TargetCheck, failing []string) {
	t.Helper()
	var failed []string
	for _, c := range cs {
		if !c.Met {
			failed = append(failed, c.Name)
		}
	}
	if len(failed) != len(failing) {
		t.Fatalf("failed %q, want %q", failed, failing)
	}
	for i := range failed {
		if !strings.HasPrefix(failed[i], failing[i]) {
			t.Errorf("failed %q, want %q", failed, failing)
		}
	}
}

// TestLimitTargetCheckRun: a link profile holds the median to 1.5 times
// the limit the hosts' exchanges allowed; a run without the limit fails
// it, naming why.
func TestLimitTargetCheckRun(t *testing.T) {
	c, ok := netmodel.MatrixClass("normal3")
	if !ok {
		t.Fatal("no normal3 class")
	}
	tg := linkProfile(c).Targets
	base := lab.RunReport{
		Summary: lab.GclockSummary{Summary: lab.Summary{Evaluations: 300, ErrorP50Ns: 150, ErrorP99Ns: 900}, BoundCoverage: 1,
			ConvergenceRoundsPerNodePerS: 0.8, RoundsPerNodePerS: 0.15},
		Compare: map[string]lab.Summary{lab.PeerChrony: {Evaluations: 10, ErrorP50Ns: 600, ErrorP99Ns: 7000}},
	}
	with := func(limit *lab.LimitFigures, why string) lab.RunReport {
		r := base
		r.Summary.Limit, r.LimitError = limit, why
		return r
	}
	tests := []struct {
		name    string
		r       lab.RunReport
		failing []string
		got     string
	}{
		{"within 1.5x", with(&lab.LimitFigures{LimitNs: 100}, ""), nil, "1.50x (limit 0.100 us)"},
		{"beyond 1.5x", with(&lab.LimitFigures{LimitNs: 99}, ""), []string{"median <= 1.5x the limit"}, "1.52x (limit 0.099 us)"},
		{"no measurements", with(nil, ""), []string{"median <= 1.5x the limit"}, "no limit: run with measurements"},
		{"a replay failed", with(nil, "h2: truncated"), []string{"median <= 1.5x the limit"}, "no limit: h2: truncated"},
		{"a zero limit", with(&lab.LimitFigures{}, ""), []string{"median <= 1.5x the limit"}, "no limit: run with measurements"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checks := tg.checkRun(tc.r)
			wantFailed(t, checks, tc.failing)
			for _, ch := range checks {
				if strings.Contains(ch.Name, "the limit") && ch.Got != tc.got {
					t.Errorf("%s: got %q, want %q", ch.Name, ch.Got, tc.got)
				}
			}
		})
	}
	// The floor profiles do not check it.
	for _, ch := range defaultTargets().checkRun(base) {
		if strings.Contains(ch.Name, "the limit") {
			t.Errorf("defaultTargets checks %q", ch.Name)
		}
	}
}
