package eval

import (
	"math"
	"math/bits"
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

// Max returns the largest value added (0 when empty).
func (h *Histogram) Max() int64 { return h.max }

// Resolution is the histogram's relative resolution, 2^-subBits.
func (h *Histogram) Resolution() float64 { return math.Ldexp(1, -int(h.subBits)) }

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
