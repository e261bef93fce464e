package estimate

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// centreOnWander feeds rounds of 60 exchanges every 6 s from a source whose
// frequency follows a 0.1-ppm cycle of period cycle s (a crystal's
// temperature cycle; 0: none) plus a random walk of walkPPB ppb/sqrt(s), over symmetric exponential delays,
// into centre-line hulls of a 4096-exchange window with the memories given,
// and returns each one's mean |error| one period ahead of the newest
// exchange over the last 40 rounds.
func centreOnWander(t *testing.T, seed uint64, cycle, walkPPB float64, memories ...float64) []float64 {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 91))
	const t0, period, n, per = int64(1e15), int64(6e9), 120, 60
	off := float64(r.Int64N(2e9) - 1e9)
	ppb0 := float64(r.Int64N(60000) - 30000)
	// Phase in ns relative to t0 (float64 on relative seconds only):
	// ppb0 t + A P/(2 pi) (1 - cos(2 pi t / P)) + the random walk's sum.
	phase0 := r.Float64() * 2 * math.Pi
	// The random walk of the frequency (walkPPB ppb/sqrt(s)), its phase
	// drawn on a 0.1-s grid beforehand and interpolated.
	walk := make([]float64, int(float64(n+2)*float64(period)/1e8)+2)
	for i, f := 1, 0.0; i < len(walk); i++ {
		f += r.NormFloat64() * walkPPB * math.Sqrt(0.1)
		walk[i] = walk[i-1] + f*0.1
	}
	y := func(t int64) int64 {
		s := float64(t-t0) / 1e9
		i := int(s * 10)
		w := walk[i] + (walk[i+1]-walk[i])*(s*10-float64(i))
		cyc := 0.0
		if cycle > 0 {
			cyc = 100 * cycle / (2 * math.Pi) * (math.Cos(phase0) - math.Cos(phase0+2*math.Pi*s/cycle))
		}
		return t + int64(math.Round(off+ppb0*s+cyc+w))
	}
	var hs []*Hull
	for _, m := range memories {
		hs = append(hs, mustHull(t, HullConfig{Window: 4096, Center: true, CenterMemory: m}))
	}
	sum := make([]float64, len(hs))
	cnt := 0
	for i := range n {
		at := t0 + int64(i)*period
		var rd []Sample
		for range per {
			d1 := 70000 + int64(r.ExpFloat64()*20000)
			hold := 2000 + r.Int64N(2000)
			d2 := 70000 + int64(r.ExpFloat64()*20000)
			s := Sample{SrcSend: y(at), LocRecv: at + d1, LocSend: at + d1 + hold}
			s.SrcRecv = y(s.LocSend + d2)
			rd = append(rd, s)
			at = s.LocSend + d2 + 300000
		}
		for k, h := range hs {
			if err := h.AddRound(rd); err != nil {
				t.Fatalf("seed %d round %d, memory %v: %v", seed, i, memories[k], err)
			}
		}
		if i < n-40 {
			continue
		}
		x := at + period
		want := y(x)
		cnt++
		for k, h := range hs {
			c, _, ok := h.Center(x)
			if !ok {
				t.Fatalf("seed %d round %d, memory %v: no centre line", seed, i, memories[k])
			}
			sum[k] += math.Abs(float64(c - want))
		}
	}
	for k := range sum {
		sum[k] /= float64(cnt)
	}
	return sum
}

// TestHullCenterMemoryFollowsWander: over a wandering frequency the line
// with a memory of 2.5 rounds predicts the next period better than the
// one through the whole window (4096 exchanges, 68 rounds, 7 minutes),
// which averages the frequency of minutes. On a steady frequency the
// memory costs noise: about ten rounds count instead of 68 (116 ns against
// 17 ns when written), the price of following a crystal that wanders
// even 0.001 ppm/sqrt(s).
func TestHullCenterMemoryFollowsWander(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cycle, walk   float64
		maxMemOfWhole float64 // 0: at most maxMemNs
		maxMemNs      float64
	}{
		{"0.1-ppm cycle of 15 min, 0.005 ppm/sqrt(s)", 900, 5, 0.2, 0},
		{"0.1-ppm cycle of 5 min, 0.005 ppm/sqrt(s)", 300, 5, 0.2, 0},
		{"0.001 ppm/sqrt(s)", 0, 1, 0.7, 0},
		{"steady", 0, 0, 0, 200},
	} {
		var mem, whole float64
		for seed := uint64(1); seed <= 6; seed++ {
			e := centreOnWander(t, seed, tc.cycle, tc.walk, 2.5, 0)
			mem, whole = mem+e[0]/6, whole+e[1]/6
		}
		t.Logf("%s: mean |error| one period ahead, memory 2.5 rounds %.0f ns, whole window %.0f ns", tc.name, mem, whole)
		if tc.maxMemOfWhole == 0 {
			if mem > tc.maxMemNs {
				t.Errorf("%s: memory %.0f ns, want at most %v ns", tc.name, mem, tc.maxMemNs)
			}
		} else if mem > tc.maxMemOfWhole*whole {
			t.Errorf("%s: memory %.0f ns, want at most %v x the whole window's %.0f ns", tc.name, mem, tc.maxMemOfWhole, whole)
		}
	}
}

// TestHullRoundPace: the pace the memory scales with is the average gap
// between rounds; a restarted window keeps it, a round older than the last
// is no gap, and the memory is off until two rounds were seen.
func TestHullRoundPace(t *testing.T) {
	h := mustHull(t, HullConfig{Window: 64, Center: true, CenterMemory: 2})
	round := func(at, off int64) []Sample {
		return []Sample{{SrcSend: at + off, LocRecv: at + 1000, LocSend: at + 2000, SrcRecv: at + off + 3000}}
	}
	if err := h.AddRound(round(1e12, 0)); err != nil {
		t.Fatal(err)
	}
	if tau, _ := h.centerMemory(); tau != 0 {
		t.Errorf("after one round: tau %v, want 0 (no pace yet)", tau)
	}
	for i, at := range []int64{1e12 + 4e9, 1e12 + 8e9, 1e12 + 12e9} {
		if err := h.AddRound(round(at, 0)); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	if tau, _ := h.centerMemory(); tau != 2*4e9 {
		t.Errorf("rounds every 4 s: tau %v, want 8e9 (2 rounds)", tau)
	}
	// An offset jump restarts the window; the pace goes on.
	err := h.AddRound(round(1e12+20e9, 5e9))
	if !errors.Is(err, ErrInconsistent) {
		t.Fatalf("offset jump: %v, want ErrInconsistent", err)
	}
	if want := 4e9 + roundGapDecay*(8e9-4e9); h.roundGap != want {
		t.Errorf("after an 8-s gap and a restart: gap %v, want %v", h.roundGap, want)
	}
	// A round older than the last changes nothing, not even the last.
	g := h.roundGap
	_ = h.AddRound(round(1e12+10e9, 5e9))
	if h.roundGap != g || h.lastRound != 1e12+20e9+1000 {
		t.Errorf("an older round moved the gap %v -> %v, the last round to %d", g, h.roundGap, h.lastRound)
	}
	// A pause of an hour counts as roundGapMax average gaps.
	if err := h.AddRound(round(1e12+20e9+3600e9, 5e9)); err != nil && !errors.Is(err, ErrInconsistent) {
		t.Fatal(err)
	}
	if want := g + roundGapDecay*(roundGapMax*g-g); h.roundGap != want {
		t.Errorf("after a pause of an hour: gap %v, want %v", h.roundGap, want)
	}
	// Memory 0: no time constant whatever the pace.
	h0 := mustHull(t, HullConfig{Window: 64, Center: true})
	for _, at := range []int64{1e12, 1e12 + 4e9, 1e12 + 8e9} {
		if err := h0.AddRound(round(at, 0)); err != nil {
			t.Fatal(err)
		}
	}
	if tau, from := h0.centerMemory(); tau != 0 || from != math.MinInt64 {
		t.Errorf("memory 0: tau %v from %d, want 0 and the whole window", tau, from)
	}
}
