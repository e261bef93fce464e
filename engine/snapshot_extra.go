package engine

// Tracking is what chronyc tracking and sourcestats show and Snapshot does
// not carry: which source global time follows now, and per source the
// estimator's window and the exchanges' round trips. Durations are local
// nanoseconds.
type Tracking struct {
	// Selected is the source whose estimate global time follows at the
	// instant asked (the one with the narrowest bounds, as Read uses);
	// HasSelected is false on the reference and before any estimate.
	Selected    NodeID
	HasSelected bool
	Sources     []SourceTracking // in the order of Snapshot.Sources
}

// SourceTracking is the node's view of one source's exchanges.
type SourceTracking struct {
	Source NodeID
	// Samples is the number of exchanges in the Hull's window, the samples
	// the guaranteed bounds (and the hull and center estimates) rest on
	// (chronyc sourcestats NP).
	Samples int
	// LastRTT is the round trip of the last accepted round's best exchange
	// (estimate.Sample.RTT); -1 before the first round.
	LastRTT int64
	// ShortestRTT is the shortest such round trip ever; -1 before the
	// first round.
	ShortestRTT int64
}

// windowLen is implemented by estimators that report how many samples
// they keep (estimate.Hull).
type windowLen interface{ Len() int }

// Tracking returns the selected source at local time x and each source's
// window and round trips. Like Snapshot it allocates; it is meant for
// metrics scrapes.
func (n *Node) Tracking(x int64) Tracking {
	var t Tracking
	if s, _, _, _, ok := n.bestSource(x); ok && !n.IsReference() {
		t.Selected, t.HasSelected = s.id, true
	}
	for _, s := range n.sources {
		st := SourceTracking{Source: s.id, LastRTT: -1, ShortestRTT: -1}
		if w, ok := s.hull.(windowLen); ok {
			st.Samples = w.Len()
		}
		if rtt, ok := n.LastRTT(s.id); ok {
			st.LastRTT = rtt
			st.ShortestRTT = s.minRTT
		}
		t.Sources = append(t.Sources, st)
	}
	return t
}

// LastRTT returns the round trip of the best exchange of the last round
// accepted from source id; false before the first round or for a node that
// is not a source. Cheap: the daemon calls it after each round to smooth
// the round trips.
func (n *Node) LastRTT(id NodeID) (int64, bool) {
	i, ok := n.sourceIndex[id]
	if !ok || !n.sources[i].haveBest {
		return 0, false
	}
	return n.sources[i].best.RTT(), true
}
