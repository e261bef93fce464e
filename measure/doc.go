// Package measure times distributed operations and one-way messages the
// way the papers did, with gclock's global time (seeds 003 and 000).
//
// Every node runs Run with the same Config but its Rank. The nodes agree
// on a first start instant over gclock's UDP layer (transport, OpPut
// messages, each acknowledged and delivered once), then run Config.Runs
// iterations Period apart. Each iteration has two executions of the
// operation (barrier, reduce, allreduce, a page transfer, or a command):
//
//   - scheduled: every node waits until its global time reaches the
//     iteration's instant and starts (the PGCCS way, in software);
//   - barrier-started: every node leaves a dissemination barrier and
//     starts (the MPI_Barrier way).
//
// Each start and end is a Stamp: one CLOCK_MONOTONIC_RAW reading seen
// through the node's own clock and through its daemon's global time
// (gtime.Reader.At), with the bounds. Analyze turns the stamps of all
// nodes into the methods of seed 003, side by side:
//
//   - (a) MethodBarrier: each node's own clock from its barrier exit;
//   - (b) MethodGlobal: global end minus the earliest global start;
//   - (c) MethodWindow: ReproMPI's latest end minus earliest start;
//
// each with the deviation of every node from its execution's mean and,
// given a Truth (the lab knows every clock), the error against the true
// time and whether the bounds hold it. Result.Paper presents them as the
// paper does (figures 10-14): each node's time to the operation's common
// end, its deviation in % of the operation, the shares within the paper's
// +-1.8/0.24/0.04% (PaperBands). Scheduled executions with a node more
// than LateLimitNs late are left out and counted, as ReproMPI leaves them
// out (AnalyzeWith and Options change the limit).
//
// The latency test (OpLatency) sends messages of each size between ranks
// 0 and 1, both ways, and stamps the first datagram's kernel transmit stamp
// and the last datagram's kernel receive stamp in global time (seed 000,
// figure 2).
//
//	stamps, err := measure.Run(ctx, cfg, conn, measure.Clocks{Global: reader.At})
//	measure.WriteStamps(f, stamps)          // one file per node
//	res, err := measure.Analyze(all, nil)   // all nodes' stamps; a Truth in the lab
//	measure.WriteMarkdown(os.Stdout, res, nil)
//	measure.PlotDeviations(res, "dev.png")
//
// `gclock measure` runs a node, `gclock measure report` analyses stamp
// files and `gclock lab measure` runs it all in the lab against the truth;
// docs/measure.md has the figures.
package measure
