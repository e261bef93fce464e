// Package sim is gclock's discrete-event simulator: it drives one engine per
// node over emulated clocks and links, and measures how well every node
// knows global time (the reference node's clock).
//
// Most callers want three calls:
//
//	sc := sim.DefaultScenario()           // or sim.Shipped("liao-fig3"), sim.Parse(yaml, "file.yaml")
//	res, err := sim.Run(ctx, sc, sim.Options{Logger: logger})
//	sim.WriteTable(os.Stdout, res)        // or sim.WriteJSON, sim.PlotFile
//
// # The model
//
// Truth time is an int64 nanosecond count starting at Origin. Events (a
// node's timer, a message arriving, an evaluation) sit in a heap ordered by
// truth time and then by insertion, so a run is a pure function of its
// scenario: every random source is seeded from Scenario.Seed.
//
// Each node has an emulated clock (package clock: offset, drift, drift steps,
// random-walk wander, granularity, read jitter) and scheduling noise where
// timestamps are taken: a received message is stamped late, a sent message
// leaves late, a timer fires late (exponential, mean Clocks.SchedNoise).
// Late receive stamps and late departures never break causality, so the
// engine's guaranteed bounds must still hold.
//
// Each directed link (package netmodel) has a fixed minimum delay (asymmetric: MinDelay plus a
// per-link draw up to Asymmetry), a random tail (exponential, lognormal or
// pareto with a given mean), loss, duplication and reordering (a share of
// messages held back). Phases change the load over time: they scale the
// tails and the scheduling noise, add periodic bursts, or override the loss
// (loss 1 cuts all links, to let clocks run free after an acquisition).
//
// The engine asks for timers in local time (Ready.NextTick); the simulator
// converts them to truth time with the clock's TruthAt.
//
// # The evaluator
//
// Only the evaluator looks at clock parameters. Every Eval.Interval of truth
// time it reads every node's engine at the node's own clock reading and
// compares with the truth, the reference's ideal clock at that instant:
// error = Est - truth, bound coverage (truth in [Earliest, Latest]), bound
// width, Mono's error, by package eval. Statistics are streaming (Welford
// mean and variance, maxima); p50/p99 are gonum's empirical quantiles over
// every error while a run has at most 2^21 evaluations (nodes times reads
// after the warm-up), and beyond that come from eval's log-linear histogram
// (relative resolution 1/32, reported at bucket middles: within 1.6%), so
// memory does not grow with the length of a long run.
//
// # Scenarios
//
// Scenarios are YAML; unknown fields are rejected and every error names the
// field path and the line. Shipped scenarios are embedded (Names, Shipped):
// the default, and one per paper reproduction (Liao Table 1 and Fig. 3,
// Jezequel section 6, Intel's post-mortem correction), which Report runs and
// prints beside the paper's numbers.
package sim
