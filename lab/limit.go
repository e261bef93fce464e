package lab

import (
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/eval/limit"
	"github.com/gclock/gclock/internal/quantile"
)

// LimitFigures are what a host's logged exchanges allowed (issue 28's "the
// limit, computed"): after the run, the exchanges its daemon logged
// (GclockConfig.Measurements) are replayed through the textbook estimators
// of eval/limit and the oracle, judged every EvalEvery against the truth
// that only the evaluator knows (the emulated clocks rebuilt from their
// configs, or on raw clocks the one kernel clock). The replay's own figure
// is the centre-line estimator on the same exchanges (daemon.Replay), a
// check that the replay is the daemon's estimator.
type LimitFigures struct {
	// LimitNs is the median |error| of the run's best textbook
	// estimator, chosen with hindsight for the run (the one whose mean
	// over the hosts is least: limit.Common), and LimitName which one; in
	// the run's summary the mean over the hosts. LuckiestNs is the least
	// of the host's own medians and LuckiestName its estimator (in the
	// summary their mean): the limit until stop 46, below any one
	// estimator's by the luck of choosing per host (eval/limit, Common).
	LimitNs      float64 `json:"limit_ns"`
	LimitName    string  `json:"limit"`
	LuckiestNs   float64 `json:"luckiest_ns,omitempty"`
	LuckiestName string  `json:"luckiest,omitempty"`
	// MediansNs is every textbook estimator's median |error| on the host
	// (limit.Names order; null where it never had a line).
	MediansNs []*float64 `json:"medians_ns,omitempty"`
	// OracleNs is the oracle's median |error|: a Kalman filter of the
	// rounds told the clocks' true random walk of the frequency.
	OracleNs float64 `json:"oracle_ns"`
	// ReplayP50Ns is the replayed centre line's median |error| (a host's
	// only: 0 in the run's summary).
	ReplayP50Ns int64 `json:"replay_p50_ns,omitempty"`
	Evaluations int   `json:"evaluations"`
}

// EmulatedTruth is the truth of a replay of the exchanges a host on the
// emulated clock host logged with a source on the emulated clock src: the
// source's true time at each of the host's local times, in increasing
// order (each call commits the host's clock up to that time), and the
// variance per second of the random walk of the two clocks' frequency
// difference, (ns/ns)^2 per s, which the oracle is told (the temperature
// cycle, a sine, is not a random walk and is not told). Both configs need
// their origin_raw, as a lab run writes them.
func EmulatedTruth(host, src clock.EmulatedConfig) (truth func(local int64) (int64, bool), wander float64, err error) {
	if host.OriginRaw == 0 || src.OriginRaw == 0 {
		return nil, 0, errors.New("an emulated clock without origin_raw: its truth cannot be rebuilt")
	}
	h, err := host.New()
	if err != nil {
		return nil, 0, fmt.Errorf("the host's clock: %w", err)
	}
	s, err := src.New()
	if err != nil {
		return nil, 0, fmt.Errorf("the source's clock: %w", err)
	}
	truth = func(x int64) (int64, bool) {
		t := h.TruthAt(x)
		h.Ideal(t) // commit: the evaluations go forward in time
		if h.Err() != nil || s.Err() != nil {
			return 0, false
		}
		return s.Ideal(t), true
	}
	return truth, walkVariance(host) + walkVariance(src), nil
}

// walkVariance is an emulated clock's random walk of the frequency as a
// variance per second, (ns/ns)^2 per s.
func walkVariance(c clock.EmulatedConfig) float64 {
	if c.WanderPPM <= 0 || c.WanderStep <= 0 {
		return 0
	}
	w := c.WanderPPM * 1e-6
	return w * w / time.Duration(c.WanderStep).Seconds()
}

// replayLimit replays host i's logged exchanges with the reference (h0,
// node id 1) and returns what they allowed; ok false when there is nothing
// to judge (no file, no exchange with the reference). memory is the
// daemons' sync.center_memory.
func (r *gclockRun) replayLimit(i int, memory float64) (LimitFigures, bool, error) {
	path := r.path("measurements-h%d.csv", i)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return LimitFigures{}, false, nil
	}
	if err != nil {
		return LimitFigures{}, false, err
	}
	all, err := daemon.ReadMeasurements(f, path)
	f.Close()
	if err != nil {
		return LimitFigures{}, false, err
	}
	var ms []daemon.Measurement
	for _, m := range all {
		if m.Source == 1 {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return LimitFigures{}, false, nil
	}
	rc := daemon.DefaultReplayConfig()
	rc.Limit, rc.Hull.CenterMemory = true, memory
	rc.Warmup, rc.EvalEvery = r.gc.Warmup.Nanoseconds(), r.gc.EvalEvery.Nanoseconds()
	host, ref := r.clocks[i], r.clocks[0]
	switch {
	case host.emu != nil && ref.emu != nil:
		if rc.Truth, rc.Wander, err = EmulatedTruth(host.truth.Config, ref.truth.Config); err != nil {
			return LimitFigures{}, false, fmt.Errorf("%s: %w", path, err)
		}
	case host.emu != nil || ref.emu != nil:
		return LimitFigures{}, false, fmt.Errorf("%s: h%d and the reference run on different kinds of clock: no common truth", path, i)
	}
	res, err := daemon.Replay(ms, rc)
	if err != nil {
		return LimitFigures{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if len(res.Errors) == 0 || math.IsNaN(res.Limit.Best) { // rc.Limit: res.Limit is set
		return LimitFigures{}, false, nil
	}
	abs := make([]int64, len(res.Errors))
	for k, e := range res.Errors {
		abs[k] = max(e, -e)
	}
	return LimitFigures{LimitNs: res.Limit.Best, LimitName: res.Limit.BestName, LuckiestNs: res.Limit.Best, LuckiestName: res.Limit.BestName,
		MediansNs: medians(res.Limit.Medians), OracleNs: res.Limit.Oracle,
		ReplayP50Ns: quantile.Of(abs, 0.5)[0], Evaluations: len(res.Errors)}, true, nil
}

// medians is m for JSON: NaN (never a line) as null.
func medians(m []float64) []*float64 {
	out := make([]*float64, len(m))
	for i := range m {
		if !math.IsNaN(m[i]) {
			out[i] = &m[i]
		}
	}
	return out
}

// limitResult is f back as the limit.Result that Common reads.
func (f LimitFigures) limitResult() limit.Result {
	r := limit.Result{Best: f.LuckiestNs, BestName: f.LuckiestName, Oracle: f.OracleNs}
	for _, m := range f.MediansNs {
		v := math.NaN()
		if m != nil {
			v = *m
		}
		r.Medians = append(r.Medians, v)
	}
	return r
}

// runLimit is the run's limit from its hosts' figures (limit.Common): each
// host's LimitNs becomes its median under the run's best estimator, and the
// summary their mean, beside the mean of the hosts' own best. ok false when
// no estimator had a line on every host.
func runLimit(hosts []*LimitFigures) (sum LimitFigures, ok bool) {
	rs := make([]limit.Result, len(hosts))
	for i, f := range hosts {
		rs[i] = f.limitResult()
	}
	c, ok := limit.Common(rs)
	if !ok {
		return LimitFigures{}, false
	}
	for i, f := range hosts {
		f.LimitNs, f.LimitName = c.PerHost[i], c.Name
		sum.Evaluations += f.Evaluations
	}
	sum.LimitNs, sum.LimitName, sum.OracleNs = c.Mean, c.String(), c.Oracle
	sum.LuckiestNs, sum.LuckiestName = c.Luckiest, fmt.Sprintf("mean of %d hosts' own best", len(hosts))
	return sum, true
}
