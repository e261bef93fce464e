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
//     archive property GCLOCK::ORIGIN_NS. The clock properties' realtime
//     date (Defs.Realtime: UTC ns of the global offset) comes from the C
//     tracer's realtime pair ("realtime R at local L", name id 1<<57|1) of
//     the first process that has one.
//   - ClockOffset local definitions at each location's first and last
//     event, offset 0 (readers add offsets to the timestamps, which are
//     global already) and the bound's half-width as the standard deviation
//     (LocationDef.ClockOffsets). The mapping at those events (global -
//     local) is written as the location properties GCLOCK::FIRST_LOCAL_NS,
//     GCLOCK::FIRST_OFFSET_NS, GCLOCK::LAST_LOCAL_NS and
//     GCLOCK::LAST_OFFSET_NS (LocationDef's offsets).
//   - One location group (an MPI rank, in rank order of the process numbers)
//     per process, under a system tree node per host (named by the C
//     tracer's gethostname, name id 1<<57; else "host N"); one location per
//     track (thread) of a process, with ID proc<<16 | track.
//   - Enter and Leave of every region. Regions named after MPI calls get
//     the MPI paradigm and the role OTF2 gives them (point-to-point,
//     barrier, one-to-all, ...); blocking collectives also get
//     MpiCollectiveBegin and MpiCollectiveEnd with the collective
//     operation, and, from the C MPI tracer's traces (mpi/src/gclock_mpi.c,
//     which records them on its regions' events), the communicator, the
//     root (its rank there) and the bytes sent and received. Without that
//     data (the Go recorder, older traces) a collective is on
//     MPI_COMM_WORLD with no root (OTF2_UNDEFINED_UINT32) and sizes 0.
//   - Communicators: Defs.Comms[0] MPI_COMM_WORLD (every process's track 0,
//     in process order), Defs.Comms[1] MPI_COMM_SELF (a group of type
//     COMM_SELF without members, as Score-P writes it; the C tracer's key
//     2), and each communicator the C tracer's string table names with all
//     its members ("MPI communicator KEY: N ranks, world ranks ..."), named
//     by MPI_Comm_set_name (name id 1<<58 | KEY) if the program named it.
//   - Send and Recv become MpiSend and MpiRecv with the message size. The
//     C tracer names the communicator and tag of every message key (the
//     id's upper 32 bits): the record then has that communicator, the
//     peer's rank in it and the MPI tag. Otherwise the message is on
//     MPI_COMM_WORLD and its tag is the id's upper 32 bits. The id itself is
//     the attribute gclock::message_id. The dependencies the C tracer
//     records for collectives (message ids with bit 63 set) are not
//     messages and are left out.
//   - Nonblocking requests of the C tracer: its instants "MPI request
//     started/completed/tested/cancelled" (name ids 1<<59 | 1..4, value: the
//     request number) become request records with Record.Request the
//     number: MpiIsend (the send in an MPI_Isend/Issend/Ibsend/Irsend
//     region, held until its request's start) and MpiIsendComplete;
//     MpiIrecvRequest (in MPI_Irecv) and MpiIrecv (the receive after the
//     completion); MpiRequestTest; MpiRequestCancelled;
//     NbcRequest and NbcComplete (NonBlockingCollectiveRequest/Complete:
//     Op, Comm, Root, Size, Received from the MPI_I<collective> region's
//     events). A request instant of a request its location never started
//     is left out and counted in Stats.Requests.
//   - One-sided calls of the C tracer: RmaWinCreate and RmaWinDestroy in
//     MPI_Win_create/allocate and MPI_Win_free, RmaPut, RmaGet and RmaAtomic
//     (accumulate) with the target's rank in the window's communicator and
//     the bytes, RmaCollectiveBegin/End around MPI_Win_fence, and
//     RmaAcquireLock/RmaReleaseLock in MPI_Win_lock/unlock; every window
//     is an RmaWin on its communicator. No completion records are written
//     (the tracer does not know when a put completes). What the string
//     table does not name is counted in Stats.Unnamed.
//   - Instant events are regions of zero length (role artificial); counters
//     are asynchronous int64 metrics, one metric per counter name.
//   - Every event carries the attribute gclock::local_ns (the raw local
//     timestamp) and, where the correction knows one (the daemon's
//     mappings), gclock::bound_ns: the half-width of the bound on the
//     event's global time.
//
// The archive is written in pure Go by package archive (gosink.go, every
// build: CreateGo), byte for byte what libotf2 writes but for the anchor
// file's trace id; a build with `-tags otf2` and cgo writes it with libotf2
// instead (archive.go, Debian libotf2-trace-dev), and the tests check that
// both sinks write the same files. The Kind -> OTF2 record mapping of the
// pure-Go sink is the table eventRecords, one row per kind.
package otf2
