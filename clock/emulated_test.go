package clock

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// bigIdeal is an independent oracle for a single-segment clock:
// origin + offset + (t-origin) + floor((t-origin)*k/1e18), in big integers.
func bigIdeal(origin, offset, t int64, ppm float64) int64 {
	k := big.NewInt(int64(math.Round(ppm * 1e12)))
	dt := new(big.Int).Sub(big.NewInt(t), big.NewInt(origin))
	p := new(big.Int).Mul(dt, k)
	q := new(big.Int)
	m := new(big.Int)
	q.DivMod(p, big.NewInt(1e18), m) // Euclidean: floor for a positive divisor
	r := new(big.Int).Add(big.NewInt(origin), big.NewInt(offset))
	r.Add(r, dt).Add(r, q)
	if !r.IsInt64() {
		if r.Sign() > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return r.Int64()
}

func mustEmu(t *testing.T, p EmuParams) *Emulated {
	t.Helper()
	e, err := NewEmulated(p)
	if err != nil {
		t.Fatalf("NewEmulated(%+v): %v", p, err)
	}
	return e
}

func TestIdealOffsetDriftExact(t *testing.T) {
	tests := []struct {
		name   string
		origin int64
		offset int64
		ppm    float64
		t      int64
		want   int64 // 0: use the big-integer oracle
	}{
		{"offset only", 0, 1000, 0, 1e9, 1e9 + 1000},
		{"10ppm 1s", 0, 1000, 10, 1e9, 1e9 + 1000 + 10000},
		{"10ppm 11.6 days", 0, -7, 10, 1e15, 1e15 - 7 + 1e10},
		{"-3.5ppm 1s", 0, 0, -3.5, 1e9, 1e9 - 3500},
		{"-3.5ppm odd ns floors", 0, 0, -3.5, 1, 0},
		{"+0.5ppm 1ns floors", 0, 0, 0.5, 1, 1},
		{"origin shifted", 5e12, 3, 100, 5e12 + 1e6, 5e12 + 3 + 1e6 + 100},
		{"before origin", 1e9, 0, 20, 0, 0 - 20000},
		{"2^61 with 7.25ppm", 0, 123, 7.25, 1 << 61, 0},
		{"-2^61 with -99.999ppm", 1 << 40, -1 << 50, -99.999, -1 << 61, 0},
		{"near MaxTime", -MaxTime, 0, 1e5, MaxTime, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEmu(t, EmuParams{Origin: tc.origin, Offset: tc.offset, DriftPPM: tc.ppm})
			want := tc.want
			if want == 0 {
				want = bigIdeal(tc.origin, tc.offset, tc.t, tc.ppm)
			}
			if got := e.Ideal(tc.t); got != want {
				t.Errorf("Ideal(%d) = %d, want %d (diff %d)", tc.t, got, want, got-want)
			}
			if e.Err() != nil {
				t.Errorf("Err() = %v", e.Err())
			}
		})
	}
}

func TestIdealRandomAgainstOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		origin := r.Int64N(1<<61) - 1<<60
		offset := r.Int64N(1<<61) - 1<<60
		ppm := math.Round((r.Float64()*2-1)*500*1e6) / 1e6
		e := mustEmu(t, EmuParams{Origin: origin, Offset: offset, DriftPPM: ppm})
		x := r.Int64N(1<<61) - 1<<60
		if got, want := e.Ideal(x), bigIdeal(origin, offset, x, ppm); got != want {
			t.Fatalf("origin %d offset %d ppm %v: Ideal(%d) = %d, want %d", origin, offset, ppm, x, got, want)
		}
	}
}

func TestSteps(t *testing.T) {
	e := mustEmu(t, EmuParams{DriftPPM: 10, Steps: []DriftStep{{At: 1e9, DriftPPM: -20}, {At: 3e9, DriftPPM: 0}}})
	tests := []struct {
		t, want int64
		skew    float64
	}{
		{5e8, 5e8 + 5000, 10e-6},
		{1e9, 1e9 + 10000, -20e-6},
		{2e9, 2e9 + 10000 - 20000, -20e-6},
		{3e9, 3e9 + 10000 - 40000, 0},
		{1e12, 1e12 - 30000, 0},
	}
	for _, tc := range tests {
		if got := e.Ideal(tc.t); got != tc.want {
			t.Errorf("Ideal(%d) = %d, want %d", tc.t, got, tc.want)
		}
		if got := e.Skew(tc.t); math.Abs(got-tc.skew) > 1e-15 {
			t.Errorf("Skew(%d) = %g, want %g", tc.t, got, tc.skew)
		}
	}
	// Look back across the steps (still kept): exact again.
	if got := e.Ideal(5e8); got != 5e8+5000 {
		t.Errorf("look-back Ideal(5e8) = %d", got)
	}
	if e.Err() != nil {
		t.Errorf("Err() = %v", e.Err())
	}
}

// Wander accumulates exactly: many segments joined with their sub-ns
// remainders give the same local time as one segment would for the same
// mean rate, to within 1 ns (no per-segment rounding drift).
func TestWanderNoRoundingAccumulation(t *testing.T) {
	e := mustEmu(t, EmuParams{DriftPPM: 1.5, WanderPPM: 1e-6, WanderStep: 1e6, Seed: 3}) // 1.5 ns per segment: half a ns to carry each time
	// With a tiny wander the mean rate is the base one; the integral of the
	// wander is bounded by sum|wanderK|*step; compute it from Skew.
	var integral float64
	var prev int64
	for x := int64(1e6); x <= 1e10; x += 1e6 {
		integral += e.Skew(prev) * 1e6
		prev = x
	}
	got := e.Ideal(1e10)
	want := 1e10 + integral
	if d := float64(got) - want; math.Abs(d) > 1.5 {
		t.Errorf("Ideal(1e10) = %d, integral of skew gives %.3f (diff %.3f ns)", got, want, d)
	}
}

func TestTruthAtInverse(t *testing.T) {
	params := []EmuParams{
		{Offset: 12345, DriftPPM: 37.5},
		{Offset: -1e12, DriftPPM: -99.9, Granularity: 1000},
		{Origin: 1e15, Offset: 7, DriftPPM: 3, WanderPPM: 0.05, WanderStep: 1e7, Seed: 9},
		{Offset: -3, DriftPPM: -7, WanderPPM: 0.5, WanderStep: MinWanderStep, Seed: 10},
		{DriftPPM: 1e5, Steps: []DriftStep{{At: 1e9, DriftPPM: -1e5}, {At: 2e9, DriftPPM: 0.001}}},
	}
	for pi, p := range params {
		e := mustEmu(t, p)
		r := rand.New(rand.NewPCG(uint64(pi), 5))
		base := p.Origin + p.Offset
		for i := 0; i < 3000; i++ {
			// Mostly forward, sometimes a little back (bounded look-back).
			l := base + int64(i)*1e6 + r.Int64N(3e6) - 1e6
			tr := e.TruthAt(l)
			if got := e.Ideal(tr); got < l {
				t.Fatalf("params %d: Ideal(TruthAt(%d)=%d) = %d < local", pi, l, tr, got)
			}
			if got := e.Ideal(tr - 1); got >= l {
				t.Fatalf("params %d: Ideal(TruthAt(%d)-1) = %d >= local: not the first", pi, l, got)
			}
			x := p.Origin + int64(i)*1e6 + r.Int64N(1e6)
			if tr := e.TruthAt(e.Ideal(x)); tr > x {
				t.Fatalf("params %d: TruthAt(Ideal(%d)) = %d > t", pi, x, tr)
			}
		}
		if e.Err() != nil {
			t.Errorf("params %d: Err() = %v", pi, e.Err())
		}
	}
}

func TestReadMonotoneQuantized(t *testing.T) {
	tests := []struct {
		name string
		g, j int64
	}{
		{"none", 0, 0},
		{"granularity 1us", 1000, 0},
		{"jitter 500ns", 0, 500},
		{"granularity 1us jitter 3us", 1000, 3000},
		{"granularity 64ms", 64e6, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEmu(t, EmuParams{Offset: -5e9, DriftPPM: -50, Granularity: tc.g, JitterNs: tc.j, Seed: 4})
			r := rand.New(rand.NewPCG(7, 7))
			prev := int64(math.MinInt64)
			x := int64(0)
			for i := 0; i < 20000; i++ {
				x += r.Int64N(2000)
				v := e.Read(x)
				if v < prev {
					t.Fatalf("Read(%d) = %d < previous %d", x, v, prev)
				}
				if tc.g > 1 && v%tc.g != 0 {
					t.Fatalf("Read(%d) = %d not a multiple of %d", x, v, tc.g)
				}
				id := e.Ideal(x)
				if v > id+tc.j || (v < id-tc.j-max(tc.g, 1) && v != prev) {
					t.Fatalf("Read(%d) = %d too far from Ideal %d", x, v, id)
				}
				prev = v
			}
		})
	}
}

func TestOverflowSaturates(t *testing.T) {
	tests := []struct {
		name string
		p    EmuParams
		from int64
		dir  int64
	}{
		{"top", EmuParams{Offset: MaxTime, DriftPPM: 1e5}, MaxTime - 1e6, 1},
		{"bottom", EmuParams{Offset: -MaxTime, DriftPPM: 1e5}, -MaxTime + 1e6, -1},
		{"top negative drift", EmuParams{Origin: -MaxTime, Offset: MaxTime, DriftPPM: -1e5}, MaxTime - 1e6, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEmu(t, tc.p)
			prev := e.Ideal(tc.from)
			for i := int64(1); i <= 1e6; i += 997 {
				x := tc.from + tc.dir*i
				v := e.Ideal(x)
				if (tc.dir > 0 && v < prev) || (tc.dir < 0 && v > prev) {
					t.Fatalf("Ideal(%d) = %d wrapped (previous %d)", x, v, prev)
				}
				prev = v
			}
			r := e.Read(tc.from + tc.dir*1e6)
			if tc.dir > 0 && r < prev-1 {
				t.Errorf("Read at the top = %d < Ideal %d", r, prev)
			}
			if e.Err() != nil {
				t.Errorf("Err() = %v", e.Err())
			}
			// Beyond MaxTime: clamped and reported.
			e.Ideal(tc.dir * math.MaxInt64)
			if !errors.Is(e.Err(), ErrRange) {
				t.Errorf("Err() = %v, want ErrRange", e.Err())
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	p := EmuParams{DriftPPM: 5, WanderPPM: 0.01, WanderStep: 1e6, JitterNs: 100, Granularity: 10, Seed: 42}
	a, b := mustEmu(t, p), mustEmu(t, p)
	for x := int64(0); x < 1e9; x += 123457 {
		if ra, rb := a.Read(x), b.Read(x); ra != rb {
			t.Fatalf("Read(%d): %d vs %d for the same seed", x, ra, rb)
		}
	}
	// Wander does not depend on how often the clock was read.
	c := mustEmu(t, p)
	if ia, ic := a.Ideal(2e9), c.Ideal(2e9); ia != ic {
		t.Errorf("Ideal(2e9) depends on the read pattern: %d vs %d", ia, ic)
	}
	p.Seed = 43
	d := mustEmu(t, p)
	if d.Ideal(2e9) == a.Ideal(2e9) {
		t.Errorf("different seeds give the same wander")
	}
}

// The frequency random walk has variance n*WanderPPM^2 after n steps.
func TestWanderVariance(t *testing.T) {
	const n, seeds, sigma = 100, 400, 0.02
	var sum2 float64
	for s := int64(0); s < seeds; s++ {
		e := mustEmu(t, EmuParams{WanderPPM: sigma, WanderStep: 1e6, Seed: s})
		k := e.Skew(n*1e6) * 1e6
		sum2 += k * k
	}
	v := sum2 / seeds
	want := n * sigma * sigma
	if v < 0.8*want || v > 1.2*want {
		t.Errorf("skew variance after %d steps = %g ppm^2, want %g ±20%%", n, v, want)
	}
}

// An hour of 1 ms wander keeps O(1) memory; a query further back than the
// kept segments is answered at the oldest and reported.
func TestMemoryBoundedAndLookBack(t *testing.T) {
	e := mustEmu(t, EmuParams{WanderPPM: 0.001, WanderStep: 1e6, Seed: 1})
	const hour = int64(3600e9)
	for x := int64(0); x <= hour; x += 1e9 {
		e.Read(x)
	}
	if len(e.ring) > lookBackSegments || cap(e.ring) > lookBackSegments {
		t.Fatalf("kept %d segments (cap %d), want <= %d", len(e.ring), cap(e.ring), lookBackSegments)
	}
	old := e.Oldest()
	if old > hour || old < hour-lookBackSegments*1e6 {
		t.Fatalf("Oldest() = %d, want within the last %d ms", old, lookBackSegments)
	}
	e.Ideal(old) // allowed
	if e.Err() != nil {
		t.Fatalf("query at Oldest: %v", e.Err())
	}
	e.Ideal(old - 1)
	if !errors.Is(e.Err(), ErrLookBack) {
		t.Errorf("Err() = %v, want ErrLookBack", e.Err())
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		field string
		p     EmuParams
	}{
		{"Offset", EmuParams{Offset: MaxTime + 1}},
		{"Origin", EmuParams{Origin: -MaxTime - 1}},
		{"DriftPPM", EmuParams{DriftPPM: math.NaN()}},
		{"DriftPPM", EmuParams{DriftPPM: 2e5}},
		{"Steps[1].At", EmuParams{Steps: []DriftStep{{At: 5}, {At: 5}}}},
		{"Steps[0].At", EmuParams{Origin: 10, Steps: []DriftStep{{At: 5}}}},
		{"Steps[0].DriftPPM", EmuParams{Steps: []DriftStep{{At: 5, DriftPPM: math.Inf(1)}}}},
		{"WanderPPM", EmuParams{WanderPPM: -1}},
		{"WanderStep", EmuParams{WanderPPM: 1}},
		{"WanderStep", EmuParams{WanderStep: -1}},
		{"WanderStep", EmuParams{WanderPPM: 1, WanderStep: MinWanderStep - 1}},
		{"Granularity", EmuParams{Granularity: -1}},
		{"JitterNs", EmuParams{JitterNs: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			_, err := NewEmulated(tc.p)
			if err == nil || !strings.Contains(err.Error(), "EmuParams."+tc.field) {
				t.Errorf("NewEmulated(%+v) error = %v, want one naming %s", tc.p, err, tc.field)
			}
		})
	}
	if _, err := NewEmulated(EmuParams{Steps: []DriftStep{{At: 0, DriftPPM: 3}}, WanderPPM: 1, WanderStep: MinWanderStep}); err != nil {
		t.Errorf("valid params rejected: %v", err)
	}
}

func TestOnRaw(t *testing.T) {
	if err := CheckRaw(); err != nil {
		t.Skipf("no CLOCK_MONOTONIC_RAW: %v", err)
	}
	now := Raw{}.Now()
	e := mustEmu(t, EmuParams{Origin: now, Offset: 1e9, DriftPPM: 10, Granularity: 1000})
	c := e.On(Raw{})
	prev := c.Now()
	if prev < now+1e9-1000 {
		t.Fatalf("On(Raw).Now() = %d, want >= %d", prev, now+1e9-1000)
	}
	for i := 0; i < 1000; i++ {
		v := c.Now()
		if v < prev {
			t.Fatalf("On(Raw).Now() went back: %d < %d", v, prev)
		}
		prev = v
	}
}

func TestRawMonotone(t *testing.T) {
	var r Raw
	prev := r.Now()
	if prev <= 0 {
		t.Fatalf("Raw.Now() = %d", prev)
	}
	for i := 0; i < 10000; i++ {
		v := r.Now()
		if v < prev {
			t.Fatalf("Raw went back: %d < %d", v, prev)
		}
		prev = v
	}
}

// A far timer deadline is looked up on a copy of the generator: the present
// stays answerable, and the committed segments later agree with the guess.
func TestTruthAtFarAheadKeepsLookBack(t *testing.T) {
	e := mustEmu(t, EmuParams{DriftPPM: 3, WanderPPM: 0.01, WanderStep: 1e6, Seed: 5})
	now := int64(5e9)
	local := e.Read(now)
	deadline := local + 10e9 // 10,000 wander steps ahead
	tr := e.TruthAt(deadline)
	e.Read(now + 1)
	e.Ideal(now - 10e6)
	if e.Err() != nil {
		t.Fatalf("after TruthAt far ahead: %v", e.Err())
	}
	if got := e.Ideal(tr); got < deadline {
		t.Errorf("Ideal(TruthAt) = %d < deadline %d", got, deadline)
	}
	if got := e.Ideal(tr - 1); got >= deadline {
		t.Errorf("Ideal(TruthAt-1) = %d >= deadline %d", got, deadline)
	}
}

// Peek minutes ahead (a daemon fitting its page over StaleAfter) must
// not push the present out of the look-back window: with a wander step of
// 1 s, 240 segments ahead and back to now give the same readings as a
// clock that never looked ahead.
func TestEmulatedFarAheadKeepsLookBack(t *testing.T) {
	p := EmuParams{Origin: 1e12, Offset: 5e6, DriftPPM: 12, WanderPPM: 0.005, WanderStep: 1e9, SinePPM: 0.5, SinePeriod: 900e9, Seed: 7}
	a, err := NewEmulated(p)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewEmulated(p)
	for now := int64(1e12); now < 1e12+300e9; now += 250e6 {
		ahead := a.Peek(now + 240e9)
		if got, want := a.Ideal(now), b.Ideal(now); got != want {
			t.Fatalf("at %d: %d after a look ahead, %d without", now, got, want)
		}
		c, _ := NewEmulated(p)
		if got, want := ahead, c.Ideal(now+240e9); got != want {
			t.Fatalf("ahead of %d: %d, want %d", now, got, want)
		}
	}
	if err := a.Err(); err != nil {
		t.Fatalf("clock recorded %v", err)
	}
}

// MaxDeviation is the largest distance of Ideal from the line through two
// of its points: checked against a dense scan of a wandering clock.
func TestEmulatedMaxDeviation(t *testing.T) {
	p := EmuParams{Origin: 1e12, Offset: 5e6, DriftPPM: 12, WanderPPM: 0.05, WanderStep: 1e9, SinePPM: 1, SinePeriod: 120e9, Seed: 3,
		Steps: []DriftStep{{At: 1e12 + 90e9, DriftPPM: 14}}}
	e := mustEmu(t, p)
	for _, start := range []int64{1e12, 1e12 + 37e9, 1e12 + 200e9} {
		e.Ideal(start + 10e9) // the present a little after start: part of the span is committed
		t0, t1, t2 := start, start+60e9, start+120e9
		got := e.MaxDeviation(t0, t1, t2)
		y0, y1 := e.Peek(t0), e.Peek(t1)
		slope := float64(y1-y0) / float64(t1-t0)
		var want float64
		for x := t0; x <= t2; x += 1e8 {
			want = math.Max(want, math.Abs(float64(e.Peek(x)-y0)-slope*float64(x-t0)))
		}
		if float64(got) < want || float64(got) > want+3 && float64(got) > want*1.0001+3 {
			t.Errorf("start %d: MaxDeviation %d, dense scan %.0f", start, got, want)
		}
		if want < 1000 {
			t.Errorf("start %d: deviation %.0f ns: the test clock should curve by microseconds", start, want)
		}
	}
}

// TestEmulatedTangent: Tangent is Ideal and the present segment's rate (a
// step ahead does not bend it: the rate before a step is the drift before
// it), and MaxDeviationTangent the largest distance of Ideal from that
// line, checked against a dense scan, across a drift step.
func TestEmulatedTangent(t *testing.T) {
	p := EmuParams{Origin: 1e12, Offset: 5e6, DriftPPM: 12, WanderPPM: 0.05, WanderStep: 1e9, SinePPM: 1, SinePeriod: 120e9, Seed: 3,
		Steps: []DriftStep{{At: 1e12 + 90e9, DriftPPM: 22}}}
	e := mustEmu(t, p)
	for _, start := range []int64{1e12 + 37e9, 1e12 + 85e9, 1e12 + 200e9} {
		e.Ideal(start + 10e9) // part of the span is committed
		y0, rate := e.Tangent(start)
		if y0 != e.Peek(start) {
			t.Errorf("start %d: Tangent's value %d, Peek %d", start, y0, e.Peek(start))
		}
		// Within the present wander segment the clock runs at that rate.
		seg := (start-p.Origin)/p.WanderStep*p.WanderStep + p.Origin
		a, b := seg+1e8, seg+9e8
		if got := float64(e.Peek(b)-e.Peek(a)) / float64(b-a); math.Abs(got-rate) > 2e-9 {
			t.Errorf("start %d: rate %.9f, the segment runs at %.9f", start, rate, got)
		}
		wantDrift := 12.0
		if start >= 1e12+90e9 {
			wantDrift = 22
		}
		if ppm := (rate - 1) * 1e6; math.Abs(ppm-wantDrift) > 3 { // wander and sine: up to about 2 ppm
			t.Errorf("start %d: rate %+.3f ppm, want about %+.0f (the drift then, not a step to come)", start, ppm, wantDrift)
		}
		t2 := start + 20e9
		got := e.MaxDeviationTangent(start, t2)
		var want float64
		for x := start; x <= t2; x += 1e8 {
			want = math.Max(want, math.Abs(float64(e.Peek(x)-y0)-(rate)*float64(x-start)))
		}
		if float64(got) < want || float64(got) > want*1.0001+3 {
			t.Errorf("start %d: MaxDeviationTangent %d, dense scan %.0f", start, got, want)
		}
	}
}

// TestKnots: the knot table reproduces Ideal to within a nanosecond, across
// wander, sine and drift steps, and refuses to grow past its limit.
func TestKnots(t *testing.T) {
	const origin = int64(5e12)
	p := EmuParams{Origin: origin, Offset: -3_456_789, DriftPPM: 27.5, WanderPPM: 0.05, WanderStep: 1e9,
		SinePPM: 0.3, SinePeriod: 20e9, Seed: 7, Steps: []DriftStep{{At: origin + 12_345_678_901, DriftPPM: -4}}}
	to := origin + 90e9
	ks, err := p.Knots(to, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 92 { // origin, 90 wander steps, one drift step
		t.Fatalf("%d knots, want 92", len(ks))
	}
	e, err := NewEmulated(p)
	if err != nil {
		t.Fatal(err)
	}
	at := func(x int64) float64 {
		i := sort.Search(len(ks), func(i int) bool { return ks[i].T > x }) - 1
		i = max(i, 0)
		return float64(ks[i].Local) + float64(x-ks[i].T)*(1+ks[i].Skew)
	}
	for x := origin - 1e9; x <= to; x += 7_777_777 {
		if d := at(x) - float64(e.Ideal(x)); math.Abs(d) > 1.01 {
			t.Fatalf("truth %d: knots %.1f, Ideal %d (off %.2f ns)", x, at(x), e.Ideal(x), d)
		}
	}
	if _, err := p.Knots(to, 50); err == nil || !strings.Contains(err.Error(), "more than 50") {
		t.Fatalf("50 knots allowed: err %v", err)
	}
	flat, err := EmuParams{Origin: origin, Offset: 9, DriftPPM: 1}.Knots(to, 10)
	if err != nil || len(flat) != 1 || flat[0].Local != origin+9 {
		t.Fatalf("a clock without wander: %v %v", flat, err)
	}
}
