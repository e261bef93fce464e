// Package engine is gclock's synchronization state machine: one Node per
// cluster node, Liao, Martonosi and Clark's adaptive algorithm (SIGMETRICS
// 1999, Figure 1) composed over any topology with Jezequel's algorithm A3
// (INRIA RR-1177, section 5).
//
// A Node is pure: it reads no clock, opens no socket, starts no goroutine
// and draws no random number. A driver (the simulator, the UDP daemon) feeds
// it local clock readings and messages and carries its output:
//
//	n, err := engine.New(cfg, logger) // cfg from DefaultConfig + topology.Roles
//	n.Tick(clock.Now())               // once to start
//	for {
//		rd := n.Ready()          // messages to send, events, next timer
//		send(rd.Messages)
//		// wait for a message or until the local clock reaches rd.NextTick:
//		n.Step(msg, recvLocal) // or n.Tick(now)
//	}
//	t := n.Read(clock.Now()) // global time: Est, [Earliest, Latest], Mono
//
// The daemon drives a Member, the same loop one level up: a Member is a
// node of a cluster with a reference order (MemberConfig.Order), and it
// wraps the Node of the current reference, rebuilt with that reference's
// roles (MemberConfig.Roles) when the reference changes. Like a Node it is
// pure, and it is driven the same way:
//
//	m, err := engine.NewMember(engine.MemberConfig{Engine: cfg, Order: order,
//		FailoverAfter: 3 * time.Second, Roles: roles}, logger)
//	m.Tick(clock.Now()) // starts: asks the others for their term (discovery)
//	for {
//		rd := m.Ready()  // engine and status messages, events, next timer
//		send(rd.Messages)
//		// wait for a message or for rd.NextTick (the daemon also ticks
//		// at least every second):
//		if m.CheckMessage(msg, recvLocal) == nil {
//			m.Step(msg, recvLocal)
//		} // or m.Tick(now)
//	}
//	t := m.Read(clock.Now())
//
// Tick runs the member's own timers (discovery, the heartbeats of a
// reference, a follower's watch of the reference and, after
// FailoverAfter of silence, the failover walk and the election), then
// the Node's. Step answers status messages (MsgStatusQuery,
// MsgStatusReply: heartbeats, votes, questions) itself, refuses an engine
// message of an older term (StaleTerm) and tells its sender the newer
// one, and passes the rest to the Node. Ready gathers both: the Node's
// messages carry the member's term, and NextTick is the earliest timer of
// the two. Read says StatusSynced only under the lease a majority renews,
// and while a new reference's Node acquires, it reads through the
// previous one (stale). TxStamp goes through to the current Node;
// Member.Node gives that Node for snapshots and priors, on the clock
// Member.In maps the local clock to. With an order of one node there is
// no election: the Member is its Node. ExampleMember runs a failover;
// docs/daemon.md ("Reference failover") gives the rules.
//
// What a node does (names in capitals are Liao's):
//
//   - As a source, for each child, every global period of that child: up to
//     MaxConcurrentRounds rounds at a time, PingsPerRound probes one after
//     the other (the next leaves when the reply arrives; a lost one is
//     retried after max(ProbeTimeout, RetryRTTs x smoothed RTT); a reply
//     whose Seq or Round is not the outstanding one is ignored). If the
//     round's shortest RTT exceeds the shortest ever by more than
//     NETWORK_LATENCY_ERROR_THRESH the pings are done once more. Then a
//     MsgTimeDiff carries all the round's exchanges (in the child's
//     orientation) and the source's own local->global mapping.
//   - Error reports from a child add up; above ERROR_THRESH the child's
//     period halves (not below MinGlobalPeriod) and the sum restarts. A
//     round that drew no report by the time the next one starts is a
//     success; SUCCESS_THRESH successes in a row double the period (not
//     above MaxGlobalPeriod). Without Adaptive the period never changes.
//     InitialGlobalPeriod may be below MinGlobalPeriod: a convergence
//     ramp, the period doubling every SUCCESS_THRESH rounds, quiet or not,
//     until it reaches MinGlobalPeriod, below which halvings never take it
//     again (a traffic ceiling for the steady state).
//   - As a child, a MsgTimeDiff feeds the round to a Hull (guaranteed bounds)
//     and to the selected estimator (the point estimate). The best
//     exchange's offset is compared with the offset the node projected
//     before the round; beyond DIFFERENCE_THRESH a MsgErrReport goes back
//     with err/DIFFERENCE_THRESH.
//   - Self resync: the projected offset is re-evaluated with the drift once
//     per self period and held in between (unless ContinuousDrift); when
//     the node's drift against global time exceeds LargeDrift, the self
//     period halves, down to MinSelfPeriod.
//   - Composition (Jezequel A3): a node's global time is its source's
//     mapping applied to its own local->source estimate. With several
//     sources the intervals are intersected at read time, and children get
//     the tightest source's composition (estimate.Compose,
//     estimate.MapInterval, estimate.Intersect).
//
// Read returns Est, the point estimate clamped into [Earliest, Latest],
// which come from the Hull and from the last exchange's own bound widened
// by MaxDrift and MaxWander, so they are never tighter than known. Mono
// never decreases: it runs at the estimated rate, slews toward Est at most
// at MaxSlewRate, and steps forward only to stay at or above Earliest.
// Estimate is Read without moving Mono.
//
// Where things are: node.go (Node, Tick, Step, Ready), rounds.go and
// periods.go (the source side: rounds, the adaptive period), timers.go,
// source.go, silence.go and selfresync.go (the child side), bounds.go,
// trust.go and read.go (global time through the sources, and reading
// it), prior.go, stamps.go, validate_msg.go; member.go (Member and its
// loop, the failover walk), election.go, lease.go, discovery.go,
// status.go, view.go.
package engine
