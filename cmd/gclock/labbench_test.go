package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/bench"
	"github.com/gclock/gclock/lab/netlab"
)

func TestParseSeeds(t *testing.T) {
	tests := []struct {
		in   string
		want []uint64
		err  string
	}{
		{"1-6", []uint64{1, 2, 3, 4, 5, 6}, ""},
		{"1,3,5", []uint64{1, 3, 5}, ""},
		{"1-3, 7", []uint64{1, 2, 3, 7}, ""},
		{"4", []uint64{4}, ""},
		{"", nil, "no seed"},
		{"a", nil, `"a" is not a seed`},
		{"3-1", nil, "A <= B"},
		{"1-x", nil, "A <= B"},
		{"0-100", nil, "more than 100"},
		{"1-60,61-120", nil, "more than 100"},
	}
	for _, tc := range tests {
		got, err := parseSeeds(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseSeeds(%q) = %v, %v; want error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseSeeds(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestLabBenchReport(t *testing.T) {
	p50 := map[string]int64{"quiet-1": 150, "cross30-1": 300, "quiet-2": 400, "cross30-2": 400}
	fake := func(_ context.Context, spec lab.RunSpec) (lab.RunReport, error) {
		profile := "quiet"
		rep := lab.RunReport{Hosts: 4, Link: "pareto:100us:50us", DurationNs: 60e9, WarmupNs: 10e9, Load: 2, Clocks: "emulated",
			Compare:      map[string]lab.Summary{lab.PeerChrony: {Evaluations: 10, ErrorP50Ns: 2000, ErrorP99Ns: 7000}},
			LoadAvgStart: [3]float64{1.5, 1, 1}, LoadAvgEnd: [3]float64{2.25, 1, 1}}
		if spec.Cross > 0 {
			profile = "cross30"
			rep.Cross, rep.PortRate = spec.Cross, spec.Lab.PortRate
			rep.Ports = []netlab.PortStats{{Port: 0, Util: 0.29}, {Port: 1, Util: 0.31}}
		}
		p := p50[fmt.Sprintf("%s-%d", profile, spec.Lab.Seed)]
		rep.Summary = lab.GclockSummary{Summary: lab.Summary{Evaluations: 100, ErrorP50Ns: p, ErrorP99Ns: 900, ErrorMaxNs: 1000},
			BoundCoverage: 1, BoundWidthMeanNs: 250e3, ConvergenceRoundsPerNodePerS: 0.9, ConvergenceExchangesPerNodePerS: 27, RoundsPerNodePerS: 0.15, ExchangesPerNodePerS: 4.5}
		if profile == "quiet" && spec.Lab.Seed == 1 {
			rep.Summary.Limit = &lab.LimitFigures{LimitNs: 120, LuckiestNs: 90, OracleNs: 100}
		}
		rep.Nodes = []lab.GclockSummary{{Summary: lab.Summary{Evaluations: 100, ErrorP50Ns: 30}},
			{Summary: lab.Summary{Evaluations: 100, ErrorP50Ns: p}}, {Summary: lab.Summary{Evaluations: 100, ErrorP50Ns: 3 * p}}}
		return rep, nil
	}
	profs, err := bench.ParseProfiles("quiet,cross30")
	if err != nil {
		t.Fatal(err)
	}
	run := lab.RunSpec{Lab: netlab.DefaultConfig(), Gclock: lab.DefaultGclockConfig(), Peer: lab.DefaultPeerConfig()}
	run.Gclock.Command = []string{"gclock", "daemon"}
	run.LoadCommand = []string{"gclock"}
	r, err := bench.Run(context.Background(), bench.Spec{Run: run, Profiles: profs, Seeds: []uint64{1, 2}, Measure: fake,
		Command: "gclock lab bench --seeds 1-2 --profile quiet,cross30", Machine: "test"})
	if err != nil || !r.Complete || r.Missed() != 3 {
		t.Fatalf("bench.Run: complete %v, %d missed, %v", r.Complete, r.Missed(), err)
	}
	var b bytes.Buffer
	writeLabBench(&b, r, "")
	out := b.String()
	for _, want := range []string{
		"| quiet | 1 | 0.150 / 0.900 / 1.000 | 0.450 (h2) | 100.0% | 250.0 | 2.00 / 7.00 | - | 13.3x | 0.120 / 0.090 / 0.100 (1.25x) | 0.90 (0.150) | 1.5-2.2 | - | 7 of 7 |",
		"| quiet | 2 | 0.400 / 0.900 / 1.000 | 1.200 (h2) | 100.0% | 250.0 | 2.00 / 7.00 | - | 5.0x | - | 0.90 (0.150) | 1.5-2.2 | - | 5 of 7 |",
		"| cross30 | 1 | 0.300 / 0.900 / 1.000 | 0.900 (h2) | 100.0% | 250.0 | 2.00 / 7.00 | - | 6.7x | - | 0.90 (0.150) | 1.5-2.2 | 29-31% | 8 of 8 |",
		"## quiet: --load 2\n",
		"## cross30: --load 2, cross traffic 30%, 1Gbit/s FIFO ports\n",
		"| target | seed 1 | seed 2 | runs that met it |",
		"| median \\|error\\| <= 0.300 us | PASS 0.150 us | FAIL 0.400 us | 1 of 2 |",
		"| chrony median / gclock median >= 10 | PASS 13.3x | FAIL 5.0x | 1 of 2 |",
		"| median \\|error\\| <= 0.500 us | PASS 0.300 us | PASS 0.400 us | 2 of 2 |",
		"| worst host median \\|error\\| <= 1.000 us | PASS 0.900 us (h2) | FAIL 1.200 us (h2) | 1 of 2 |",
		"| p99 below chrony's | PASS 0.90 vs 7.00 us | PASS 0.90 vs 7.00 us | 2 of 2 |",
		"0.150 us (lowest) to 0.400 us (highest)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestLabBenchFlags(t *testing.T) {
	// Bad flags are refused before any lab is built (no root needed).
	for _, args := range [][]string{{"--seeds", "x"}, {"--compare", "ntpd"}, {"--link", "bogus"}, {"extra"},
		{"--profile", "loud"}, {"--profile", "cross30", "--port-rate", "fast"}, {"--cross", "200%"}, {"--link", "direct", "--profile", "cross30"}} {
		var out, errb bytes.Buffer
		if err := runLabBench(args, &out, &errb); err != nil {
			t.Logf("%q: %v", args, err)
		} else {
			t.Errorf("runLabBench(%q) succeeded", args)
		}
	}
}
