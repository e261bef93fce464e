package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/topology"
)

// Tests named after Jezequel's sections: 4.2 (guaranteed bounds between the
// UP and LOW point sets) and 5.2 (algorithm A3: composition along a minimal
// spanning tree, intersection over several sources).

// estimatorSets are the factories every end-to-end test runs with: the
// test fakes, and package estimate's Hull with each selected estimator.
var estimatorSets = []struct {
	name string
	f    Estimators
}{
	{"fake", fakeEstimators},
	{"hull", func(c Config) (estimate.Estimator, estimate.Estimator, error) {
		c.Estimator = "hull"
		return DefaultEstimators(c)
	}},
	{"minrtt", func(c Config) (estimate.Estimator, estimate.Estimator, error) {
		c.Estimator = "minrtt"
		return DefaultEstimators(c)
	}},
	{"regression", func(c Config) (estimate.Estimator, estimate.Estimator, error) {
		c.Estimator = "regression"
		return DefaultEstimators(c)
	}},
}

// configsFrom turns topology roles into engine configs.
func configsFrom(roles []topology.Role, tweak func(*Config)) []Config {
	ids := func(xs []int) []NodeID {
		out := make([]NodeID, len(xs))
		for i, x := range xs {
			out[i] = NodeID(x)
		}
		return out
	}
	var cfgs []Config
	for _, r := range roles {
		c := testConfig(NodeID(r.Node), ids(r.Sources), ids(r.Children))
		if tweak != nil {
			tweak(&c)
		}
		cfgs = append(cfgs, c)
	}
	return cfgs
}

// randomClocks gives node 0 a perfect clock and every other node an offset
// within +-10 ms and a drift within +-maxPPM.
func randomClocks(n int, seed uint64, maxPPM float64) [][2]float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([][2]float64, n)
	for i := 1; i < n; i++ {
		out[i] = [2]float64{(r.Float64()*2 - 1) * 10e6, (r.Float64()*2 - 1) * maxPPM * 1e-6}
	}
	return out
}

// boundStats checks every node's reading against the truth at each probe.
type boundStats struct {
	reads, synced, violations int
	absErr                    []float64 // |Est - truth| per synced read, by node depth
	width                     map[int][]float64
	maxAbs                    float64
	warmup                    int64 // truth time before which errors are not collected
}

func (b *boundStats) check(t *testing.T, tn *testNet, depth map[NodeID]int, now int64) {
	truth := tn.truth(now)
	for _, id := range tn.ids {
		s := tn.nodes[id]
		r := s.n.Estimate(s.local(now))
		b.reads++
		if r.Status == StatusUnsynced {
			continue
		}
		b.synced++
		if truth < r.Earliest || truth > r.Latest {
			b.violations++
			if b.violations <= 5 {
				t.Errorf("node %d at truth %d: truth %d outside [%d, %d] (est %d)", id, now, truth, r.Earliest, r.Latest, r.Est)
			}
		}
		if now < b.warmup {
			continue
		}
		e := math.Abs(float64(r.Est - truth))
		b.absErr = append(b.absErr, e)
		b.maxAbs = max(b.maxAbs, e)
		if b.width == nil {
			b.width = map[int][]float64{}
		}
		b.width[depth[id]] = append(b.width[depth[id]], float64(r.Latest-r.Earliest))
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func runTopology(t *testing.T, g *topology.Graph, f Estimators, link linkFunc, seed uint64, dur int64) (*testNet, *boundStats, map[NodeID]int) {
	t.Helper()
	return runTopologyWith(t, g, f, link, seed, dur, nil)
}

func runTopologyWith(t *testing.T, g *topology.Graph, f Estimators, link linkFunc, seed uint64, dur int64, tweak func(*Config)) (*testNet, *boundStats, map[NodeID]int) {
	t.Helper()
	roles, err := topology.Roles(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	depth := map[NodeID]int{}
	for _, r := range roles {
		depth[NodeID(r.Node)] = r.Depth
	}
	tn := newTestNet(t, seed, configsFrom(roles, tweak), randomClocks(g.N(), seed, 50), link, f)
	st := &boundStats{warmup: 2e9}
	tn.run(dur, 3_700_000, func(now int64) { st.check(t, tn, depth, now) })
	return tn, st, depth
}

func TestJezequel42TwoNodeBoundsContainTruth(t *testing.T) {
	for _, es := range estimatorSets {
		t.Run(es.name, func(t *testing.T) {
			cfgs := []Config{testConfig(0, nil, []NodeID{1}), testConfig(1, []NodeID{0}, nil)}
			clocks := [][2]float64{{0, 0}, {1e6, 30e-6}}
			tn := newTestNet(t, 1, cfgs, clocks, fixedLink(10_000), es.f)
			// Errors count after 2 s: until the second round no drift is
			// known (the bounds hold from the first).
			st := &boundStats{warmup: 2e9}
			tn.run(20e9, 3_700_000, func(now int64) { st.check(t, tn, map[NodeID]int{0: 0, 1: 1}, now) })
			if st.violations > 0 {
				t.Fatalf("%d of %d synced reads outside the bounds", st.violations, st.synced)
			}
			// Node 0 always; node 1 from its first round on.
			if st.synced < st.reads*9/10 {
				t.Fatalf("only %d of %d reads synced", st.synced, st.reads)
			}
			// A symmetric network: the estimate is within the RTT/2 of
			// 10 us whatever the estimator.
			if st.maxAbs > 10_000 {
				t.Fatalf("max |est-truth| = %.0f ns", st.maxAbs)
			}
			t.Logf("%s: %d synced reads, median |err| %.0f ns, max %.0f ns, median width at depth 1 %.0f ns",
				es.name, st.synced, median(st.absErr), st.maxAbs, median(st.width[1]))
		})
	}
}

func TestJezequel52CompositionThreeLevelTree(t *testing.T) {
	g, err := topology.Tree(15, 2) // depths 0..3
	if err != nil {
		t.Fatal(err)
	}
	links := []struct {
		name string
		link linkFunc
	}{
		{"perfect", fixedLink(5_000)},
		// Asymmetric (2 us), heavy-tailed, lossy, duplicating: the bounds
		// are causal, so they must hold anyway.
		{"noisy", noisyLink(5_000, 2_000, 3_000, 0.02, 0.01)},
	}
	for _, l := range links {
		for _, es := range estimatorSets {
			t.Run(l.name+"/"+es.name, func(t *testing.T) {
				_, st, _ := runTopology(t, g, es.f, l.link, 3, 30e9)
				if st.violations > 0 {
					t.Fatalf("%d of %d synced reads outside the bounds", st.violations, st.synced)
				}
				if st.synced < st.reads*8/10 {
					t.Fatalf("only %d of %d reads synced", st.synced, st.reads)
				}
				w1, w2, w3 := median(st.width[1]), median(st.width[2]), median(st.width[3])
				if !(w1 <= w2 && w2 <= w3) {
					t.Fatalf("median bound widths by depth not increasing: %.0f %.0f %.0f", w1, w2, w3)
				}
				t.Logf("%s/%s: median |err| %.0f ns, max %.0f ns; median width depth 1/2/3: %.0f/%.0f/%.0f ns",
					l.name, es.name, median(st.absErr), st.maxAbs, w1, w2, w3)
			})
		}
	}
}

// TestJezequel52SameDepthSubNetwork: in an odd ring the two farthest nodes
// are neighbours; the higher one follows both its neighbour one level up and
// the sub-reference, and its interval is the intersection of both.
func TestJezequel52SameDepthSubNetwork(t *testing.T) {
	g, err := topology.Ring(5)
	if err != nil {
		t.Fatal(err)
	}
	for _, es := range estimatorSets {
		t.Run(es.name, func(t *testing.T) {
			// The harness's clocks read exactly: no read uncertainty, so
			// that Read's interval is exactly the sources' intersection.
			exact := func(c *Config) { c.ReadUncertainty = -1 }
			tn, st, _ := runTopologyWith(t, g, es.f, noisyLink(5_000, 1_000, 2_000, 0.01, 0), 5, 20e9, exact)
			if st.violations > 0 {
				t.Fatalf("%d violations", st.violations)
			}
			s3 := tn.nodes[3]
			n3 := s3.n
			if len(n3.sources) != 2 {
				t.Fatalf("node 3 has %d sources", len(n3.sources))
			}
			x := s3.local(tn.now)
			r := n3.Estimate(x)
			for _, src := range n3.sources {
				_, lo, hi, ok := n3.viaSource(src, x)
				if !ok {
					t.Fatalf("source %d unusable", src.id)
				}
				if r.Earliest < lo || r.Latest > hi {
					t.Fatalf("node 3 interval [%d, %d] not inside source %d's [%d, %d]", r.Earliest, r.Latest, src.id, lo, hi)
				}
			}
		})
	}
}

func TestJezequel52Hypercube(t *testing.T) {
	g, err := topology.Hypercube(4)
	if err != nil {
		t.Fatal(err)
	}
	_, st, _ := runTopology(t, g, fakeEstimators, noisyLink(5_000, 500, 1_000, 0.01, 0.01), 9, 10e9)
	if st.violations > 0 {
		t.Fatalf("%d violations", st.violations)
	}
}

func TestMonoNeverDecreases(t *testing.T) {
	g, err := topology.Tree(7, 2)
	if err != nil {
		t.Fatal(err)
	}
	roles, _ := topology.Roles(g, 0)
	for _, seed := range []uint64{1, 2, 3} {
		cfgs := configsFrom(roles, func(c *Config) { c.MaxSlewRate = 1e-3 })
		tn := newTestNet(t, seed, cfgs, randomClocks(7, seed, 100), noisyLink(5_000, 3_000, 20_000, 0.05, 0.02), fakeEstimators)
		r := rand.New(rand.NewPCG(seed, 99))
		last := map[NodeID]int64{}
		lastLocal := map[NodeID]int64{}
		reads := 0
		tn.run(20e9, 1_300_000, func(now int64) {
			for _, id := range tn.ids {
				s := tn.nodes[id]
				x := s.local(now)
				// Sometimes read in the past or twice at the same instant.
				switch r.IntN(10) {
				case 0:
					x -= r.Int64N(5e6)
				case 1:
					x = lastLocal[id]
				}
				lastLocal[id] = x
				rd := s.n.Read(x)
				reads++
				if prev, ok := last[id]; ok && rd.Mono < prev {
					t.Fatalf("seed %d node %d: Mono went back from %d to %d", seed, id, prev, rd.Mono)
				}
				last[id] = rd.Mono
				if rd.Status != StatusUnsynced && rd.Mono < rd.Earliest {
					t.Fatalf("seed %d node %d: Mono %d below Earliest %d", seed, id, rd.Mono, rd.Earliest)
				}
			}
		})
		if reads < 1000 {
			t.Fatalf("only %d reads", reads)
		}
	}
}

// TestMonoSlewRate: a correction is slewed at MaxSlewRate, not stepped.
func TestMonoSlewRate(t *testing.T) {
	c := testConfig(1, []NodeID{0}, nil)
	c.MaxSlewRate = 500e-6
	n := newNode(t, c)
	n.Tick(0)
	// Synced with offset 0 at first.
	n.Step(childRound(1, 1e9, 0, 10_000), 1e9+40_000)
	n.Step(childRound(2, 2e9, 0, 10_000), 2e9+40_000)
	n.Read(2e9 + 100_000)
	r0 := n.Read(3e9 + 100_000)
	// Now the source says we are 100 us ahead: Est drops by ~100 us, Mono
	// may only slow down by 500 ppm. (A lone contradicting round is held
	// until the next confirms it: two rounds say so.)
	n.Step(childRound(3, 3e9, 100_000, 10_000), 3e9+140_000)
	n.Step(childRound(4, 3e9+50_000, 100_000, 10_000), 3e9+190_000)
	x := int64(3e9 + 200_000)
	r1 := n.Read(x)
	dx := x - (3e9 + 100_000)
	// Mono runs at the estimated rate (the new skew is -100 ppm: 100 us
	// over the second between rounds 2 and 3) plus at most 500 ppm of slew.
	if r1.Mono < r0.Mono+dx-int64((500e-6+100e-6)*float64(dx))-2 {
		t.Fatalf("Mono fell faster than the slew: %d -> %d over %d", r0.Mono, r1.Mono, dx)
	}
	if r1.Mono >= r0.Mono+dx {
		t.Fatalf("Mono did not start correcting: %d -> %d over %d", r0.Mono, r1.Mono, dx)
	}
	if r1.Est >= r1.Mono {
		t.Fatalf("expected Est (%d) behind Mono (%d) after the correction", r1.Est, r1.Mono)
	}
}

func TestDeterminism(t *testing.T) {
	g, err := topology.Tree(15, 2)
	if err != nil {
		t.Fatal(err)
	}
	run := func(seed uint64) (uint64, []Time) {
		tn, _, _ := runTopology(t, g, estimatorSets[2].f, noisyLink(5_000, 1_000, 5_000, 0.05, 0.05), seed, 5e9)
		var reads []Time
		for _, id := range tn.ids {
			s := tn.nodes[id]
			reads = append(reads, s.n.Estimate(s.local(tn.now)))
		}
		return tn.digest.Sum64(), reads
	}
	d1, r1 := run(11)
	d2, r2 := run(11)
	if d1 != d2 || !slices.Equal(r1, r2) {
		t.Fatalf("same inputs, different outputs: %x vs %x", d1, d2)
	}
	d3, _ := run(12)
	if d3 == d1 {
		t.Fatal("different seeds gave the same digest: the digest checks nothing")
	}
}

// TestStaleBoundsWiden: with the network cut, the node goes stale and its
// bounds keep containing the truth while widening.
func TestStaleBoundsWiden(t *testing.T) {
	cfgs := []Config{testConfig(0, nil, []NodeID{1}), testConfig(1, []NodeID{0}, nil)}
	cfgs[1].StaleAfter = 2e9
	cut := int64(3e9)
	var now *int64
	link := func(from, to NodeID, r *rand.Rand) (int64, bool, bool) {
		return 10_000, now != nil && *now > cut, false
	}
	tn := newTestNet(t, 1, cfgs, [][2]float64{{0, 0}, {1e6, 80e-6}}, link, fakeEstimators)
	now = &tn.now
	var widths []int64
	var statuses []Status
	tn.run(30e9, 1e9, func(now int64) {
		s := tn.nodes[1]
		r := s.n.Estimate(s.local(now))
		truth := tn.truth(now)
		if r.Status != StatusUnsynced && (truth < r.Earliest || truth > r.Latest) {
			t.Fatalf("at %d: truth outside [%d, %d]", now, r.Earliest, r.Latest)
		}
		widths = append(widths, r.Latest-r.Earliest)
		statuses = append(statuses, r.Status)
	})
	if statuses[len(statuses)-1] != StatusStale {
		t.Fatalf("status after the cut: %v", statuses[len(statuses)-1])
	}
	if !(widths[len(widths)-1] > widths[5]) {
		t.Fatalf("bounds did not widen: %v", widths)
	}
}

// TestLiaoSelfResyncHoldsTheOffset: on a perfect network the only error
// left is the self resync's: the offset is held for a self period, so the
// error reaches |drift| x self period (under LargeDrift x MaxSelfPeriod, or
// the larger drift x MinSelfPeriod); applying the drift continuously
// removes it.
func TestLiaoSelfResyncHoldsTheOffset(t *testing.T) {
	g, err := topology.Tree(15, 2)
	if err != nil {
		t.Fatal(err)
	}
	c := testConfig(0, nil, nil)
	limit := max(c.LargeDrift*float64(c.MaxSelfPeriod), 100e-6*float64(c.MinSelfPeriod))
	_, step, _ := runTopologyWith(t, g, estimatorSets[2].f, fixedLink(5_000), 3, 20e9, nil)
	_, cont, _ := runTopologyWith(t, g, estimatorSets[2].f, fixedLink(5_000), 3, 20e9, func(c *Config) { c.ContinuousDrift = true })
	t.Logf("max |err|: self resync %.0f ns (limit %.0f), continuous %.0f ns", step.maxAbs, limit, cont.maxAbs)
	if step.violations+cont.violations > 0 {
		t.Fatal("bounds violated")
	}
	if step.maxAbs > limit*1.1 {
		t.Fatalf("self-resync error %.0f ns above %.0f", step.maxAbs, limit)
	}
	if cont.maxAbs > step.maxAbs/4 {
		t.Fatalf("continuous drift error %.0f ns not well below the held offset's %.0f", cont.maxAbs, step.maxAbs)
	}
}

// TestJezequel43MinDelayTightensBounds: with a known minimum one-way delay
// mu (here 9 us of a 10 us link) the bounds shrink from about the round
// trip to about the delay variation, and still contain the truth.
func TestJezequel43MinDelayTightensBounds(t *testing.T) {
	widths := map[int64]float64{}
	for _, mu := range []int64{0, 9_000} {
		cfgs := []Config{testConfig(0, nil, []NodeID{1}), testConfig(1, []NodeID{0}, nil)}
		for i := range cfgs {
			cfgs[i].HullMinDelay = time.Duration(mu)
			// The world's clocks are linear: state it, as Jezequel does
			// (the default model's 2 ppm steps would widen the bounds by
			// more than mu tightens them).
			cfgs[i].MaxFreqStep = 0
		}
		tn := newTestNet(t, 1, cfgs, [][2]float64{{0, 0}, {1e6, 30e-6}}, noisyLink(10_000, 0, 500, 0, 0), DefaultEstimators)
		st := &boundStats{warmup: 2e9}
		tn.run(20e9, 3_700_000, func(now int64) { st.check(t, tn, map[NodeID]int{0: 0, 1: 1}, now) })
		if st.violations > 0 {
			t.Fatalf("mu %d: %d violations", mu, st.violations)
		}
		widths[mu] = median(st.width[1])
		t.Logf("mu %d ns: median width %.0f ns, max |err| %.0f ns", mu, widths[mu], st.maxAbs)
	}
	if widths[9_000] > widths[0]/4 {
		t.Fatalf("mu did not tighten the bounds: %v", widths)
	}
}
