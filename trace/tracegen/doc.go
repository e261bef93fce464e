// Package tracegen writes synthetic traces with a known truth: N processes
// with emulated clocks (clock.Emulated: offset, drift, random-walk wander,
// read jitter) run regions and exchange messages over a network with a
// minimum latency and a long-tailed delay; sync sessions with the reference
// (process 0) are run at the start, at the end and on demand in between,
// exactly as trace.Recorder records them; a synthetic daemon publishes a
// local->global mapping per process periodically, with a configurable
// error. For every event, Generate returns the truth: the reference clock's
// ideal (jitter-free) reading at the true time of the event, which is what
// a perfect correction would produce.
//
// It is the proof of package trace: `gclock trace demo` generates, merges
// with each correction method, and reports the error of every corrected
// timestamp against this truth and the causality violations.
package tracegen
