package lab

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/eval/limit"
	"github.com/gclock/gclock/internal/conf"
)

// limitClocks are two emulated clocks as a lab run writes them: offsets of
// milliseconds, drifts of ppm, the lab's wander, from one raw origin near
// a real CLOCK_MONOTONIC_RAW reading.
func limitClocks() (host, src clock.EmulatedConfig) {
	const origin = int64(5_341_000_000_000)
	w := DefaultWander()
	mk := func(off time.Duration, drift float64, seed int64) clock.EmulatedConfig {
		return clock.EmulatedConfig{Offset: conf.Duration(off), DriftPPM: drift, Seed: seed, OriginRaw: origin,
			WanderPPM: w.RandomWalkPPM, WanderStep: conf.Duration(time.Second), SinePPM: w.SinePPM, SinePeriod: conf.Duration(w.SinePeriod)}
	}
	return mk(1425069*time.Nanosecond, -20.481, 1002), mk(3744029*time.Nanosecond, -9.482, 1000)
}

// TestEmulatedTruth: the truth a replay is judged against is the source's
// clock at the raw instant the host's clock showed the local time, and
// the oracle is told both clocks' random walks.
func TestEmulatedTruth(t *testing.T) {
	hc, sc := limitClocks()
	truth, wander, err := EmulatedTruth(hc, sc)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * math.Pow(0.005e-6, 2); math.Abs(wander-want) > 1e-9*want {
		t.Errorf("wander %g, want %g", wander, want)
	}
	h, _ := hc.New()
	s, _ := sc.New()
	for k := range 700 {
		raw := hc.OriginRaw + int64(k)*100_000_000 + int64(k%7)*13
		got, ok := truth(h.Ideal(raw))
		if !ok {
			t.Fatalf("raw %d: no truth", raw)
		}
		// Ideal floors to the ns and the host runs 20 ppm slow: the
		// local time is reached within a ns of raw.
		if want := s.Ideal(raw); got < want-1 || got > want+1 {
			t.Fatalf("raw %d: truth %d, want %d", raw, got, want)
		}
	}
	noOrigin := hc
	noOrigin.OriginRaw = 0
	if _, _, err := EmulatedTruth(noOrigin, sc); err == nil || !strings.Contains(err.Error(), "origin_raw") {
		t.Errorf("EmulatedTruth without origin_raw: %v", err)
	}
	bad := sc
	bad.DriftPPM = math.NaN()
	if _, _, err := EmulatedTruth(hc, bad); err == nil || !strings.Contains(err.Error(), "source") {
		t.Errorf("EmulatedTruth with a NaN drift: %v", err)
	}
}

// TestReplayOnEmulatedClocks: exchanges stamped on two emulated clocks
// (symmetric 100-us paths with 3 us of normal jitter each way, a round of
// 120 every 5 s) replayed against EmulatedTruth land within a few hundred
// ns, as the lab's daemons do; judged as if the clocks were raw they would
// be milliseconds off, so the truth is what the figures rest on. The
// limit and the oracle come out beside them.
func TestReplayOnEmulatedClocks(t *testing.T) {
	hc, sc := limitClocks()
	h, _ := hc.New()
	s, _ := sc.New()
	rng := rand.New(rand.NewPCG(7, 7))
	delay := func() int64 { return 100_000 + int64(3000*rng.NormFloat64()) }
	var ms []daemon.Measurement
	for r := range 16 {
		for k := range 120 {
			t1 := hc.OriginRaw + int64(r)*5_000_000_000 + int64(k)*2_000_000
			t2 := t1 + delay()
			t3 := t2 + 40_000
			t4 := t3 + delay()
			ms = append(ms, daemon.Measurement{Source: 1, Sample: estimateSample(s.Ideal(t3), h.Ideal(t4), h.Ideal(t1), s.Ideal(t2))})
		}
	}
	rc := daemon.DefaultReplayConfig()
	rc.Limit, rc.Hull.CenterMemory = true, 2.5
	var err error
	if rc.Truth, rc.Wander, err = EmulatedTruth(hc, sc); err != nil {
		t.Fatal(err)
	}
	res, err := daemon.Replay(ms, rc)
	if err != nil {
		t.Fatal(err)
	}
	p50 := medianAbs(res.Errors)
	t.Logf("%d evaluations: median |error| %d ns; limit %.0f ns (%s), oracle %.0f ns", len(res.Errors), p50, res.Limit.Best, res.Limit.BestName, res.Limit.Oracle)
	if len(res.Errors) < 1000 || p50 > 400 {
		t.Errorf("median |error| %d ns over %d evaluations: want at most 400 over 1000 or more", p50, len(res.Errors))
	}
	if !(res.Limit.Best > 0 && res.Limit.Best < 400) || !(res.Limit.Oracle > 0 && res.Limit.Oracle < 400) {
		t.Errorf("limit %.0f ns, oracle %.0f ns: want both in (0, 400)", res.Limit.Best, res.Limit.Oracle)
	}
	rc.Truth, rc.Wander = nil, 0
	raw, err := daemon.Replay(ms, rc)
	if err != nil {
		t.Fatal(err)
	}
	if p := medianAbs(raw.Errors); p < 1_000_000 {
		t.Errorf("judged as raw clocks: median |error| %d ns, want the clocks' 2.3 ms offset difference", p)
	}
}

func estimateSample(srcSend, locRecv, locSend, srcRecv int64) estimate.Sample {
	return estimate.Sample{SrcSend: srcSend, LocRecv: locRecv, LocSend: locSend, SrcRecv: srcRecv}
}

func medianAbs(errs []int64) int64 {
	a := make([]int64, len(errs))
	for i, e := range errs {
		a[i] = max(e, -e)
	}
	slices.Sort(a)
	if len(a) == 0 {
		return math.MaxInt64
	}
	return a[len(a)/2]
}

// TestRunLimit: the run's limit is one estimator's mean over the hosts
// (the one least on that mean), each host's figure becomes its median
// under it, and the hosts' own best is kept beside; an estimator without
// a line on some host is not eligible.
func TestRunLimit(t *testing.T) {
	f := func(v ...float64) *float64 { return &v[0] }
	n := len(limit.Names())
	host := func(vals map[int]float64, oracle float64) *LimitFigures {
		lf := &LimitFigures{MediansNs: make([]*float64, n), OracleNs: oracle, Evaluations: 10}
		best := math.Inf(1)
		for i := range lf.MediansNs {
			v, ok := vals[i]
			if !ok {
				v = 900
			}
			if !math.IsNaN(v) {
				lf.MediansNs[i] = f(v)
				if v < best {
					best, lf.LuckiestNs, lf.LuckiestName = v, v, limit.Names()[i]
				}
			}
		}
		lf.LimitNs, lf.LimitName = lf.LuckiestNs, lf.LuckiestName
		return lf
	}
	hosts := []*LimitFigures{
		host(map[int]float64{0: 100, 3: 300}, 200),
		host(map[int]float64{0: 800, 3: 320, 6: 150}, 400),
		host(map[int]float64{0: math.NaN(), 1: 50, 3: 340}, 300),
	}
	sum, ok := runLimit(hosts)
	if !ok {
		t.Fatal("no run limit")
	}
	want := limit.Names()[3]
	if sum.LimitNs != 320 || sum.LimitName != want+" over 3 hosts" || sum.LuckiestNs != (100+150+50)/3.0 || sum.OracleNs != 300 || sum.Evaluations != 30 {
		t.Errorf("summary %+v: want %s 320 ns, luckiest 100, oracle 300, 30 evaluations", sum, want)
	}
	for i, wantNs := range []float64{300, 320, 340} {
		if hosts[i].LimitNs != wantNs || hosts[i].LimitName != want {
			t.Errorf("host %d: limit %v %s, want %v %s", i, hosts[i].LimitNs, hosts[i].LimitName, wantNs, want)
		}
	}
	if hosts[2].LuckiestName != limit.Names()[1] || hosts[2].LuckiestNs != 50 {
		t.Errorf("host 2's own best %s %v, want %s 50", hosts[2].LuckiestName, hosts[2].LuckiestNs, limit.Names()[1])
	}
	if _, ok := runLimit([]*LimitFigures{{MediansNs: make([]*float64, n)}}); ok {
		t.Error("a host without any line gave a run limit")
	}
}
