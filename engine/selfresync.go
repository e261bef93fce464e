package engine

// selfResync reports Liao's "apply drift rate to Tdiff every
// self_resync_period". The projection itself needs no timer: Read holds the
// offset of the last self-resync instant (selfGrid). So that a simulator
// does not pay one wake-up per node per self period, the event is reported
// at the next Tick or Step after one or more self-resync instants passed,
// stamped with the latest of them, Value = the offset change in ns.
func (n *Node) selfResync(now int64) {
	if n.cfg.ContinuousDrift || n.selfNext == 0 || now < n.selfNext {
		return
	}
	g := n.selfGrid(now)
	off, ok := n.offsetAt(g)
	if ok {
		n.event(g, EvSelfResync, 0, float64(off-n.lastOffset))
		n.lastOffset = off
	}
	n.selfNext = g + n.selfPeriod
}

// selfGrid returns the last self-resync instant at or before x: the
// projection Liao holds between self resyncs.
func (n *Node) selfGrid(x int64) int64 {
	if n.cfg.ContinuousDrift || !n.selfSet || x < n.selfAnchor {
		return x
	}
	return n.selfAnchor + (x-n.selfAnchor)/n.selfPeriod*n.selfPeriod
}
