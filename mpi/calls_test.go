package mpi

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/timeline"
)

// Name ids and conventions of the C tracer (mpi/src/gclock_mpi.c).
const (
	collBit  = uint64(1) << 63
	tagName  = uint64(1) << 62
	commName = uint64(1) << 61
	winName  = uint64(1) << 60
	noPeer   = ^uint32(0)
)

// callRecord is one traced MPI call as its region's events carry it: the
// enter's peer (root or target, world rank) and value (bytes sent; the
// window's size; the lock type), the leave's peer resolved through the
// string table to its communicator or window ("comm 0 2": the world ranks
// of its members; "win 0 1 2 3": a window on those) and value (bytes
// received).
type callRecord struct {
	name      string
	peer      uint32
	sent      int64
	on        string
	recvd     int64
	leavePeer uint32
}

func (c callRecord) String() string {
	p := "-"
	if c.peer != noPeer {
		p = strconv.Itoa(int(c.peer))
	}
	return fmt.Sprintf("%s(peer %s, sent %d, on %s, received %d)", c.name, p, c.sent, c.on, c.recvd)
}

// traceNames reads a trace's string table by name id.
func traceNames(t *testing.T, path string) map[uint64]string {
	t.Helper()
	names := map[uint64]string{}
	for _, n := range summary(t, path).Names {
		names[n.ID] = n.Name
	}
	return names
}

// commLabel turns the name of communicator key into "comm" and its members'
// world ranks, from "MPI communicator KEY: N ranks, world ranks a b ...".
func commLabel(names map[uint64]string, key uint64) string {
	n, ok := names[commName|key]
	_, members, found := strings.Cut(n, "world ranks ")
	if !ok || !found {
		return fmt.Sprintf("comm %08x (unnamed)", key)
	}
	return "comm " + members
}

// plainCalls are the calls whose regions carry no data on their events:
// the environment, point-to-point and completion calls.
var plainCalls = map[string]bool{}

func init() {
	for _, n := range strings.Fields("Init Init_thread Finalize Send Ssend Bsend Rsend Isend Issend Ibsend Irsend Recv Irecv " +
		"Sendrecv Wait Waitall Waitany Waitsome Test Testall Testany Testsome Start Startall") {
		plainCalls["MPI_"+n] = true
	}
}

// callRecords pairs the enter and leave events of every region of a C
// tracer's file with data on its events (MPI regions do not nest on a
// track).
func callRecords(t *testing.T, path string) []callRecord {
	t.Helper()
	names := traceNames(t, path)
	var out []callRecord
	var open *format.Event
	for _, e := range rawEvents(t, path) {
		if (e.Kind == format.Enter || e.Kind == format.Leave) && plainCalls[names[e.ID]] {
			continue // no data on their events (TestMPIRunOTF2 checks their regions)
		}
		switch e.Kind {
		case format.Enter:
			if open != nil {
				t.Fatalf("%s: %s entered inside %s", path, names[e.ID], names[open.ID])
			}
			e := e
			open = &e
		case format.Leave:
			if open == nil || open.ID != e.ID {
				t.Fatalf("%s: leave of %s without its enter", path, names[e.ID])
			}
			r := callRecord{name: names[e.ID], peer: open.Peer, sent: open.Value, recvd: e.Value, leavePeer: e.Peer}
			if strings.HasPrefix(r.name, "MPI_Win") || r.name == "MPI_Put" || r.name == "MPI_Get" || r.name == "MPI_Accumulate" {
				w := names[winName|uint64(e.Peer)]
				var wk, ck uint32
				if _, err := fmt.Sscanf(w, "MPI window %x on communicator %x", &wk, &ck); err != nil || wk != e.Peer {
					r.on = fmt.Sprintf("window %08x (name %q)", e.Peer, w)
				} else {
					r.on = "win " + strings.TrimPrefix(commLabel(names, uint64(ck)), "comm ")
				}
			} else {
				r.on = commLabel(names, uint64(e.Peer))
			}
			out = append(out, r)
			open = nil
		}
	}
	return out
}

// wantCalls is what calls.c records per round on world rank me of 4
// (the halves: world ranks me%2 and me%2+2).
func wantCalls(me int) []callRecord {
	const n = 4
	u := func(r int) uint32 { return uint32(r) }
	world := "comm 0 1 2 3"
	half := fmt.Sprintf("comm %d %d", me%2, me%2+2)
	hrank, other := me/2, (me+2)%n
	exscan := int64(0)
	if hrank > 0 {
		exscan = 8
	}
	bsent, brecvd := int64(0), int64(8)
	if hrank == 1 {
		bsent, brecvd = 8, 0
	}
	ww, hw := "win 0 1 2 3", "win "+strings.TrimPrefix(half, "comm ")
	return []callRecord{
		{name: "MPI_Scan", peer: noPeer, sent: 12, on: world, recvd: 12},
		{name: "MPI_Exscan", peer: noPeer, sent: 8, on: half, recvd: exscan},
		{name: "MPI_Alltoallw", peer: noPeer, sent: (1 + 2 + 3 + 4) * 4, on: world, recvd: n * int64(me+1) * 4},
		{name: "MPI_Bcast", peer: u(me%2 + 2), sent: bsent, on: half, recvd: brecvd},
		{name: "MPI_Iscan", peer: noPeer, sent: 12, on: world, recvd: 12},
		{name: "MPI_Iexscan", peer: noPeer, sent: 8, on: half, recvd: exscan},
		{name: "MPI_Ialltoallw", peer: noPeer, sent: (1 + 2 + 3 + 4) * 4, on: world, recvd: n * int64(me+1) * 4},
		{name: "MPI_Win_allocate", peer: noPeer, sent: 64, on: ww},
		{name: "MPI_Win_fence", peer: noPeer, on: ww},
		{name: "MPI_Put", peer: u((me + 1) % n), sent: 8, on: ww},
		{name: "MPI_Win_fence", peer: noPeer, on: ww},
		{name: "MPI_Get", peer: u((me + 2) % n), on: ww, recvd: 12},
		{name: "MPI_Win_fence", peer: noPeer, on: ww},
		{name: "MPI_Win_lock", peer: u((me + 3) % n), sent: 1, on: ww},
		{name: "MPI_Accumulate", peer: u((me + 3) % n), sent: 4, on: ww},
		{name: "MPI_Win_unlock", peer: u((me + 3) % n), on: ww},
		{name: "MPI_Win_lock_all", peer: noPeer, on: ww},
		{name: "MPI_Win_unlock_all", peer: noPeer, on: ww},
		{name: "MPI_Barrier", peer: noPeer, on: world},
		{name: "MPI_Win_free", peer: noPeer, on: ww},
		{name: "MPI_Win_create", peer: noPeer, sent: 32, on: hw},
		{name: "MPI_Win_fence", peer: noPeer, on: hw},
		{name: "MPI_Put", peer: u(other), sent: 4, on: hw},
		{name: "MPI_Win_fence", peer: noPeer, on: hw},
		{name: "MPI_Win_lock", peer: u(other), sent: 2, on: hw},
		{name: "MPI_Win_unlock", peer: u(other), on: hw},
		{name: "MPI_Win_free", peer: noPeer, on: hw},
	}
}

// TestTraceCalls traces calls.c (scans, Alltoallw, their nonblocking forms,
// a rooted collective on a split communicator, persistent requests and
// one-sided calls) on 4 ranks and checks, rank by rank, that every call is
// recorded in order with its root or target, bytes, communicator or window
// (through the string table), the persistent requests' messages with their
// tags and sizes, and that the merged trace matches every message and
// collective dependency with none received before sent.
func TestTraceCalls(t *testing.T) {
	dir := built(t)
	const rounds = 3
	files := traceRun(t, dir, "ok", filepath.Join(dir, "calls"), strconv.Itoa(rounds))
	for me, f := range files {
		got := callRecords(t, f)
		var want []callRecord
		for range rounds {
			want = append(want, wantCalls(me)...)
		}
		for i := range max(len(got), len(want)) {
			var g, w string
			if i < len(got) {
				g = got[i].String()
			}
			if i < len(want) {
				w = want[i].String()
			}
			if g != w {
				t.Errorf("rank %d call %d: %s, want %s", me, i, g, w)
			}
		}
		// A new window per round: the keys of one window's calls agree, and differ between rounds.
		keys := map[uint32]bool{}
		for _, c := range got {
			if c.name == "MPI_Win_allocate" {
				keys[c.leavePeer] = true
			}
		}
		if len(keys) != rounds {
			t.Errorf("rank %d: %d distinct keys for the %d windows allocated", me, len(keys), rounds)
		}
		// The persistent requests' messages: per round 3 of 12 bytes to the next rank (tag 7 on the
		// world) and 3 of 4 bytes to the other member of its half (tag 8), and as many received.
		names := traceNames(t, f)
		type msg struct {
			kind  format.Kind
			peer  uint32
			bytes int64
			tag   string
		}
		count := map[msg]int{}
		for _, e := range rawEvents(t, f) {
			if (e.Kind == format.Send || e.Kind == format.Recv) && e.ID&collBit == 0 {
				count[msg{e.Kind, e.Peer, e.Value, names[tagName|e.ID>>32]}]++
			}
		}
		tag7 := "MPI communicator 00000001 tag 7"
		var half string
		for id, n := range names {
			if id&commName != 0 && id != commName|1 {
				half = fmt.Sprintf("MPI communicator %08x tag 8", id&^commName)
				if !strings.HasSuffix(n, fmt.Sprintf("world ranks %d %d", me%2, me%2+2)) {
					t.Errorf("rank %d: communicator name %q, want its half's members", me, n)
				}
			}
		}
		wantMsgs := map[msg]int{
			{format.Send, uint32((me + 1) % ranks), 12, tag7}:         3 * rounds,
			{format.Recv, uint32((me + ranks - 1) % ranks), 12, tag7}: 3 * rounds,
			{format.Send, uint32((me + 2) % ranks), 4, half}:          3 * rounds,
			{format.Recv, uint32((me + 2) % ranks), 4, half}:          3 * rounds,
		}
		if fmt.Sprint(count) != fmt.Sprint(wantMsgs) {
			t.Errorf("rank %d: messages (kind, peer, bytes, tag name): %v, want %v", me, count, wantMsgs)
		}
	}
	rep, err := timeline.Run(timeline.Files(files), timeline.Options{Method: correct.Auto, CLC: true})
	if err != nil {
		t.Fatal(err)
	}
	tot := causality.Totals(rep.Pairs)
	// Dependencies per round: scan and iscan 6 (rank i waits for ranks 0..i-1), exscan and iexscan 1 per
	// half, alltoallw and ialltoallw 12, the barrier 12, the bcast 1 per half; the persistent messages 4 ranks x 6.
	perRound := 2*6 + 2*2 + 2*12 + 12 + 2 + ranks*6
	if tot.Messages != int64(perRound*rounds) || rep.Unmatched != 0 {
		t.Errorf("%d messages and dependencies matched, %d ends unmatched; want %d and 0", tot.Messages, rep.Unmatched, perRound*rounds)
	}
	// One host, one clock: no raw violation; the correction's own (a
	// zero offset estimated a few us off under load) is logged, and CLC
	// must leave none (as in TestFortranTrace).
	clc := causality.Totals(rep.AfterCLC)
	t.Logf("received before sent: %d raw, %d corrected, %d after CLC", tot.Raw, tot.Corrected, clc.Corrected)
	if tot.Raw != 0 || clc.Corrected != 0 {
		t.Errorf("received before sent: %d raw, %d after CLC (one host: want 0)", tot.Raw, clc.Corrected)
	}
}

// traceRun runs argv on ranks ranks under the tracer (libgclockmpi.so from
// dir preloaded, tracing into a fresh directory), checks that every rank
// printed "<ok> <rank>" (the program's own checks; "" checks nothing) and
// returns the trace files, one per rank, in rank order.
func traceRun(t *testing.T, dir, ok string, argv ...string) []string {
	t.Helper()
	tdir := filepath.Join(t.TempDir(), "trace")
	out, errout, err := mpirun(t, ranks, map[string]string{
		"LD_PRELOAD": filepath.Join(dir, "libgclockmpi.so"), "GCLOCK_MPI_TRACE": tdir, "GCLOCK_MPI_QUIET": "1",
	}, argv...)
	if err != nil {
		t.Fatalf("mpirun %s: %v\n%s\n%s", filepath.Base(argv[0]), err, out, errout)
	}
	for r := range ranks {
		if ok != "" && !strings.Contains(out, fmt.Sprintf("%s %d\n", ok, r)) {
			t.Fatalf("rank %d: the program's own checks failed:\n%s\n%s", r, out, errout)
		}
	}
	files, _ := filepath.Glob(filepath.Join(tdir, "rank-*.gct"))
	slices.Sort(files)
	if len(files) != ranks {
		t.Fatalf("trace files %v, want %d (the tracer opens one per rank in MPI_Init)", files, ranks)
	}
	return files
}
