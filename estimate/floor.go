package estimate

import (
	"fmt"
	"math"
	"slices"
)

// FloorConfig configures a FloorFilter.
type FloorConfig struct {
	// History is how many of the most recent exchanges (kept or rejected)
	// the floor is taken from. 0: DefaultFloorHistory.
	History int
	// Slack, ns: an exchange is rejected when its round trip is more than
	// max(Slack, SlackFrac*floor) below the floor. It must cover how soft
	// the floor is (the spread of the fastest exchanges: a few us in the
	// lab, far less with hardware stamps). At least 1.
	Slack int64
	// SlackFrac widens the slack on long paths (1/16: 9 us on the lab's
	// 150-us floor). 0: DefaultFloorSlackFrac; must be in [0, 1).
	SlackFrac float64
	// MaxSkew bounds |rate of one clock - rate of the other|: a round trip
	// mixes an interval of each clock, so the held time (LocSend -
	// LocRecv) of a slow responder moves it by up to MaxSkew times that
	// time; the slack grows by as much. In [0, 0.5].
	MaxSkew float64
	// Granularity, ns, is the stamps' read granularity (0: exact stamps).
	// A round trip is the difference of two intervals, each read off one
	// clock, so it is off by less than twice that either way: the slack
	// grows by as much (128 us on the FPS T-40 of Jezequel's section 6,
	// whose clocks tick every 64 us). At least 0.
	Granularity int64
	// LongHistory is how many of the most recent exchanges the long floor
	// (see FloorFilter) is taken from, at least History. 0:
	// DefaultFloorLongFactor x History, at most 65536 (or History if that
	// is more).
	LongHistory int
	// NoOneWay turns off the one-way check (see FloorFilter): only the
	// round trip is judged, as before it.
	NoOneWay bool
}

// DefaultFloorHistory is FloorConfig.History's default: the floor is taken
// from the last 256 exchanges (four of the lab's 60-exchange rounds, a
// long window of Liao's 3-exchange rounds).
const DefaultFloorHistory = 256

// DefaultFloorSlackFrac is FloorConfig.SlackFrac's default.
const DefaultFloorSlackFrac = 1.0 / 16

// floorRankDiv and floorMinRank choose which round trip stands for the
// floor: the k-th shortest of the n recent ones, k = max(floorMinRank,
// n/floorRankDiv) (8 of 256). Fewer than k impossible exchanges in the
// history cannot move the floor, and k exchanges at a genuinely lower
// floor (a shorter route) do: they are then accepted.
const (
	floorRankDiv = 32
	floorMinRank = 3
)

// floorSoftFactor scales the softness of the floor (the 4k-th shortest
// round trip minus the 2k-th) into how far below the k-th shortest an
// exchange may lie when the long floor vouches for it. On a queued path
// (70% cross traffic) the k-th shortest of 256 lay 50-100 us above the
// true floor, and the genuine exchanges below it spread about as the ranks
// above it do.
const floorSoftFactor = 2

// DefaultFloorLongFactor is how many times History the long floor's
// history holds by default (4096 exchanges with the default History).
const DefaultFloorLongFactor = 16

// floorMinSamples is the least history (with the round being checked)
// before anything is rejected: the k-th shortest of a handful of round
// trips says nothing about the floor.
const floorMinSamples = 32

// FloorFilter keeps exchanges whose round trip is impossibly short out of
// an estimator. A round trip cannot be shorter than the path's floor (the
// fastest the network and both stacks can carry a message each way); one
// that is measured shorter has a wrong timestamp (a transmit stamp taken
// late or matched to the wrong datagram, a receive stamp taken early),
// and such an exchange, being the fastest, is exactly the one a
// floor-based estimator (the Hull's bounds, Center's margin line, MinRTT)
// trusts most: one of them pins the estimate for a window's length.
//
// Two floors judge an exchange. The short floor is the k-th shortest round
// trip among the last History exchanges and the round being checked (see
// floorRankDiv): an exchange within the slack (max(Slack, SlackFrac x
// floor) plus the allowances for the hold and the granularity) of it, or
// above it, is kept. On a path whose queues are rarely empty the k-th
// shortest lies far above the true floor (the 3rd percentile of 256 was
// 212-253 us at 70% cross traffic, the floor 154 us), and the genuine
// exchanges below it are the fastest of all, the ones the estimators need
// most. An exchange further below is kept only if it is also not more than
// max(slack, floorSoftFactor x the short floor's softness) below the short
// floor and not more than max(slack, the long floor's softness) below the
// long floor, the floorMinRank-th shortest of the last LongHistory
// exchanges (softness: the 4k-th shortest minus the 2k-th; for the long
// floor the 2m-th minus the m-th, m = floorMinRank). The long history holds
// enough of the path's rare near-floor exchanges that a genuine fast one
// lies within about their spread of the m-th, while a wrong stamp tens of
// us below the true floor lies beyond it; fewer than m wrong stamps in the
// long history cannot move the long floor. On a quiet path both softnesses
// are a few us and the rule is the short floor's alone. Replayed on 60
// host-runs of the lab at 70% cross traffic (raw clocks; docs/lab.md), the
// short floor alone rejected 23-57 genuine exchanges per host-run, among
// them 11-30 of its 30 fastest; both floors 0-4, most in a run's first
// 480; and of the replies there made 30 or 50 us late that fell 15 us or
// more below the run's fastest round trip they refused 96% and 98% (with
// twice the long floor's softness: 26 genuine in all, 83% and 86%).
//
// A round trip within the slack can still hide one impossible direction
// (both stamps of one side shifted together): Filter also judges each
// direction's delay alone, within its round, against the caller's line
// (the one-way check: floor_oneway.go).
//
// Rejected exchanges stay in the history, so a floor that really dropped
// is followed as soon as k exchanges show it. Dropping exchanges only
// removes constraints, so the Hull's bounds stay guaranteed: they contain
// every line the kept exchanges allow, a superset of what all of them
// allow.
//
// A FloorFilter reads no clock; it is not safe for concurrent use.
type FloorFilter struct {
	cfg  FloorConfig
	ring []int64 // the last LongHistory round trips, oldest first until full
	next int     // ring position of the next write once full
	tmp  []int64
}

// floors is what a FloorFilter judges a round by.
type floors struct {
	short, soft    int64 // the short floor and its softness
	long, longSoft int64 // the long floor and its softness
	ok             bool  // false: too little history to judge
}

// NewFloorFilter checks cfg and returns an empty filter.
func NewFloorFilter(cfg FloorConfig) (*FloorFilter, error) {
	if cfg.History == 0 {
		cfg.History = DefaultFloorHistory
	}
	if cfg.SlackFrac == 0 {
		cfg.SlackFrac = DefaultFloorSlackFrac
	}
	if cfg.LongHistory == 0 && cfg.History >= floorMinSamples && cfg.History <= 1<<20 {
		cfg.LongHistory = max(cfg.History, min(DefaultFloorLongFactor*cfg.History, 1<<16))
	}
	switch {
	case cfg.History < floorMinSamples || cfg.History > 1<<20:
		return nil, fmt.Errorf("estimate: FloorConfig.History = %d: must be in [%d, 2^20]", cfg.History, floorMinSamples)
	case cfg.Slack < 1:
		return nil, fmt.Errorf("estimate: FloorConfig.Slack = %d ns: must be >= 1", cfg.Slack)
	case math.IsNaN(cfg.SlackFrac) || cfg.SlackFrac < 0 || cfg.SlackFrac >= 1:
		return nil, fmt.Errorf("estimate: FloorConfig.SlackFrac = %v: must be in [0, 1)", cfg.SlackFrac)
	case math.IsNaN(cfg.MaxSkew) || cfg.MaxSkew < 0 || cfg.MaxSkew > 0.5:
		return nil, fmt.Errorf("estimate: FloorConfig.MaxSkew = %v: must be in [0, 0.5]", cfg.MaxSkew)
	case cfg.Granularity < 0:
		return nil, fmt.Errorf("estimate: FloorConfig.Granularity = %d ns: must be >= 0", cfg.Granularity)
	case cfg.LongHistory < cfg.History || cfg.LongHistory > 1<<22:
		return nil, fmt.Errorf("estimate: FloorConfig.LongHistory = %d: must be in [History = %d, 2^22]", cfg.LongHistory, cfg.History)
	}
	return &FloorFilter{cfg: cfg}, nil
}

// Filter appends to dst the exchanges of round that fit the floors and
// returns it with how many were rejected on their round trip and how many,
// their round trip fitting, on one direction alone (see FloorFilter's
// one-way check; it needs line valid, the caller's current estimate, for
// its skew). Every exchange of the round joins the history afterwards.
// Samples with a negative round trip are left to the caller's own checks
// (they are kept, not counted).
func (f *FloorFilter) Filter(dst, round []Sample, line Mapping) (kept []Sample, rejected, oneWay int) {
	fl := f.floorsWith(round)
	var ow oneWayCheck
	if !f.cfg.NoOneWay {
		ow = f.oneWayFloors(round, line, fl)
	}
	for i, s := range round {
		switch {
		case fl.ok && f.below(s, fl):
			rejected++
		case ow.ok && ow.below(i):
			oneWay++
		default:
			dst = append(dst, s)
		}
	}
	for _, s := range round {
		f.push(s.RTT())
	}
	return dst, rejected, oneWay
}

// Floor returns the short floor the history alone gives (ok false while it
// holds fewer than floorMinSamples exchanges).
func (f *FloorFilter) Floor() (int64, bool) {
	fl := f.floorsWith(nil)
	return fl.short, fl.ok
}

// LongFloor returns the long floor the history alone gives (ok as Floor's).
func (f *FloorFilter) LongFloor() (int64, bool) {
	fl := f.floorsWith(nil)
	return fl.long, fl.ok
}

// Reset forgets the history.
func (f *FloorFilter) Reset() { f.ring, f.next = f.ring[:0], 0 }

// below reports whether s's round trip lies too far below the floors (see
// FloorFilter).
func (f *FloorFilter) below(s Sample, fl floors) bool {
	rtt := s.RTT()
	if rtt < 0 {
		return false
	}
	var hold int64
	if held := s.LocSend - s.LocRecv; held > 0 {
		hold = int64(math.Ceil(f.cfg.MaxSkew * float64(held)))
	}
	slack := max(f.cfg.Slack, int64(f.cfg.SlackFrac*float64(fl.short))) + 2*f.cfg.Granularity + hold
	if rtt >= fl.short-slack {
		return false
	}
	return rtt < fl.short-max(slack, floorSoftFactor*fl.soft+hold) || rtt < fl.long-max(slack, fl.longSoft+hold)
}

// floorsWith computes the floors over the history and round: the short
// one over the newest History round trips, the long one over all that are
// kept (LongHistory).
func (f *FloorFilter) floorsWith(round []Sample) floors {
	n := min(len(f.ring), f.cfg.History) + len(round)
	if n < floorMinSamples {
		return floors{}
	}
	// The short history: the newest History round trips of the ring.
	f.tmp = f.tmp[:0]
	if len(f.ring) < f.cfg.LongHistory {
		f.tmp = append(f.tmp, f.ring[max(0, len(f.ring)-f.cfg.History):]...)
	} else {
		for i := range f.cfg.History {
			f.tmp = append(f.tmp, f.ring[(f.next-1-i+2*len(f.ring))%len(f.ring)])
		}
	}
	for _, s := range round {
		f.tmp = append(f.tmp, s.RTT())
	}
	slices.Sort(f.tmp)
	k := max(floorMinRank, n/floorRankDiv)
	fl := floors{ok: true, short: f.tmp[k-1], soft: f.tmp[min(4*k, n)-1] - f.tmp[min(2*k, n)-1]}
	// The long floor: the 2m shortest of the whole ring and the round.
	var lowBuf [2 * floorMinRank]int64
	low := lowBuf[:0]
	for _, r := range f.ring {
		low = keepSmallest(low, len(lowBuf), r)
	}
	for _, s := range round {
		low = keepSmallest(low, len(lowBuf), s.RTT())
	}
	fl.long, fl.longSoft = low[floorMinRank-1], low[len(low)-1]-low[floorMinRank-1]
	return fl
}

func (f *FloorFilter) push(rtt int64) {
	if len(f.ring) < f.cfg.LongHistory {
		f.ring = append(f.ring, rtt)
		return
	}
	f.ring[f.next] = rtt
	f.next = (f.next + 1) % len(f.ring)
}
