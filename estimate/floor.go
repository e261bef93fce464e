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
// The floor is the k-th shortest round trip among the last History
// exchanges and the round being checked (see floorRankDiv); an exchange
// more than the slack below it is rejected. Rejected exchanges stay in the
// history, so a floor that really dropped is followed as soon as k
// exchanges show it. Dropping exchanges only removes constraints, so the
// Hull's bounds stay guaranteed: they contain every line the kept
// exchanges allow, a superset of what all of them allow.
//
// A FloorFilter reads no clock; it is not safe for concurrent use.
type FloorFilter struct {
	cfg  FloorConfig
	ring []int64 // recent round trips, oldest first once full
	next int     // ring position of the next write once full
	tmp  []int64
}

// NewFloorFilter checks cfg and returns an empty filter.
func NewFloorFilter(cfg FloorConfig) (*FloorFilter, error) {
	if cfg.History == 0 {
		cfg.History = DefaultFloorHistory
	}
	if cfg.SlackFrac == 0 {
		cfg.SlackFrac = DefaultFloorSlackFrac
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
	}
	return &FloorFilter{cfg: cfg, ring: make([]int64, 0, cfg.History)}, nil
}

// Filter appends to dst the exchanges of round whose round trip fits the
// floor and returns it with the number rejected. Every exchange of the
// round joins the history afterwards. Samples with a negative round trip
// are left to the caller's own checks (they are kept, not counted).
func (f *FloorFilter) Filter(dst, round []Sample) (kept []Sample, rejected int) {
	floor, ok := f.floorWith(round)
	for _, s := range round {
		if ok && f.below(s, floor) {
			rejected++
		} else {
			dst = append(dst, s)
		}
	}
	for _, s := range round {
		f.push(s.RTT())
	}
	return dst, rejected
}

// Floor returns the floor the history alone gives (ok false while it holds
// fewer than floorMinSamples exchanges).
func (f *FloorFilter) Floor() (int64, bool) { return f.floorWith(nil) }

// Reset forgets the history.
func (f *FloorFilter) Reset() { f.ring, f.next = f.ring[:0], 0 }

// below reports whether s's round trip lies more than the slack below floor.
func (f *FloorFilter) below(s Sample, floor int64) bool {
	rtt := s.RTT()
	if rtt < 0 {
		return false
	}
	slack := max(f.cfg.Slack, int64(f.cfg.SlackFrac*float64(floor)))
	if held := s.LocSend - s.LocRecv; held > 0 {
		slack += int64(math.Ceil(f.cfg.MaxSkew * float64(held)))
	}
	return rtt < floor-slack
}

// floorWith is the k-th shortest round trip of the history and round.
func (f *FloorFilter) floorWith(round []Sample) (int64, bool) {
	n := len(f.ring) + len(round)
	if n < floorMinSamples {
		return 0, false
	}
	f.tmp = append(f.tmp[:0], f.ring...)
	for _, s := range round {
		f.tmp = append(f.tmp, s.RTT())
	}
	slices.Sort(f.tmp)
	k := max(floorMinRank, n/floorRankDiv)
	return f.tmp[k-1], true
}

func (f *FloorFilter) push(rtt int64) {
	if len(f.ring) < f.cfg.History {
		f.ring = append(f.ring, rtt)
		return
	}
	f.ring[f.next] = rtt
	f.next = (f.next + 1) % f.cfg.History
}
