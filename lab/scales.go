package lab

import "github.com/gclock/gclock/gtime"

// The truth of a read under failover (docs/daemon.md, "Reference
// failover"): global time is, in each election term, the scale its
// reference defines on its own clock (the identity for the first
// reference, the frozen line for a node that took over), which the
// reference publishes on its page (gtime.Scale). Every page read says the
// term it belongs to; the evaluator judges it against that term's scale,
// computed with the emulated clock of the term's reference (which only the
// evaluator knows). The definition itself is public: the daemon under test
// never sees the emulation's parameters.

// termScales holds the scale definitions seen on the reference pages.
type termScales struct {
	defs      map[uint32]termScale
	newest    uint32 // highest term defined
	have      bool
	redefined uint64 // reads of a reference page whose definition differed from the one held for its term
}

// termScale is a term's scale and the host whose clock it is defined on.
type termScale struct {
	host  int
	scale gtime.Scale
}

func newTermScales() *termScales { return &termScales{defs: map[uint32]termScale{}} }

// learn takes the scale a page of host read (its term and, on the term's
// reference, its definition). A new definition of a known term (a
// restarted reference that restarts global time within its term) replaces
// the old one and is counted: the reads of that term are judged against
// the definition that holds when they are read.
func (ts *termScales) learn(host int, s gtime.Scale) {
	if !s.Defined {
		return
	}
	d := termScale{host: host, scale: s}
	if old, ok := ts.defs[s.Term]; ok && old != d {
		ts.redefined++
	}
	ts.defs[s.Term] = d
	if !ts.have || s.Term > ts.newest {
		ts.newest, ts.have = s.Term, true
	}
}

// truth is global time at raw in term's scale and whether term's scale is
// known; if it is not, the newest scale known (host 0's clock before any),
// the best the evaluator has for reads that promise nothing.
func (ts *termScales) truth(term uint32, raw int64, clocks []*hostClock) (int64, bool) {
	d, ok := ts.defs[term]
	if !ok {
		if !ts.have {
			return clocks[0].at(raw), false
		}
		d = ts.defs[ts.newest]
	}
	return d.scale.At(clocks[d.host].at(raw)), ok
}
