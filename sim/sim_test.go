package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
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

func TestLinkModelStatistics(t *testing.T) {
	const n = 200000
	for _, tc := range []struct {
		dist       string
		sigma, alp float64
	}{{"exponential", 0, 0}, {"lognormal", 1, 0}, {"pareto", 0, 3}} {
		t.Run(tc.dist, func(t *testing.T) {
			spec := LinkSpec{MinDelay: 5000, Asymmetry: 400, Loss: 0.05, Duplicate: 0.02, Reorder: 0.01, ReorderDelay: 1e6,
				Tail: TailSpec{Dist: tc.dist, Mean: 2000, Sigma: tc.sigma, Alpha: tc.alp}}
			m := linkModel{spec: spec, seed: 42}
			rng := rand.New(rand.NewPCG(1, 2))
			ld := load{tailScale: 1, schedScale: 1, loss: spec.Loss, duplicate: spec.Duplicate, reorder: spec.Reorder}
			var lost, dup, sent, reord int
			var sum float64
			base := m.minDelay(3, 4)
			if base < 5000 || base > 5400 {
				t.Fatalf("min delay %d outside [5000, 5400]", base)
			}
			if m.minDelay(3, 4) != base {
				t.Fatal("min delay of a link is not fixed")
			}
			var buf []int64
			for range n {
				buf = m.transmit(rng, 3, 4, ld, buf)
				switch len(buf) {
				case 0:
					lost++
				case 2:
					dup++
				}
				for _, d := range buf {
					if d < base {
						t.Fatalf("delay %d below the minimum %d", d, base)
					}
					if d >= base+int64(spec.ReorderDelay) {
						reord++
						d -= int64(spec.ReorderDelay)
					}
					sent++
					sum += float64(d - base)
				}
			}
			within := func(name string, got, want, tol float64) {
				if math.Abs(got-want) > tol {
					t.Errorf("%s = %.4g, want %.4g +- %.2g", name, got, want, tol)
				}
			}
			within("loss rate", float64(lost)/n, 0.05, 0.004)
			within("duplicate rate", float64(dup)/float64(n-lost), 0.02, 0.003)
			within("reorder rate", float64(reord)/float64(sent), 0.01, 0.002)
			// The pareto's sample mean converges slowly; alpha 3 has finite
			// variance, so 5% is about 10 standard errors.
			within("tail mean", sum/float64(sent), 2000, 100)
			ld.tailScale = 10
			sum, sent = 0, 0
			for range n / 4 {
				buf = m.transmit(rng, 3, 4, load{tailScale: 10}, buf)
				for _, d := range buf {
					if d < base+int64(spec.ReorderDelay) {
						sum += float64(d - base)
						sent++
					}
				}
			}
			within("loaded tail mean", sum/float64(sent), 20000, 2000)
		})
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
		if l.tailScale != tc.tail || float64(l.phase) != tc.phase {
			t.Errorf("at %v: tail scale %v phase %d, want %v, %v", tc.at, l.tailScale, l.phase, tc.tail, tc.phase)
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
		{"bad duration", "duration: 10 minutes\n", []string{"duration", "line 1", "bad duration"}},
		{"bad int", "nodes: many\n", []string{"nodes", "line 1"}},
		{"list expected", "phases: 3\n", []string{"phases", "want a list"}},
		{"in list", "phases:\n  - name: a\n    start: 0s\n  - name: b\n    strat: 1m\n", []string{"phases[1].strat", "line 5"}},
		{"validation", "nodes: 1\n", []string{"nodes", "out of range"}},
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
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b, "fuzz.yaml")
		if err == nil {
			if err := s.Validate(); err != nil {
				t.Fatalf("parsed scenario does not validate: %v", err)
			}
		}
	})
}

func TestHistogramQuantiles(t *testing.T) {
	for _, sub := range []uint{3, 5, 7} {
		h := NewHistogram(sub)
		rng := rand.New(rand.NewPCG(3, 4))
		vals := make([]int64, 0, 100000)
		for range 100000 {
			v := int64(rng.ExpFloat64() * 1e5)
			vals = append(vals, v)
			h.Add(v)
		}
		res := math.Ldexp(1, -int(sub))
		for _, q := range []float64{0.5, 0.9, 0.99} {
			exact := quantileExact(vals, q)
			got := h.Quantile(q)
			if math.Abs(float64(got-exact)) > res*float64(exact)+1 {
				t.Errorf("subBits %d q %v: got %d, exact %d, resolution %v", sub, q, got, exact, res)
			}
		}
		if h.Quantile(1) > h.max || h.Count() != 100000 {
			t.Errorf("max or count wrong")
		}
	}
	small := NewHistogram(4)
	for v := range int64(10) {
		small.Add(v)
	}
	if got := small.Quantile(0.5); got != 4 {
		t.Errorf("exact range median %d, want 4", got)
	}
	if NewHistogram(4).Quantile(0.5) != 0 {
		t.Error("empty histogram quantile not 0")
	}
}

func quantileExact(v []int64, q float64) int64 {
	s := append([]int64(nil), v...)
	slicesSort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func TestErrStatsMergeMatchesDirect(t *testing.T) {
	a, b, all := newErrStats(5), newErrStats(5), newErrStats(5)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 1000 {
		e := int64(rng.NormFloat64() * 300)
		w := uint64(rng.IntN(1000))
		if i%2 == 0 {
			a.add(e, e, e < 200, w)
		} else {
			b.add(e, e, e < 200, w)
		}
		all.add(e, e, e < 200, w)
	}
	a.merge(b)
	sa, sall := a.summary(0, 0, 1, 1), all.summary(0, 0, 1, 1)
	if math.Abs(sa.ErrorStdNs-sall.ErrorStdNs) > 1e-6 || math.Abs(sa.ErrorMeanNs-sall.ErrorMeanNs) > 1e-9 ||
		sa.ErrorP99Ns != sall.ErrorP99Ns || sa.BoundCoverage != sall.BoundCoverage {
		t.Errorf("merged %+v != direct %+v", sa, sall)
	}
}

func TestSatSub(t *testing.T) {
	for _, tc := range []struct{ a, b, want int64 }{
		{5, 3, 2}, {math.MaxInt64, -1, math.MaxInt64}, {math.MinInt64, 1, math.MinInt64}, {-5, -7, 2},
	} {
		if got := satSub(tc.a, tc.b); got != tc.want {
			t.Errorf("satSub(%d, %d) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func slicesSort(s []int64) { slices.Sort(s) }
