package estimate

import (
	"math"
	"slices"

	"github.com/gclock/gclock/internal/satmath"
)

// The one-way check (FloorFilter.Filter): a round trip within the floor's
// slack can still hide one impossible direction. In a links bench (pareto
// seed 3, docs/estimators.md, "The links bench of the final build") one
// exchange's reply came back 20.5 us faster than any other of the run and
// its request went 18 us slower: two stamps of one side about 19 us off
// together (the child's late, or the reference's early). Its round trip,
// 2 us under the two directions' floors together, passed the round-trip
// floor, and the floor line rested on the reply's impossible delay: 12.4
// us off for 8 s.
//
// So each direction is judged alone, within its round: the delay of the
// source's message (LOW: f(LocRecv) - SrcSend) and of the local one (UP:
// SrcRecv - f(LocSend)), f the caller's current line. Only the line's skew
// is used: its offset is the same for the whole round, so it cancels in the
// comparison with the round's own k-th shortest delay that way (k as the
// round-trip floor's rank, 7 of a round of 240). Whatever the line's error
// (a drift step, a clock step, the first rounds), a shift common to the
// round moves the floor with it; a wrong skew tilts the round by at most
// the line's SkewErr times the round's span, which is added to the slack.
// An exchange is refused when one of its directions lies further below the
// k-th than max(slack, oneWaySoftFactor x the spread of the lowest ranks:
// the 4k-th minus the k-th), the slack being max(Slack, SlackFrac x half
// the round-trip floor) plus twice the granularity plus that tilt: a lone
// wrong stamp lies tens of us below the k-th, a genuine fast exchange
// within a few times the spread of the ranks above it. Rounds of fewer than
// floorMinSamples exchanges (Liao's three) are not judged one way: a
// handful of delays says nothing about a floor, and judging them against
// the history would need the line's offset, which a drift change moves
// round after round.

// oneWaySoftFactor scales the spread of a direction's lowest delays (the
// 4k-th minus the k-th of its round) into how far below the k-th a genuine
// delay may lie. A bell has no floor: of 240 normal delays the k-th (7th)
// lies 1.9 standard deviations below the mean and the 28th 1.2, so 4
// spreads reach 4.7 below the mean, below which a round of 240 normal
// delays has one about 3 times in 10000 rounds. Replayed on the kept bench
// runs (`gclock lab replay`; the links benches k, n, o, q, r and t, 18 runs
// of each class, and the default link's benches p, r and t, 9 of each
// profile: 486 host-runs), the check
// refused pareto seed 3's impossible reply and 6 other exchanges (3 on
// normal 10 us, 2 bimodal, 1 normal 3 us), none on cross70's queues. On
// benches q, r and t, 2 spreads refused 112 (bimodal and normal 10 us),
// and twice the 4k-th minus the 2k-th (the round-trip floor's softness)
// 467, trimming the bells' genuine lower tail.
const oneWaySoftFactor = 4

// oneWayCheck is what Filter judges a round's directions by.
type oneWayCheck struct {
	down, up       []int64 // per exchange of the round, each direction's delay less a constant shared by the round
	judged         []bool  // false: left alone (negative round trip, stamps too far apart)
	minDown, minUp int64   // the least delay each direction may show
	ok             bool
}

// oneWaySpan bounds how far (ns) a round's stamps may lie from its first
// exchange's to be judged one way: 2^50 ns, 13 days, far beyond any round,
// and small enough that a skew times it is exact in float64 to the ns.
const oneWaySpan = 1 << 50

// oneWayFloors computes the round's one-way floors (ok false when the
// round is not judged one way).
func (f *FloorFilter) oneWayFloors(round []Sample, line Mapping, fl floors) oneWayCheck {
	if !fl.ok || !line.Valid || len(round) < floorMinSamples || math.IsNaN(line.Skew) || math.Abs(line.Skew) > 0.5 {
		return oneWayCheck{}
	}
	c := oneWayCheck{down: make([]int64, len(round)), up: make([]int64, len(round)), judged: make([]bool, len(round))}
	x0, y0 := round[0].LocRecv, round[0].SrcSend
	near := func(v, o int64) (int64, bool) {
		d, ok := satmath.SubChecked(v, o)
		return d, ok && d <= oneWaySpan && d >= -oneWaySpan // not wrapped, and near enough to judge
	}
	loX, hiX := int64(0), int64(0)
	var downs, ups []int64
	for i, s := range round {
		if s.RTT() < 0 {
			continue
		}
		xr, ok1 := near(s.LocRecv, x0)
		xs, ok2 := near(s.LocSend, x0)
		ys, ok3 := near(s.SrcSend, y0)
		yr, ok4 := near(s.SrcRecv, y0)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			continue
		}
		c.down[i] = xr - ys + int64(math.Round(line.Skew*float64(xr)))
		c.up[i] = yr - xs - int64(math.Round(line.Skew*float64(xs)))
		c.judged[i] = true
		downs, ups = append(downs, c.down[i]), append(ups, c.up[i])
		loX, hiX = min(loX, xr, xs), max(hiX, xr, xs)
	}
	n := len(downs)
	if n < floorMinSamples {
		return oneWayCheck{}
	}
	tilt := line.SkewErr * float64(hiX-loX)
	if math.IsNaN(tilt) || tilt > float64(fl.short) {
		return oneWayCheck{} // the line's skew is too loose to tell one direction from the other
	}
	slack := max(f.cfg.Slack, int64(f.cfg.SlackFrac*float64(fl.short)/2)) + 2*f.cfg.Granularity + int64(math.Ceil(tilt))
	k := max(floorMinRank, n/floorRankDiv)
	least := func(v []int64) int64 {
		slices.Sort(v)
		return v[k-1] - max(slack, oneWaySoftFactor*(v[min(4*k, n)-1]-v[k-1]))
	}
	c.minDown, c.minUp, c.ok = least(downs), least(ups), true
	return c
}

// below reports whether exchange i of the round has a direction below its
// floor.
func (c *oneWayCheck) below(i int) bool {
	return c.judged[i] && (c.down[i] < c.minDown || c.up[i] < c.minUp)
}
