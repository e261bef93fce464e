package limit

import (
	"fmt"
	"math"
)

// Common is a run's limit: the one textbook estimator whose mean median
// over the run's hosts is least, chosen with hindsight for the run (the
// hosts of a run share its link class), and each host's median under it.
//
// Each host's own Best is the least of ten medians, each itself a noisy
// figure (a minute of errors that move together over tens of seconds), so
// on links where several estimators are near each other the host's Best
// is the one that was luckiest there: a different estimator on each host
// (the fastest 1% on one host of a 10-us bell, where it is 2.3x the mean's
// error over many hosts), and a figure below what any single estimator,
// or the oracle told the clocks' wander, does. In the simulator's matrix
// (normal 10 us, 40 seeds, 120 hosts) the hosts' own Best averaged 226 ns,
// the best single estimator over all of them (mean/10) 311, the oracle
// 290; on normal 3 us 98, 126 (mean/3) and 117. One choice per run keeps
// the hindsight (still in-sample: 272 and 118 there) and takes out most
// of the luck. A host's own Best stays in its Result ("luckiest").
//
// ok is false when no estimator had a line on every host (or rs is
// empty); an estimator without a line on some host is not eligible.
func Common(rs []Result) (c CommonResult, ok bool) {
	names := Names()
	best := -1
	bestMean := math.Inf(1)
	for i := range names {
		sum := 0.0
		eligible := len(rs) > 0
		for _, r := range rs {
			if i >= len(r.Medians) || math.IsNaN(r.Medians[i]) {
				eligible = false
				break
			}
			sum += r.Medians[i]
		}
		if eligible && sum/float64(len(rs)) < bestMean {
			best, bestMean = i, sum/float64(len(rs))
		}
	}
	if best < 0 {
		return CommonResult{}, false
	}
	c = CommonResult{Name: names[best], Mean: bestMean}
	for _, r := range rs {
		c.PerHost = append(c.PerHost, r.Medians[best])
		c.Luckiest += r.Best
		c.Oracle += r.Oracle
	}
	c.Luckiest /= float64(len(rs))
	c.Oracle /= float64(len(rs))
	return c, true
}

// CommonResult is Common's answer.
type CommonResult struct {
	// Name is the run's best textbook estimator ("kind/span") and Mean its
	// mean median over the hosts (ns): the run's limit.
	Name string
	Mean float64
	// PerHost is each host's median under it (ns), in the order given.
	PerHost []float64
	// Luckiest is the mean over the hosts of each one's own Best (ns):
	// the limit as computed before stop 46, below Mean by the luck of
	// choosing per host.
	Luckiest float64
	// Oracle is the mean over the hosts of their oracles (ns; 0 where
	// the trackers ran none).
	Oracle float64
}

// String names the choice, e.g. "mean/10 over 3 hosts".
func (c CommonResult) String() string { return fmt.Sprintf("%s over %d hosts", c.Name, len(c.PerHost)) }
