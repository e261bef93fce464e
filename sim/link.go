package sim

import "github.com/gclock/gclock/netmodel"

// load is the state of the load at one truth time: what the phases make of
// the links (netmodel.Load) and of the nodes' scheduling.
type load struct {
	netmodel.Load
	schedScale float64
	phase      int
}

// loadAt returns the load at rel ns after the start of the run.
func (s *Scenario) loadAt(rel int64) load {
	l := load{Load: s.Links.Load(), schedScale: 1, phase: -1}
	for i := len(s.Phases) - 1; i >= 0; i-- {
		p := &s.Phases[i]
		if rel < int64(p.Start) {
			continue
		}
		l.phase = i
		l.TailScale, l.schedScale = p.TailScale, p.SchedScale
		if p.Loss != nil {
			l.Loss = *p.Loss
		}
		if p.Duplicate != nil {
			l.Duplicate = *p.Duplicate
		}
		if p.Reorder != nil {
			l.Reorder = *p.Reorder
		}
		if p.BurstLength > 0 && (rel-int64(p.Start))%int64(p.BurstEvery) < int64(p.BurstLength) {
			l.TailScale *= p.BurstScale
			l.schedScale *= p.BurstScale
		}
		break
	}
	return l
}

// mix64 is splitmix64's finaliser: a fixed hash that derives the run's
// seeds from the scenario's.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
