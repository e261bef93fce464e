package eval

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gclock/gclock/internal/quantile"
	"github.com/gclock/gclock/internal/satmath"
)

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
		res := h.Resolution()
		for _, q := range []float64{0.5, 0.9, 0.99} {
			exact := quantile.Of(vals, q)[0]
			got := h.Quantile(q)
			if math.Abs(float64(got-exact)) > res*float64(exact)+1 {
				t.Errorf("subBits %d q %v: got %d, exact %d, resolution %v", sub, q, got, exact, res)
			}
		}
		if h.Quantile(1) > h.Max() || h.Count() != 100000 {
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

func TestSummaryTable(t *testing.T) {
	const iv = 10
	r := func(at, est, lo, hi int64, st Status) Read {
		return Read{At: at, Est: est, Earliest: lo, Latest: hi, Mono: est, Status: st}
	}
	tests := []struct {
		name  string
		reads []Read
		check func(t *testing.T, s Summary)
	}{
		{"empty", nil, func(t *testing.T, s Summary) {
			if s.Evaluations != 0 || s.BoundCoverage != 1 || s.StatusShare != nil || s.UnsyncedShare != 0 {
				t.Errorf("empty: %+v", s)
			}
		}},
		{"coverage is over synced reads", []Read{
			r(0, 5, 0, 10, Synced), r(10, 5, 6, 10, Synced), // covered, not covered (truth 0)
			r(20, 50, 40, 60, Stale), r(30, 1, -1, 2, Degraded), // not covered, covered
		}, func(t *testing.T, s Summary) {
			// Truth is 0 in every read: only the first holds it among the synced.
			if s.BoundCoverage != 0.5 || s.BoundCoverageAll != 0.5 {
				t.Errorf("coverage %v, all %v, want 0.5, 0.5", s.BoundCoverage, s.BoundCoverageAll)
			}
		}},
		{"unsynced reads have no estimate", []Read{
			r(0, 0, math.MinInt64, math.MaxInt64, Unsynced), r(10, 100, 90, 110, Synced),
			r(20, 0, math.MinInt64, math.MaxInt64, NoDaemon), r(30, -100, -110, -90, Synced),
		}, func(t *testing.T, s Summary) {
			if s.Evaluations != 2 || s.UnsyncedShare != 0.5 || s.ErrorMeanNs != 100 || s.ErrorBiasNs != 0 {
				t.Errorf("%+v", s)
			}
			if s.BoundWidthMeanNs != 20 {
				t.Errorf("width %v, want 20", s.BoundWidthMeanNs)
			}
			want := map[string]float64{"unsynced": 0.25, "synced": 0.5, "stale": 0, "degraded": 0, "no-daemon": 0.25}
			if len(s.StatusShare) != len(want) {
				t.Errorf("status share %v, want %v", s.StatusShare, want)
			}
			for k, v := range want {
				if s.StatusShare[k] != v {
					t.Errorf("status share %v, want %v", s.StatusShare, want)
				}
			}
		}},
		{"longest not synced", []Read{
			r(0, 0, 0, 0, Synced), r(10, 0, 0, 0, Stale), r(20, 0, 0, 0, Degraded), r(30, 0, 0, 0, Synced),
			r(40, 0, 0, 0, Unsynced), r(50, 0, 0, 0, Synced),
		}, func(t *testing.T, s Summary) {
			if s.LongestNotSyncedNs != 2*iv {
				t.Errorf("longest not synced %d, want %d", s.LongestNotSyncedNs, 2*iv)
			}
		}},
		{"saturated errors", []Read{
			{Est: math.MaxInt64, Truth: -10, Earliest: math.MinInt64, Latest: math.MaxInt64, Mono: math.MinInt64, Status: Stale},
		}, func(t *testing.T, s Summary) {
			if s.ErrorMaxNs != math.MaxInt64 || s.ErrorP99Ns != math.MaxInt64 || s.MonoErrorMaxNs != math.MaxInt64-9 {
				t.Errorf("%+v", s)
			}
			if s.BoundWidthMeanNs != 0 || s.BoundCoverageAll != 1 {
				t.Errorf("unbounded read: width %v coverage %v", s.BoundWidthMeanNs, s.BoundCoverageAll)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := New(Options{Interval: iv, Exact: true})
			for _, x := range tt.reads {
				a.Add(x)
			}
			tt.check(t, a.Summary())
		})
	}
}

// TestMergeMatchesDirect: two halves merged give the summary of all reads,
// exact or not, and an exact Acc merged with a histogram becomes one.
func TestMergeMatchesDirect(t *testing.T) {
	for _, exact := range []bool{true, false} {
		opt := Options{Interval: 1, Exact: exact}
		a, b, all := New(opt), New(opt), New(opt)
		rng := rand.New(rand.NewPCG(5, 6))
		for i := range 1000 {
			e := int64(rng.NormFloat64() * 300)
			w := int64(rng.IntN(1000))
			st := []Status{Synced, Stale, Degraded, Unsynced}[rng.IntN(4)]
			x := Read{At: int64(i), Est: e, Earliest: 200 - w, Latest: 200, Mono: e / 2, Status: st}
			if i%2 == 0 {
				a.Add(x)
			} else {
				b.Add(x)
			}
			all.Add(x)
		}
		a.Merge(b)
		sa, sall := a.Summary(), all.Summary()
		if math.Abs(sa.ErrorStdNs-sall.ErrorStdNs) > 1e-6 || math.Abs(sa.ErrorMeanNs-sall.ErrorMeanNs) > 1e-9 ||
			sa.ErrorP99Ns != sall.ErrorP99Ns || sa.ErrorP50Ns != sall.ErrorP50Ns || sa.BoundCoverage != sall.BoundCoverage ||
			sa.BoundWidthMeanNs != sall.BoundWidthMeanNs || sa.Evaluations != sall.Evaluations {
			t.Errorf("exact %v: merged %+v != direct %+v", exact, sa, sall)
		}
	}
	ex, hi := New(Options{Exact: true}), New(Options{})
	for i := range 100 {
		ex.Add(Read{Est: int64(i), Status: Synced})
		hi.Add(Read{Est: int64(1000 + i), Status: Synced})
	}
	ex.Merge(hi)
	if s := ex.Summary(); s.Evaluations != 200 || s.QuantileResolution != 1.0/32 || s.ErrorMaxNs != 1099 {
		t.Errorf("exact merged with a histogram: %+v", s)
	}
}

// TestSummarizeErrors is the lab's peer summary (lab.Summary).
func TestSummarizeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []int64
		want Errors
	}{
		{"empty", nil, Errors{}},
		{"one", []int64{-5}, Errors{Evaluations: 1, ErrorMeanNs: 5, ErrorBiasNs: -5, ErrorP50Ns: 5, ErrorP95Ns: 5, ErrorP99Ns: 5, ErrorMaxNs: 5}},
		{"signs", []int64{-3, 1, 2, -4}, Errors{Evaluations: 4, ErrorMeanNs: 2.5, ErrorBiasNs: -1,
			ErrorStdNs: math.Sqrt(26.0 / 3), ErrorP50Ns: 2, ErrorP95Ns: 4, ErrorP99Ns: 4, ErrorMaxNs: 4}},
		{"minint", []int64{math.MinInt64}, Errors{Evaluations: 1, ErrorMeanNs: math.MaxInt64, ErrorBiasNs: math.MinInt64,
			ErrorP50Ns: math.MaxInt64, ErrorP95Ns: math.MaxInt64, ErrorP99Ns: math.MaxInt64, ErrorMaxNs: math.MaxInt64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SummarizeErrors(tt.in)
			if math.Abs(got.ErrorStdNs-tt.want.ErrorStdNs) < 1e-9 {
				got.ErrorStdNs = tt.want.ErrorStdNs
			}
			if got != tt.want {
				t.Fatalf("SummarizeErrors(%v) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
	// 1..100: nearest-rank quantiles are observed values.
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(100 - i)
	}
	s := SummarizeErrors(v)
	if s.ErrorP50Ns != 50 || s.ErrorP95Ns != 95 || s.ErrorP99Ns != 99 || s.ErrorMaxNs != 100 {
		t.Fatalf("1..100: %+v, want p50 50, p95 95, p99 99, max 100", s)
	}
}

func TestPerNodePerS(t *testing.T) {
	for _, tt := range []struct {
		c    float64
		n    int
		s, w float64
	}{{100, 4, 5, 5}, {100, 0, 5, 0}, {100, 4, 0, 0}, {100, 4, math.NaN(), 0}} {
		if got := PerNodePerS(tt.c, tt.n, tt.s); got != tt.w {
			t.Errorf("PerNodePerS(%v, %d, %v) = %v, want %v", tt.c, tt.n, tt.s, got, tt.w)
		}
	}
}

// FuzzAcc: any reads, however extreme, give a summary whose shares are
// shares, whose quantiles are ordered and bounded by the maximum, and
// exact and histogram accumulators agree on everything but the quantiles.
func FuzzAcc(f *testing.F) {
	f.Add(int64(5), int64(0), int64(10), int64(3), uint8(1), int64(0))
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MinInt64), uint8(2), int64(-1))
	f.Add(int64(-7), int64(-8), int64(-9), int64(0), uint8(200), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, est, lo, hi, mono int64, st uint8, truth int64) {
		ex, hist := New(Options{Interval: 1, Exact: true}), New(Options{Interval: 1})
		for i := range int64(7) {
			// Vary the reads a little around the fuzzed one.
			r := Read{At: i, Est: satmath.Add(est, i), Earliest: lo, Latest: hi, Mono: mono, Status: Status((st + uint8(i)) % 6), Truth: truth}
			ex.Add(r)
			hist.Add(r)
		}
		se, sh := ex.Summary(), hist.Summary()
		for _, s := range []Summary{se, sh} {
			var sum float64
			for _, v := range s.StatusShare {
				sum += v
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Fatalf("status shares sum to %v: %v", sum, s.StatusShare)
			}
			for _, v := range []float64{s.BoundCoverage, s.BoundCoverageAll, s.UnsyncedShare} {
				if !(v >= 0 && v <= 1) {
					t.Fatalf("share %v outside [0, 1]: %+v", v, s)
				}
			}
			if s.ErrorP50Ns < 0 || s.ErrorP50Ns > s.ErrorP95Ns || s.ErrorP95Ns > s.ErrorP99Ns || s.ErrorP99Ns > s.ErrorMaxNs {
				t.Fatalf("quantiles out of order: %+v", s.Errors)
			}
		}
		se.ErrorP50Ns, se.ErrorP95Ns, se.ErrorP99Ns, se.QuantileResolution = 0, 0, 0, 0
		sh.ErrorP50Ns, sh.ErrorP95Ns, sh.ErrorP99Ns, sh.QuantileResolution = 0, 0, 0, 0
		if se.Errors != sh.Errors || se.BoundCoverage != sh.BoundCoverage || se.LongestNotSyncedNs != sh.LongestNotSyncedNs {
			t.Fatalf("exact %+v, histogram %+v", se, sh)
		}
	})
}
