package otf2

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gclock/gclock/trace/format"
)

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
	Enter               Kind = iota + 1 // region enter
	Leave                               // region leave
	MpiSend                             // point-to-point send
	MpiRecv                             // point-to-point receive
	CollBegin                           // MpiCollectiveBegin
	CollEnd                             // MpiCollectiveEnd
	Metric                              // one int64 metric value
	RmaWinCreate                        // a window created (Win)
	RmaWinDestroy                       // a window freed (Win)
	RmaPut                              // Win, Peer (remote), Size, Match
	RmaGet                              // Win, Peer (remote), Received, Match
	RmaAtomic                           // an accumulate: Win, Peer (remote), Size, Match
	RmaCollBegin                        // RmaCollectiveBegin (a fence)
	RmaCollEnd                          // RmaCollectiveEnd: Win
	RmaAcquireLock                      // Win, Peer (remote), Match (the lock id), Lock
	RmaReleaseLock                      // Win, Peer (remote), Match (the lock id)
	MpiIsend                            // a nonblocking send: Peer (receiver), Comm, Tag, Size, Request
	MpiIsendComplete                    // a nonblocking send completed: Request
	MpiIrecvRequest                     // a nonblocking receive posted: Request
	MpiIrecv                            // a nonblocking receive completed: Peer (sender), Comm, Tag, Size, Request
	MpiRequestTest                      // an unsuccessful test of a request: Request
	MpiRequestCancelled                 // a request cancelled: Request
	NbcRequest                          // NonBlockingCollectiveRequest: Request
	NbcComplete                         // NonBlockingCollectiveComplete: Op, Comm, Root, Size (sent), Received, Request
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
	case RmaWinCreate:
		return "RMA_WIN_CREATE"
	case RmaWinDestroy:
		return "RMA_WIN_DESTROY"
	case RmaPut:
		return "RMA_PUT"
	case RmaGet:
		return "RMA_GET"
	case RmaAtomic:
		return "RMA_ATOMIC"
	case RmaCollBegin:
		return "RMA_COLLECTIVE_BEGIN"
	case RmaCollEnd:
		return "RMA_COLLECTIVE_END"
	case RmaAcquireLock:
		return "RMA_ACQUIRE_LOCK"
	case RmaReleaseLock:
		return "RMA_RELEASE_LOCK"
	case MpiIsend:
		return "MPI_ISEND"
	case MpiIsendComplete:
		return "MPI_ISEND_COMPLETE"
	case MpiIrecvRequest:
		return "MPI_IRECV_REQUEST"
	case MpiIrecv:
		return "MPI_IRECV"
	case MpiRequestTest:
		return "MPI_REQUEST_TEST"
	case MpiRequestCancelled:
		return "MPI_REQUEST_CANCELLED"
	case NbcRequest:
		return "NON_BLOCKING_COLLECTIVE_REQUEST"
	case NbcComplete:
		return "NON_BLOCKING_COLLECTIVE_COMPLETE"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Undefined is OTF2_UNDEFINED_UINT32 (a collective's unknown root).
const Undefined uint32 = ^uint32(0)

// Record is one OTF2 event as written.
type Record struct {
	Kind     Kind
	Loc      uint64 // location
	Time     uint64 // global time - origin, ns
	Region   uint32 // Enter, Leave
	Peer     uint32 // MpiSend, MpiIsend: receiver, MpiRecv, MpiIrecv: sender, Rma*: the target (rank in Comm, or in the window's)
	Tag      uint32
	Comm     uint32 // MpiSend, MpiRecv, MpiIsend, MpiIrecv, CollEnd, NbcComplete: index in Defs.Comms (0: MPI_COMM_WORLD, 1: MPI_COMM_SELF)
	Size     uint64 // message bytes; CollEnd, NbcComplete: bytes sent; RmaPut, RmaAtomic: bytes
	Received uint64 // CollEnd, NbcComplete, RmaGet: bytes received
	Op       uint8  // CollEnd, NbcComplete: OTF2_CollectiveOp
	Root     uint32 // CollEnd, NbcComplete: rank in Comm, or Undefined
	Request  uint64 // MpiIsend .. NbcComplete: the request id (the tracer's request number on this location, 1, 2, ...)
	Win      uint32 // Rma*: index in Defs.Windows, or Undefined (RmaCollEnd of an unknown window)
	Match    uint64 // RmaPut, RmaGet, RmaAtomic: matching id; locks: the lock id
	Lock     uint8  // RmaAcquireLock: OTF2_LockType (0 exclusive, 1 shared)
	Metric   uint32 // Metric: the metric class
	Value    int64  // Metric
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
	paradigmUser = 1 // OTF2_PARADIGM_USER (2 is OTF2_PARADIGM_COMPILER)
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

// The C MPI tracer's conventions (mpi/src/gclock_mpi.c, docs/mpi.md).
const (
	collBit     = uint64(1) << 63 // message ids of its collective dependencies
	tagNameBit  = uint64(1) << 62 // | message key (id >> 32): "MPI communicator KEY tag T"
	commNameBit = uint64(1) << 61 // | communicator key: "MPI communicator KEY: N ranks, world ranks ..."
	winNameBit  = uint64(1) << 60 // | window key: "MPI window KEY on communicator CKEY"
	reqNameBit  = uint64(1) << 59 // | reqStart..reqCancel: the request instants (value: the request number)
	userNameBit = uint64(1) << 58 // | communicator key: the name MPI_Comm_set_name gave it
	hostName    = uint64(1) << 57 // the host's name (gethostname)
	realtimeID  = hostName | 1    // "realtime R at local L": CLOCK_REALTIME and the trace clock read together
	worldKey    = 1               // MPI_COMM_WORLD's key
	selfKey     = 2               // MPI_COMM_SELF's key (on every rank)
	noPeer      = ^uint32(0)      // a region's enter without root or target
)

// The request instants of the C tracer (reqNameBit | kind), by their names.
const (
	reqStart = 1 + iota
	reqDone
	reqTest
	reqCancel
)

var reqNames = [...]string{reqStart: "MPI request started", reqDone: "MPI request completed", reqTest: "MPI request tested", reqCancel: "MPI request cancelled"}

// isendCalls are the regions whose send is a nonblocking one.
var isendCalls = map[string]bool{"MPI_Isend": true, "MPI_Issend": true, "MPI_Ibsend": true, "MPI_Irsend": true}

// nbcName is the nonblocking form's name of a blocking collective's:
// MPI_Reduce_scatter -> MPI_Ireduce_scatter.
func nbcName(blocking string) string {
	return "MPI_I" + strings.ToLower(blocking[4:5]) + blocking[5:]
}

// nonBlocking maps a nonblocking collective's name to its blocking form's.
var nonBlocking = func() map[string]string {
	m := map[string]string{}
	for n := range collectives {
		m[nbcName(n)] = n
	}
	return m
}()

// rmaKind is what an MPI one-sided call's region becomes.
type rmaKind uint8

const (
	rmaNone rmaKind = iota
	rmaCreate
	rmaFree
	rmaPut
	rmaGet
	rmaAcc
	rmaFence
	rmaLock
	rmaUnlock
)

var rmaCalls = map[string]rmaKind{
	"MPI_Win_create": rmaCreate, "MPI_Win_allocate": rmaCreate, "MPI_Win_free": rmaFree, "MPI_Put": rmaPut,
	"MPI_Get": rmaGet, "MPI_Accumulate": rmaAcc, "MPI_Win_fence": rmaFence, "MPI_Win_lock": rmaLock,
	"MPI_Win_unlock": rmaUnlock,
}

// parseCommName reads the C tracer's name of a communicator: its key and
// its members' world ranks; ok false unless the list is complete.
func parseCommName(s string) (key uint32, members []uint32, ok bool) {
	head, list, found := strings.Cut(s, " ranks, world ranks ")
	if !found {
		return 0, nil, false
	}
	ks, ns, found := strings.Cut(strings.TrimPrefix(head, "MPI communicator "), ": ")
	if !found || len(head) == len(strings.TrimPrefix(head, "MPI communicator ")) {
		return 0, nil, false
	}
	k, err := strconv.ParseUint(ks, 16, 32)
	if err != nil || len(ks) != 8 {
		return 0, nil, false
	}
	n, err := strconv.Atoi(ns)
	if err != nil || n <= 0 {
		return 0, nil, false
	}
	f := strings.Split(list, " ")
	if len(f) != n {
		return 0, nil, false // truncated ("...") or malformed
	}
	seen := map[uint32]bool{}
	for _, x := range f {
		r, err := strconv.ParseUint(x, 10, 32)
		if err != nil || seen[uint32(r)] {
			return 0, nil, false
		}
		seen[uint32(r)] = true
		members = append(members, uint32(r))
	}
	return uint32(k), members, true
}

// parseKeyPair reads "PREFIX%08x MID%d" names: the C tracer's tag names
// ("MPI communicator %08x tag %d") and window names ("MPI window %08x on
// communicator %08x", second base 16).
func parseKeyPair(s, prefix, mid string, base int) (uint32, int64, bool) {
	rest, found := strings.CutPrefix(s, prefix)
	if !found {
		return 0, 0, false
	}
	ks, vs, found := strings.Cut(rest, mid)
	if !found || len(ks) != 8 {
		return 0, 0, false
	}
	k, err := strconv.ParseUint(ks, 16, 32)
	if err != nil {
		return 0, 0, false
	}
	if base == 16 {
		v, err := strconv.ParseUint(vs, 16, 32)
		return uint32(k), int64(v), err == nil && len(vs) == 8
	}
	v, err := strconv.ParseInt(vs, 10, 32)
	return uint32(k), v, err == nil
}

// RegionDef is one region definition.
type RegionDef struct {
	Name     string
	Role     uint8
	Paradigm uint8
	coll     int     // OTF2_CollectiveOp + 1, 0: not a collective
	nbc      int     // a nonblocking collective's OTF2_CollectiveOp + 1
	rma      rmaKind // one-sided call
	isend    bool    // a nonblocking send
	irecv    bool    // MPI_Irecv
}

// CommDef is an MPI communicator: Defs.Comms[0] is MPI_COMM_WORLD (no
// Members: every rank), Defs.Comms[1] MPI_COMM_SELF (Self, no Members:
// written as a group of type OTF2_GROUP_TYPE_COMM_SELF, as Score-P does),
// then the communicators the C tracer names.
type CommDef struct {
	Name    string   // the name MPI_Comm_set_name gave it, else "MPI communicator KEY"
	Members []uint32 // ranks in MPI_COMM_WORLD (location group indices), in communicator rank order
	Self    bool     // MPI_COMM_SELF
	pos     map[uint32]uint32
}

// WinDef is an MPI window.
type WinDef struct {
	Name string
	Comm uint32 // index in Defs.Comms
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
	// The correction's mapping at this location's first and last event:
	// global - local (ns, the raw local stamp against the written global
	// time, origin included) at those local times. Written as location
	// properties (GCLOCK::FIRST_OFFSET_NS ...). HasOffsets false for a
	// location without events.
	FirstLocal, FirstOffset int64
	LastLocal, LastOffset   int64
	HasOffsets              bool
	// The same two events' timestamps as written and the half-width of
	// the bound on their global time (0: the correction knows none).
	// Written as OTF2 ClockOffset records with offset 0 (the timestamps
	// are global already: readers add a ClockOffset's offset to them) and
	// the bound as the standard deviation: the mapping used, stated to
	// readers that look for Score-P's records, changing no timestamp.
	FirstTime, LastTime   uint64
	FirstBound, LastBound int64
}

// ClockOffsets are the ClockOffset records of a location: (time, offset,
// standard deviation) at its first and its last event (one record when
// they coincide), offset 0, the bound's half-width as the deviation.
func (l *LocationDef) ClockOffsets() []ClockOffset {
	if !l.HasOffsets {
		return nil
	}
	out := []ClockOffset{{Time: l.FirstTime, StdDev: float64(l.FirstBound)}}
	if l.LastTime != l.FirstTime {
		out = append(out, ClockOffset{Time: l.LastTime, StdDev: float64(l.LastBound)})
	}
	return out
}

// ClockOffset is one OTF2 ClockOffset record (a local definition).
type ClockOffset struct {
	Time   uint64
	Offset int64
	StdDev float64
}

// Defs are the global definitions, complete after Close.
type Defs struct {
	Offset, Length uint64 // clock properties: first event and span, ns
	Origin         int64  // global time of timestamp 0
	// Realtime is the UTC date (ns since 1970) of timestamp Offset (OTF2
	// 3.0's realtimeTimestamp of the clock properties), when a trace
	// carries the C tracer's realtime pair (its reference rank's preferred);
	// HasRealtime false otherwise.
	Realtime    uint64
	HasRealtime bool
	Procs       []ProcDef
	Hosts       []uint32 // distinct hosts, ascending
	HostNames   []string // per Hosts: the name a trace of it gives (the C tracer's gethostname), else "host N"
	Locations   []LocationDef
	Regions     []RegionDef
	Comms       []CommDef // [0]: MPI_COMM_WORLD (no members listed: every rank)
	Windows     []WinDef
	Metrics     []string // metric names (one class per member)
	Metadata    []KV
}

// Stats count what the translation did.
type Stats struct {
	Events       int64 // OTF2 event records written
	Input        int64 // merged events read
	Dependencies int64 // collective dependencies left out
	Unknown      int64 // messages to or from a process not in the trace, left out
	Clamped      int64 // events moved forward to keep a location's time non-decreasing
	// MPI records whose communicator or window the string table does not
	// name completely (a message then goes on MPI_COMM_WORLD with the id's
	// upper half as its tag, a collective on MPI_COMM_WORLD with no root
	// or sizes, a one-sided call has its region only).
	Unnamed int64
	// Request instants of the C tracer not turned into records: of a
	// request this location never started (its start was lost, or the
	// trace is cut), or a start outside a nonblocking call's region.
	Requests int64
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
	last      []uint64        // per location, the last time written
	entered   []format.Merged // per location, the last enter (MPI regions carry data there)
	match     []uint64        // per location, the next RMA matching id
	commOf    map[uint32]int
	winOf     map[uint32]int
	firstOf   map[uint32][2]int64 // per process, its first event's raw and global time
	loc2      []locState          // per location: the requests and the open regions
	originSet bool
	first     bool
	lastTime  uint64
	stats     Stats
	err       error
	closed    bool
}

func newWriter(s sink, opt Options) *Writer {
	return &Writer{sink: s, opt: opt, names: map[nameKey]string{}, rank: map[uint32]int{},
		locIdx: map[uint64]int{}, regionOf: map[string]uint32{}, metricOf: map[string]uint32{}, first: true,
		commOf: map[uint32]int{}, winOf: map[uint32]int{}, firstOf: map[uint32][2]int64{}, defs: Defs{Comms: []CommDef{{Name: "MPI_COMM_WORLD"}, {Name: "MPI_COMM_SELF", Self: true}}}}
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
	w.entered = append(w.entered, format.Merged{})
	w.match = append(w.match, 0)
	w.loc2 = append(w.loc2, locState{reqs: map[uint64]*request{}})
	return len(w.defs.Locations) - 1, nil
}

func (w *Writer) region(name string) uint32 {
	if r, ok := w.regionOf[name]; ok {
		return r
	}
	d := RegionDef{Name: name, Role: roleFunction, Paradigm: paradigmUser}
	if c, ok := collectives[name]; ok {
		d.Role, d.Paradigm, d.coll = c.role, paradigmMPI, int(c.op)+1
	} else if b, ok := nonBlocking[name]; ok {
		c := collectives[b]
		d.Role, d.Paradigm, d.nbc = c.role, paradigmMPI, int(c.op)+1
	} else if k, ok := rmaCalls[name]; ok {
		d.Paradigm, d.rma = paradigmMPI, k
	} else if pointToPoint[name] {
		d.Role, d.Paradigm = rolePoint2Pt, paradigmMPI
		d.isend, d.irecv = isendCalls[name], name == "MPI_Irecv"
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
	if _, ok := w.firstOf[m.Proc]; !ok {
		w.firstOf[m.Proc] = [2]int64{m.Raw, m.Time}
	}
	r := Record{Loc: w.defs.Locations[li].ID, Time: t, Raw: m.Raw}
	if w.opt.Bound != nil {
		r.Bound, r.HasBound = w.opt.Bound(m.Proc, m.Raw)
	}
	var bound int64
	if r.HasBound {
		bound = r.Bound
	}
	ld := &w.defs.Locations[li]
	if !ld.HasOffsets {
		ld.HasOffsets, ld.FirstLocal, ld.FirstOffset = true, m.Raw, m.Time-m.Raw
		ld.FirstTime, ld.FirstBound = t, bound
	}
	ld.LastLocal, ld.LastOffset = m.Raw, m.Time-m.Raw
	ld.LastTime, ld.LastBound = t, bound
	emit := func(x Record) error {
		w.defs.Locations[li].Events++
		w.stats.Events++
		return w.sink.event(&x)
	}
	ls := &w.loc2[li]
	// A nonblocking send waits in its call's region for its request
	// number; anything else first lets it go as a blocking send.
	if ls.held != nil && !(m.Kind == format.Instant && w.reqInstant(m) == reqStart) {
		h := *ls.held
		ls.held = nil
		if err := emit(h); err != nil {
			return err
		}
	}
	switch m.Kind {
	case format.Enter, format.Leave:
		r.Region = w.region(w.name(m.Proc, m.ID, "region"))
		d := w.defs.Regions[r.Region]
		if m.Kind == format.Enter {
			w.entered[li] = *m
			ls.open = append(ls.open, r.Region)
			r.Kind = Enter
			if err := emit(r); err != nil {
				return err
			}
			if d.coll > 0 {
				r.Kind = CollBegin
				return emit(r)
			}
			if d.rma == rmaFence {
				r.Kind = RmaCollBegin
				return emit(r)
			}
			return nil
		}
		// The C MPI tracer's enter carries the root or target and the bytes sent, its leave the
		// communicator's or window's key (never 0) and the bytes received.
		if n := len(ls.open); n > 0 && ls.open[n-1] == r.Region {
			ls.open = ls.open[:n-1]
		}
		ls.awaitRecv = 0
		in := w.entered[li]
		data := in.Kind == format.Enter && in.ID == m.ID && m.Peer != 0
		if d.coll > 0 || (d.nbc > 0 && ls.nbc != 0) {
			c := r
			c.Kind, c.Op, c.Root = CollEnd, uint8(d.coll-1), Undefined
			if d.nbc > 0 {
				c.Op = uint8(d.nbc - 1)
			}
			if data {
				if ci, ok := w.comm(m.Proc, m.Peer); ok {
					c.Comm, c.Size, c.Received = ci, uint64(max(in.Value, 0)), uint64(max(m.Value, 0))
					if in.Peer != noPeer {
						c.Root, _ = w.rankIn(ci, in.Peer)
					}
				} else {
					w.stats.Unnamed++
				}
			}
			if d.nbc > 0 {
				// Kept for the request's completion.
				if q := ls.reqs[ls.nbc]; q != nil {
					q.coll = c
				}
				ls.nbc = 0
			} else if err := emit(c); err != nil {
				return err
			}
		}
		if d.rma != rmaNone {
			if err := w.rmaLeave(li, r, d.rma, data, &in, m, emit); err != nil {
				return err
			}
		}
		r.Kind = Leave
		return emit(r)
	case format.Instant:
		if k := w.reqInstant(m); k != 0 {
			return w.request(ls, r, k, uint64(m.Value), emit)
		}
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
		// The C MPI tracer names the communicator and tag of every message key.
		if name, ok := w.names[nameKey{m.Proc, tagNameBit | m.ID>>32}]; ok {
			ck, tag, ok := parseKeyPair(name, "MPI communicator ", " tag ", 10)
			ci, cok := w.comm(m.Proc, ck)
			rr, rok := w.rankIn(ci, m.Peer)
			if ok && cok && rok && tag >= 0 {
				r.Comm, r.Peer, r.Tag = ci, rr, uint32(tag)
			} else {
				w.stats.Unnamed++
			}
		}
		if r.Kind == MpiSend && len(ls.open) > 0 && w.defs.Regions[ls.open[len(ls.open)-1]].isend {
			ls.held = &r // until its request's number
			return nil
		}
		if r.Kind == MpiRecv && ls.awaitRecv != 0 {
			r.Kind, r.Request = MpiIrecv, ls.awaitRecv
			ls.awaitRecv = 0
		}
		return emit(r)
	}
	return fmt.Errorf("otf2: process %d: event of unknown kind %d at local %d ns", m.Proc, m.Kind, m.Raw)
}

// locState is what the translation keeps per location for the C tracer's
// requests.
type locState struct {
	open      []uint32            // the open regions, innermost last
	held      *Record             // a nonblocking send waiting for its request number
	reqs      map[uint64]*request // the pending requests by number
	awaitRecv uint64              // a completed receive request whose MpiRecv comes next
	nbc       uint64              // the request a nonblocking collective's region started
}

// request is a pending nonblocking request.
type request struct {
	kind Kind   // MpiIsend, MpiIrecv or NbcComplete
	coll Record // NbcComplete: the collective's data (Op, Comm, Root, Size, Received)
}

// reqInstant returns the C tracer's request instant kind of m, 0 if m is
// none (its id and its name in the string table must both say so).
func (w *Writer) reqInstant(m *format.Merged) int {
	if m.Kind != format.Instant || m.ID&^7 != reqNameBit {
		return 0
	}
	k := int(m.ID & 7)
	if k < reqStart || k > reqCancel || w.names[nameKey{m.Proc, m.ID}] != reqNames[k] {
		return 0
	}
	return k
}

// request turns a request instant of request num into its OTF2 record.
func (w *Writer) request(ls *locState, r Record, k int, num uint64, emit func(Record) error) error {
	r.Request = num
	q := ls.reqs[num]
	var top RegionDef
	if len(ls.open) > 0 {
		top = w.defs.Regions[ls.open[len(ls.open)-1]]
	}
	switch {
	case k == reqStart && ls.held != nil:
		h := *ls.held
		ls.held = nil
		h.Kind, h.Request = MpiIsend, num
		ls.reqs[num] = &request{kind: MpiIsend}
		return emit(h)
	case k == reqStart && top.irecv:
		ls.reqs[num] = &request{kind: MpiIrecv}
		r.Kind = MpiIrecvRequest
		return emit(r)
	case k == reqStart && top.nbc > 0:
		c := Record{Op: uint8(top.nbc - 1), Root: Undefined}
		ls.reqs[num], ls.nbc = &request{kind: NbcComplete, coll: c}, num
		r.Kind = NbcRequest
		return emit(r)
	case k == reqStart || q == nil:
		w.stats.Requests++
		return nil
	case k == reqTest:
		r.Kind = MpiRequestTest
		return emit(r)
	case k == reqCancel:
		delete(ls.reqs, num)
		r.Kind = MpiRequestCancelled
		return emit(r)
	}
	delete(ls.reqs, num)
	switch q.kind {
	case MpiIsend:
		r.Kind = MpiIsendComplete
	case MpiIrecv:
		ls.awaitRecv = num // its receive follows
		return nil
	default:
		c := q.coll
		r.Kind, r.Op, r.Comm, r.Root, r.Size, r.Received = NbcComplete, c.Op, c.Comm, c.Root, c.Size, c.Received
	}
	return emit(r)
}

// comm returns the index of the communicator with the C tracer's key, as
// proc's string table names it; defined at its first use.
func (w *Writer) comm(proc uint32, key uint32) (uint32, bool) {
	if key == worldKey {
		return 0, true
	}
	if key == selfKey {
		return 1, true
	}
	if i, ok := w.commOf[key]; ok {
		return uint32(i), true
	}
	k, members, ok := parseCommName(w.names[nameKey{proc, commNameBit | uint64(key)}])
	if !ok || k != key {
		return 0, false
	}
	c := CommDef{Name: fmt.Sprintf("MPI communicator %08x", key), pos: map[uint32]uint32{}}
	if n := w.names[nameKey{proc, userNameBit | uint64(key)}]; n != "" {
		c.Name = n
	}
	for i, p := range members {
		r, ok := w.rank[p]
		if !ok || r < 0 {
			return 0, false // a member not in the trace
		}
		c.Members = append(c.Members, uint32(r))
		c.pos[uint32(r)] = uint32(i)
	}
	w.commOf[key] = len(w.defs.Comms)
	w.defs.Comms = append(w.defs.Comms, c)
	return uint32(len(w.defs.Comms) - 1), true
}

// rankIn returns the rank of process proc (a world rank) in communicator ci.
func (w *Writer) rankIn(ci uint32, proc uint32) (uint32, bool) {
	r, ok := w.rank[proc]
	if !ok || r < 0 || int(ci) >= len(w.defs.Comms) {
		return Undefined, false
	}
	if ci == 0 {
		return uint32(r), true
	}
	if ci == 1 {
		return 0, true // MPI_COMM_SELF
	}
	p, ok := w.defs.Comms[ci].pos[uint32(r)]
	if !ok {
		return Undefined, false
	}
	return p, true
}

// window returns the index of the window with the C tracer's key.
func (w *Writer) window(proc uint32, key uint32) (uint32, bool) {
	if i, ok := w.winOf[key]; ok {
		return uint32(i), true
	}
	k, ck, ok := parseKeyPair(w.names[nameKey{proc, winNameBit | uint64(key)}], "MPI window ", " on communicator ", 16)
	if !ok || k != key {
		return 0, false
	}
	ci, ok := w.comm(proc, uint32(ck))
	if !ok {
		return 0, false
	}
	w.winOf[key] = len(w.defs.Windows)
	w.defs.Windows = append(w.defs.Windows, WinDef{Name: fmt.Sprintf("MPI window %08x", key), Comm: ci})
	return uint32(len(w.defs.Windows) - 1), true
}

// rmaLeave writes the RMA records of a one-sided call's region before its
// leave: in is its enter, data whether they carry the C tracer's data.
func (w *Writer) rmaLeave(li int, r Record, kind rmaKind, data bool, in, m *format.Merged, emit func(Record) error) error {
	win := Undefined
	if data {
		if wi, ok := w.window(m.Proc, m.Peer); ok {
			win = wi
		} else {
			w.stats.Unnamed++
		}
	}
	r.Win, r.Root = win, Undefined
	if kind == rmaFence {
		r.Kind = RmaCollEnd
		return emit(r)
	}
	if win == Undefined {
		return nil
	}
	remote, rok := Undefined, false
	if in.Peer != noPeer {
		remote, rok = w.rankIn(w.defs.Windows[win].Comm, in.Peer)
	}
	r.Peer = remote
	next := func() uint64 { w.match[li]++; return w.match[li] - 1 }
	switch {
	case kind == rmaCreate:
		r.Kind = RmaWinCreate
	case kind == rmaFree:
		r.Kind = RmaWinDestroy
	case !rok:
		return nil // a transfer or a lock without its target
	case kind == rmaPut:
		r.Kind, r.Size, r.Match = RmaPut, uint64(max(in.Value, 0)), next()
	case kind == rmaGet:
		r.Kind, r.Received, r.Match = RmaGet, uint64(max(m.Value, 0)), next()
	case kind == rmaAcc:
		r.Kind, r.Size, r.Match = RmaAtomic, uint64(max(in.Value, 0)), next()
	case kind == rmaLock:
		r.Kind, r.Match = RmaAcquireLock, uint64(win)<<32|uint64(remote)
		if in.Value != 1 {
			r.Lock = 1 // shared
		}
	case kind == rmaUnlock:
		r.Kind, r.Match = RmaReleaseLock, uint64(win)<<32|uint64(remote)
	default:
		return nil
	}
	return emit(r)
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
	// A nonblocking send whose call's region the trace cuts off: a send.
	for li := range w.loc2 {
		if h := w.loc2[li].held; h != nil {
			w.loc2[li].held = nil
			w.defs.Locations[li].Events++
			w.stats.Events++
			if w.err = w.sink.event(h); w.err != nil {
				w.sink.abort()
				return w.err
			}
		}
	}
	w.defs.Length = w.lastTime - w.defs.Offset
	w.hostNames()
	w.realtime()
	w.defs.Metadata = append([]KV(nil), w.opt.Metadata...)
	if w.defs.Origin != 0 {
		w.defs.Metadata = append(w.defs.Metadata, KV{"origin_ns", strconv.FormatInt(w.defs.Origin, 10)})
	}
	w.err = w.sink.finish(&w.defs)
	return w.err
}

// hostNames names each host after the name a trace of it gives.
func (w *Writer) hostNames() {
	w.defs.HostNames = make([]string, len(w.defs.Hosts))
	for i, h := range w.defs.Hosts {
		w.defs.HostNames[i] = fmt.Sprintf("host %d", h)
		for _, p := range w.procs {
			if n := w.names[nameKey{p.Proc, hostName}]; p.Host == h && n != "" {
				w.defs.HostNames[i] = n
				break
			}
		}
	}
}

// parseRealtime reads the C tracer's "realtime R at local L".
func parseRealtime(s string) (rt, local int64, ok bool) {
	a, b, found := strings.Cut(strings.TrimPrefix(s, "realtime "), " at local ")
	if !found || !strings.HasPrefix(s, "realtime ") {
		return 0, 0, false
	}
	rt, err1 := strconv.ParseInt(a, 10, 64)
	local, err2 := strconv.ParseInt(b, 10, 64)
	return rt, local, err1 == nil && err2 == nil && rt > 0
}

// realtime sets the UTC date of timestamp Offset from the realtime pair of
// the first process (in rank order) that has one and events: its first
// event was at local raw r and global g, so at UTC rt + (r - local) (the
// local clock's rate taken as UTC's over that span); timestamp Offset is
// g - origin - Offset earlier.
func (w *Writer) realtime() {
	for _, p := range w.procs {
		rt, local, ok := parseRealtime(w.names[nameKey{p.Proc, realtimeID}])
		f, seen := w.firstOf[p.Proc]
		if !ok || !seen {
			continue
		}
		at := rt + (f[0] - local) - (f[1] - w.defs.Origin - int64(w.defs.Offset))
		if at > 0 {
			w.defs.Realtime, w.defs.HasRealtime = uint64(at), true
		}
		return
	}
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
