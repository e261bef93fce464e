package estimate

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// ex is an exchange on raw clocks (true offset 0) sent at t with one-way
// delays fwd and back and the responder holding it for hold, all ns.
func ex(t, fwd, hold, back int64) Sample {
	return Sample{SrcSend: t, LocRecv: t + fwd, LocSend: t + fwd + hold, SrcRecv: t + fwd + hold + back}
}

// labRound is n exchanges 5 ms apart from t like the lab's on its default
// link (seeded by t): one-way delays of 73.5 us plus the link's pareto
// excess (a Lomax of shape 3 and mean 28.9 us), holds of 30 us to 1 ms.
func labRound(t int64, n int) []Sample {
	rng := rand.New(rand.NewPCG(uint64(t), 21))
	r := make([]Sample, n)
	for i := range r {
		r[i] = ex(t+int64(i)*5_000_000, paretoWay(rng), 30_000+rng.Int64N(1_000_000), paretoWay(rng))
	}
	return r
}

// queuedRound is n exchanges 2.5 ms apart on a path through FIFO ports at
// 70% cross traffic (seeded by t): each way 73.5 us plus the link's pareto
// excess, and nine times in ten a wait behind bulk frames, exponential
// with a mean of 200 us (the lab's small frames waited 180-210 us at the
// median). Exchanges near the floor need both ways to find their port
// empty: rare, genuine, and the ones a centre line rests on.
func queuedRound(t int64, n int) []Sample {
	rng := rand.New(rand.NewPCG(uint64(t), 70))
	way := func() int64 {
		d := paretoWay(rng)
		if rng.Float64() < 0.9 {
			d += int64(rng.ExpFloat64() * 200_000)
		}
		return d
	}
	r := make([]Sample, n)
	for i := range r {
		r[i] = ex(t+int64(i)*2_500_000, way(), 30_000+rng.Int64N(300_000), way())
	}
	return r
}

// jezequelRound is n exchanges 10 ms apart on the FPS T-40's links as the
// simulator's jezequel-fps-t40 scenario has them (seeded by t): each way
// 3 ms plus an exponential excess of mean 4 ms, every stamp read off a
// clock of 64-us granularity (each clock with its own phase). Its 3rd
// percentile of round trips lies about 1 ms above its 6-ms floor.
func jezequelRound(t int64, n int) []Sample {
	rng := rand.New(rand.NewPCG(uint64(t), 40))
	const g = 64_000
	src := func(x int64) int64 { return x / g * g }
	loc := func(x int64) int64 { return (x + 23_000) / g * g }
	way := func() int64 { return 3_000_000 + int64(rng.ExpFloat64()*4_000_000) }
	r := make([]Sample, n)
	for i := range r {
		t1 := t + int64(i)*10_000_000
		t2 := t1 + way()
		t3 := t2 + 100_000 + rng.Int64N(1_000_000)
		t4 := t3 + way()
		r[i] = Sample{SrcSend: src(t1), LocRecv: loc(t2), LocSend: loc(t3), SrcRecv: src(t4)}
	}
	return r
}

// fastest is the index of r's exchange with the shortest round trip.
func fastest(r []Sample) int {
	k := 0
	for i := range r {
		if r[i].RTT() < r[k].RTT() {
			k = i
		}
	}
	return k
}

// TestFloorFilter feeds rounds of recorded-style exchanges and checks
// which the filter keeps.
func TestFloorFilter(t *testing.T) {
	const t0 = int64(500e9)
	type round struct {
		r        []Sample
		rejected int
	}
	// late returns r with exchange i's reply stamped d ns late (T3 later:
	// the round trip comes out d shorter), as the lab's bad runs showed.
	// i < 0 counts from the fastest exchange.
	late := func(r []Sample, i int, d int64) []Sample {
		r = append([]Sample(nil), r...)
		if i < 0 {
			i = fastest(r)
		}
		r[i].LocSend += d
		return r
	}
	// at returns a round of n exchanges on a path whose floor is floor ns
	// each way, the responder holding each for hold.
	at := func(t int64, n int, floor, hold int64) []Sample {
		r := make([]Sample, n)
		for i := range r {
			r[i] = ex(t+int64(i)*5_000_000, floor+int64(i%5)*300, hold, floor+int64(i%3)*300)
		}
		return r
	}
	tests := []struct {
		name    string
		cfg     FloorConfig
		rounds  []round
		wantFlr int64 // the most Floor() may be at the end, 0: not checked
	}{
		{"too little history: nothing rejected", FloorConfig{Slack: 2000},
			[]round{{late(labRound(t0, 20), 3, 60_000), 0}}, 0},
		{"steady path: all kept", FloorConfig{Slack: 2000},
			[]round{{labRound(t0, 60), 0}, {labRound(t0+1e9, 60), 0}}, 0},
		{"one reply 50 us late: rejected", FloorConfig{Slack: 2000},
			[]round{{labRound(t0, 60), 0}, {late(labRound(t0+1e9, 60), -1, 50_000), 1}}, 0},
		{"one reply 8 us late: inside the slack (1/16 of 150 us)", FloorConfig{Slack: 2000},
			[]round{{at(t0, 60, 75_000, 50_000), 0}, {late(at(t0+1e9, 60, 75_000, 50_000), 3, 8_000), 0}}, 0},
		{"one reply 11 us late: beyond it", FloorConfig{Slack: 2000},
			[]round{{at(t0, 60, 75_000, 50_000), 0}, {late(at(t0+1e9, 60, 75_000, 50_000), 3, 11_000), 1}}, 0},
		{"in the first round: rejected once there are 32", FloorConfig{Slack: 2000},
			[]round{{late(labRound(t0, 60), 10, 50_000), 1}}, 0},
		{"three bad in one round after 240 good: all rejected", FloorConfig{Slack: 2000},
			[]round{{at(t0, 60, 75_000, 50_000), 0}, {at(t0+1e8, 60, 75_000, 50_000), 0},
				{at(t0+2e8, 60, 75_000, 50_000), 0}, {at(t0+3e8, 60, 75_000, 50_000), 0}, {late(late(late(at(t0+1e9, 60, 75_000, 50_000), 0, 50_000), 7, 20_000), 9, 90_000), 3}}, 0},
		{"three bad among the first 120: the third stands for the floor", FloorConfig{Slack: 2000},
			[]round{{at(t0, 60, 75_000, 50_000), 0}, {late(late(late(at(t0+1e9, 60, 75_000, 50_000), 0, 50_000), 7, 20_000), 9, 90_000), 2}}, 0},
		{"a slow responder's hold on drifting clocks widens the slack", FloorConfig{Slack: 500, SlackFrac: 0.001, MaxSkew: 200e-6},
			[]round{{at(t0, 60, 20_000, 5_000), 0}, {append(at(t0+1e9, 59, 20_000, 5_000), ex(t0+2e9, 20_000, 10_000_000, 20_000-1_500)), 0}}, 0},
		{"the same exchange without the hold allowance", FloorConfig{Slack: 500, SlackFrac: 0.001},
			[]round{{at(t0, 60, 20_000, 5_000), 0}, {append(at(t0+1e9, 59, 20_000, 5_000), ex(t0+2e9, 20_000, 10_000_000, 20_000-1_500)), 1}}, 0},
		{"the path got 30 us faster: followed once 8 of 256 show it", FloorConfig{Slack: 2000},
			[]round{
				{at(t0, 60, 75_000, 40_000), 0}, {at(t0+1e9, 60, 75_000, 40_000), 0},
				{at(t0+2e9, 60, 75_000, 40_000), 0}, {at(t0+3e9, 60, 75_000, 40_000), 0},
				{at(t0+4e9, 5, 60_000, 40_000), 5},
				{at(t0+5e9, 60, 60_000, 40_000), 0},
			}, 121_000},
		{"negative round trips are the caller's business", FloorConfig{Slack: 2000},
			[]round{{labRound(t0, 60), 0}, {[]Sample{{SrcSend: 10, LocRecv: 0, LocSend: 100, SrcRecv: 20}}, 0}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFloorFilter(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range tt.rounds {
				kept, rej, _ := f.Filter(nil, r.r, Mapping{})
				if rej != r.rejected || len(kept)+rej != len(r.r) {
					t.Errorf("round %d: kept %d rejected %d of %d, want %d rejected", i, len(kept), rej, len(r.r), r.rejected)
				}
			}
			if tt.wantFlr != 0 {
				if got, ok := f.Floor(); !ok || got > tt.wantFlr {
					t.Errorf("Floor() = %d, %v, want at most %d", got, ok, tt.wantFlr)
				}
			}
		})
	}
}

// TestFloorFilterPaths runs a filter over many rounds of a path and then
// one more round with a last exchange appended: the path's genuine
// exchanges must be kept (all but a handful in the first rounds, and none
// of the fastest after them), and the last exchange must be judged as
// want.
func TestFloorFilterPaths(t *testing.T) {
	// early returns x with its receive stamp (T2) d ns early: T3 - T2
	// grows by d, so the round trip comes out d shorter.
	early := func(x Sample, d int64) Sample { x.LocRecv -= d; return x }
	const t0 = int64(700e9)
	tests := []struct {
		name     string
		round    func(t int64, n int) []Sample
		rounds   int
		perRound int
		last     Sample
		gran     int64
		rejected bool // want the last exchange rejected
		// maxRejected bounds the genuine exchanges rejected over the rounds;
		// none may be among the fastest keepFastest of them once the long
		// history holds 480 exchanges (before, it has seen few of a queued
		// path's near-floor exchanges, and a genuine one 15 us below its
		// third shortest is refused: the price of refusing wrong stamps
		// 15 us below it).
		maxRejected, keepFastest int
	}{
		{"queued path: an exchange at the true floor is kept", queuedRound, 20, 120,
			ex(t0+99e9, 73_500, 200_000, 73_500), 0, false, 3, 30},
		{"queued path: a lone receive stamp 30 us early is rejected", queuedRound, 20, 120,
			early(ex(t0+99e9, 73_500, 200_000, 73_500), 30_000), 0, true, 3, 30},
		{"queued path: a reply stamped 50 us late is rejected", queuedRound, 20, 120,
			ex(t0+99e9, 73_500, 200_000, 73_500-50_000), 0, true, 3, 30},
		{"quiet lab link: a receive stamp 15 us early is rejected", labRound, 20, 60,
			early(ex(t0+99e9, 73_500, 200_000, 73_500), 15_000), 0, true, 0, 30},
		{"Jezequel-like link (64-us granularity): its fastest are kept", jezequelRound, 150, 3,
			ex(t0+99e9, 3_000_000, 500_000, 3_000_000), 64_000, false, 0, 30},
		{"Jezequel-like link: a stamp 1 ms early is rejected", jezequelRound, 150, 3,
			early(ex(t0+99e9, 3_000_000, 500_000, 3_000_000), 1_000_000), 64_000, true, 0, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewFloorFilter(FloorConfig{Slack: 2000, MaxSkew: 32e-6, Granularity: tt.gran})
			if err != nil {
				t.Fatal(err)
			}
			var all []Sample
			var rejected []Sample
			late := map[Sample]bool{}
			for i := range tt.rounds {
				r := tt.round(t0+int64(i)*1e9, tt.perRound)
				kept, _, _ := f.Filter(nil, r, Identity(t0)) // raw clocks: the true line, the one-way check on
				in := map[Sample]bool{}
				for _, x := range kept {
					in[x] = true
				}
				for _, x := range r {
					if !in[x] {
						rejected = append(rejected, x)
						late[x] = (i+1)*tt.perRound > 480
					}
				}
				all = append(all, r...)
			}
			if len(rejected) > tt.maxRejected {
				t.Errorf("%d of %d genuine exchanges rejected, want at most %d", len(rejected), len(all), tt.maxRejected)
			}
			slices.SortFunc(all, func(a, b Sample) int { return cmp.Compare(a.RTT(), b.RTT()) })
			var lost []int64
			for _, x := range all[:tt.keepFastest] {
				if late[x] {
					lost = append(lost, x.RTT())
				}
			}
			if len(lost) > 0 {
				t.Errorf("%d of the %d fastest genuine exchanges (round trips from %d ns) rejected after the first 480: %v ns",
					len(lost), tt.keepFastest, all[0].RTT(), lost)
			}
			_, rej, ow := f.Filter(nil, append(tt.round(t0+int64(tt.rounds)*1e9, tt.perRound), tt.last), Identity(t0))
			rej += ow
			if got := rej > 0; got != tt.rejected {
				short, _ := f.Floor()
				long, _ := f.LongFloor()
				t.Errorf("last exchange (round trip %d ns; floors %d and %d ns, the run's fastest %d ns): rejected %v, want %v",
					tt.last.RTT(), short, long, all[0].RTT(), got, tt.rejected)
			}
			if rej > 1 {
				t.Errorf("%d rejected in the last round, want the last exchange's judgement alone", rej)
			}
		})
	}
}

// TestFloorFilterKeepsOrderAndReset: the kept exchanges keep their order
// and Reset forgets the history.
func TestFloorFilterKeepsOrderAndReset(t *testing.T) {
	f, err := NewFloorFilter(FloorConfig{Slack: 2000})
	if err != nil {
		t.Fatal(err)
	}
	r := labRound(1e12, 60)
	k := fastest(r)
	r[k].LocSend += 60_000
	kept, rej, _ := f.Filter(nil, r, Mapping{})
	if rej != 1 || len(kept) != 59 || kept[k] != r[k+1] || (k > 0 && kept[k-1] != r[k-1]) {
		t.Fatalf("rejected %d, kept %d; kept[%d] = %v, want %v", rej, len(kept), k, kept[k], r[k+1])
	}
	if _, ok := f.Floor(); !ok {
		t.Fatal("no floor after 60 exchanges")
	}
	f.Reset()
	if _, ok := f.Floor(); ok {
		t.Fatal("a floor after Reset")
	}
}

// TestFloorConfigValidate names the bad field.
func TestFloorConfigValidate(t *testing.T) {
	for _, c := range []FloorConfig{
		{Slack: 0}, {Slack: 1, History: 31}, {Slack: 1, SlackFrac: 1}, {Slack: 1, SlackFrac: -0.1},
		{Slack: 1, MaxSkew: 0.6}, {Slack: 1, MaxSkew: -1}, {Slack: 1, History: 64, LongHistory: 63},
		{Slack: 1, LongHistory: 1<<22 + 1}, {Slack: 1, Granularity: -1},
	} {
		if _, err := NewFloorFilter(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if _, err := NewFloorFilter(FloorConfig{Slack: 1}); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
}
