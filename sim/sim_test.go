package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/satmath"
)

func standIn() Options { return Options{NewNode: newCristian} }

// small is a short star run that every driver test uses.
func small(t *testing.T) Scenario {
	t.Helper()
	s := DefaultScenario()
	s.Nodes = 8
	s.Duration = Duration(2 * time.Minute)
	s.Eval.Warmup = Duration(5 * time.Second)
	s.Phases[1].Start = Duration(time.Minute)
	return s
}

func TestDeterminismSameSeedSameJSON(t *testing.T) {
	sc := small(t)
	var outs [3][]byte
	for i := range outs {
		s := sc
		if i == 2 {
			s.Seed++
		}
		res, err := Run(context.Background(), s, standIn())
		if err != nil {
			t.Fatal(err)
		}
		outs[i], err = json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatalf("same seed, different JSON:\n%s\n%s", outs[0], outs[1])
	}
	if bytes.Equal(outs[0], outs[2]) {
		t.Fatalf("different seeds gave identical JSON: the seed is not used")
	}
}

func TestEndToEndStandInCoverage(t *testing.T) {
	res, err := Run(context.Background(), small(t), standIn())
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Evaluations == 0 {
		t.Fatal("no evaluation counted")
	}
	if s.BoundCoverage != 1 {
		t.Errorf("coverage %v, want 1 (the driver broke causality of timestamps)", s.BoundCoverage)
	}
	// Cristian's estimate is off by at most half the round trip plus drift
	// over one period: loaded tails reach tens of us.
	if s.ErrorMaxNs > 2_000_000 {
		t.Errorf("max error %d ns, want < 2 ms", s.ErrorMaxNs)
	}
	if s.MessagesPerNodePerS < 1 || s.MessagesPerNodePerS > 10 {
		t.Errorf("messages per node per s = %v, want about 2 (a probe and a reply every 500 ms per child)", s.MessagesPerNodePerS)
	}
	// The reference reads its own clock: off its ideal only by read jitter.
	if len(res.Nodes) != 8 || res.Nodes[0].ErrorMaxNs > int64(small(t).Clocks.Jitter) {
		t.Errorf("reference node summary %+v, want error <= jitter", res.Nodes[0])
	}
}

func TestLoadPhases(t *testing.T) {
	s := DefaultScenario()
	for _, tc := range []struct {
		at          time.Duration
		tail, phase float64
	}{
		{0, 1, 0},
		{4 * time.Minute, 1, 0},
		{5*time.Minute + 100*time.Millisecond, 50, 1}, // inside the first burst
		{5*time.Minute + 500*time.Millisecond, 10, 1},
		{5*time.Minute + 2100*time.Millisecond, 50, 1},
	} {
		l := s.loadAt(int64(tc.at))
		if l.TailScale != tc.tail || float64(l.phase) != tc.phase {
			t.Errorf("at %v: tail scale %v phase %d, want %v, %v", tc.at, l.TailScale, l.phase, tc.tail, tc.phase)
		}
	}
}

func TestParseErrorsNameFieldAndLine(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top", "nodes: 4\nbogus: 1\n", []string{"bogus", "line 2", "unknown field"}},
		{"unknown nested", "links:\n  tail:\n    meen: 2us\n", []string{"links.tail.meen", "line 3"}},
		{"bad duration", "duration: 10 minutes\n", []string{"line 1: duration: duration \"10 minutes\"", "unit"}},
		{"bad int", "nodes: many\n", []string{"nodes", "line 1"}},
		{"list expected", "phases: 3\n", []string{"phases", "want a list"}},
		{"in list", "phases:\n  - name: a\n    start: 0s\n  - name: b\n    strat: 1m\n", []string{"phases[1].strat", "line 5"}},
		{"validation", "nodes: 1\n", []string{"line 1: nodes", "out of range"}},
		{"validation nested", "seed: 1\nlinks:\n  loss: 1.5\n", []string{"line 3: links.loss"}},
		{"bad topology", "topology:\n  kind: torus\n", []string{"topology.kind", "torus"}},
		{"bad prob", "links:\n  loss: 1.5\n", []string{"links.loss"}},
		{"syntax", "nodes: [1\n", []string{"s.yaml"}},
		{"empty", "", []string{"empty"}},
		{"duplicate", "nodes: 4\nnodes: 5\n", []string{"nodes", "line 2"}},
		{"hypercube size", "nodes: 6\ntopology: {kind: hypercube}\n", []string{"power of two"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "s.yaml")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestShippedScenariosParse(t *testing.T) {
	names := Names()
	if len(names) == 0 {
		t.Fatal("no shipped scenario")
	}
	for _, n := range names {
		if _, err := Shipped(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	d := DefaultScenario()
	if d.Nodes != 16 || d.Topology.Kind != "star" || d.Clocks.MaxDriftPPM != 50 || len(d.Phases) != 2 {
		t.Errorf("default scenario %+v is not 16 nodes, star, 50 ppm, two phases", d)
	}
	if _, err := Shipped("nope"); err == nil || !strings.Contains(err.Error(), "default") {
		t.Errorf("unknown name error %v should list the shipped names", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range Names() {
		b, _ := scenarioFS.ReadFile("scenarios/" + n + ".yaml")
		f.Add(b)
	}
	f.Add([]byte("nodes: 4\nphases: [{start: 0s, loss: 2}]\n"))
	f.Add([]byte("a: &x {b: *x}\n"))
	f.Add([]byte(aliasBomb(20)))
	f.Add([]byte("links: &l {loss: 0.1}\nphases: [{<<: *l, start: 0s}]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b, "fuzz.yaml")
		if err == nil {
			if err := s.Validate(); err != nil {
				t.Fatalf("parsed scenario does not validate: %v", err)
			}
		}
	})
}

func TestSatSub(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{5, 3, 2}, {math.MaxInt64, -1, math.MaxInt64}, {math.MinInt64, 1, math.MinInt64}, {-5, -7, 2},
	} {
		if got := satmath.Sub(tc.a, tc.b); got != tc.want {
			t.Errorf("satmath.Sub(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// aliasBomb is a scenario whose aliases expand quadratically: one list of
// n node ids, used by n drift steps (n*n values from some 10n bytes).
func aliasBomb(n int) string {
	var b strings.Builder
	b.WriteString("nodes: 4\nclocks:\n  drift_steps:\n    - {at: 1s, delta_ppm: 1, nodes: &n [")
	b.WriteString(strings.Repeat("1, ", n-1) + "1]}\n")
	for range n {
		b.WriteString("    - {at: 2s, delta_ppm: 1, nodes: *n}\n")
	}
	return b.String()
}

// TestParseRefusesAliasBomb: a scenario whose aliases would expand to 3*10^8
// values (an 800-KB file of this kind took 744 MB and 15.7 s before the cap) is
// refused, the error naming the file and the line of the alias that went
// over conf.MaxAliasValues.
func TestParseRefusesAliasBomb(t *testing.T) {
	if _, err := Parse([]byte(aliasBomb(10)), "small.yaml"); err != nil {
		t.Fatalf("10 aliases of 10 ids: %v", err)
	}
	_, err := Parse([]byte(aliasBomb(18_000)), "bomb.yaml")
	if err == nil || !strings.Contains(err.Error(), "bomb.yaml: line ") || !strings.Contains(err.Error(), "alias") {
		t.Fatalf("alias bomb: %v, want an error naming bomb.yaml, a line and the aliases", err)
	}
}
