package otf2

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gclock/gclock/trace/format"
)

// recSink keeps the records and definitions (a test double of the archive).
type recSink struct {
	recs    []Record
	defs    *Defs
	aborted bool
	failAt  int // fail the n-th event (1-based), 0: never
}

func (s *recSink) event(r *Record) error {
	if s.failAt > 0 && len(s.recs)+1 == s.failAt {
		return errors.New("disk full")
	}
	s.recs = append(s.recs, *r)
	return nil
}
func (s *recSink) finish(d *Defs) error { s.defs = d; return nil }
func (s *recSink) abort()               { s.aborted = true }

func ev(t int64, proc uint32, kind format.Kind, id uint64, peer uint32, value int64) format.Merged {
	return format.Merged{Event: format.Event{Time: t, Kind: kind, ID: id, Peer: peer, Value: value}, Raw: t + 1000, Proc: proc}
}

func run(t *testing.T, opt Options, procs []uint32, names []format.Name, evs []format.Merged) (*recSink, *Writer, error) {
	t.Helper()
	s := &recSink{}
	w := newWriter(s, opt)
	w.SetNames(names)
	for _, p := range procs {
		if err := w.SetProcess(p, "p", p/2); err != nil {
			t.Fatal(err)
		}
	}
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			return s, w, err
		}
	}
	return s, w, w.Close()
}

type brief struct {
	Kind   Kind
	Loc    uint64
	Time   uint64
	Region uint32
	Peer   uint32
	Tag    uint32
	Op     uint8
}

func briefs(rs []Record) []brief {
	var out []brief
	for _, r := range rs {
		out = append(out, brief{r.Kind, r.Loc, r.Time, r.Region, r.Peer, r.Tag, r.Op})
	}
	return out
}

func TestTranslate(t *testing.T) {
	names := []format.Name{{Proc: 10, ID: 1, Name: "MPI_Allreduce"}, {Proc: 10, ID: 2, Name: "compute"},
		{Proc: 20, ID: 1, Name: "MPI_Bcast"}, {Proc: 20, ID: 3, Name: "mark"}, {Proc: 20, ID: 4, Name: "queue"}}
	cases := []struct {
		name  string
		evs   []format.Merged
		want  []brief
		stats Stats
	}{
		{"user region", []format.Merged{ev(100, 10, format.Enter, 2, 0, 0), ev(150, 10, format.Leave, 2, 0, 0)},
			[]brief{{Enter, 10 << 16, 100, 0, 0, 0, 0}, {Leave, 10 << 16, 150, 0, 0, 0, 0}}, Stats{Events: 2, Input: 2}},
		{"collective gets begin and end with its op", []format.Merged{ev(100, 10, format.Enter, 1, 0, 0), ev(150, 10, format.Leave, 1, 0, 0)},
			[]brief{{Enter, 10 << 16, 100, 0, 0, 0, 0}, {CollBegin, 10 << 16, 100, 0, 0, 0, 0}, {CollEnd, 10 << 16, 150, 0, 0, 0, 11}, {Leave, 10 << 16, 150, 0, 0, 0, 0}}, Stats{Events: 4, Input: 2}},
		{"bcast op 1", []format.Merged{ev(5, 20, format.Enter, 1, 0, 0), ev(6, 20, format.Leave, 1, 0, 0)},
			[]brief{{Enter, 20 << 16, 5, 0, 0, 0, 0}, {CollBegin, 20 << 16, 5, 0, 0, 0, 0}, {CollEnd, 20 << 16, 6, 0, 0, 0, 1}, {Leave, 20 << 16, 6, 0, 0, 0, 0}}, Stats{Events: 4, Input: 2}},
		{"messages by rank, tag from the id's upper half", []format.Merged{ev(100, 10, format.Send, 7<<32|3, 20, 64), ev(130, 20, format.Recv, 7<<32|3, 10, 64)},
			[]brief{{MpiSend, 10 << 16, 100, 0, 1, 7, 0}, {MpiRecv, 20 << 16, 130, 0, 0, 7, 0}}, Stats{Events: 2, Input: 2}},
		{"collective dependencies and unknown peers left out", []format.Merged{ev(100, 10, format.Send, collBit|1, 20, 0), ev(110, 10, format.Send, 1, 99, 8)},
			nil, Stats{Input: 2, Dependencies: 1, Unknown: 1}},
		{"instant is a zero-length region", []format.Merged{ev(100, 20, format.Instant, 3, 0, 0)},
			[]brief{{Enter, 20 << 16, 100, 0, 0, 0, 0}, {Leave, 20 << 16, 100, 0, 0, 0, 0}}, Stats{Events: 2, Input: 1}},
		{"counter is a metric", []format.Merged{ev(100, 20, format.Counter, 4, 0, 42)},
			[]brief{{Metric, 20 << 16, 100, 0, 0, 0, 0}}, Stats{Events: 1, Input: 1}},
		{"negative times shift to 0", []format.Merged{ev(-50, 10, format.Enter, 2, 0, 0), ev(-20, 10, format.Leave, 2, 0, 0)},
			[]brief{{Enter, 10 << 16, 0, 0, 0, 0, 0}, {Leave, 10 << 16, 30, 0, 0, 0, 0}}, Stats{Events: 2, Input: 2}},
		{"a location never runs backwards", []format.Merged{ev(100, 10, format.Enter, 2, 0, 0), ev(90, 10, format.Leave, 2, 0, 0)},
			[]brief{{Enter, 10 << 16, 100, 0, 0, 0, 0}, {Leave, 10 << 16, 100, 0, 0, 0, 0}}, Stats{Events: 2, Input: 2, Clamped: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, w, err := run(t, Options{}, []uint32{20, 10}, names, c.evs)
			if err != nil {
				t.Fatal(err)
			}
			if got := briefs(s.recs); !reflect.DeepEqual(got, c.want) {
				t.Errorf("records\n got %+v\nwant %+v", got, c.want)
			}
			if w.Stats() != c.stats {
				t.Errorf("stats %+v, want %+v", w.Stats(), c.stats)
			}
			var n uint64
			for _, l := range s.defs.Locations {
				n += l.Events
			}
			if n != uint64(len(s.recs)) {
				t.Errorf("locations count %d events, %d written", n, len(s.recs))
			}
		})
	}
}

func TestDefinitions(t *testing.T) {
	names := []format.Name{{Proc: 1, ID: 1, Name: "MPI_Barrier"}, {Proc: 1, ID: 2, Name: "MPI_Send"}, {Proc: 1, ID: 3, Name: "solve"}, {Proc: 2, ID: 4, Name: "MPI_Comm_rank"}}
	evs := []format.Merged{ev(1000, 1, format.Enter, 1, 0, 0), ev(1100, 1, format.Leave, 1, 0, 0), ev(1200, 1, format.Enter, 2, 0, 0),
		ev(1300, 1, format.Leave, 2, 0, 0), ev(1400, 1, format.Enter, 3, 0, 0), ev(1500, 2, format.Enter, 4, 0, 0)}
	evs[5].Track = 3
	bound := func(proc uint32, raw int64) (int64, bool) { return int64(proc) * 10, proc == 2 }
	s, w, err := run(t, Options{Bound: bound, Metadata: []KV{{"method", "daemon"}}}, []uint32{2, 1}, names, evs)
	if err != nil {
		t.Fatal(err)
	}
	d := w.Defs()
	if d.Offset != 1000 || d.Length != 500 || d.Origin != 0 {
		t.Errorf("clock: offset %d length %d origin %d, want 1000 500 0", d.Offset, d.Length, d.Origin)
	}
	wantReg := []RegionDef{{Name: "MPI_Barrier", Role: roleBarrier, Paradigm: paradigmMPI, coll: 1}, {Name: "MPI_Send", Role: rolePoint2Pt, Paradigm: paradigmMPI},
		{Name: "solve", Role: roleFunction, Paradigm: paradigmUser}, {Name: "MPI_Comm_rank", Role: roleFunction, Paradigm: paradigmMPI}}
	if !reflect.DeepEqual(d.Regions, wantReg) {
		t.Errorf("regions %+v, want %+v", d.Regions, wantReg)
	}
	// Ranks in process order; every process's track 0 defined, tracks named.
	if d.Procs[0].Proc != 1 || d.Procs[1].Proc != 2 {
		t.Errorf("ranks %+v, want processes 1, 2", d.Procs)
	}
	// Raw stamps are global + 1000: the mapping's offset is -1000 at the first and last event.
	// The first and last event's timestamps (global - origin) and bounds
	// (the Bound option: proc x 10 ns, known for process 2 only) go into
	// the ClockOffset records.
	wantLoc := []LocationDef{{ID: 1 << 16, Name: "p", Group: 0, Events: 7, FirstLocal: 2000, FirstOffset: -1000, LastLocal: 2400, LastOffset: -1000, HasOffsets: true,
		FirstTime: 1000, LastTime: 1400},
		{ID: 2 << 16, Name: "p", Group: 1}, {ID: 2<<16 | 3, Name: "p track 3", Group: 1, Events: 1, FirstLocal: 2500, FirstOffset: -1000, LastLocal: 2500, LastOffset: -1000, HasOffsets: true,
			FirstTime: 1500, LastTime: 1500, FirstBound: 20, LastBound: 20}}
	if !reflect.DeepEqual(d.Locations, wantLoc) {
		t.Errorf("locations %+v, want %+v", d.Locations, wantLoc)
	}
	wantOff := [][]ClockOffset{{{Time: 1000}, {Time: 1400}}, nil, {{Time: 1500, StdDev: 20}}}
	for i := range d.Locations {
		if got := d.Locations[i].ClockOffsets(); !reflect.DeepEqual(got, wantOff[i]) {
			t.Errorf("location %d clock offsets %+v, want %+v", i, got, wantOff[i])
		}
	}
	if !reflect.DeepEqual(d.Hosts, []uint32{0, 1}) {
		t.Errorf("hosts %v", d.Hosts)
	}
	for _, r := range s.recs {
		wantB := r.Loc>>16 == 2
		if r.HasBound != wantB || (wantB && r.Bound != 20) || r.Raw == 0 {
			t.Errorf("record %+v: bound %v %d, raw %d", r, r.HasBound, r.Bound, r.Raw)
		}
	}
	if len(d.Metadata) != 1 || PropertyName(d.Metadata[0].Key) != "GCLOCK::METHOD" {
		t.Errorf("metadata %+v", d.Metadata)
	}
}

func TestErrors(t *testing.T) {
	t.Run("undeclared process", func(t *testing.T) {
		_, _, err := run(t, Options{}, []uint32{1}, nil, []format.Merged{ev(1, 5, format.Enter, 1, 0, 0)})
		if err == nil || !strings.Contains(err.Error(), "process 5") {
			t.Errorf("err %v, want one naming process 5", err)
		}
	})
	t.Run("unknown kind", func(t *testing.T) {
		_, _, err := run(t, Options{}, []uint32{1}, nil, []format.Merged{ev(1, 1, format.Kind(99), 1, 0, 0)})
		if err == nil || !strings.Contains(err.Error(), "unknown kind 99") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("out of order across locations", func(t *testing.T) {
		_, _, err := run(t, Options{}, []uint32{1, 2}, nil, []format.Merged{ev(-5, 1, format.Enter, 1, 0, 0), ev(-9, 2, format.Enter, 1, 0, 0)})
		if err == nil || !strings.Contains(err.Error(), "not in time order") {
			t.Errorf("err %v", err)
		}
	})
	t.Run("declared late", func(t *testing.T) {
		w := newWriter(&recSink{}, Options{})
		w.SetProcess(1, "a", 0)
		e := ev(1, 1, format.Enter, 1, 0, 0)
		w.Write(&e)
		if err := w.SetProcess(2, "b", 0); err == nil {
			t.Error("SetProcess after Write: no error")
		}
		if err := w.SetProcess(1, "a", 0); err == nil {
			t.Error("SetProcess twice: no error")
		}
	})
	t.Run("sink failure aborts", func(t *testing.T) {
		s := &recSink{failAt: 2}
		w := newWriter(s, Options{})
		w.SetProcess(1, "a", 0)
		var err error
		for i := range 3 {
			e := ev(int64(i), 1, format.Enter, 1, 0, 0)
			if err = w.Write(&e); err != nil {
				break
			}
		}
		if err == nil || w.Close() == nil || !s.aborted || s.defs != nil {
			t.Errorf("err %v, aborted %v, finished %v", err, s.aborted, s.defs != nil)
		}
	})
}

func TestPropertyName(t *testing.T) {
	for in, want := range map[string]string{"method": "GCLOCK::METHOD", "process 3": "GCLOCK::PROCESS_3", "origin_ns": "GCLOCK::ORIGIN_NS", "ü": "GCLOCK::_"} {
		if got := PropertyName(in); got != want {
			t.Errorf("PropertyName(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzTranslate: any event stream in time order is either refused with an
// error or written with every location's time non-decreasing and the
// locations' event counts adding up to the records written.
func FuzzTranslate(f *testing.F) {
	f.Add(uint64(1), 50)
	f.Add(uint64(7), 400)
	f.Fuzz(func(t *testing.T, seed uint64, n int) {
		n = min(max(n, 0), 2000)
		rng := rand.New(rand.NewPCG(seed, 3))
		names := []format.Name{{Proc: 0, ID: 1, Name: "MPI_Reduce"}, {Proc: 1, ID: 1, Name: "MPI_Scan"}, {Proc: 2, ID: 1, Name: "MPI_Put"},
			{Proc: 3, ID: 1, Name: "MPI_Win_fence"}, {Proc: 0, ID: 2, Name: "MPI_Win_lock"}}
		for p := range uint32(4) { // the C MPI tracer's names: a communicator (key 2), its tag, a window (key 3)
			names = append(names, format.Name{Proc: p, ID: commNameBit | 2, Name: "MPI communicator 00000002: 2 ranks, world ranks 2 0"},
				format.Name{Proc: p, ID: tagNameBit, Name: "MPI communicator 00000002 tag 5"},
				format.Name{Proc: p, ID: winNameBit | 3, Name: "MPI window 00000003 on communicator 00000002"},
				format.Name{Proc: p, ID: 3, Name: []string{"MPI_Isend", "MPI_Irecv", "MPI_Iallreduce", "MPI_Wait"}[p]})
			for k := reqStart; k <= reqCancel; k++ { // the request instants
				names = append(names, format.Name{Proc: p, ID: reqNameBit | uint64(k), Name: reqNames[k]})
			}
		}
		s := &recSink{}
		w := newWriter(s, Options{Bound: func(uint32, int64) (int64, bool) { return 5, rng.IntN(2) == 0 }})
		w.SetNames(names)
		for p := range uint32(3) {
			w.SetProcess(p, "p", 0)
		}
		tm := rng.Int64N(2000) - 1000
		for range n {
			tm += rng.Int64N(50)
			e := format.Merged{Event: format.Event{Time: tm, Kind: format.Kind(rng.IntN(8)), ID: rng.Uint64N(4) | uint64(rng.IntN(2))<<63,
				Peer: uint32(rng.IntN(5)), Value: rng.Int64N(100) - 10, Track: uint16(rng.IntN(3))}, Proc: uint32(rng.IntN(4)), Raw: rng.Int64()}
			if e.Kind == format.Instant && rng.IntN(2) == 0 {
				e.ID, e.Value = reqNameBit|uint64(1+rng.IntN(4)), rng.Int64N(4) // a request instant of request 0..3
			}
			if err := w.Write(&e); err != nil {
				return
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		last := map[uint64]uint64{}
		for _, r := range s.recs {
			if r.Time < last[r.Loc] {
				t.Fatalf("location %d runs backwards: %d after %d", r.Loc, r.Time, last[r.Loc])
			}
			last[r.Loc] = r.Time
		}
		var sum uint64
		for _, l := range s.defs.Locations {
			sum += l.Events
		}
		if sum != uint64(len(s.recs)) || int64(len(s.recs)) != w.Stats().Events {
			t.Fatalf("counts: locations %d, records %d, stats %d", sum, len(s.recs), w.Stats().Events)
		}
	})
}

// TestTranslateMPIData: the C MPI tracer's data on its regions' events and
// its names of communicators, tags and windows become OTF2's communicator,
// root, sizes, tags and RMA records; what its string table does not name
// falls back to MPI_COMM_WORLD (counted in Stats.Unnamed).
func TestTranslateMPIData(t *testing.T) {
	const half, win, tk = 0x3c39ef87, 0x502c3f13, 0x1234
	names := []format.Name{}
	for _, p := range []uint32{0, 1, 2, 3} {
		names = append(names,
			format.Name{Proc: p, ID: 1, Name: "MPI_Bcast"}, format.Name{Proc: p, ID: 2, Name: "MPI_Put"},
			format.Name{Proc: p, ID: 3, Name: "MPI_Win_lock"}, format.Name{Proc: p, ID: 4, Name: "MPI_Win_fence"},
			format.Name{Proc: p, ID: 5, Name: "MPI_Scan"},
			format.Name{Proc: p, ID: commNameBit | half, Name: "MPI communicator 3c39ef87: 2 ranks, world ranks 3 1"},
			format.Name{Proc: p, ID: commNameBit | 0x77, Name: "MPI communicator 00000077: 3 ranks, world ranks 0 1 ..."},
			format.Name{Proc: p, ID: tagNameBit | tk, Name: "MPI communicator 3c39ef87 tag 8"},
			format.Name{Proc: p, ID: winNameBit | win, Name: "MPI window 502c3f13 on communicator 3c39ef87"})
	}
	cases := []struct {
		name    string
		evs     []format.Merged
		want    []Record // the fields compared: Kind, Peer, Tag, Comm, Size, Received, Root, Win, Match, Lock
		unnamed int64
	}{
		{"bcast on a split communicator: root 3 is its rank 0", []format.Merged{ev(10, 1, format.Enter, 1, 3, 0), ev(20, 1, format.Leave, 1, half, 8)},
			[]Record{{Kind: Enter}, {Kind: CollBegin}, {Kind: CollEnd, Comm: 2, Root: 0, Received: 8, Op: 1}, {Kind: Leave}}, 0},
		{"scan on the world: no root, sizes", []format.Merged{ev(10, 0, format.Enter, 5, noPeer, 12), ev(20, 0, format.Leave, 5, worldKey, 12)},
			[]Record{{Kind: Enter}, {Kind: CollBegin}, {Kind: CollEnd, Root: Undefined, Size: 12, Received: 12, Op: 14}, {Kind: Leave}}, 0},
		{"a communicator named in part: MPI_COMM_WORLD, no root", []format.Merged{ev(10, 0, format.Enter, 1, 1, 4), ev(20, 0, format.Leave, 1, 0x77, 0)},
			[]Record{{Kind: Enter}, {Kind: CollBegin}, {Kind: CollEnd, Root: Undefined, Op: 1}, {Kind: Leave}}, 1},
		{"a message with its communicator, tag and rank there", []format.Merged{ev(10, 3, format.Send, tk<<32|5, 1, 4), ev(20, 1, format.Recv, tk<<32|5, 3, 4)},
			[]Record{{Kind: MpiSend, Peer: 1, Tag: 8, Comm: 2, Size: 4}, {Kind: MpiRecv, Peer: 0, Tag: 8, Comm: 2, Size: 4}}, 0},
		{"a message to a rank outside the named communicator", []format.Merged{ev(10, 3, format.Send, tk<<32|5, 2, 4)},
			[]Record{{Kind: MpiSend, Peer: 2, Tag: tk, Size: 4}}, 1},
		{"put, lock and fence on a window", []format.Merged{
			ev(10, 1, format.Enter, 2, 3, 16), ev(20, 1, format.Leave, 2, win, 0),
			ev(30, 1, format.Enter, 3, 3, 2), ev(40, 1, format.Leave, 3, win, 0),
			ev(50, 1, format.Enter, 4, noPeer, 0), ev(60, 1, format.Leave, 4, win, 0)},
			[]Record{{Kind: Enter}, {Kind: RmaPut, Peer: 0, Size: 16, Win: 0, Root: Undefined}, {Kind: Leave},
				{Kind: Enter}, {Kind: RmaAcquireLock, Peer: 0, Win: 0, Root: Undefined, Lock: 1}, {Kind: Leave},
				{Kind: Enter}, {Kind: RmaCollBegin}, {Kind: RmaCollEnd, Win: 0, Root: Undefined}, {Kind: Leave}}, 0},
		{"an unnamed window: regions only, the fence's end on no window", []format.Merged{
			ev(10, 1, format.Enter, 2, 3, 16), ev(20, 1, format.Leave, 2, 0x99, 0),
			ev(50, 1, format.Enter, 4, noPeer, 0), ev(60, 1, format.Leave, 4, 0x99, 0)},
			[]Record{{Kind: Enter}, {Kind: Leave}, {Kind: Enter}, {Kind: RmaCollBegin}, {Kind: RmaCollEnd, Win: Undefined, Root: Undefined}, {Kind: Leave}}, 2},
		{"a region of an older trace (no data): as before", []format.Merged{ev(10, 1, format.Enter, 1, 0, 0), ev(20, 1, format.Leave, 1, 0, 0)},
			[]Record{{Kind: Enter}, {Kind: CollBegin}, {Kind: CollEnd, Root: Undefined, Op: 1}, {Kind: Leave}}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, w, err := run(t, Options{}, []uint32{0, 1, 2, 3}, names, c.evs)
			if err != nil {
				t.Fatal(err)
			}
			var got []Record
			for _, r := range s.recs {
				got = append(got, Record{Kind: r.Kind, Peer: r.Peer, Tag: r.Tag, Comm: r.Comm, Size: r.Size, Received: r.Received,
					Root: r.Root, Win: r.Win, Match: r.Match, Lock: r.Lock, Op: r.Op})
			}
			for i := range c.want {
				if c.want[i].Kind == Enter || c.want[i].Kind == Leave || c.want[i].Kind == CollBegin || c.want[i].Kind == RmaCollBegin {
					if i < len(got) {
						c.want[i] = Record{Kind: c.want[i].Kind, Peer: got[i].Peer, Tag: got[i].Tag} // regions: only the kind
					}
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("records\n got %+v\nwant %+v", got, c.want)
			}
			if w.Stats().Unnamed != c.unnamed {
				t.Errorf("unnamed %d, want %d", w.Stats().Unnamed, c.unnamed)
			}
		})
	}
	// The definitions: the split communicator with its members' world ranks in its rank order.
	s, _, err := run(t, Options{}, []uint32{0, 1, 2, 3}, names, cases[5].evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.defs.Comms) != 3 || !s.defs.Comms[1].Self || !reflect.DeepEqual(s.defs.Comms[2].Members, []uint32{3, 1}) || len(s.defs.Windows) != 1 || s.defs.Windows[0].Comm != 2 {
		t.Errorf("communicators %+v, windows %+v", s.defs.Comms, s.defs.Windows)
	}
}

func TestParseNames(t *testing.T) {
	for _, c := range []struct {
		in      string
		key     uint32
		members []uint32
		ok      bool
	}{
		{"MPI communicator 00000001: 4 ranks, world ranks 0 1 2 3", 1, []uint32{0, 1, 2, 3}, true},
		{"MPI communicator 3c39ef87: 2 ranks, world ranks 2 0", 0x3c39ef87, []uint32{2, 0}, true},
		{"MPI communicator 3c39ef87: 3 ranks, world ranks 2 0 ...", 0, nil, false},
		{"MPI communicator 3c39ef87: 2 ranks, world ranks 2 2", 0, nil, false},
		{"MPI communicator 3c39ef8: 1 ranks, world ranks 2", 0, nil, false},
		{"MPI communicator 3c39ef87 tag 8", 0, nil, false},
		{"", 0, nil, false},
	} {
		k, m, ok := parseCommName(c.in)
		if k != c.key || !reflect.DeepEqual(m, c.members) || ok != c.ok {
			t.Errorf("parseCommName(%q) = %x %v %v, want %x %v %v", c.in, k, m, ok, c.key, c.members, c.ok)
		}
	}
	for _, c := range []struct {
		in, prefix, mid string
		base            int
		k               uint32
		v               int64
		ok              bool
	}{
		{"MPI communicator 3c39ef87 tag 8", "MPI communicator ", " tag ", 10, 0x3c39ef87, 8, true},
		{"MPI communicator 3c39ef87 tag -3", "MPI communicator ", " tag ", 10, 0x3c39ef87, -3, true},
		{"MPI communicator 3c39ef87 tag x", "MPI communicator ", " tag ", 10, 0x3c39ef87, 0, false},
		{"MPI window 502c3f13 on communicator 00000001", "MPI window ", " on communicator ", 16, 0x502c3f13, 1, true},
		{"MPI window 502c3f13 on communicator 1", "MPI window ", " on communicator ", 16, 0x502c3f13, 1, false},
	} {
		k, v, ok := parseKeyPair(c.in, c.prefix, c.mid, c.base)
		if ok != c.ok || (ok && (k != c.k || v != c.v)) {
			t.Errorf("parseKeyPair(%q) = %x %d %v, want %x %d %v", c.in, k, v, ok, c.k, c.v, c.ok)
		}
	}
}

// FuzzParseNames: the name parsers never panic, and a communicator name
// they accept lists as many distinct members as it says.
func FuzzParseNames(f *testing.F) {
	f.Add("MPI communicator 00000001: 4 ranks, world ranks 0 1 2 3")
	f.Add("MPI communicator 3c39ef87 tag 8")
	f.Add("MPI window 502c3f13 on communicator 00000001")
	f.Fuzz(func(t *testing.T, s string) {
		if _, m, ok := parseCommName(s); ok {
			seen := map[uint32]bool{}
			for _, r := range m {
				if seen[r] {
					t.Fatalf("%q: member %d twice", s, r)
				}
				seen[r] = true
			}
			if !strings.Contains(s, strconv.Itoa(len(m))+" ranks") {
				t.Fatalf("%q: %d members", s, len(m))
			}
		}
		parseKeyPair(s, "MPI communicator ", " tag ", 10)
		parseKeyPair(s, "MPI window ", " on communicator ", 16)
	})
}

// TestTranslateRequests: the C tracer's request instants (started in the
// nonblocking call's region, after its send; completed in the completing
// call's region, before its receive; tested; cancelled) become OTF2's
// request records with the tracer's request numbers, a nonblocking
// collective's request records carry its data from its call's events, and
// request instants of unknown requests, or named otherwise, leave no record.
func TestTranslateRequests(t *testing.T) {
	const tk = 0x1234
	names := []format.Name{}
	for _, p := range []uint32{0, 1} {
		names = append(names,
			format.Name{Proc: p, ID: 1, Name: "MPI_Isend"}, format.Name{Proc: p, ID: 2, Name: "MPI_Irecv"},
			format.Name{Proc: p, ID: 3, Name: "MPI_Wait"}, format.Name{Proc: p, ID: 4, Name: "MPI_Test"},
			format.Name{Proc: p, ID: 5, Name: "MPI_Iallreduce"}, format.Name{Proc: p, ID: 6, Name: "MPI_Send"},
			format.Name{Proc: p, ID: tagNameBit | tk, Name: "MPI communicator 00000001 tag 7"})
		for k := reqStart; k <= reqCancel; k++ {
			names = append(names, format.Name{Proc: p, ID: reqNameBit | uint64(k), Name: reqNames[k]})
		}
	}
	names = append(names, format.Name{Proc: 2, ID: reqNameBit | reqDone, Name: "not the tracer's"})
	req := func(t int64, p uint32, k int, num int64) format.Merged {
		return ev(t, p, format.Instant, reqNameBit|uint64(k), 0, num)
	}
	msg := uint64(tk << 32) // message 0 of the key
	evs := []format.Merged{
		// Rank 0: MPI_Isend (request 1) to rank 1, an unsuccessful MPI_Test, MPI_Wait completes it.
		ev(10, 0, format.Enter, 1, 0, 0), ev(11, 0, format.Send, msg, 1, 4), req(12, 0, reqStart, 1), ev(13, 0, format.Leave, 1, 0, 0),
		// Rank 1: MPI_Irecv (request 5), MPI_Wait completes it with its receive.
		ev(14, 1, format.Enter, 2, 0, 0), req(15, 1, reqStart, 5), ev(16, 1, format.Leave, 2, 0, 0),
		ev(20, 0, format.Enter, 4, 0, 0), req(21, 0, reqTest, 1), ev(22, 0, format.Leave, 4, 0, 0),
		ev(30, 1, format.Enter, 3, 0, 0), req(31, 1, reqDone, 5), ev(32, 1, format.Recv, msg, 0, 4), ev(33, 1, format.Leave, 3, 0, 0),
		ev(40, 0, format.Enter, 3, 0, 0), req(41, 0, reqDone, 1), ev(42, 0, format.Leave, 3, 0, 0),
		// Rank 0: MPI_Iallreduce (request 2) on the world, 8 bytes each way, completed by MPI_Wait.
		ev(50, 0, format.Enter, 5, noPeer, 8), req(51, 0, reqStart, 2), ev(52, 0, format.Leave, 5, worldKey, 8),
		ev(60, 0, format.Enter, 3, 0, 0), req(61, 0, reqDone, 2), ev(62, 0, format.Leave, 3, 0, 0),
		// Rank 0: a blocking send stays an MpiSend; a completion of an unknown request leaves nothing.
		ev(70, 0, format.Enter, 6, 0, 0), ev(71, 0, format.Send, msg+1, 1, 4), ev(72, 0, format.Leave, 6, 0, 0),
		ev(80, 0, format.Enter, 3, 0, 0), req(81, 0, reqDone, 99), ev(82, 0, format.Leave, 3, 0, 0),
		// Rank 1: a cancelled receive request; rank 2: an instant with a request id but another name is an instant.
		ev(90, 1, format.Enter, 2, 0, 0), req(91, 1, reqStart, 6), ev(92, 1, format.Leave, 2, 0, 0),
		ev(93, 1, format.Enter, 3, 0, 0), req(94, 1, reqCancel, 6), ev(95, 1, format.Leave, 3, 0, 0),
		req(96, 2, reqDone, 6),
	}
	s, w, err := run(t, Options{}, []uint32{0, 1, 2}, names, evs)
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		Kind           Kind
		Time           uint64
		Peer, Tag      uint32
		Size, Received uint64
		Op             uint8
		Root           uint32
		Request        uint64
	}
	var got []rec
	for _, r := range s.recs {
		if r.Kind != Enter && r.Kind != Leave {
			got = append(got, rec{r.Kind, r.Time, r.Peer, r.Tag, r.Size, r.Received, r.Op, r.Root, r.Request})
		}
	}
	want := []rec{
		{Kind: MpiIsend, Time: 11, Peer: 1, Tag: 7, Size: 4, Request: 1},
		{Kind: MpiIrecvRequest, Time: 15, Request: 5},
		{Kind: MpiRequestTest, Time: 21, Request: 1},
		{Kind: MpiIrecv, Time: 32, Peer: 0, Tag: 7, Size: 4, Request: 5},
		{Kind: MpiIsendComplete, Time: 41, Request: 1},
		{Kind: NbcRequest, Time: 51, Request: 2},
		{Kind: NbcComplete, Time: 61, Op: 11, Root: Undefined, Size: 8, Received: 8, Request: 2},
		{Kind: MpiSend, Time: 71, Peer: 1, Tag: 7, Size: 4},
		{Kind: MpiIrecvRequest, Time: 91, Request: 6},
		{Kind: MpiRequestCancelled, Time: 94, Request: 6},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("records\n got %+v\nwant %+v", got, want)
	}
	if st := w.Stats(); st.Requests != 1 {
		t.Errorf("Stats.Requests %d, want 1 (the completion of request 99)", st.Requests)
	}
	// The instant named otherwise is a zero-length region.
	if n := len(s.recs); s.recs[n-2].Kind != Enter || s.defs.Regions[s.recs[n-2].Region].Name != "not the tracer's" {
		t.Errorf("last records %+v, want the instant's region", s.recs[n-2:])
	}
	last := map[uint64]uint64{}
	for _, r := range s.recs {
		if r.Time < last[r.Loc] {
			t.Fatalf("location %d runs backwards: %+v after %d", r.Loc, r, last[r.Loc])
		}
		last[r.Loc] = r.Time
	}
}

// TestMPIDefinitions: host names, MPI_Comm_set_name's names, MPI_COMM_SELF
// and the realtime date from the C tracer's string table.
func TestMPIDefinitions(t *testing.T) {
	const half = 0x3c39ef87
	names := []format.Name{
		{Proc: 0, ID: 1, Name: "MPI_Bcast"}, {Proc: 1, ID: 1, Name: "MPI_Bcast"}, {Proc: 2, ID: 1, Name: "MPI_Send"},
		{Proc: 0, ID: hostName, Name: "node-a"}, {Proc: 3, ID: hostName, Name: "node-b"},
		{Proc: 1, ID: commNameBit | half, Name: "MPI communicator 3c39ef87: 2 ranks, world ranks 3 1"},
		{Proc: 1, ID: userNameBit | half, Name: "odd ranks"},
		{Proc: 2, ID: tagNameBit | 0x55, Name: "MPI communicator 00000002 tag 3"},
		// Rank 1 read CLOCK_REALTIME 1.7e18 when its trace clock read 5000; rank 0 has no pair.
		{Proc: 1, ID: realtimeID, Name: "realtime 1700000000000000000 at local 5000"},
	}
	evs := []format.Merged{
		ev(100, 0, format.Enter, 1, 3, 0), // raw 1100
		ev(200, 1, format.Enter, 1, 3, 0), // raw 1200
		ev(210, 1, format.Leave, 1, half, 4),
		ev(300, 2, format.Send, 0x55<<32, 2, 4), // to itself on MPI_COMM_SELF
		ev(310, 2, format.Recv, 0x55<<32, 2, 4),
	}
	// Hosts: processes 0 and 1 on host 0, 2 and 3 on host 1 (run's p/2).
	s, _, err := run(t, Options{}, []uint32{0, 1, 2, 3}, names, evs)
	if err != nil {
		t.Fatal(err)
	}
	d := s.defs
	if !reflect.DeepEqual(d.HostNames, []string{"node-a", "node-b"}) {
		t.Errorf("host names %v", d.HostNames)
	}
	if len(d.Comms) != 3 || d.Comms[1].Name != "MPI_COMM_SELF" || !d.Comms[1].Self || d.Comms[2].Name != "odd ranks" {
		t.Errorf("communicators %+v", d.Comms)
	}
	for _, r := range s.recs {
		if (r.Kind == MpiSend || r.Kind == MpiRecv) && (r.Comm != 1 || r.Peer != 0 || r.Tag != 3) {
			t.Errorf("self message %+v, want MPI_COMM_SELF (1), peer 0, tag 3", r)
		}
	}
	// Rank 1's first event: raw 1200, global 200, i.e. UTC 1.7e18 + (1200 - 5000);
	// timestamp Offset (100: the trace's first event) is 100 ns earlier.
	if want := uint64(1_700_000_000_000_000_000 + 1200 - 5000 - 100); !d.HasRealtime || d.Realtime != want {
		t.Errorf("realtime %d (%v), want %d", d.Realtime, d.HasRealtime, want)
	}
}

func TestParseRealtime(t *testing.T) {
	for _, c := range []struct {
		s         string
		rt, local int64
		ok        bool
	}{
		{"realtime 1700000000000000000 at local 5000", 1700000000000000000, 5000, true},
		{"realtime 17 at local -5", 17, -5, true},
		{"realtime 0 at local 5", 0, 0, false},
		{"realtime -1 at local 5", 0, 0, false},
		{"realtime 17 at local", 0, 0, false},
		{"realtime x at local 5", 0, 0, false},
		{"realtime 99999999999999999999 at local 5", 0, 0, false},
		{"", 0, 0, false},
	} {
		rt, local, ok := parseRealtime(c.s)
		if ok != c.ok || (ok && (rt != c.rt || local != c.local)) {
			t.Errorf("parseRealtime(%q) = %d, %d, %v; want %d, %d, %v", c.s, rt, local, ok, c.rt, c.local, c.ok)
		}
	}
}

func FuzzParseRealtime(f *testing.F) {
	f.Add("realtime 1700000000000000000 at local 5000")
	f.Add("realtime 1 at local -9223372036854775808")
	f.Fuzz(func(t *testing.T, s string) {
		rt, local, ok := parseRealtime(s)
		if !ok {
			return
		}
		if rt <= 0 {
			t.Fatalf("%q: realtime %d accepted", s, rt)
		}
		if back := fmt.Sprintf("realtime %d at local %d", rt, local); back != s {
			// Leading zeros or a plus sign parse too; the numbers must be the text's.
			r2, l2, ok2 := parseRealtime(back)
			if !ok2 || r2 != rt || l2 != local {
				t.Fatalf("%q: %d %d does not round-trip", s, rt, local)
			}
		}
	})
}

// TestHeldSendAtClose: a nonblocking send whose call's region the trace
// cuts off (no request number, no leave) is still written, as a send.
func TestHeldSendAtClose(t *testing.T) {
	names := []format.Name{{Proc: 0, ID: 1, Name: "MPI_Isend"}}
	evs := []format.Merged{ev(10, 0, format.Enter, 1, 0, 0), ev(11, 0, format.Send, 5<<32, 1, 4)}
	s, w, err := run(t, Options{}, []uint32{0, 1}, names, evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.recs) != 2 || s.recs[1].Kind != MpiSend || s.recs[1].Time != 11 || s.recs[1].Size != 4 || w.Stats().Events != 2 || s.defs.Locations[0].Events != 2 {
		t.Errorf("records %+v, stats %+v", s.recs, w.Stats())
	}
}
