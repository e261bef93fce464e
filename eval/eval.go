package eval

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"

	"github.com/gclock/gclock/internal/satmath"
)

// Status is what a read claimed; the values are engine.Status's and
// gtime.Status's (convert with eval.Status(s)).
type Status uint8

// Statuses. Only Synced promises that the truth is inside the bounds;
// Unsynced and NoDaemon reads have no estimate.
const (
	Unsynced Status = iota
	Synced
	Stale
	NoDaemon // a page whose writer is gone (gtime only)
	Degraded
	numStatus
)

// String names the status as the reports' status_share keys do.
func (s Status) String() string {
	switch s {
	case Synced:
		return "synced"
	case Stale:
		return "stale"
	case NoDaemon:
		return "no-daemon"
	case Degraded:
		return "degraded"
	default:
		return "unsynced"
	}
}

// estimated reports whether a read of status s has an estimate.
func (s Status) estimated() bool { return s == Synced || s == Stale || s == Degraded }

// Read is one read of a node's global time and the truth at the same
// instant, all in ns.
type Read struct {
	// At is when the read was taken (any origin, the same for all reads of
	// an Acc): it measures the stretches not synced.
	At                    int64
	Est, Earliest, Latest int64
	// Mono is the monotonic estimate (engine.Time.Mono); set it to Est when
	// there is none.
	Mono   int64
	Status Status
	Truth  int64
}

// Options configure an Acc.
type Options struct {
	// Interval is the time between two reads of a node, ns: a stretch not
	// synced lasts from its first read to one interval past its last.
	Interval int64
	// Exact keeps every |error| for exact quantiles (8 bytes per read);
	// false counts them in a Histogram of resolution 1/32 instead.
	Exact bool
}

// histSubBits is the resolution of the histogram of an inexact Acc: 1/32,
// within 1.6% at bucket middles, in a few hundred buckets.
const histSubBits = 5

// Acc accumulates the reads of one node (or, merged, of many) in constant
// memory unless Options.Exact: Welford mean and variance of the signed
// error, mean and maximum of |error|, its quantiles, bound coverage and
// width, Mono's error, the statuses and the longest stretch not synced.
type Acc struct {
	opt Options
	// n counts the reads with an estimate; byStatus every read.
	n        uint64
	byStatus [numStatus]uint64
	// Reads claiming synced and those of them whose bounds held the truth;
	// reads with an estimate whose bounds held the truth.
	syncedN, syncedCovered, covered uint64
	mean, m2, sumAbs                float64
	maxAbs                          int64
	abs                             []float64  // Exact
	hist                            *Histogram // !Exact
	sumWidth                        float64
	widthN                          uint64
	monoSum                         float64
	monoMax                         int64
	notSynced                       bool // the last read did not say synced
	notSyncedFrom                   int64
	longestNotSynced                int64
}

// New returns an empty accumulator.
func New(opt Options) *Acc {
	a := &Acc{opt: opt}
	if !opt.Exact {
		a.hist = NewHistogram(histSubBits)
	}
	return a
}

// Add counts one read.
func (a *Acc) Add(r Read) {
	st := r.Status
	if st >= numStatus {
		st = Unsynced
	}
	a.byStatus[st]++
	if st == Synced {
		a.notSynced = false
	} else {
		if !a.notSynced {
			a.notSynced, a.notSyncedFrom = true, r.At
		}
		a.longestNotSynced = max(a.longestNotSynced, satmath.Add(satmath.Sub(r.At, a.notSyncedFrom), a.opt.Interval))
	}
	if !st.estimated() {
		return
	}
	covered := r.Earliest <= r.Truth && r.Truth <= r.Latest
	if covered {
		a.covered++
	}
	if st == Synced {
		a.syncedN++
		if covered {
			a.syncedCovered++
		}
	}
	err := satmath.Sub(r.Est, r.Truth)
	a.n++
	f := float64(err)
	d := f - a.mean
	a.mean += d / float64(a.n)
	a.m2 += d * (f - a.mean)
	ab := satmath.Abs(err)
	a.sumAbs += float64(ab)
	a.maxAbs = max(a.maxAbs, ab)
	if a.opt.Exact {
		a.abs = append(a.abs, float64(ab))
	} else {
		a.hist.Add(ab)
	}
	// An unbounded side (saturated width) has no width to average.
	if w := satmath.Sub(r.Latest, r.Earliest); w < math.MaxInt64 {
		a.sumWidth += float64(max(w, 0))
		a.widthN++
	}
	m := satmath.Abs(satmath.Sub(r.Mono, r.Truth))
	a.monoSum += float64(m)
	a.monoMax = max(a.monoMax, m)
}

// Merge folds o's reads into a (Chan et al.'s parallel variance). The
// quantiles stay exact only if both are; a's stretch not synced is not
// continued by o's (they are other nodes).
// Reserve makes room for n more errors, so that merging many accumulators
// into a does not copy the kept errors over and over (exact mode only).
func (a *Acc) Reserve(n int) {
	if a.opt.Exact && n > 0 {
		a.abs = slices.Grow(a.abs, n)
	}
}

func (a *Acc) Merge(o *Acc) {
	if o.n > 0 {
		n := a.n + o.n
		d := o.mean - a.mean
		a.m2 += o.m2 + d*d*float64(a.n)*float64(o.n)/float64(n)
		a.mean += d * float64(o.n) / float64(n)
		a.n = n
	}
	for i := range a.byStatus {
		a.byStatus[i] += o.byStatus[i]
	}
	a.syncedN += o.syncedN
	a.syncedCovered += o.syncedCovered
	a.covered += o.covered
	a.sumAbs += o.sumAbs
	a.maxAbs = max(a.maxAbs, o.maxAbs)
	switch {
	case a.opt.Exact && o.opt.Exact:
		a.abs = append(a.abs, o.abs...)
	case a.opt.Exact: // o is a histogram: a becomes one
		a.hist = NewHistogram(histSubBits)
		for _, v := range a.abs {
			a.hist.Add(satmath.FromFloat(v))
		}
		a.abs, a.opt.Exact = nil, false
		a.hist.Merge(o.hist)
	case o.opt.Exact:
		for _, v := range o.abs {
			a.hist.Add(satmath.FromFloat(v))
		}
	default:
		a.hist.Merge(o.hist)
	}
	a.sumWidth += o.sumWidth
	a.widthN += o.widthN
	a.monoSum += o.monoSum
	a.monoMax = max(a.monoMax, o.monoMax)
	a.longestNotSynced = max(a.longestNotSynced, o.longestNotSynced)
}

// Errors summarises errors (estimate minus truth, ns): the mean, p50, p95,
// p99 and max are of |error|, the bias and std of the signed error. Its
// JSON names are those of `gclock sim --json` and `gclock lab --json`.
type Errors struct {
	Evaluations uint64  `json:"evaluations"`   // errors summarised
	ErrorMeanNs float64 `json:"error_mean_ns"` // mean |error|
	ErrorBiasNs float64 `json:"error_bias_ns"` // mean signed error
	ErrorStdNs  float64 `json:"error_std_ns"`  // standard deviation of the signed error (n-1)
	ErrorP50Ns  int64   `json:"error_p50_ns"`  // median |error|
	ErrorP95Ns  int64   `json:"error_p95_ns"`  // 95th percentile of |error|
	ErrorP99Ns  int64   `json:"error_p99_ns"`  // 99th percentile of |error|
	ErrorMaxNs  int64   `json:"error_max_ns"`  // largest |error|
}

// Summary is the evaluation of the reads of an Acc.
type Summary struct {
	// Errors is over the reads with an estimate (synced, stale, degraded).
	Errors
	// UnsyncedShare is the share of reads without an estimate.
	UnsyncedShare float64
	// BoundCoverage is the share of reads claiming synced whose bounds
	// held the truth (1 when none claimed synced); BoundCoverageAll the
	// share over every read with an estimate.
	BoundCoverage, BoundCoverageAll float64
	// StatusShare is the share of reads in each status (every status but
	// no-daemon always present; no-daemon when seen).
	StatusShare map[string]float64
	// BoundWidthMeanNs is the mean Latest - Earliest of the reads with an
	// estimate and both bounds finite.
	BoundWidthMeanNs float64
	// MonoErrorMeanNs and MonoErrorMaxNs are of |Mono - truth|.
	MonoErrorMeanNs float64
	MonoErrorMaxNs  int64
	// LongestNotSyncedNs is the longest stretch of reads that did not say
	// synced: how long a node took to (re-)acquire.
	LongestNotSyncedNs int64
	// QuantileResolution is the relative resolution of the quantiles: 0
	// when exact, 1/32 from the histogram.
	QuantileResolution float64
}

// Summary condenses the reads counted so far.
func (a *Acc) Summary() Summary {
	out := Summary{Errors: Errors{Evaluations: a.n, ErrorMaxNs: a.maxAbs},
		MonoErrorMaxNs: a.monoMax, LongestNotSyncedNs: a.longestNotSynced, BoundCoverage: 1}
	if !a.opt.Exact {
		out.QuantileResolution = a.hist.Resolution()
	}
	var all uint64
	for _, c := range a.byStatus {
		all += c
	}
	if all > 0 {
		out.UnsyncedShare = float64(all-a.n) / float64(all)
		out.StatusShare = map[string]float64{}
		for i, c := range a.byStatus {
			if Status(i) == NoDaemon && c == 0 {
				continue
			}
			out.StatusShare[Status(i).String()] = float64(c) / float64(all)
		}
	}
	if a.syncedN > 0 {
		out.BoundCoverage = float64(a.syncedCovered) / float64(a.syncedN)
	}
	if a.widthN > 0 {
		out.BoundWidthMeanNs = a.sumWidth / float64(a.widthN)
	}
	if a.n == 0 {
		return out
	}
	n := float64(a.n)
	out.ErrorMeanNs = a.sumAbs / n
	out.ErrorBiasNs = a.mean
	if a.n > 1 {
		out.ErrorStdNs = math.Sqrt(a.m2 / (n - 1))
	}
	if a.opt.Exact {
		slices.Sort(a.abs)
		// |errors| beyond 2^53 ns round as float64s: never above the maximum.
		q := func(p float64) int64 {
			return min(satmath.FromFloat(stat.Quantile(p, stat.Empirical, a.abs, nil)), a.maxAbs)
		}
		out.ErrorP50Ns, out.ErrorP95Ns, out.ErrorP99Ns = q(0.50), q(0.95), q(0.99)
	} else {
		out.ErrorP50Ns, out.ErrorP95Ns, out.ErrorP99Ns = a.hist.Quantile(0.50), a.hist.Quantile(0.95), a.hist.Quantile(0.99)
	}
	out.BoundCoverageAll = float64(a.covered) / n
	out.MonoErrorMeanNs = a.monoSum / n
	return out
}

// SummarizeErrors summarises signed errors in ns (exact quantiles). An
// empty input gives a zero Errors.
func SummarizeErrors(errs []int64) Errors {
	a := New(Options{Exact: true})
	for _, e := range errs {
		a.Add(Read{Est: e, Mono: e, Status: Synced})
	}
	return a.Summary().Errors
}

// PerNodePerS is a count (messages, exchanges, rounds) as a rate per node
// and per second; 0 without nodes or time.
func PerNodePerS(count float64, nodes int, seconds float64) float64 {
	if nodes <= 0 || !(seconds > 0) {
		return 0
	}
	return count / float64(nodes) / seconds
}
