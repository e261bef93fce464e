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
//     the tightest source's composition (Compose, MapInterval, Intersect).
//
// Read returns Est, the point estimate clamped into [Earliest, Latest],
// which come from the Hull and from the last exchange's own bound widened
// by MaxDrift and MaxWander, so they are never tighter than known. Mono
// never decreases: it runs at the estimated rate, slews toward Est at most
// at MaxSlewRate, and steps forward only to stay at or above Earliest.
// Estimate is Read without moving Mono.
package engine
