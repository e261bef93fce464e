package limit

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gclock/gclock/estimate"
)

// rounds draws rounds of exchanges between a local clock and a source
// running skew faster and offset ahead, with one-way delays from delay.
func feed(t *Tracker, r *rand.Rand, delay func() int64, offset int64, skew float64, rounds int, judge bool) {
	src := func(x int64) int64 { return x + offset + int64(math.Round(skew*float64(x))) }
	for k := range rounds {
		x := int64(k) * 6e9
		var round []estimate.Sample
		for range 240 {
			up, down := delay(), delay()
			s := estimate.Sample{LocSend: x, SrcRecv: src(x + up)}
			s.SrcSend = s.SrcRecv + 1000
			s.LocRecv = x + up + 1000 + down
			round = append(round, s)
			x += 2e6
		}
		t.AddRound(round)
		if judge {
			for at := x; at < x+6e9; at += 1e8 {
				t.Judge(at, src(at))
			}
		}
	}
}

// TestLimitKnowsTheTextbook: on bell-shaped delays the mean (or its
// trimmed and median kin) is the best textbook estimator and near
// sigma/sqrt(n); on a sharp floor an each-way floor or Cristian's fastest
// exchange is, far below the mean; an empty tracker has no best.
func TestLimitKnowsTheTextbook(t *testing.T) {
	if r := New().Result(1); !math.IsNaN(r.Best) || r.BestName != "" || len(r.Medians) != len(Names()) {
		t.Fatalf("empty tracker: %+v", r)
	}
	r := rand.New(rand.NewPCG(1, 2))
	bell := New()
	feed(bell, r, func() int64 { return int64(100e3 + 10e3*r.NormFloat64()) }, 3e6, 20e-6, 14, true)
	b := bell.Result(1)
	t.Logf("bell: best %s %.0f ns; medians %v", b.BestName, b.Best, b.Medians)
	if b.Best > 800 {
		t.Errorf("bell: best %.0f ns, want under 800 (10 us x 0.7 / sqrt(2400) is 140)", b.Best)
	}
	floor := New()
	feed(floor, r, func() int64 { return int64(100e3 + 20e3*r.ExpFloat64()) }, 3e6, 20e-6, 14, true)
	f := floor.Result(2)
	t.Logf("floor: best %s %.0f ns; medians %v", f.BestName, f.Best, f.Medians)
	mean := f.Medians[0] // mean/3
	if f.Best > mean/3 {
		t.Errorf("floor: best %.0f ns, want a third of the mean's %.0f", f.Best, mean)
	}
	if f.BestName == "mean/3" || f.BestName == "mean/10" {
		t.Errorf("floor: the mean was best (%s)", f.BestName)
	}
}

func TestCommon(t *testing.T) {
	nan := math.NaN()
	n := len(Names())
	row := func(vals map[int]float64) Result {
		r := Result{Medians: make([]float64, n), Best: math.NaN()}
		for i := range r.Medians {
			r.Medians[i] = 1000
		}
		for i, v := range vals {
			r.Medians[i] = v
		}
		for _, m := range r.Medians {
			if !math.IsNaN(m) && (math.IsNaN(r.Best) || m < r.Best) {
				r.Best = m
			}
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		rs       []Result
		ok       bool
		want     string
		mean     float64
		perHost  []float64
		luckiest float64
	}{
		{name: "empty", rs: nil},
		{name: "one host: its own best", rs: []Result{row(map[int]float64{3: 200})}, ok: true, want: Names()[3], mean: 200, perHost: []float64{200}, luckiest: 200},
		{
			// each host's luckiest is a different estimator; the run's
			// choice is the one least on the average, not either luck
			name: "luck on each host",
			rs: []Result{
				row(map[int]float64{0: 100, 2: 300, 4: 250}),
				row(map[int]float64{0: 500, 2: 310, 4: 260}),
			},
			ok: true, want: Names()[4], mean: 255, perHost: []float64{250, 260}, luckiest: 180,
		},
		{
			name: "no line on a host: not eligible",
			rs: []Result{
				row(map[int]float64{1: 50, 5: 300}),
				row(map[int]float64{1: nan, 5: 320}),
			},
			ok: true, want: Names()[5], mean: 310, perHost: []float64{300, 320}, luckiest: 185,
		},
		{
			name: "no estimator on every host",
			rs: []Result{
				{Medians: slices.Repeat([]float64{nan}, n), Best: nan},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := Common(tc.rs)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if c.Name != tc.want || c.Mean != tc.mean || !slices.Equal(c.PerHost, tc.perHost) || c.Luckiest != tc.luckiest {
				t.Errorf("got %s mean %v per host %v luckiest %v, want %s mean %v per host %v luckiest %v", c.Name, c.Mean, c.PerHost, c.Luckiest, tc.want, tc.mean, tc.perHost, tc.luckiest)
			}
		})
	}
}
