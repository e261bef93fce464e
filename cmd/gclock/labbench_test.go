package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/gclock/gclock/lab"
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
	run := func(seed uint64, p50 int64) labBenchRun {
		rep := lab.RunReport{Hosts: 4, Link: "pareto:100us:50us", DurationNs: 60e9, WarmupNs: 10e9, Load: 2, Clocks: "emulated",
			Summary: lab.GclockSummary{Summary: lab.Summary{Evaluations: 100, ErrorP50Ns: p50, ErrorP99Ns: 900, ErrorMaxNs: 1000},
				BoundCoverage: 1, ConvergenceRoundsPerNodePerS: 0.9, ConvergenceExchangesPerNodePerS: 27, RoundsPerNodePerS: 0.15, ExchangesPerNodePerS: 4.5},
			Compare: map[string]lab.Summary{lab.PeerChrony: {Evaluations: 10, ErrorP50Ns: 2000, ErrorP99Ns: 7000}}}
		return labBenchRun{Seed: seed, Report: rep, Checks: lab.DefaultTargets().Check(rep.Summary, rep.Compare)}
	}
	r := labBenchReport{Command: "gclock lab bench --seeds 1-2", Machine: "test", Runs: []labBenchRun{run(1, 150), run(2, 400)}, Complete: true}
	r.Tally = tally(r.Runs)
	var b bytes.Buffer
	writeLabBench(&b, r)
	out := b.String()
	for _, want := range []string{
		"| 1 | 0.150 / 0.900 / 1.000 | 100.0% | 0.90 (27.0) | 0.150 (4.50) | 2.00 / 7.00 | - | 13.3x | 7 of 7 |",
		"| 2 | 0.400 / 0.900 / 1.000 | 100.0% | 0.90 (27.0) | 0.150 (4.50) | 2.00 / 7.00 | - | 5.0x | 5 of 7 |",
		"| median \\|error\\| <= 0.300 us | 1 of 2 |",
		"| chrony median / gclock median >= 10 | 1 of 2 |",
		"| p99 below chrony's | 2 of 2 |",
		"0.150 us (lowest) to 0.400 us (highest)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestLabBenchFlags(t *testing.T) {
	// Bad flags are refused before any lab is built (no root needed).
	for _, args := range [][]string{{"--seeds", "x"}, {"--compare", "ntpd"}, {"--link", "bogus"}, {"extra"}} {
		var out, errb bytes.Buffer
		if err := runLabBench(args, &out, &errb); err == nil {
			t.Errorf("runLabBench(%q) succeeded", args)
		}
	}
}
