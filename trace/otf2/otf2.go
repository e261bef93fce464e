package otf2

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gclock/gclock/trace/format"
)

// ErrNotBuilt is returned by Create in a build without libotf2.
var ErrNotBuilt = errors.New("this gclock was built without OTF2 support (rebuild with -tags otf2 and cgo, with libotf2-trace-dev installed)")

// KV is one metadata field, written as the archive property GCLOCK::KEY.
type KV struct{ Key, Value string }

// Options tune the archive.
type Options struct {
	// Metadata is written as archive properties (GCLOCK::KEY = value).
	Metadata []KV
	// Bound, if set, gives the half-width (ns) of the bound on the global
	// time of an event of proc stamped raw on its local clock; ok false
	// when the correction knows none.
	Bound func(proc uint32, raw int64) (halfWidth int64, ok bool)
}

// Kind is the kind of an OTF2 event record.
type Kind uint8

// Event record kinds.
const (
	Enter     Kind = iota + 1 // region enter
	Leave                     // region leave
	MpiSend                   // point-to-point send
	MpiRecv                   // point-to-point receive
	CollBegin                 // MpiCollectiveBegin
	CollEnd                   // MpiCollectiveEnd
	Metric                    // one int64 metric value
)

// String names the kind as otf2-print does.
func (k Kind) String() string {
	switch k {
	case Enter:
		return "ENTER"
	case Leave:
		return "LEAVE"
	case MpiSend:
		return "MPI_SEND"
	case MpiRecv:
		return "MPI_RECV"
	case CollBegin:
		return "MPI_COLLECTIVE_BEGIN"
	case CollEnd:
		return "MPI_COLLECTIVE_END"
	case Metric:
		return "METRIC"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Undefined is OTF2_UNDEFINED_UINT32 (a collective's unknown root).
const Undefined uint32 = ^uint32(0)

// Record is one OTF2 event as written.
type Record struct {
	Kind   Kind
	Loc    uint64 // location
	Time   uint64 // global time - origin, ns
	Region uint32 // Enter, Leave
	Peer   uint32 // MpiSend: receiver, MpiRecv: sender (rank in MPI_COMM_WORLD)
	Tag    uint32
	Size   uint64 // message bytes
	Op     uint8  // CollEnd: OTF2_CollectiveOp
	Root   uint32 // CollEnd
	Metric uint32 // Metric: the metric class
	Value  int64  // Metric
	// Attributes.
	Raw      int64 // gclock::local_ns
	Bound    int64 // gclock::bound_ns, if HasBound
	HasBound bool
	MsgID    uint64 // gclock::message_id, if HasMsgID
	HasMsgID bool
}

// Role values of OTF2_RegionRole used here.
const (
	roleFunction   = 1
	roleBarrier    = 15
	roleOne2All    = 23
	roleAll2One    = 24
	roleAll2All    = 25
	roleCollOther  = 26
	rolePoint2Pt   = 28
	roleArtificial = 31
)

// Paradigm values of OTF2_Paradigm used here.
const (
	paradigmUser = 2
	paradigmMPI  = 4
)

// collectives maps an MPI collective's name to its OTF2_CollectiveOp and
// region role.
var collectives = map[string]struct{ op, role uint8 }{
	"MPI_Barrier":              {0, roleBarrier},
	"MPI_Bcast":                {1, roleOne2All},
	"MPI_Gather":               {2, roleAll2One},
	"MPI_Gatherv":              {3, roleAll2One},
	"MPI_Scatter":              {4, roleOne2All},
	"MPI_Scatterv":             {5, roleOne2All},
	"MPI_Allgather":            {6, roleAll2All},
	"MPI_Allgatherv":           {7, roleAll2All},
	"MPI_Alltoall":             {8, roleAll2All},
	"MPI_Alltoallv":            {9, roleAll2All},
	"MPI_Alltoallw":            {10, roleAll2All},
	"MPI_Allreduce":            {11, roleAll2All},
	"MPI_Reduce":               {12, roleAll2One},
	"MPI_Reduce_scatter":       {13, roleAll2All},
	"MPI_Scan":                 {14, roleCollOther},
	"MPI_Exscan":               {15, roleCollOther},
	"MPI_Reduce_scatter_block": {16, roleAll2All},
}

// pointToPoint lists the MPI calls whose region role is point-to-point.
var pointToPoint = map[string]bool{
	"MPI_Send": true, "MPI_Ssend": true, "MPI_Bsend": true, "MPI_Rsend": true, "MPI_Recv": true,
	"MPI_Isend": true, "MPI_Issend": true, "MPI_Ibsend": true, "MPI_Irsend": true, "MPI_Irecv": true,
	"MPI_Sendrecv": true, "MPI_Sendrecv_replace": true, "MPI_Probe": true, "MPI_Iprobe": true,
	"MPI_Wait": true, "MPI_Waitall": true, "MPI_Waitany": true, "MPI_Waitsome": true,
	"MPI_Test": true, "MPI_Testall": true, "MPI_Testany": true, "MPI_Testsome": true,
}

// collBit marks the C tracer's collective dependencies (mpi/src/gclock_mpi.c COLL_BIT).
const collBit = uint64(1) << 63

// RegionDef is one region definition.
type RegionDef struct {
	Name     string
	Role     uint8
	Paradigm uint8
	coll     int // OTF2_CollectiveOp + 1, 0: not a collective
}

// ProcDef is one process: a location group (an MPI rank).
type ProcDef struct {
	Proc uint32
	Name string
	Host uint32
}

// LocationDef is one location (a track of a process).
type LocationDef struct {
	ID     uint64
	Name   string
	Group  int // index in Defs.Procs (the rank)
	Events uint64
}

// Defs are the global definitions, complete after Close.
type Defs struct {
	Offset, Length uint64 // clock properties: first event and span, ns
	Origin         int64  // global time of timestamp 0
	Procs          []ProcDef
	Hosts          []uint32 // distinct hosts, ascending
	Locations      []LocationDef
	Regions        []RegionDef
	Metrics        []string // metric names (one class per member)
	Metadata       []KV
}

// Stats count what the translation did.
type Stats struct {
	Events       int64 // OTF2 event records written
	Input        int64 // merged events read
	Dependencies int64 // collective dependencies left out
	Unknown      int64 // messages to or from a process not in the trace, left out
	Clamped      int64 // events moved forward to keep a location's time non-decreasing
}

// sink receives the records; the libotf2 archive or a test double.
type sink interface {
	event(r *Record) error
	finish(d *Defs) error
	abort()
}

type nameKey struct {
	proc uint32
	id   uint64
}

// Writer translates merged events into OTF2 records.
type Writer struct {
	sink      sink
	opt       Options
	names     map[nameKey]string
	procs     []ProcDef
	rank      map[uint32]int
	frozen    bool
	locIdx    map[uint64]int
	defs      Defs
	regionOf  map[string]uint32
	metricOf  map[string]uint32
	last      []uint64 // per location, the last time written
	originSet bool
	first     bool
	lastTime  uint64
	stats     Stats
	err       error
	closed    bool
}

func newWriter(s sink, opt Options) *Writer {
	return &Writer{sink: s, opt: opt, names: map[nameKey]string{}, rank: map[uint32]int{},
		locIdx: map[uint64]int{}, regionOf: map[string]uint32{}, metricOf: map[string]uint32{}, first: true}
}

// SetNames registers the string tables of the traces.
func (w *Writer) SetNames(ns []format.Name) {
	for _, n := range ns {
		w.names[nameKey{n.Proc, n.ID}] = n.Name
	}
}

// SetProcess declares a process; every process must be declared before the
// first Write (messages address processes by rank).
func (w *Writer) SetProcess(proc uint32, name string, host uint32) error {
	if w.frozen {
		return fmt.Errorf("otf2: process %d declared after the first event", proc)
	}
	if _, dup := w.rank[proc]; dup {
		return fmt.Errorf("otf2: process %d declared twice", proc)
	}
	w.rank[proc] = -1
	w.procs = append(w.procs, ProcDef{Proc: proc, Name: name, Host: host})
	return nil
}

// freeze numbers the ranks in process order and defines every process's
// track 0, the location its MPI events belong to.
func (w *Writer) freeze() {
	w.frozen = true
	sort.Slice(w.procs, func(i, j int) bool { return w.procs[i].Proc < w.procs[j].Proc })
	hosts := map[uint32]bool{}
	for i, p := range w.procs {
		w.rank[p.Proc] = i
		if !hosts[p.Host] {
			hosts[p.Host] = true
			w.defs.Hosts = append(w.defs.Hosts, p.Host)
		}
		w.loc(p.Proc, 0)
	}
	sort.Slice(w.defs.Hosts, func(i, j int) bool { return w.defs.Hosts[i] < w.defs.Hosts[j] })
	w.defs.Procs = w.procs
}

// LocationID is the OTF2 location of a process's track.
func LocationID(proc uint32, track uint16) uint64 { return uint64(proc)<<16 | uint64(track) }

func (w *Writer) loc(proc uint32, track uint16) (int, error) {
	id := LocationID(proc, track)
	if i, ok := w.locIdx[id]; ok {
		return i, nil
	}
	r, ok := w.rank[proc]
	if !ok {
		return 0, fmt.Errorf("otf2: event of process %d, which was not declared", proc)
	}
	name := w.procs[r].Name
	if track != 0 {
		name += " track " + strconv.Itoa(int(track))
	}
	w.locIdx[id] = len(w.defs.Locations)
	w.defs.Locations = append(w.defs.Locations, LocationDef{ID: id, Name: name, Group: r})
	w.last = append(w.last, 0)
	return len(w.defs.Locations) - 1, nil
}

func (w *Writer) region(name string) uint32 {
	if r, ok := w.regionOf[name]; ok {
		return r
	}
	d := RegionDef{Name: name, Role: roleFunction, Paradigm: paradigmUser}
	if c, ok := collectives[name]; ok {
		d.Role, d.Paradigm, d.coll = c.role, paradigmMPI, int(c.op)+1
	} else if pointToPoint[name] {
		d.Role, d.Paradigm = rolePoint2Pt, paradigmMPI
	} else if strings.HasPrefix(name, "MPI_") {
		d.Paradigm = paradigmMPI
	}
	r := uint32(len(w.defs.Regions))
	w.regionOf[name] = r
	w.defs.Regions = append(w.defs.Regions, d)
	return r
}

func (w *Writer) name(proc uint32, id uint64, kind string) string {
	if s, ok := w.names[nameKey{proc, id}]; ok {
		return s
	}
	return kind + " " + strconv.FormatUint(id, 10)
}

// Write translates one merged event; events come in global time order.
func (w *Writer) Write(m *format.Merged) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("otf2: write after close")
	}
	if !w.frozen {
		w.freeze()
	}
	w.err = w.write(m)
	return w.err
}

func (w *Writer) write(m *format.Merged) error {
	w.stats.Input++
	if !w.originSet {
		w.originSet = true
		if m.Time < 0 {
			w.defs.Origin = m.Time
		}
	}
	if m.Time < w.defs.Origin {
		return fmt.Errorf("otf2: event of process %d at %d ns comes before the trace's first event (%d ns): the stream is not in time order", m.Proc, m.Time, w.defs.Origin)
	}
	li, err := w.loc(m.Proc, m.Track)
	if err != nil {
		return err
	}
	t := uint64(m.Time - w.defs.Origin)
	if t < w.last[li] {
		t = w.last[li]
		w.stats.Clamped++
	}
	w.last[li] = t
	if w.first || t < w.defs.Offset {
		w.defs.Offset = t
	}
	w.first = false
	w.lastTime = max(w.lastTime, t)
	r := Record{Loc: w.defs.Locations[li].ID, Time: t, Raw: m.Raw}
	if w.opt.Bound != nil {
		r.Bound, r.HasBound = w.opt.Bound(m.Proc, m.Raw)
	}
	emit := func(x Record) error {
		w.defs.Locations[li].Events++
		w.stats.Events++
		return w.sink.event(&x)
	}
	switch m.Kind {
	case format.Enter, format.Leave:
		r.Region = w.region(w.name(m.Proc, m.ID, "region"))
		coll := w.defs.Regions[r.Region].coll
		if m.Kind == format.Enter {
			r.Kind = Enter
			if err := emit(r); err != nil {
				return err
			}
			if coll > 0 {
				r.Kind = CollBegin
				return emit(r)
			}
			return nil
		}
		if coll > 0 {
			c := r
			c.Kind, c.Op, c.Root = CollEnd, uint8(coll-1), Undefined
			if err := emit(c); err != nil {
				return err
			}
		}
		r.Kind = Leave
		return emit(r)
	case format.Instant:
		reg := w.region(w.name(m.Proc, m.ID, "instant"))
		if d := &w.defs.Regions[reg]; d.Paradigm == paradigmUser {
			d.Role = roleArtificial
		}
		r.Region, r.Kind = reg, Enter
		if err := emit(r); err != nil {
			return err
		}
		r.Kind = Leave
		return emit(r)
	case format.Counter:
		name := w.name(m.Proc, m.ID, "counter")
		id, ok := w.metricOf[name]
		if !ok {
			id = uint32(len(w.defs.Metrics))
			w.metricOf[name] = id
			w.defs.Metrics = append(w.defs.Metrics, name)
		}
		r.Kind, r.Metric, r.Value = Metric, id, m.Value
		return emit(r)
	case format.Send, format.Recv:
		if m.ID&collBit != 0 {
			w.stats.Dependencies++
			return nil
		}
		peer, ok := w.rank[m.Peer]
		if !ok {
			w.stats.Unknown++
			return nil
		}
		r.Kind = MpiSend
		if m.Kind == format.Recv {
			r.Kind = MpiRecv
		}
		r.Peer, r.Tag, r.Size = uint32(peer), uint32(m.ID>>32), uint64(max(m.Value, 0))
		r.MsgID, r.HasMsgID = m.ID, true
		return emit(r)
	}
	return fmt.Errorf("otf2: process %d: event of unknown kind %d at local %d ns", m.Proc, m.Kind, m.Raw)
}

// Close writes the definitions and finishes the archive.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		w.sink.abort()
		return w.err
	}
	if !w.frozen {
		w.freeze()
	}
	w.defs.Length = w.lastTime - w.defs.Offset
	w.defs.Metadata = append([]KV(nil), w.opt.Metadata...)
	if w.defs.Origin != 0 {
		w.defs.Metadata = append(w.defs.Metadata, KV{"origin_ns", strconv.FormatInt(w.defs.Origin, 10)})
	}
	w.err = w.sink.finish(&w.defs)
	return w.err
}

// Abort gives up the archive unless Close already ran (for error paths).
func (w *Writer) Abort() {
	if !w.closed {
		w.closed = true
		w.sink.abort()
	}
}

// Stats returns what the translation did so far.
func (w *Writer) Stats() Stats { return w.stats }

// Defs returns the definitions (complete after Close).
func (w *Writer) Defs() *Defs { return &w.defs }

// PropertyName turns a metadata key into an OTF2 property name:
// GCLOCK::KEY, upper case, letters, digits and underscores.
func PropertyName(key string) string {
	var b strings.Builder
	b.WriteString("GCLOCK::")
	for _, c := range strings.ToUpper(key) {
		if (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
