package estimate

import (
	"math"
	"math/rand/v2"
	"testing"
)

// skewedRound is n exchanges 5 ms apart from truth t between a source on
// true time and a local clock offset by off ns and fast by drift, each way
// delay() ns, the responder holding each for 30 us to 1 ms; and the line a
// caller would pass: the true mapping from the local clock to the source's.
func skewedRound(t int64, n int, off int64, drift float64, seed uint64, delay func(*rand.Rand) int64) ([]Sample, Mapping) {
	rng := rand.New(rand.NewPCG(seed, uint64(t)))
	loc := func(tt int64) int64 { return off + tt + int64(math.Round(drift*float64(tt-t))) }
	r := make([]Sample, n)
	for i := range r {
		t1 := t + int64(i)*5_000_000
		t2 := t1 + delay(rng)
		t3 := t2 + 30_000 + rng.Int64N(1_000_000)
		t4 := t3 + delay(rng)
		r[i] = Sample{SrcSend: t1, LocRecv: loc(t2), LocSend: loc(t3), SrcRecv: t4}
	}
	return r, Mapping{X0: loc(t), Y0: t, Skew: 1/(1+drift) - 1, Valid: true}
}

// paretoWay is the lab's default link one way: 73.5 us and a Lomax excess
// of shape 3 and mean 28.9 us. bellWay is normal 100 us, sd 10 us.
func paretoWay(rng *rand.Rand) int64 {
	return 73_500 + int64(57_700*(math.Pow(1-rng.Float64(), -1.0/3)-1))
}

func bellWay(rng *rand.Rand) int64 { return 100_000 + int64(10_000*rng.NormFloat64()) }

// lowestDown is the index of the exchange whose source-to-local delay is
// the shortest (on a round of skewedRound, whose truth is known).
func lowestDown(r []Sample, m Mapping) int {
	k, best := 0, int64(math.MaxInt64)
	for i, s := range r {
		y, _, _ := m.At(s.LocRecv)
		if d := y - s.SrcSend; d < best {
			k, best = i, d
		}
	}
	return k
}

// lowestUp is the index of the exchange whose local-to-source delay is the
// shortest.
func lowestUp(r []Sample, m Mapping) int {
	k, best := 0, int64(math.MaxInt64)
	for i, s := range r {
		y, _, _ := m.At(s.LocSend)
		if d := s.SrcRecv - y; d < best {
			k, best = i, d
		}
	}
	return k
}

// TestFloorFilterOneWay: an exchange whose round trip fits but one of whose
// directions is impossibly fast (both local stamps late: the reply seems to
// come back faster than the path allows, the request to go slower) is
// refused on that direction alone; genuine rounds, a line whose offset or
// skew is off within its claim, short rounds and no line refuse nothing.
func TestFloorFilterOneWay(t *testing.T) {
	const t0 = int64(500e9)
	lateBoth := func(by int64) func([]Sample, Mapping) {
		return func(r []Sample, m Mapping) {
			k := lowestUp(r, m)
			r[k].LocRecv += by // the source's message seems slower...
			r[k].LocSend += by // ...and the reply faster, by as much
		}
	}
	tests := []struct {
		name    string
		n       int
		way     func(*rand.Rand) int64
		rounds  int
		spoil   func([]Sample, Mapping) // applied to the last round
		line    func(Mapping) Mapping
		noCheck bool
		want    int // exchanges refused one way in the last round
		maxRest int // and at most this many in the rounds before
	}{
		{"pareto: both local stamps 19 us late", 240, paretoWay, 4, lateBoth(19_000), nil, false, 1, 0},
		{"pareto: the same with the one-way check off", 240, paretoWay, 4, lateBoth(19_000), nil, true, 0, 0},
		{"pareto: 3 us late is within the slack", 240, paretoWay, 4, lateBoth(3_000), nil, false, 0, 0},
		{"pareto: local stamps 19 us early (the request impossibly fast)", 240, paretoWay, 4, func(r []Sample, m Mapping) {
			k := lowestDown(r, m)
			r[k].LocRecv -= 19_000
			r[k].LocSend -= 19_000
		}, nil, false, 1, 0},
		{"bell, sd 10 us: 40 genuine rounds", 240, bellWay, 40, nil, nil, false, 0, 0},
		{"pareto: the line's offset 200 us off", 240, paretoWay, 4, lateBoth(19_000), func(m Mapping) Mapping {
			m.Y0 += 200_000
			return m
		}, false, 1, 0},
		{"pareto: the line's skew 10 ppm off, as its SkewErr says", 240, paretoWay, 4, nil, func(m Mapping) Mapping {
			m.Skew += 10e-6
			m.SkewErr = 10e-6
			return m
		}, false, 0, 0},
		{"pareto: a skew error beyond the round trip's floor judges nothing", 240, paretoWay, 4, lateBoth(19_000), func(m Mapping) Mapping {
			m.SkewErr = 1e-3
			return m
		}, false, 0, 0},
		{"pareto: a round of 20 is not judged one way", 20, paretoWay, 30, lateBoth(19_000), nil, false, 0, 0},
		{"pareto: no line yet", 240, paretoWay, 4, lateBoth(19_000), func(Mapping) Mapping { return Mapping{} }, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFloorFilter(FloorConfig{Slack: 2000, MaxSkew: 200e-6, NoOneWay: tt.noCheck})
			if err != nil {
				t.Fatal(err)
			}
			rest := 0
			for i := range tt.rounds {
				r, m := skewedRound(t0+int64(i)*6e9, tt.n, 3_000_000, 50e-6, 7, tt.way)
				if tt.line != nil {
					m = tt.line(m)
				}
				last := i == tt.rounds-1
				if last && tt.spoil != nil {
					tt.spoil(r, m)
				}
				kept, rt, ow := f.Filter(nil, r, m)
				if len(kept)+rt+ow != len(r) {
					t.Fatalf("round %d: kept %d + rejected %d + one way %d != %d", i, len(kept), rt, ow, len(r))
				}
				if last {
					if ow != tt.want {
						t.Errorf("last round: %d refused one way, want %d", ow, tt.want)
					}
					if rt != 0 && tt.spoil != nil {
						t.Errorf("last round: %d refused on the round trip, want none (the spoilt one keeps its round trip)", rt)
					}
				} else {
					rest += ow
				}
			}
			if rest > tt.maxRest {
				t.Errorf("%d genuine exchanges refused one way before the last round, want at most %d", rest, tt.maxRest)
			}
		})
	}
}

// TestFloorFilterOneWayWrapped: stamps that wrap or lie far apart are left
// alone, without a panic, and the rest of the round is still judged.
func TestFloorFilterOneWayWrapped(t *testing.T) {
	f, err := NewFloorFilter(FloorConfig{Slack: 2000})
	if err != nil {
		t.Fatal(err)
	}
	r, m := skewedRound(1e12, 240, -5_000, 20e-6, 3, paretoWay)
	k := lowestUp(r, m)
	r[k].LocRecv += 19_000
	r[k].LocSend += 19_000
	bad := r[k]
	// Two exchanges with plausible round trips (150 us) whose stamps lie
	// across the int64 range from the rest.
	r = append(r,
		Sample{SrcSend: math.MinInt64 + 5, LocRecv: math.MaxInt64 - 400_000, LocSend: math.MaxInt64 - 250_000, SrcRecv: math.MinInt64 + 300_005},
		Sample{SrcSend: 1 << 62, LocRecv: 1<<62 + 75_000, LocSend: 1<<62 + 200_000, SrcRecv: 1<<62 + 350_000},
	)
	kept, rt, ow := f.Filter(nil, r, m)
	if ow != 1 || rt != 0 || len(kept) != len(r)-1 {
		t.Fatalf("kept %d of %d, %d refused on the round trip and %d one way; want all but the late pair, refused one way", len(kept), len(r), rt, ow)
	}
	for _, x := range kept {
		if x == bad {
			t.Fatal("the late pair was kept")
		}
	}
}
