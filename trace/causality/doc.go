// Package causality checks and repairs the message order of a merged trace.
//
// Checker counts, per pair of processes, the messages received before they
// were sent: once on the raw local timestamps (what a viewer shows without
// correction) and once on the corrected global timestamps. It streams: its
// memory is the messages in flight (one end seen, the other not yet).
//
// CLC is the controlled logical clock of Rabenseifner, extended to parallel
// replay by Becker, Rabenseifner and Wolf: it replays each process's events
// in order, and moves a receive that would come earlier than its send plus
// a minimum latency to just after it; every later event of that process
// moves with it (gamma = 1 keeps every local interval; gamma < 1 lets the
// shift decay back towards the corrected times). With Amortize, a jump is
// also spread backwards over the events before the receive (backward
// amortization), as far as their sends allow. The raw timestamps are
// kept (format.Merged.Raw) and Moved reports, per process, how many events
// moved and by how much: corrections are never silent. CLC works on a
// trace held in memory (its replay needs random access); the merge without
// CLC streams.
package causality
