package estimate

import "math"

// The adaptive span (HullConfig.CenterAdapt): the centre line over the
// newest 1/2, 1/4 and 1/8 of the window as well as the whole, chosen by how
// well each predicted the newest rounds.

// Span candidates of HullConfig.CenterAdapt: the whole window and its
// newest 1/2, 1/4 and 1/8. spanMinPoints is the fewest samples per side a
// candidate needs to be judged (fewer: it is skipped); spanDecay is the
// weight of the newest round in each candidate's average error (about the
// last 8 rounds count).
const (
	spanCands     = 4
	spanMinPoints = 6
	spanDecay     = 0.125
	spanGain      = 0.7
	// spanMinHorizons: a shorter candidate is judged (and can be chosen)
	// only when its span is at least this many times the distance to the
	// exchange it predicts and the gap between rounds, i.e. the time its
	// line is extrapolated over. A
	// span of one or two rounds has a slope made of the noise within them
	// (a few us over a second: ppm), which a lucky prediction or two could
	// make look best; extrapolated over a period, it was 15-35 us off in a
	// loaded lab run where the whole window's line stayed within 2 us
	// (docs/lab.md, "Where the error under load came from").
	spanMinHorizons = 4
)

// spanCut is the relative local time from which candidate k fits.
func (h *Hull) spanCut(k int) int64 {
	if k == 0 {
		return math.MinInt64
	}
	return h.newest - (h.newest-h.minX)>>k
}

// scoreSpans updates every candidate's average |error| predicting the
// fastest exchange of a new round (its UP and LOW points, relative), and
// chooses the best candidate for Center.
func (h *Hull) scoreSpans(ups, lows []pt) {
	best := 0
	for i := range ups {
		if ups[i].d+lows[i].d < ups[best].d+lows[best].d { // LOW is negated: the gap is the round trip
			best = i
		}
	}
	u, l := ups[best], lows[best]
	mx := float64(u.x+l.x) / 2
	md := float64(u.d-l.d) / 2
	// The line is read until the next round, about a gap between rounds
	// on: a round the checks asked for a second after the last is no
	// shorter horizon (spanGapOn).
	horizon := max(0, (u.x+l.x)/2-h.newest)
	if spanGapOn {
		horizon = max(horizon, int64(h.roundGap))
	}
	for k := range spanCands {
		c, sk, ok := h.centerOver(k, true)
		if ok && k > 0 && (h.newest-h.minX)>>k < spanMinHorizons*horizon {
			ok = false // too short to extrapolate this far
		}
		if !ok {
			h.spanErr[k] = math.Inf(1)
			continue
		}
		e := math.Abs(c + sk*mx - md)
		if math.IsInf(h.spanErr[k], 1) || !h.spanSeen[k] {
			h.spanErr[k], h.spanSeen[k] = e, true
		} else {
			h.spanErr[k] += spanDecay * (e - h.spanErr[k])
		}
	}
	// A shorter span must predict clearly better (spanGain) to be chosen:
	// its line rests on fewer exchanges, so its noise is larger than its
	// recent errors show.
	sel := 0
	for k := 1; k < spanCands; k++ {
		if h.spanErr[k] < spanGain*h.spanErr[sel] {
			sel = k
		}
	}
	if sel != h.spanSel {
		h.spanSel, h.centerCached = sel, false
	}
}

// centerOver is candidate k's centre line (relative d at x = 0, skew):
// the refined line, cached, or for scoring the max-margin line alone; ok
// is false with fewer than spanMinPoints on either side.
func (h *Hull) centerOver(k int, scoring bool) (c, skew float64, ok bool) {
	src := h
	if k > 0 {
		src = h.cands[k-1]
		if !src.have || len(src.up.pts) < spanMinPoints || len(src.low.pts) < spanMinPoints {
			return 0, 0, false
		}
	}
	if !scoring {
		return src.wholeCenter()
	}
	src.noRefine = true
	c, skew, ok = src.computeCenterLine()
	src.noRefine = false
	return c, skew, ok
}

// spanGapOn: a candidate is judged against the gap between rounds too,
// not only the distance to the round it predicts (tests turn it off to
// compare). Until stop 46 a round the checks asked for 1.2 s after the
// last let the span of those two rounds be judged, and chosen when it
// predicted that round well: its slope, the two rounds' noise over 1.2 s,
// was then read for the period after (in the simulator's link matrix on a
// 10-us bell, seed 14, 2.6 us off 6 s later).
var spanGapOn = true
