package sim

import (
	"math"
	"math/rand/v2"
)

// maxDelay caps one drawn delay (a pareto tail can be huge) so that truth
// times never overflow; a message this late is as good as lost to the engine.
const maxDelay = int64(60e9)

// load is the state of the load at one truth time: what the phases make of
// the links and of the nodes' scheduling.
type load struct {
	tailScale  float64
	schedScale float64
	loss       float64
	duplicate  float64
	reorder    float64
	phase      int
}

// loadAt returns the load at rel ns after the start of the run.
func (s *Scenario) loadAt(rel int64) load {
	l := load{tailScale: 1, schedScale: 1, loss: s.Links.Loss, duplicate: s.Links.Duplicate, reorder: s.Links.Reorder, phase: -1}
	for i := len(s.Phases) - 1; i >= 0; i-- {
		p := &s.Phases[i]
		if rel < int64(p.Start) {
			continue
		}
		l.phase = i
		l.tailScale, l.schedScale = p.TailScale, p.SchedScale
		if p.Loss != nil {
			l.loss = *p.Loss
		}
		if p.Duplicate != nil {
			l.duplicate = *p.Duplicate
		}
		if p.Reorder != nil {
			l.reorder = *p.Reorder
		}
		if p.BurstLength > 0 && (rel-int64(p.Start))%int64(p.BurstEvery) < int64(p.BurstLength) {
			l.tailScale *= p.BurstScale
			l.schedScale *= p.BurstScale
		}
		break
	}
	return l
}

// mix64 is splitmix64's finaliser: a fixed hash used to give every directed
// link its own minimum delay independent of the order of events.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// linkModel draws one-way delays for every directed link. It holds no state
// per link: a link's fixed minimum delay is a hash of the seed and its ends.
type linkModel struct {
	spec LinkSpec
	seed uint64
}

// minDelay is the fixed minimum one-way delay of the link from -> to.
func (m *linkModel) minDelay(from, to int) int64 {
	d := int64(m.spec.MinDelay)
	if a := int64(m.spec.Asymmetry); a > 0 {
		h := mix64(m.seed ^ mix64(uint64(from)<<32|uint64(uint32(to))))
		d += int64(h % uint64(a+1))
	}
	return d
}

// tail draws the random part of a delay with the given mean.
func (m *linkModel) tail(rng *rand.Rand, mean float64) int64 {
	if mean <= 0 {
		return 0
	}
	var x float64
	switch m.spec.Tail.Dist {
	case "lognormal":
		sg := m.spec.Tail.Sigma
		mu := math.Log(mean) - sg*sg/2
		x = math.Exp(mu + sg*rng.NormFloat64())
	case "pareto":
		// Lomax (pareto shifted to start at 0): mean = xm/(alpha-1).
		a := m.spec.Tail.Alpha
		xm := mean * (a - 1)
		u := 1 - rng.Float64() // (0, 1]
		x = xm * (math.Pow(u, -1/a) - 1)
	default:
		x = mean * rng.ExpFloat64()
	}
	if !(x < float64(maxDelay)) {
		return maxDelay
	}
	return int64(x)
}

// transmit draws what happens to one message sent on from -> to under load
// l: the delays of its copies (none when lost, two when duplicated).
func (m *linkModel) transmit(rng *rand.Rand, from, to int, l load, buf []int64) []int64 {
	buf = buf[:0]
	if l.loss > 0 && rng.Float64() < l.loss {
		return buf
	}
	copies := 1
	if l.duplicate > 0 && rng.Float64() < l.duplicate {
		copies = 2
	}
	base := m.minDelay(from, to)
	mean := float64(m.spec.Tail.Mean) * l.tailScale
	for range copies {
		d := base + m.tail(rng, mean)
		if l.reorder > 0 && rng.Float64() < l.reorder {
			d += int64(m.spec.ReorderDelay)
		}
		buf = append(buf, min(d, maxDelay))
	}
	return buf
}
