package otf2

import (
	"github.com/gclock/gclock/trace/format"
)

// richTrace is a merged stream that makes every event Kind (messages on
// a named communicator and on the world, collectives with and without the
// C tracer's data, every one-sided call, instants on a second track,
// counters), with bounds on some events: what the sink tests write with
// each sink.
func richTrace() (procs []uint32, names []format.Name, evs []format.Merged, opt Options) {
	const half, win, tk = 0x3c39ef87, 0x502c3f13, 0x1234
	procs = []uint32{0, 1, 2, 3}
	for _, p := range procs {
		names = append(names,
			format.Name{Proc: p, ID: 1, Name: "MPI_Bcast"}, format.Name{Proc: p, ID: 2, Name: "MPI_Put"},
			format.Name{Proc: p, ID: 3, Name: "MPI_Win_lock"}, format.Name{Proc: p, ID: 4, Name: "MPI_Win_fence"},
			format.Name{Proc: p, ID: 5, Name: "MPI_Scan"}, format.Name{Proc: p, ID: 6, Name: "MPI_Win_create"},
			format.Name{Proc: p, ID: 7, Name: "MPI_Get"}, format.Name{Proc: p, ID: 8, Name: "MPI_Accumulate"},
			format.Name{Proc: p, ID: 9, Name: "MPI_Win_unlock"}, format.Name{Proc: p, ID: 10, Name: "MPI_Win_free"},
			format.Name{Proc: p, ID: 11, Name: "solve ✓ (UTF-8)"}, format.Name{Proc: p, ID: 12, Name: "checkpoint"},
			format.Name{Proc: p, ID: 13, Name: "queue depth"}, format.Name{Proc: p, ID: 14, Name: "MPI_Send"},
			format.Name{Proc: p, ID: commNameBit | half, Name: "MPI communicator 3c39ef87: 2 ranks, world ranks 3 1"},
			format.Name{Proc: p, ID: tagNameBit | tk, Name: "MPI communicator 3c39ef87 tag 8"},
			format.Name{Proc: p, ID: winNameBit | win, Name: "MPI window 502c3f13 on communicator 3c39ef87"},
			format.Name{Proc: p, ID: 15, Name: "MPI_Isend"}, format.Name{Proc: p, ID: 16, Name: "MPI_Irecv"},
			format.Name{Proc: p, ID: 17, Name: "MPI_Wait"}, format.Name{Proc: p, ID: 18, Name: "MPI_Test"},
			format.Name{Proc: p, ID: 19, Name: "MPI_Iallreduce"},
			format.Name{Proc: p, ID: userNameBit | half, Name: "odd ranks"})
		for k := reqStart; k <= reqCancel; k++ {
			names = append(names, format.Name{Proc: p, ID: reqNameBit | uint64(k), Name: reqNames[k]})
		}
	}
	names = append(names, format.Name{Proc: 0, ID: hostName, Name: "node-a"}, format.Name{Proc: 3, ID: hostName, Name: "node-b"},
		format.Name{Proc: 0, ID: realtimeID, Name: "realtime 1800000000000000000 at local 1699999999995000000"})
	t := int64(1_700_000_000_000_000_000)
	e := func(proc uint32, kind format.Kind, id uint64, peer uint32, value int64, track uint16) {
		t += 137
		evs = append(evs, format.Merged{Event: format.Event{Time: t, Kind: kind, ID: id, Peer: peer, Value: value, Track: track}, Raw: t - 5_000_000 + int64(proc), Proc: proc})
	}
	region := func(proc uint32, id uint64, inPeer uint32, inValue int64, outPeer uint32, outValue int64) {
		e(proc, format.Enter, id, inPeer, inValue, 0)
		e(proc, format.Leave, id, outPeer, outValue, 0)
	}
	e(3, format.Enter, 11, 0, 0, 0)
	region(1, 6, noPeer, 0, win, 0)        // MPI_Win_create
	region(1, 2, 3, 16, win, 0)            // MPI_Put to world rank 3 (rank 0 in the window's communicator)
	region(1, 7, 3, 0, win, 32)            // MPI_Get
	region(1, 8, 3, 8, win, 0)             // MPI_Accumulate
	region(1, 3, 3, 2, win, 0)             // MPI_Win_lock (shared)
	region(1, 9, 3, 0, win, 0)             // MPI_Win_unlock
	region(1, 4, noPeer, 0, win, 0)        // MPI_Win_fence
	region(1, 10, noPeer, 0, win, 0)       // MPI_Win_free
	region(1, 1, 3, 0, half, 8)            // MPI_Bcast on the split communicator, root world rank 3
	region(0, 5, noPeer, 12, worldKey, 12) // MPI_Scan on the world
	region(2, 1, 0, 0, 0, 0)               // MPI_Bcast of an older trace (no data)
	e(3, format.Send, tk<<32|5, 1, 4, 0)   // on the split communicator, tag 8
	e(1, format.Recv, tk<<32|5, 3, 4, 0)
	e(0, format.Enter, 14, 0, 0, 0)
	e(0, format.Send, 42<<32|7, 2, 4096, 0)   // on the world, tag 42
	e(0, format.Send, 1<<63|1<<32|5, 1, 0, 0) // a collective's dependency: no message
	e(0, format.Leave, 14, 0, 0, 0)
	e(2, format.Recv, 42<<32|7, 0, 4096, 0)
	e(2, format.Instant, 12, 0, 0, 1)
	e(0, format.Counter, 13, 0, 17, 0)
	e(0, format.Counter, 13, 0, -3, 0)
	// Nonblocking requests: an Isend tested then completed, its Irecv
	// completed with the receive, a nonblocking collective, a cancelled Irecv.
	req := func(proc uint32, k int, num int64) { e(proc, format.Instant, reqNameBit|uint64(k), 0, num, 0) }
	e(0, format.Enter, 15, 0, 0, 0)
	e(0, format.Send, 42<<32|8, 2, 8, 0)
	req(0, reqStart, 1)
	e(0, format.Leave, 15, 0, 0, 0)
	e(2, format.Enter, 16, 0, 0, 0)
	req(2, reqStart, 1)
	e(2, format.Leave, 16, 0, 0, 0)
	e(0, format.Enter, 18, 0, 0, 0)
	req(0, reqTest, 1)
	e(0, format.Leave, 18, 0, 0, 0)
	e(2, format.Enter, 17, 0, 0, 0)
	req(2, reqDone, 1)
	e(2, format.Recv, 42<<32|8, 0, 8, 0)
	e(2, format.Leave, 17, 0, 0, 0)
	e(0, format.Enter, 17, 0, 0, 0)
	req(0, reqDone, 1)
	e(0, format.Leave, 17, 0, 0, 0)
	e(0, format.Enter, 19, noPeer, 4, 0)
	req(0, reqStart, 2)
	e(0, format.Leave, 19, worldKey, 4, 0)
	e(0, format.Enter, 17, 0, 0, 0)
	req(0, reqDone, 2)
	e(0, format.Leave, 17, 0, 0, 0)
	e(2, format.Enter, 16, 0, 0, 0)
	req(2, reqStart, 2)
	e(2, format.Leave, 16, 0, 0, 0)
	e(2, format.Enter, 17, 0, 0, 0)
	req(2, reqCancel, 2)
	e(2, format.Leave, 17, 0, 0, 0)
	e(3, format.Leave, 11, 0, 0, 0)
	opt = Options{Metadata: []KV{{"method", "spline"}, {"hosts", "2"}}, Bound: func(proc uint32, raw int64) (int64, bool) {
		return raw%1000 + 1, raw%2 == 0
	}}
	return
}
