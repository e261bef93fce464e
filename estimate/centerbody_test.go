package estimate_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/netmodel"
)

// bodyRun feeds a centre-line hull rounds of exchanges over link (the
// lab's syntax: forward is the local node's messages to its source), the
// source's clock running skew faster than the local one, and returns the
// mean |error| of Center half a period after each of the last rounds, and
// the shape of the line at the end.
func bodyRun(t testing.TB, link string, floorOnly bool, seed uint64) (float64, estimate.CenterShape, bool) {
	t.Helper()
	l, err := netmodel.ParseLink(link)
	if err != nil {
		t.Fatal(err)
	}
	return bodyRunWith(t, l.Forward.Sample, l.Reverse.Sample, floorOnly, seed)
}

// bodyRunWith is bodyRun with the two directions' delays drawn by up and
// down.
func bodyRunWith(t testing.TB, upDelay, downDelay func(*rand.Rand) int64, floorOnly bool, seed uint64) (float64, estimate.CenterShape, bool) {
	t.Helper()
	h, err := estimate.NewHull(estimate.HullConfig{Window: 4096, Center: true, CenterMemory: 2.5, CenterFloorOnly: floorOnly})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 99))
	const skew, offset = 20e-6, int64(3_000_000)
	src := func(x int64) int64 { return x + offset + int64(math.Round(skew*float64(x))) }
	err16 := feedRounds(t, h, 16, 6, int64(2e6), src, func() int64 { return upDelay(r) }, func() int64 { return downDelay(r) })
	sh, ok := h.CenterShape()
	return err16, sh, ok
}

// feedRounds feeds h rounds of 240 exchanges, a round every 6 s, the
// exchanges gap apart, the source's clock at local time x being src(x), the
// two directions' delays drawn by up and down (a reply 1 us after its
// probe), and returns the mean |error| of Center half a period after each
// of the last evalLast rounds.
func feedRounds(t testing.TB, h *estimate.Hull, rounds, evalLast int, gap int64, src func(int64) int64, up, down func() int64) float64 {
	t.Helper()
	const period, pings = int64(6e9), 240
	var sum float64
	var n int
	for k := range rounds {
		x := int64(k) * period
		var round []estimate.Sample
		for range pings {
			u, d := up(), down()
			s := estimate.Sample{LocSend: x, SrcRecv: src(x + u)}
			s.SrcSend = s.SrcRecv + 1000
			s.LocRecv = x + u + 1000 + d
			round = append(round, s)
			x += gap
		}
		if err := h.AddRound(round); err != nil {
			t.Fatal(err)
		}
		if k >= rounds-evalLast {
			at := x + period/2
			y, _, ok := h.Center(at)
			if !ok {
				t.Fatal("no centre line")
			}
			sum += math.Abs(float64(y - src(at)))
			n++
		}
	}
	return sum / float64(n)
}

// TestCenterBody: on every delay shape the centre line rests on what the
// data support: the lower body of a bell (several times better than the
// fastest exchanges), the floor of a floor (as before), the floor alone
// when the two directions' floors agree and their tails differ, and the
// midpoints when two bells of one mean differ in width. Three seeds each.
func TestCenterBody(t *testing.T) {
	for _, tt := range []struct {
		name, link string
		kinds      []string // the shape's Kind at the end, any of
		asym       bool     // CenterShape.Asymmetric at the end
		body       string   // CenterShape.Body at the end
		// maxRatio: mean |error| at most this times the floor line's;
		// minRatio: at least (a body that must not win by luck).
		maxRatio, minRatio float64
	}{
		{"normal 10us", "normal:100us:10us", []string{"body", "blend"}, false, "lower", 0.4, 0},
		{"normal 3us", "normal:100us:3us", []string{"body", "blend"}, false, "lower", 0.5, 0},
		{"bimodal", "bimodal:100us:20us", []string{"body", "blend"}, false, "lower", 0.9, 0},
		{"pareto floor", "pareto:100us:50us", []string{"floor"}, false, "", 1.05, 0.95},
		{"exponential floor", "exponential:100us:20us", []string{"floor"}, false, "", 1.05, 0.95},
		// The same floor each way, one direction queueing more: the floor
		// is unbiased, the body is not.
		{"one floor, different tails", "exponential:110us:10us/pareto:117.32us:30us", []string{"floor"}, true, "", 1.05, 0.95},
		// The same mean each way, one direction jittering more: the body
		// is unbiased, the floor (the fastest of a bell) is not.
		{"one mean, different widths", "normal:100us:8us/normal:100us:20us", []string{"body"}, true, "midpoints", 0.1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				got, sh, ok := bodyRun(t, tt.link, false, seed)
				floor, _, _ := bodyRun(t, tt.link, true, seed)
				t.Logf("seed %d: %.0f ns (floor line %.0f ns), %s (asymmetric %v), body weight %.2f, spreads %.0f/%.0f ns, disagreement %.1f sd, floor memory %.1f s",
					seed, got, floor, sh.Kind(), sh.Asymmetric, sh.BodyWeight, sh.SpreadUp, sh.SpreadDown, sh.Disagree, sh.FloorMemory/1e9)
				if !ok {
					t.Fatalf("seed %d: no shape", seed)
				}
				kindOK := false
				for _, k := range tt.kinds {
					kindOK = kindOK || sh.Kind() == k
				}
				if !kindOK {
					t.Errorf("seed %d: rests on %s, want one of %v", seed, sh.Kind(), tt.kinds)
				}
				if sh.Asymmetric != tt.asym {
					t.Errorf("seed %d: Asymmetric %v, want %v", seed, sh.Asymmetric, tt.asym)
				}
				if sh.Body != tt.body {
					t.Errorf("seed %d: body line %q, want %q", seed, sh.Body, tt.body)
				}
				if got > tt.maxRatio*floor+20 || got < tt.minRatio*floor-20 {
					t.Errorf("seed %d: %.0f ns against the floor line's %.0f: want a ratio in [%g, %g]", seed, got, floor, tt.minRatio, tt.maxRatio)
				}
			}
		})
	}
}

// TestCenterBodyOneWayWaits: a bell each way (5 us), and one direction
// besides waiting one time in five (exponential, 10 us on the average: a
// busy stack or scheduler on one side, as in the lab): the midpoints' mean
// is then 1 us off (half the mean wait), their median 0.5 us, the lower
// tenth of each direction 0.25 us, and the line rests on the lower body.
func TestCenterBodyOneWayWaits(t *testing.T) {
	bell := func(r *rand.Rand) int64 { return int64(100e3 + 5e3*r.NormFloat64()) }
	waits := func(r *rand.Rand) int64 {
		d := bell(r)
		if r.IntN(5) == 0 {
			d += int64(10e3 * r.ExpFloat64())
		}
		return d
	}
	for seed := uint64(1); seed <= 3; seed++ {
		got, sh, ok := bodyRunWith(t, waits, bell, false, seed)
		t.Logf("seed %d: %.0f ns, %s (%s body, asymmetric %v), spreads %.0f/%.0f ns", seed, got, sh.Kind(), sh.Body, sh.Asymmetric, sh.SpreadUp, sh.SpreadDown)
		if !ok || sh.Kind() != "body" || sh.Body != "lower" {
			t.Errorf("seed %d: rests on %s (%q body), want the lower body", seed, sh.Kind(), sh.Body)
		}
		if got > 450 {
			t.Errorf("seed %d: %.0f ns off, want under 450 (the midpoints' median is 500 ns off)", seed, got)
		}
	}
}

// TestCenterBodyAcrossRebase: the body line's measured moves (how far
// each line moved when the next round came) compare lines in the hull's
// relative units, which change when the window drops its oldest half and
// moves its origin (Hull.rebase). On bells with a 30-ppm skew, a window of
// 512 rebases every few rounds; the lines' spreads (FloorSD, BodySD, which
// include the measured moves) must not jump at those rounds: moved with
// the origin, a line's move is its noise, a few hundred ns; not moved, it
// is the origin's shift, hundreds of us.
func TestCenterBodyAcrossRebase(t *testing.T) {
	h, err := estimate.NewHull(estimate.HullConfig{Window: 512, Center: true, CenterMemory: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	l, err := netmodel.ParseLink("normal:100us:10us")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 99))
	const skew = 30e-6
	src := func(x int64) int64 { return x + 3_000_000 + int64(math.Round(skew*float64(x))) }
	var sds []float64
	x := int64(1e12)
	for k := range 30 {
		var round []estimate.Sample
		for range 240 {
			up, down := l.Forward.Sample(r), l.Reverse.Sample(r)
			s := estimate.Sample{LocSend: x, SrcRecv: src(x + up)}
			s.SrcSend = s.SrcRecv + 1000
			s.LocRecv = x + up + 1000 + down
			round = append(round, s)
			x += 2e6
		}
		x += 5.5e9
		if err := h.AddRound(round); err != nil {
			t.Fatal(err)
		}
		if _, _, ok := h.Center(x); !ok {
			t.Fatal("no centre line")
		}
		if sh, ok := h.CenterShape(); ok && k >= 6 {
			sds = append(sds, max(sh.FloorSD, sh.BodySD))
		}
	}
	sorted := slices.Clone(sds)
	slices.Sort(sorted)
	t.Logf("spreads: median %.0f ns, largest %.0f ns", sorted[len(sorted)/2], sorted[len(sorted)-1])
	// Not moved with the origin, the median was 14.9 us and the largest 67.
	for i, sd := range sds {
		if sd > 10e3 {
			t.Errorf("round %d: the lines' spread %.0f ns: a move measured across the origin's shift", i+6, sd)
		}
	}
}

// curveRun feeds a centre-line hull 50 rounds of 240 exchanges over a
// 3-us bell each way, a round every 6 s, the source's clock moving away
// from the local one with a frequency that changes at accel (ns/s^2, a
// crystal's temperature cycle over a minute looks like this), and returns
// the mean |error| of Center half a period after each of the last 20
// rounds and the body line's memory at the end.
func curveRun(t testing.TB, accel float64, seed uint64) (float64, float64) {
	t.Helper()
	h, err := estimate.NewHull(estimate.HullConfig{Window: 4096, Center: true, CenterMemory: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	src := func(x int64) int64 {
		s := float64(x) / 1e9
		return x + 3_000_000 + int64(math.Round(20e-6*float64(x)+accel/2*s*s))
	}
	delay := func() int64 { return 100_000 + int64(math.Round(3000*r.NormFloat64())) }
	mean := feedRounds(t, h, 50, 20, int64(700e3), src, delay, delay)
	sh, _ := h.CenterShape()
	return mean, sh.Memory
}

// TestCenterBodyFollowsCurvature: where the frequency moves (3 ns/s^2,
// h2's clock in the lab's seed 1), the body line's memory shortens to the
// curvature the rounds show and the line lags far less than with its
// default memory; on a steady clock the memory stays the default and
// nothing changes.
func TestCenterBodyFollowsCurvature(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		curved, mem := curveRun(t, 3, seed)
		steady, memSteady := curveRun(t, 0, seed)
		// The default memory: the fixed stretch, nothing measured from
		// the rounds (the measured wander, bodyWander, shortens it too).
		restore, restoreNoise := estimate.SetBodyCurve(false), estimate.SetBodyNoise(false)
		curvedFixed, _ := curveRun(t, 3, seed)
		steadyFixed, _ := curveRun(t, 0, seed)
		restore()
		restoreNoise()
		// bodyCurve alone, on the stretch the rounds chose: it changes
		// nothing on the steady clock.
		restore = estimate.SetBodyCurve(false)
		steadyNoCurve, _ := curveRun(t, 0, seed)
		restore()
		t.Logf("seed %d: curving clock %.0f ns (memory %.1f s) against %.0f ns with the default memory; steady clock %.0f ns (memory %.1f s) against %.0f with the fixed stretch",
			seed, curved, mem/1e9, curvedFixed, steady, memSteady/1e9, steadyFixed)
		if mem == 0 || curved > 0.6*curvedFixed {
			t.Errorf("seed %d: curving clock: %.0f ns with memory %.1f s, want a shorter memory and at most 0.6x the default memory's %.0f ns", seed, curved, mem/1e9, curvedFixed)
		}
		if memSteady != 0 || steady != steadyNoCurve {
			t.Errorf("seed %d: steady clock: %.0f ns with memory %.1f s, want the stretch's memory unshortened (%.0f ns)", seed, steady, memSteady/1e9, steadyNoCurve)
		}
	}
}

// noiseRun feeds a centre-line hull 40 rounds of 240 exchanges over a bell
// of sigma ns each way, a round every 6 s, the source's frequency a
// random walk of walk ns/s per sqrt(s) (the lab's clocks: 5), and returns
// the mean |error| of Center half a period after each of the last 25
// rounds and the body line's memory stretch at the end.
func noiseRun(t testing.TB, sigma, walk float64, seed uint64) (float64, float64) {
	t.Helper()
	mean, sh := noiseRunShape(t, sigma, walk, seed)
	return mean, sh.Stretch
}

// noiseRunShape is noiseRun, returning the line's whole shape at the end.
func noiseRunShape(t testing.TB, sigma, walk float64, seed uint64) (float64, estimate.CenterShape) {
	t.Helper()
	h, err := estimate.NewHull(estimate.HullConfig{Window: 4096, Center: true, CenterMemory: 2.5})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 11))
	// The frequency (ns/s) at each whole second, and the phase (ns) the
	// source's clock gained by then; between seconds the phase is linear.
	const secs = 40*6 + 10
	phase := make([]float64, secs+1)
	f := 20e3
	for k := 1; k <= secs; k++ {
		f += walk * r.NormFloat64()
		phase[k] = phase[k-1] + f
	}
	src := func(x int64) int64 {
		k := min(int(x/1e9), secs-1)
		frac := float64(x-int64(k)*1e9) / 1e9
		return x + 3_000_000 + int64(math.Round(phase[k]+frac*(phase[k+1]-phase[k])))
	}
	delay := func() int64 { return 100_000 + int64(math.Round(sigma*r.NormFloat64())) }
	mean := feedRounds(t, h, 40, 25, int64(700e3), src, delay, delay)
	sh, _ := h.CenterShape()
	return mean, sh
}

// TestCenterBodyMemoryFollowsNoise: the body line's memory stretches with
// the fourth root of its rounds' noise (bodyNoise): shorter on a 3-us bell
// than on a 10-us one over the same clocks, and over eight
// seeds of clocks that wander as the lab's do the error is well below the
// fixed stretch's on the narrow bell (137 against 158 ns) and not above it
// on the wide one (304 against 312).
func TestCenterBodyMemoryFollowsNoise(t *testing.T) {
	stretch := map[uint64]float64{} // the wider bell's, per seed
	for seed := uint64(1); seed <= 8; seed++ {
		stretch[seed] = math.Inf(1)
	}
	for _, c := range []struct {
		sigma float64
		most  float64 // the most error, times the fixed stretch's
	}{{10000, 1.03}, {3000, 0.92}} {
		var on, off float64
		for seed := uint64(1); seed <= 8; seed++ {
			e, st := noiseRun(t, c.sigma, 5, seed)
			restore := estimate.SetBodyNoise(false)
			eFixed, stFixed := noiseRun(t, c.sigma, 5, seed)
			restore()
			if st >= stretch[seed] {
				t.Errorf("sigma %.0f ns seed %d: stretch %.2f, want below the narrower bell's %.2f on the same clocks", c.sigma, seed, st, stretch[seed])
			}
			stretch[seed] = st
			if stFixed != 2 {
				t.Errorf("sigma %.0f ns seed %d: fixed stretch %.2f, want 2", c.sigma, seed, stFixed)
			}
			t.Logf("sigma %.0f ns seed %d: %.0f ns (stretch %.2f) against %.0f fixed", c.sigma, seed, e, st, eFixed)
			on, off = on+e, off+eFixed
		}
		t.Logf("sigma %.0f ns: mean %.0f ns against %.0f fixed", c.sigma, on/8, off/8)
		if on > c.most*off {
			t.Errorf("sigma %.0f ns: mean %.0f ns against %.0f with the fixed stretch, want at most %.2fx", c.sigma, on/8, off/8, c.most)
		}
	}
}

// TestCenterBodyStretchShown: a bell's line reports the body's memory
// stretch and the wander it measured; a sharp floor's, where no body line
// is fitted, reports neither.
func TestCenterBodyStretchShown(t *testing.T) {
	_, bell, ok := bodyRun(t, "normal:100us:3us", false, 1)
	if !ok || !(bell.Stretch >= 0.75 && bell.Stretch <= 4) || !(bell.Wander > 0) {
		t.Errorf("3-us bell: stretch %.2f, wander %g ppm/sqrt(s) (ok %v), want a stretch in 0.75-4 and a wander", bell.Stretch, bell.Wander, ok)
	}
	_, floor, ok := bodyRun(t, "pareto:100us:50us", false, 1)
	if !ok || floor.Stretch != 0 || floor.Wander != 0 || floor.BodyWeight != 0 {
		t.Errorf("pareto floor: stretch %.2f, wander %g, body weight %.2f (ok %v), want 0, 0, 0", floor.Stretch, floor.Wander, floor.BodyWeight, ok)
	}
}

// TestCenterBodyKalman: on bells over clocks that wander as the lab's do
// the Kalman line of the rounds' own locations (bodyKalman) takes a share
// of the body line (0.43 and 0.45 on average), and over eight seeds the
// error is not above the exponentially weighted line's alone (139 against
// 138 ns, 303 against 302: here, with 240 exchanges a round, the two lines
// are about as good; the filter alone did 142 and 308). Its gains are in
// the simulator's matrix (docs/estimators.md).
func TestCenterBodyKalman(t *testing.T) {
	for _, c := range []struct {
		sigma float64
		most  float64 // the most error, times the line's without the filter
	}{{3000, 1.03}, {10000, 1.03}} {
		var on, off, w float64
		for seed := uint64(1); seed <= 8; seed++ {
			e, sh := noiseRunShape(t, c.sigma, 5, seed)
			restore := estimate.SetBodyKalman(false)
			eOff, shOff := noiseRunShape(t, c.sigma, 5, seed)
			restore()
			if shOff.Kalman != 0 {
				t.Errorf("sigma %.0f ns seed %d: Kalman weight %.2f with the filter off", c.sigma, seed, shOff.Kalman)
			}
			if !(sh.Kalman > 0 && sh.Kalman <= 1) {
				t.Errorf("sigma %.0f ns seed %d: Kalman weight %.2f, want in (0, 1]", c.sigma, seed, sh.Kalman)
			}
			t.Logf("sigma %.0f ns seed %d: %.0f ns (Kalman weight %.2f) against %.0f without", c.sigma, seed, e, sh.Kalman, eOff)
			on, off, w = on+e, off+eOff, w+sh.Kalman
		}
		t.Logf("sigma %.0f ns: mean %.0f ns against %.0f without, mean weight %.2f", c.sigma, on/8, off/8, w/8)
		if on > c.most*off {
			t.Errorf("sigma %.0f ns: mean %.0f ns against %.0f without the Kalman line, want at most %.2fx", c.sigma, on/8, off/8, c.most)
		}
	}
}
