package sim

import (
	"math"
	"math/bits"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/internal/satmath"
)

// Histogram counts non-negative int64 values in log-linear buckets, like
// HdrHistogram: values below 2^SubBits are exact; above, each power of two is
// split into 2^SubBits buckets, so a quantile is off by at most 2^-SubBits
// of its value (reported at the bucket's middle: half that). Memory grows
// with the logarithm of the largest value, never with the count.
type Histogram struct {
	subBits uint
	counts  []uint64
	n       uint64
	max     int64
}

// NewHistogram returns a histogram with relative resolution 2^-subBits
// (subBits in [1, 10]).
func NewHistogram(subBits uint) *Histogram {
	subBits = min(max(subBits, 1), 10)
	return &Histogram{subBits: subBits}
}

func (h *Histogram) index(v uint64) int {
	if v < 1<<h.subBits {
		return int(v)
	}
	exp := uint(bits.Len64(v)) - 1
	shift := exp - h.subBits
	mant := (v >> shift) & (1<<h.subBits - 1)
	return int((uint64(exp-h.subBits+1) << h.subBits) + mant)
}

// bucketMid returns the middle of bucket i and its width.
func (h *Histogram) bucketMid(i int) (mid, width uint64) {
	if i < 1<<h.subBits {
		return uint64(i), 1
	}
	blk := uint(i >> h.subBits) // >= 1
	mant := uint64(i & (1<<h.subBits - 1))
	shift := blk - 1
	lo := (1<<h.subBits + mant) << shift
	width = 1 << shift
	return lo + width/2, width
}

// Add counts v (negative values count as 0).
func (h *Histogram) Add(v int64) {
	if v < 0 {
		v = 0
	}
	i := h.index(uint64(v))
	if i >= len(h.counts) {
		nc := make([]uint64, i+1, max(i+1, 2*len(h.counts)))
		copy(nc, h.counts)
		h.counts = nc
	}
	h.counts[i]++
	h.n++
	h.max = max(h.max, v)
}

// Count returns the number of values added.
func (h *Histogram) Count() uint64 { return h.n }

// Quantile returns the q-quantile (q in [0, 1]), within the histogram's
// resolution, never above the largest value seen; 0 when empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var cum uint64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			mid, _ := h.bucketMid(i)
			if mid > uint64(h.max) {
				return h.max
			}
			return int64(mid)
		}
	}
	return h.max
}

// Merge adds o's counts into h (same resolution required; otherwise each of
// o's buckets is re-added at its middle).
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		if c == 0 {
			continue
		}
		mid, _ := o.bucketMid(i)
		j := h.index(mid)
		if o.subBits == h.subBits {
			j = i
		}
		if j >= len(h.counts) {
			nc := make([]uint64, j+1)
			copy(nc, h.counts)
			h.counts = nc
		}
		h.counts[j] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// ErrStats accumulates one node's (or the cluster's) evaluation in constant
// memory: Welford mean and variance of the signed error, mean and maximum of
// |error|, a histogram of |error| for the quantiles, bound coverage and
// width, and the same for Mono.
type ErrStats struct {
	N        uint64 // evaluations with an estimate (synced, stale or degraded)
	Unsynced uint64 // evaluations where the node had no vouched estimate yet
	// ByStatus counts every evaluation by the status the read claimed
	// (index engine.Status: unsynced, synced, stale, -, degraded).
	ByStatus [5]uint64
	// SyncedN and SyncedCovered count the reads that claimed synced and
	// those whose bounds held the truth: a synced read is a promise.
	SyncedN, SyncedCovered uint64
	mean, m2               float64
	sumAbs                 float64
	MaxAbs                 int64
	Hist                   *Histogram
	Covered                uint64
	sumWidth               float64
	monoSum                float64
	MonoMax                int64
}

func newErrStats(subBits uint) *ErrStats { return &ErrStats{Hist: NewHistogram(subBits)} }

// satSub returns a-b saturated to the int64 range.
func satSub(a, b int64) int64 { return satmath.Sub(a, b) }

// add records one evaluation: err = Est - truth, mono = Mono - truth,
// covered = truth within the bounds, width = Latest - Earliest.
func (s *ErrStats) add(err, mono int64, covered bool, width uint64) {
	s.N++
	f := float64(err)
	d := f - s.mean
	s.mean += d / float64(s.N)
	s.m2 += d * (f - s.mean)
	a := satmath.Abs(err)
	s.sumAbs += float64(a)
	s.MaxAbs = max(s.MaxAbs, a)
	s.Hist.Add(a)
	if covered {
		s.Covered++
	}
	s.sumWidth += float64(width)
	ma := satmath.Abs(mono)
	s.monoSum += float64(ma)
	s.MonoMax = max(s.MonoMax, ma)
}

// merge folds o into s (Chan et al.'s parallel variance).
func (s *ErrStats) merge(o *ErrStats) {
	if o.N > 0 {
		n := s.N + o.N
		d := o.mean - s.mean
		s.m2 += o.m2 + d*d*float64(s.N)*float64(o.N)/float64(n)
		s.mean += d * float64(o.N) / float64(n)
		s.N = n
	}
	s.Unsynced += o.Unsynced
	for i := range s.ByStatus {
		s.ByStatus[i] += o.ByStatus[i]
	}
	s.SyncedN += o.SyncedN
	s.SyncedCovered += o.SyncedCovered
	s.sumAbs += o.sumAbs
	s.MaxAbs = max(s.MaxAbs, o.MaxAbs)
	s.Hist.Merge(o.Hist)
	s.Covered += o.Covered
	s.sumWidth += o.sumWidth
	s.monoSum += o.monoSum
	s.MonoMax = max(s.MonoMax, o.MonoMax)
}

// Summary is the evaluation of one node or of the whole cluster. Errors are
// Est - truth in ns; the mean, p50, p99 and max are of |error|; the std is of
// the signed error. p50/p99 come from a log-linear histogram (see
// Histogram) and are exact to the resolution stated by QuantileResolution.
type Summary struct {
	ID            int     `json:"id"`
	Evaluations   uint64  `json:"evaluations"`
	UnsyncedShare float64 `json:"unsynced_share"`
	ErrorMeanNs   float64 `json:"error_mean_ns"`
	ErrorBiasNs   float64 `json:"error_bias_ns"`
	ErrorStdNs    float64 `json:"error_std_ns"`
	ErrorP50Ns    int64   `json:"error_p50_ns"`
	ErrorP99Ns    int64   `json:"error_p99_ns"`
	ErrorMaxNs    int64   `json:"error_max_ns"`
	// BoundCoverage is the share of reads claiming synced whose bounds
	// held the truth (1 when none claimed synced); BoundCoverageAll the
	// share over every read with an estimate, degraded and stale included.
	BoundCoverage    float64 `json:"bound_coverage"`
	BoundCoverageAll float64 `json:"bound_coverage_all"`
	// StatusShare is the share of evaluations in each status.
	StatusShare         map[string]float64 `json:"status_share"`
	BoundWidthMeanNs    float64            `json:"bound_width_mean_ns"`
	MonoErrorMeanNs     float64            `json:"mono_error_mean_ns"`
	MonoErrorMaxNs      int64              `json:"mono_error_max_ns"`
	MessagesPerNodePerS float64            `json:"messages_per_node_per_s"`
	QuantileResolution  float64            `json:"quantile_resolution"`
}

func (s *ErrStats) summary(id int, msgs uint64, nodes int, seconds float64) Summary {
	out := Summary{ID: id, Evaluations: s.N, ErrorMaxNs: s.MaxAbs, MonoErrorMaxNs: s.MonoMax,
		QuantileResolution: math.Ldexp(1, -int(s.Hist.subBits))}
	if tot := s.N + s.Unsynced; tot > 0 {
		out.UnsyncedShare = float64(s.Unsynced) / float64(tot)
	}
	out.BoundCoverage = 1
	if s.SyncedN > 0 {
		out.BoundCoverage = float64(s.SyncedCovered) / float64(s.SyncedN)
	}
	var all uint64
	for _, c := range s.ByStatus {
		all += c
	}
	if all > 0 {
		out.StatusShare = map[string]float64{}
		for i, c := range s.ByStatus {
			if i == 3 {
				continue
			}
			out.StatusShare[engine.Status(i).String()] = float64(c) / float64(all)
		}
	}
	if s.N > 0 {
		n := float64(s.N)
		out.ErrorMeanNs = s.sumAbs / n
		out.ErrorBiasNs = s.mean
		if s.N > 1 {
			out.ErrorStdNs = math.Sqrt(s.m2 / (n - 1))
		}
		out.ErrorP50Ns = s.Hist.Quantile(0.5)
		out.ErrorP99Ns = s.Hist.Quantile(0.99)
		out.BoundCoverageAll = float64(s.Covered) / n
		out.BoundWidthMeanNs = s.sumWidth / n
		out.MonoErrorMeanNs = s.monoSum / n
	}
	if nodes > 0 && seconds > 0 {
		out.MessagesPerNodePerS = float64(msgs) / float64(nodes) / seconds
	}
	return out
}
