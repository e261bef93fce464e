// Package correct maps each process's local timestamps onto global time
// (the reference process's clock) from what its trace recorded, as seed
// 001 (Intel Trace Collector) does post mortem:
//
//   - Linear: with two sync sessions (start and end), a line fitted by
//     regression over all exchanges after dropping the 10% with the highest
//     round trip (estimate.FitLine).
//   - Spline: with three or more sessions (Timesync, VT_timesync), each
//     session is condensed to one point (estimate.Condense) and a monotone
//     spline with a continuous first derivative goes through the points
//     (estimate.NewSpline, Fritsch-Butland).
//   - Daemon: the local->global mappings the sync daemon published during
//     the run, recorded in the trace (RecordMapping): piecewise, each from
//     its From time on.
//   - Offset: a single session gives an offset only (no drift).
//   - None: the reference's own clock, or no sync data at all (reported).
//
// Auto picks daemon, then spline, linear, offset, in that order of
// preference, and Choice says which method each process got and why.
//
// The daemon's mappings and the session-based corrections (SessionMapper)
// are Bounders: the sessions' bound is the farthest any line through every
// exchange (estimate.Hull) lies from the correction, so it widens where the
// correction extrapolates beyond the sessions, and there is none when the
// exchanges fit no single rate (Choice.Bounded, Choice.NoBound).
// Processes flagged SYNCED-HOST without sessions of their own borrow the
// sessions of a process on the same host.
package correct
