package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/eval/limit"
)

// Measurement is one line of a daemon's log.measurements file: an exchange
// with a source, its four stamps on the two local clocks (ns).
type Measurement struct {
	Source int
	estimate.Sample
}

// ReadMeasurements parses a log.measurements CSV. name is used in errors
// (which give the line and the column). A file that ends in the middle of
// a line (a daemon killed while writing) is an error naming that line.
func ReadMeasurements(r io.Reader, name string) ([]Measurement, error) {
	br := bufio.NewReader(r)
	var out []Measurement
	cols := strings.Split(strings.TrimSuffix(measurementsHeader, "\n"), ",")
	for line := 1; ; line++ {
		s, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return out, fmt.Errorf("%s: line %d: %w", name, line, err)
		}
		if s == "" && errors.Is(err, io.EOF) {
			if line == 1 {
				return nil, fmt.Errorf("%s: empty file (want the header %q)", name, strings.TrimSuffix(measurementsHeader, "\n"))
			}
			return out, nil
		}
		if !strings.HasSuffix(s, "\n") {
			return out, fmt.Errorf("%s: line %d: truncated (no end of line): %q", name, line, clip(s))
		}
		s = strings.TrimSuffix(strings.TrimSuffix(s, "\n"), "\r")
		if line == 1 {
			if s != strings.TrimSuffix(measurementsHeader, "\n") {
				return nil, fmt.Errorf("%s: line 1: header %q, want %q", name, clip(s), strings.TrimSuffix(measurementsHeader, "\n"))
			}
			continue
		}
		f := strings.Split(s, ",")
		if len(f) != len(cols) {
			return out, fmt.Errorf("%s: line %d: %d fields, want %d (%s)", name, line, len(f), len(cols), strings.TrimSuffix(measurementsHeader, "\n"))
		}
		var v [6]int64
		for i := range f {
			if v[i], err = strconv.ParseInt(f[i], 10, 64); err != nil {
				return out, fmt.Errorf("%s: line %d: column %s: %q is not an integer", name, line, cols[i], clip(f[i]))
			}
		}
		if v[0] < 0 || v[0] > math.MaxUint32 {
			return out, fmt.Errorf("%s: line %d: column source: %d is not a node id", name, line, v[0])
		}
		m := Measurement{Source: int(v[0]), Sample: estimate.Sample{SrcSend: v[1], LocRecv: v[2], LocSend: v[3], SrcRecv: v[4]}}
		if rtt := m.RTT(); rtt != v[5] {
			return out, fmt.Errorf("%s: line %d: column rtt_ns: %d, but the stamps give %d", name, line, v[5], rtt)
		}
		out = append(out, m)
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// ReplayConfig says how to replay measurements through the centre-line
// estimator.
type ReplayConfig struct {
	Hull      estimate.HullConfig // Center is set by Replay
	RoundGap  int64               // a pause longer than this (ns, local clock) starts a new round
	Warmup    int64               // ns after the first exchange left out of the figures
	EvalEvery int64               // ns between evaluations after each round, until the next
	// Limit also feeds every round to the textbook estimators of
	// eval/limit and judges them at the same evaluations (ReplayResult.Limit).
	Limit bool
	// Truth maps a local time of the replayed host to its source's true
	// time then (nil: a raw-clock run, where both are the kernel's clock
	// and the truth is the local time itself). An evaluator that knows the
	// clocks builds it (`gclock lab replay` from an emulated run's configs);
	// false leaves that evaluation out.
	Truth func(local int64) (int64, bool)
	// Wander is what the oracle is told (limit.NewWithOracle): the variance
	// per second of the random walk of the frequency difference between
	// the two clocks, (ns/ns)^2 per s; 0 for raw clocks.
	Wander float64
	// Floor, when not nil, keeps impossibly fast exchanges out of the
	// estimator as the daemon's engine does (engine.Config.FloorConfig):
	// the measurements log holds every exchange, the rejected ones too.
	Floor *estimate.FloorConfig
}

// DefaultReplayConfig is the lab daemons' estimator: a 4096-exchange
// window, rounds split at 300 ms pauses, 10 s of warm-up, an evaluation
// every 10 ms.
func DefaultReplayConfig() ReplayConfig {
	floor := engine.DefaultConfig().FloorConfig()
	return ReplayConfig{Hull: estimate.HullConfig{Window: 4096, CenterBreaks: true}, RoundGap: 300e6, Warmup: 10e9, EvalEvery: 10e6, Floor: &floor}
}

// ReplayResult is the error of the replayed estimate against the truth:
// ReplayConfig.Truth, or for a `gclock lab --clocks raw` run, whose daemons
// run on the one kernel clock, that both clocks are the same (true offset
// 0, true skew 0).
type ReplayResult struct {
	Exchanges, Rounds, Evaluations int
	Restarts, Rejected             int // rounds that restarted the window / that it refused
	// Rounds the centre line found suspect of a frequency break, and the
	// breaks the next round confirmed (estimate.HullConfig.CenterBreaks).
	Suspects, Breaks int
	// Exchanges the floor filter kept out (ReplayConfig.Floor): on their
	// round trip, and on one direction alone.
	BelowFloor, OneWayBelowFloor int
	// Errors (estimate - truth, ns) at every evaluation.
	Errors []int64
	// Limit is what the same exchanges allowed (ReplayConfig.Limit).
	Limit *limit.Result
}

// Replay feeds the measurements of one source, round by round, to a hull
// with the centre line and evaluates the estimate every EvalEvery from the
// end of each round to the start of the next (for 1 s after the last).
func Replay(ms []Measurement, rc ReplayConfig) (ReplayResult, error) {
	var res ReplayResult
	if len(ms) == 0 {
		return res, errors.New("replay: no measurements")
	}
	if rc.EvalEvery <= 0 || rc.RoundGap <= 0 || rc.Warmup < 0 {
		return res, fmt.Errorf("replay: eval every %d, round gap %d, warm-up %d: want positive (warm-up >= 0)", rc.EvalEvery, rc.RoundGap, rc.Warmup)
	}
	hc := rc.Hull
	hc.Center = true
	h, err := estimate.NewHull(hc)
	if err != nil {
		return res, fmt.Errorf("replay: %w", err)
	}
	if rc.Wander < 0 || math.IsNaN(rc.Wander) || math.IsInf(rc.Wander, 0) {
		return res, fmt.Errorf("replay: wander %v: want a finite variance >= 0", rc.Wander)
	}
	truth := rc.Truth
	if truth == nil {
		truth = func(x int64) (int64, bool) { return x, true }
	}
	var lim *limit.Tracker
	if rc.Limit {
		lim = limit.NewWithOracle(rc.Wander)
	}
	var rounds [][]estimate.Sample
	for i, m := range ms {
		if m.Source != ms[0].Source {
			return res, fmt.Errorf("replay: exchange %d is from source %d, the first from %d: replay one source at a time", i, m.Source, ms[0].Source)
		}
		if i == 0 || m.LocRecv-ms[i-1].LocRecv > rc.RoundGap {
			rounds = append(rounds, nil)
		}
		rounds[len(rounds)-1] = append(rounds[len(rounds)-1], m.Sample)
	}
	var floor *estimate.FloorFilter
	if rc.Floor != nil {
		if floor, err = estimate.NewFloorFilter(*rc.Floor); err != nil {
			return res, fmt.Errorf("replay: %w", err)
		}
	}
	t0 := rounds[0][0].LocRecv
	for i, rd := range rounds {
		kept := rd
		if floor != nil {
			var rej, ow int
			kept, rej, ow = floor.Filter(make([]estimate.Sample, 0, len(rd)), rd, h.Mapping())
			res.BelowFloor, res.OneWayBelowFloor = res.BelowFloor+rej, res.OneWayBelowFloor+ow
		}
		if len(kept) > 0 {
			if err := h.AddRound(kept); err != nil {
				if !errors.Is(err, estimate.ErrInconsistent) {
					res.Rejected++ // a round the hull refuses, as the engine would
					continue
				}
				res.Restarts++ // the window restarted from this round
			}
		}
		if lim != nil {
			lim.AddRound(rd) // the limit sees every exchange the host received
		}
		end := rd[len(rd)-1].LocRecv
		next := end + 1e9
		if i+1 < len(rounds) {
			next = rounds[i+1][0].LocRecv
		}
		for x := end; x < next; x += rc.EvalEvery {
			if x-t0 < rc.Warmup {
				continue
			}
			y, _, ok := h.Center(x)
			if !ok {
				continue
			}
			src, known := truth(x)
			if !known {
				continue
			}
			res.Errors = append(res.Errors, y-src)
			if lim != nil {
				lim.Judge(x, src)
			}
		}
	}
	res.Exchanges, res.Rounds, res.Evaluations = len(ms), len(rounds), len(res.Errors)
	res.Suspects, res.Breaks = int(h.Suspects()), int(h.Breaks())
	if lim != nil {
		r := lim.Result(int(ms[0].Source))
		res.Limit = &r
	}
	return res, nil
}
