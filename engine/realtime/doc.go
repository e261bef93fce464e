// Package realtime is the served time scale as a pure state machine: what
// global time is mapped onto before it is published (Jezequel 5.4). The
// engine always runs on the nodes' raw clocks and its global time g is the
// reference's clock, never slewed by NTP; a Scale maps g onto the served
// scale, estimate and both bounds, and tells the other nodes how.
//
// Two modes:
//
//   - ModeReference (reference-realtime): served(g) = g + O(g), O = the
//     reference's CLOCK_REALTIME minus g. The reference is handed a sample
//     of O every Poll (Sample: value and half-width, measured by its
//     driver) and models it as a line from the last sample: the slope is
//     measured between the last two samples (NTP's frequency correction),
//     the error is the sample's plus MaxSlew per ns of distance from it
//     (NTP may change the slew rate at any time). A sample outside the
//     previous model's bounds (a step, or a faster slew) is counted
//     (Stats.Jumps), logged, and the model restarts from it.
//
//     The reference's CLOCK_REALTIME is not UTC by itself: its driver
//     also reads the clock's own state (SetUpstream, an Upstream: the
//     kernel's adjtimex and chronyd's tracking) with every sample, and
//     the model carries it to the nodes. Apply widens both bounds by the
//     upstream's maxerror (plus UpstreamGrowth per ns since it was read,
//     as the kernel grows it), so that UTC itself is inside, and serves
//     nothing while the upstream is unsynchronised (Upstream().Problem).
//     The driver passes the leap announcement, stratum and reference id
//     on to NTP clients.
//
//   - ModeMeanDrift: served(g) runs at the mean rate of all the cluster's
//     clocks. Nodes report their rate against the reference (Inputs.Rate,
//     see Rate); the reference averages them with its own (1), counting a
//     node that has not reported as rate 1 with error 2*MaxDrift. Served
//     time is a chain of segments A + (g-At)*M, each continuous with the
//     one before, so a new mean never makes a jump. The first segment
//     starts at the reference's CLOCK_REALTIME (one Sample); a new one is
//     made only once the last one is in effect and takes effect Lead after
//     it is made, so every node that polls knows it before it is used: the
//     chain is the same function on every node. Outside what a node knows
//     (before its first known segment, after its horizon) its bounds widen
//     by 4*MaxDrift per ns, the largest possible difference of two means.
//
// Nodes ask the reference with MsgQuery every Poll (carrying the rate
// report and the newest segment known) and get the model or the next
// segment in MsgInfo: a request/reply pair without ACKs, the reply being
// the acknowledgement; a query unanswered within ReplyTimeout is counted
// as failed and the next poll asks again. In reference-realtime a node
// polls Poll/20 after the reference's next sample (the model's At plus
// Poll), so that the model it holds is never much older than a Poll.
// After a change of reference (Retarget, failover.go) a node polls
// Poll/8 apart for a Poll, and the new reference measures its slope over
// spans doubling from SampleEvery to half a Poll.
//
// A Scale is driven like an engine.Node:
//
//	s, err := realtime.New(cfg, logger)
//	s.Tick(local, realtime.Inputs{...}) // Inputs: the node's rate and Earliest
//	rd := s.Ready()
//	if rd.Sample { s.Sample(g, off, halfWidth) } // the reference's CLOCK_REALTIME - g
//	send(rd.Messages)                          // and wait until rd.NextTick or a message:
//	s.Step(msg, local)
//	ok := s.Apply(readings) // at publish: global time onto the served scale
//
// Apply makes no promise of continuity across a new model (an NTP step
// moves served time): the publisher slews (gtime.Update.Continuous), so
// served time never goes backwards and after a CLOCK_REALTIME step of s it
// takes s/max_slew to catch up.
package realtime
