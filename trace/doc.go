// Package trace records events of a program with local timestamps, in
// gclock's chunked binary format (package trace/format), together with the
// sync sessions that later let `gclock merge` put every process on one
// timeline (seed 001, Intel Trace Collector).
//
// Most programs do:
//
//	rec, err := trace.New(f, trace.Config{Proc: rank, Name: "rank3",
//		Clock: clock.Raw{}, Prober: p}, logger) // runs the start sync session
//	tr := rec.Track(0)                                // one per goroutine
//	compute := rec.Name("compute")
//	tr.Enter(compute)
//	tr.Send(peer, msgID, size)
//	tr.Leave(compute)
//	rec.Timesync()                                    // optional, VT_timesync
//	err = rec.Close()                                 // end sync session, flush
//
// The hot path (Enter, Leave, Instant, Counter, Send, Recv) takes a mutex,
// reads the clock, and appends a fixed-size record to the current chunk; it
// never allocates. Stamping under the lock keeps the file in local time
// order across goroutines, which the merge relies on. A full chunk is
// written with one Write call; write errors are kept and returned by Flush
// and Close.
//
// Sync sessions: a Prober performs one exchange with the reference (or the
// daemon) and returns an estimate.Sample in this process's orientation. A
// session runs up to SyncMaxMessages exchanges or until SyncMaxDuration has
// passed on the local clock, whichever comes first, and is stored raw in the
// trace. The reference process has no Prober. Processes on one host that
// share the host's clock set SyncedHost and record no sessions; the merge
// uses the sessions of a process of the same Host (seed 001's SYNCED-HOST).
//
// Daemon mappings: when a sync daemon runs, RecordMapping stores the
// mapping it publishes (local -> global, estimate.Mapping) with the local
// time from which it applies; `gclock merge -method daemon` uses them.
package trace
