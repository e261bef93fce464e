package estimate

import (
	"math"
	"slices"
)

// The checks' trend (issue 28, stop 44). A check exchange's interval
// (Check: its midpoint give or take half its round trip's excess over the
// fastest) is tens of us wide on a bell or a uniform link, so a run of
// checks beyond the line (CheckTally) found a 10-ppm jump there only 2-3 s
// after it, 20-30 us on. The checks' midpoints together say more: each
// is the line's error plus the link's midpoint noise (7 us on a 10-us
// bell), and after a jump they drift away from where they lay, linearly.
//
// trend tests the checks since the last round for that drift: each
// midpoint in units of the midpoints' spread, less where the checks
// before rounds that held lay (their median; breakState.base), clipped to
// ±trendClip (a floor's long tail must not weigh as a drift), and the
// generalized likelihood ratio of a hinge: zero until some check, then
// growing linearly with time. Its z is the largest over the hinge's place
// of sum(a_j y_j) / sqrt(sum(a_j^2)), a_j the time since the hinge, y_j
// the standardized midpoints. Beyond trendZ on one side the line broke on
// that side.
//
// A load burst widens the delays, and so the midpoints' spread: against
// the baseline's spread, a burst on a bell looks like a drift, either way
// (stop 42's trend test, against the rounds' spread alone, fired in the
// simulator's bursts; so did this one in TestCheckTrend's, on every
// link). So each hinge's z is studentized: divided by the checks' own
// spread about the hinge's line since the hinge (fitted to the unclipped
// midpoints, in units of the baseline's spread) where that is more than 1.
// A jump moves the checks along the line and leaves their spread; a burst
// widens it. The baseline's spread is 1.4826 times the median absolute
// deviation of its midpoints. A hinge placed late has few checks after it,
// whose spread about its line says little (a few of a burst's checks on
// one side fired the test); so each z is also divided by the newest
// checks' own spread, from their successive differences (clipped, at
// least trendLocal of them, since the hinge or before), where that is
// more than the baseline's: a jump moves the checks slowly against their
// noise and leaves those differences as they were (stop 45).
const (
	// trendBase: the newest checks before rounds that held kept as the
	// baseline; trendMinBase of them before the test is run.
	trendBase    = 128
	trendMinBase = 32
	// trendMinChecks: checks since the last round before the test is run.
	trendMinChecks = 4
	// trendClip: a standardized midpoint counts at most this much.
	trendClip = 2.5
	// trendZ: the z beyond which the checks say the line broke. 4.5 until
	// stop 45, where a steady clock's checks never fired in TestCheckTrend;
	// but on a bell the error the trend finds a jump at is the p99 under
	// it (z grows as the 3/2 power of the time since the jump: 1.3-1.5 s
	// at 10 ppm on a 10-us bell, 10 checks a second). At 3.75, with 20
	// checks a second, 1.0 s; the test then says the line broke in a few
	// steady periods in a hundred (trendFires in the tests), and a false
	// alarm costs a round, judged as any other: a suspect needs its
	// location beyond 3 times its spread on the alarm's side (located),
	// a break the next round beyond too.
	trendZ = 3.75
)

// trendLocal: the newest checks' own spread (trend) is read from at
// least this many (0.8 s of checks at 20 a second).
const trendLocal = 16

// trendLocalOn: the newest checks' own spread studentizes the test too
// (tests turn it off to compare).
var trendLocalOn = true

// trend is the side (1: the source's time ahead of the line, -1: behind;
// 0: none) on which the checks since the last round drift away from where
// the checks before rounds that held lay, and the test's z (signed).
func (b *breakState) trend() (side int, z float64) {
	cs := b.checks
	if len(b.base) < trendMinBase || len(cs) < trendMinChecks {
		return 0, 0
	}
	loc, s := median(slices.Clone(b.base)), madScale(b.base)
	if !(s > 0) || math.IsNaN(loc) || math.IsInf(s, 0) || math.IsInf(loc, 0) {
		return 0, 0
	}
	y, raw := make([]float64, len(cs)), make([]float64, len(cs))
	for i, c := range cs {
		raw[i] = (c.mid - loc) / s
		y[i] = max(-trendClip, min(trendClip, raw[i]))
	}
	// diffs[w]: the squared successive differences of the clipped
	// midpoints from check w on (for the newest checks' own spread).
	diffs := make([]float64, len(cs)+1)
	for j := len(cs) - 1; j > 0; j-- {
		d := y[j] - y[j-1]
		diffs[j-1] = diffs[j] + d*d
	}
	for k := range cs {
		// The hinge at the check before k (for the first, as far before
		// it as the second is after: a jump between the round and the
		// first check).
		var tj float64
		switch {
		case k > 0:
			tj = cs[k-1].x
		case len(cs) > 1:
			tj = cs[0].x - (cs[1].x - cs[0].x)
		}
		var sy, saa, sr, srr float64
		for j := k; j < len(cs); j++ {
			a := cs[j].x - tj
			sy += a * y[j]
			saa += a * a
			sr += a * raw[j]
			srr += raw[j] * raw[j]
		}
		if !(saa > 0) {
			continue
		}
		v := sy / math.Sqrt(saa)
		if m := len(cs) - k; m > 1 {
			// Studentized: where the checks since the hinge spread about
			// it (unclipped) more than the baseline's, as in a burst,
			// they weigh less.
			v /= math.Sqrt(max(1, (srr-sr*sr/saa)/float64(m-1)))
		}
		if trendLocalOn {
			// And where the newest checks (since the hinge, at least
			// trendLocal of them) differ from each other more than the
			// baseline's: a burst's, whatever the line. A jump moves
			// them 0.5 us a check at 10 ppm and 20 checks a second,
			// against a 10-us bell's 7.
			w := max(0, min(k, len(cs)-trendLocal))
			if nd := len(cs) - w - 1; nd > 0 {
				v /= math.Sqrt(max(1, diffs[w]/float64(nd)/2))
			}
		}
		if math.Abs(v) > math.Abs(z) {
			z = v
		}
	}
	switch {
	case z > trendZ:
		return 1, z
	case z < -trendZ:
		return -1, z
	}
	return 0, z
}

// keepBase adds the checks judged before a round that held to the
// baseline (their midpoints; the newest trendBase).
func (b *breakState) keepBase(checks []checkPt) {
	for _, c := range checks {
		if !math.IsNaN(c.mid) && !math.IsInf(c.mid, 0) {
			b.base = append(b.base, c.mid)
		}
	}
	b.base = keepNewest(b.base, trendBase)
}

// CheckTrend says whether the check exchanges judged since the last round
// (Check) drift away from the line: side 1 or -1 when they do beyond
// trendZ (the source's time ahead of the line or behind it), else 0, and
// the test's z. The engine asks after each check that its CheckTally did
// not already find beyond the line. 0 while a suspect is held (its checks
// are not kept), where the hull finds no breaks, and before trendMinBase
// checks have been judged before rounds that held.
func (h *Hull) CheckTrend() (side int, z float64) {
	if !breakOn || !h.cfg.CenterBreaks || !h.cfg.Center || h.brk.suspect {
		return 0, 0
	}
	return h.brk.trend()
}
