// Package otf2 writes a merged gclock trace as an OTF2 archive, the format
// Score-P writes and Vampir, Scalasca, Extra-P and otf2-print read.
//
// Most programs do:
//
//	w, err := otf2.Create(dir, otf2.Options{Metadata: kv, Bound: bound})
//	w.SetNames(names)                     // the traces' string tables
//	w.SetProcess(proc, "rank 3", host)    // every process, before any event
//	for each merged event m { err = w.Write(&m) } // in global time order
//	err = w.Close()                       // definitions, anchor file
//
// What goes where:
//   - Timestamps are ns of global time (timer resolution 1e9). The clock
//     properties' global offset is the first event's time and the trace
//     length the span to the last; a trace that starts before global time 0
//     is shifted so that it starts at 0, and the shift is written as the
//     archive property GCLOCK::ORIGIN_NS.
//   - One location group (an MPI rank, in rank order of the process numbers)
//     per process, under a system tree node per host; one location per
//     track (thread) of a process, with ID proc<<16 | track.
//   - Enter and Leave of every region. Regions named after MPI calls get
//     the MPI paradigm and the role OTF2 gives them (point-to-point,
//     barrier, one-to-all, ...); collectives also get MpiCollectiveBegin
//     and MpiCollectiveEnd with the collective operation on MPI_COMM_WORLD
//     (gclock's trace records neither the root nor the sizes of a
//     collective: root is OTF2_UNDEFINED_UINT32, sizes 0).
//   - Send and Recv become MpiSend and MpiRecv on MPI_COMM_WORLD with the
//     message size. The trace keeps the message id, not the MPI tag: the
//     tag written is the id's upper 32 bits (the C tracer puts a hash of
//     communicator and tag there, so messages of one tag stay together),
//     and the id itself is the attribute gclock::message_id. The
//     dependencies the C tracer records for collectives (message ids with
//     bit 63 set) are not messages and are left out.
//   - Instant events are regions of zero length (role artificial); counters
//     are asynchronous int64 metrics, one metric per counter name.
//   - Every event carries the attribute gclock::local_ns (the raw local
//     timestamp) and, where the correction knows one (the daemon's
//     mappings), gclock::bound_ns: the half-width of the bound on the
//     event's global time.
//
// Writing the archive needs libotf2 (Debian: libotf2-trace-dev) and a
// build with `-tags otf2` and cgo; without it Create returns ErrNotBuilt and
// the rest of gclock stays pure Go. The translation itself is pure Go and
// tested on every build.
package otf2
