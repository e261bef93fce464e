// Package timeline is the whole of `gclock merge` as a library: it reads
// per-process traces, corrects each onto global time (package correct),
// merges them into one stream (package merge), counts causality violations
// before and after correction (package causality), optionally applies the
// controlled logical clock, writes Chrome JSON (package chrome) and a
// compact binary merged trace (format.KindMerged chunks), and, when the
// truth is known (package tracegen), measures the error of every corrected
// timestamp.
//
// Each input is read twice: a first pass collects what the correction needs
// (sessions, daemon mappings, names; events only counted), a second pass
// streams the events through the merge. Without CLC, memory does not grow
// with the length of the traces (truth evaluation aside, which keeps one
// int64 per event for the percentiles); CLC holds the merged trace in
// memory.
package timeline
