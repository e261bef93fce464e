package otf2

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	ar "github.com/gclock/gclock/trace/otf2/archive"
)

// goSink writes the archive in pure Go (package archive), the same
// definitions and records as the libotf2 sink (archive.go, -tags otf2).
type goSink struct {
	dir  string
	w    *ar.Writer
	locs map[uint64]bool
}

// CreateGo opens an OTF2 archive in dir like Create, written in pure Go
// whatever the build (Create is CreateGo in a build without -tags otf2).
func CreateGo(dir string, opt Options) (*Writer, error) {
	if err := replaceArchive(dir); err != nil {
		return nil, err
	}
	w, err := ar.Create(dir, "traces", ar.Options{Creator: "gclock"})
	if err != nil {
		return nil, fmt.Errorf("otf2: %w", err)
	}
	return newWriter(&goSink{dir: dir, w: w, locs: map[uint64]bool{}}, opt), nil
}

// replaceArchive makes dir and removes an archive already there (its
// anchor file, global definitions and location files; other files in dir
// stay), for either sink.
func replaceArchive(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("otf2: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "traces.otf2")); err == nil {
		for _, p := range []string{"traces.otf2", "traces.def", "traces"} {
			if err := os.RemoveAll(filepath.Join(dir, p)); err != nil {
				return fmt.Errorf("otf2: replace the archive in %s: %w", dir, err)
			}
		}
	}
	return nil
}

// Attribute definitions every event refers to (both sinks; typ is OTF2's
// OTF2_Type).
const (
	attrLocal = 0 // gclock::local_ns
	attrBound = 1 // gclock::bound_ns
	attrMsgID = 2 // gclock::message_id
)

var attrDefs = []struct {
	name, desc string
	typ        uint8
}{
	{"gclock::local_ns", "the event's raw timestamp on its process's local clock, ns", ar.TypeInt64},
	{"gclock::bound_ns", "half-width of the bound on the event's global time, ns (daemon mappings)", ar.TypeUint64},
	{"gclock::message_id", "gclock's message id (send and receive of one message share it)", ar.TypeUint64},
}

func u[T ~uint8 | ~uint32 | ~uint64 | ~int](x T) ar.Value { return ar.U(uint64(x)) }

// eventRecords maps each Kind to its OTF2 event record and that record's
// current fields in the order of the OTF2 specification (otf2.events):
// adding a kind is one row.
var eventRecords = map[Kind]struct {
	name   string
	fields func(r *Record) []ar.Value
}{
	Enter:         {"Enter", func(r *Record) []ar.Value { return []ar.Value{u(r.Region)} }},
	Leave:         {"Leave", func(r *Record) []ar.Value { return []ar.Value{u(r.Region)} }},
	MpiSend:       {"MpiSend", func(r *Record) []ar.Value { return []ar.Value{u(r.Peer), u(r.Comm), u(r.Tag), u(r.Size)} }},
	MpiRecv:       {"MpiRecv", func(r *Record) []ar.Value { return []ar.Value{u(r.Peer), u(r.Comm), u(r.Tag), u(r.Size)} }},
	CollBegin:     {"MpiCollectiveBegin", func(r *Record) []ar.Value { return nil }},
	CollEnd:       {"MpiCollectiveEnd", func(r *Record) []ar.Value { return []ar.Value{u(r.Op), u(r.Comm), u(r.Root), u(r.Size), u(r.Received)} }},
	RmaWinCreate:  {"RmaWinCreate", func(r *Record) []ar.Value { return []ar.Value{u(r.Win)} }},
	RmaWinDestroy: {"RmaWinDestroy", func(r *Record) []ar.Value { return []ar.Value{u(r.Win)} }},
	RmaPut:        {"RmaPut", func(r *Record) []ar.Value { return []ar.Value{u(r.Win), u(r.Peer), u(r.Size), u(r.Match)} }},
	RmaGet:        {"RmaGet", func(r *Record) []ar.Value { return []ar.Value{u(r.Win), u(r.Peer), u(r.Received), u(r.Match)} }},
	// An accumulate: OTF2_RMA_ATOMIC_TYPE_ACCUMULATE (0), bytes sent, none received.
	RmaAtomic:    {"RmaAtomic", func(r *Record) []ar.Value { return []ar.Value{u(r.Win), u(r.Peer), u(0), u(r.Size), u(0), u(r.Match)} }},
	RmaCollBegin: {"RmaCollectiveBegin", func(r *Record) []ar.Value { return nil }},
	// A fence: OTF2_COLLECTIVE_OP_BARRIER, sync level process | memory, no bytes.
	RmaCollEnd:     {"RmaCollectiveEnd", func(r *Record) []ar.Value { return []ar.Value{u(0), u(3), u(r.Win), u(r.Root), u(0), u(0)} }},
	RmaAcquireLock: {"RmaAcquireLock", func(r *Record) []ar.Value { return []ar.Value{u(r.Win), u(r.Peer), u(r.Match), u(r.Lock)} }},
	RmaReleaseLock: {"RmaReleaseLock", func(r *Record) []ar.Value { return []ar.Value{u(r.Win), u(r.Peer), u(r.Match)} }},
	// Nonblocking requests: the request id is the C tracer's request number.
	MpiIsend: {"MpiIsend", func(r *Record) []ar.Value {
		return []ar.Value{u(r.Peer), u(r.Comm), u(r.Tag), u(r.Size), u(r.Request)}
	}},
	MpiIsendComplete: {"MpiIsendComplete", func(r *Record) []ar.Value { return []ar.Value{u(r.Request)} }},
	MpiIrecvRequest:  {"MpiIrecvRequest", func(r *Record) []ar.Value { return []ar.Value{u(r.Request)} }},
	MpiIrecv: {"MpiIrecv", func(r *Record) []ar.Value {
		return []ar.Value{u(r.Peer), u(r.Comm), u(r.Tag), u(r.Size), u(r.Request)}
	}},
	MpiRequestTest:      {"MpiRequestTest", func(r *Record) []ar.Value { return []ar.Value{u(r.Request)} }},
	MpiRequestCancelled: {"MpiRequestCancelled", func(r *Record) []ar.Value { return []ar.Value{u(r.Request)} }},
	NbcRequest:          {"NonBlockingCollectiveRequest", func(r *Record) []ar.Value { return []ar.Value{u(r.Request)} }},
	NbcComplete: {"NonBlockingCollectiveComplete", func(r *Record) []ar.Value {
		return []ar.Value{u(r.Op), u(r.Comm), u(r.Root), u(r.Size), u(r.Received), u(r.Request)}
	}},
	// One int64 value (OTF2_TYPE_INT64) of the metric class.
	Metric: {"Metric", func(r *Record) []ar.Value {
		return []ar.Value{u(r.Metric), ar.Array([]ar.Value{u(ar.TypeInt64), ar.I(r.Value)})}
	}},
}

func (s *goSink) event(r *Record) error {
	e, ok := eventRecords[r.Kind]
	if !ok {
		return fmt.Errorf("otf2: no OTF2 record for %s", r.Kind)
	}
	rec, err := ar.NewRecord(ar.Event, e.name, r.Time, e.fields(r)...)
	if err != nil {
		return fmt.Errorf("otf2: %s of location %d: %w", r.Kind, r.Loc, err)
	}
	rec.Attrs = append(rec.Attrs, ar.Attr{ID: attrLocal, Type: ar.TypeInt64, Value: uint64(r.Raw)})
	if r.HasBound {
		rec.Attrs = append(rec.Attrs, ar.Attr{ID: attrBound, Type: ar.TypeUint64, Value: uint64(r.Bound)})
	}
	if r.HasMsgID {
		rec.Attrs = append(rec.Attrs, ar.Attr{ID: attrMsgID, Type: ar.TypeUint64, Value: r.MsgID})
	}
	s.locs[r.Loc] = true
	if err := s.w.Event(r.Loc, rec); err != nil {
		return fmt.Errorf("otf2: write %s of location %d at %d ns in %s: %w", r.Kind, r.Loc, r.Time, s.dir, err)
	}
	return nil
}

func (s *goSink) abort() { s.w.Abort() }

// OTF2 constants of the definitions.
const (
	undefined32         = math.MaxUint32 // OTF2_UNDEFINED_UINT32 (no parent, no string)
	undefinedTimestamp  = math.MaxUint64
	paradigmClassProc   = 0  // OTF2_PARADIGM_CLASS_PROCESS
	locGroupProcess     = 1  // OTF2_LOCATION_GROUP_TYPE_PROCESS
	locCPUThread        = 1  // OTF2_LOCATION_TYPE_CPU_THREAD
	groupCommLocations  = 4  // OTF2_GROUP_TYPE_COMM_LOCATIONS
	groupCommGroup      = 5  // OTF2_GROUP_TYPE_COMM_GROUP
	groupCommSelf       = 6  // OTF2_GROUP_TYPE_COMM_SELF
	metricTypeUser      = 3  // OTF2_METRIC_TYPE_USER
	metricAbsolutePoint = 17 // OTF2_METRIC_ABSOLUTE_POINT
	baseDecimal         = 1  // OTF2_BASE_DECIMAL
	metricAsynchronous  = 2  // OTF2_METRIC_ASYNCHRONOUS
	recorderAbstract    = 1  // OTF2_RECORDER_KIND_ABSTRACT
)

// finish writes what the libotf2 sink's finish writes, in its order.
func (s *goSink) finish(d *Defs) error {
	w := s.w
	for _, l := range d.Locations {
		if err := w.FinishEvents(l.ID); err != nil {
			return fmt.Errorf("otf2: %w", err)
		}
		w.TouchLocalDefs(l.ID)
		for _, o := range l.ClockOffsets() {
			r, err := ar.NewRecord(ar.LocalDef, "ClockOffset", 0, ar.U(o.Time), ar.I(o.Offset), ar.F(o.StdDev))
			if err == nil {
				err = w.LocalDef(l.ID, r)
			}
			if err != nil {
				return fmt.Errorf("otf2: the clock offsets of location %d: %w", l.ID, err)
			}
		}
	}
	for _, kv := range d.Metadata {
		w.SetProperty(PropertyName(kv.Key), kv.Value)
	}
	var strs []string
	ids := map[string]uint64{}
	str := func(x string) ar.Value {
		id, ok := ids[x]
		if !ok {
			id = uint64(len(strs))
			ids[x] = id
			strs = append(strs, x)
		}
		return ar.U(id)
	}
	// Strings are referenced before they are written: number them first,
	// in the libotf2 sink's order.
	empty := str("")
	machine, nodeClass, hostClass := str("gclock"), str("machine"), str("node")
	hostNames := make([]ar.Value, len(d.Hosts))
	for i, h := range d.Hosts {
		if i < len(d.HostNames) && d.HostNames[i] != "" {
			hostNames[i] = str(d.HostNames[i])
		} else {
			hostNames[i] = str(fmt.Sprintf("host %d", h))
		}
	}
	// The correction's mapping at each location's first and last event.
	offProps := [4]ar.Value{str("GCLOCK::FIRST_LOCAL_NS"), str("GCLOCK::FIRST_OFFSET_NS"),
		str("GCLOCK::LAST_LOCAL_NS"), str("GCLOCK::LAST_OFFSET_NS")}
	procNames := make([]ar.Value, len(d.Procs))
	for i, p := range d.Procs {
		procNames[i] = str(p.Name)
	}
	locNames := make([]ar.Value, len(d.Locations))
	for i, l := range d.Locations {
		locNames[i] = str(l.Name)
	}
	regNames := make([]ar.Value, len(d.Regions))
	for i, r := range d.Regions {
		regNames[i] = str(r.Name)
	}
	metNames := make([]ar.Value, len(d.Metrics))
	for i, m := range d.Metrics {
		metNames[i] = str(m)
	}
	attrNames := make([][2]ar.Value, len(attrDefs))
	for i, a := range attrDefs {
		attrNames[i] = [2]ar.Value{str(a.name), str(a.desc)}
	}
	mpi, user := str("MPI"), str("User")
	world, worldGroup, worldLocs := str("MPI_COMM_WORLD"), str("MPI_COMM_WORLD group"), str("MPI ranks")
	commNames := make([]ar.Value, len(d.Comms))
	for i := 1; i < len(d.Comms); i++ {
		commNames[i] = str(d.Comms[i].Name)
	}
	winNames := make([]ar.Value, len(d.Windows))
	for i, win := range d.Windows {
		winNames[i] = str(win.Name)
	}

	var err error
	def := func(name string, vals ...ar.Value) {
		if err != nil {
			return
		}
		var r *ar.Record
		if r, err = ar.NewRecord(ar.GlobalDef, name, 0, vals...); err == nil {
			err = w.Global(r)
		}
		if err != nil {
			err = fmt.Errorf("otf2: write %s definition in %s: %w", name, s.dir, err)
		}
	}
	for i, x := range strs {
		def("String", u(i), ar.S(x))
	}
	realtime := ar.U(undefinedTimestamp)
	if d.HasRealtime {
		realtime = ar.U(d.Realtime)
	}
	def("ClockProperties", u(1_000_000_000), u(d.Offset), u(d.Length), realtime)
	def("Paradigm", u(paradigmMPI), mpi, u(paradigmClassProc))
	def("Paradigm", u(paradigmUser), user, u(paradigmClassProc))
	def("SystemTreeNode", u(0), machine, nodeClass, ar.U(undefined32))
	hostNode := map[uint32]uint64{}
	for i, h := range d.Hosts {
		hostNode[h] = uint64(i + 1)
		def("SystemTreeNode", u(i+1), hostNames[i], hostClass, u(0))
	}
	for i, p := range d.Procs {
		def("LocationGroup", u(i), procNames[i], u(locGroupProcess), u(hostNode[p.Host]), ar.U(undefined32))
	}
	for i, l := range d.Locations {
		def("Location", u(l.ID), locNames[i], u(locCPUThread), u(l.Events), u(l.Group))
	}
	for _, l := range d.Locations {
		if l.HasOffsets {
			for j, v := range [4]int64{l.FirstLocal, l.FirstOffset, l.LastLocal, l.LastOffset} {
				// location, name, type, value
				def("LocationProperty", u(l.ID), offProps[j], u(ar.TypeInt64), ar.I(v))
			}
		}
	}
	for i, r := range d.Regions {
		// self, name, description, source file, begin and end line, canonical name, role, paradigm, flags
		def("Region", u(i), regNames[i], empty, empty, u(0), u(0), regNames[i], u(r.Role), u(r.Paradigm), u(0))
	}
	for i, a := range attrDefs {
		def("Attribute", u(i), attrNames[i][0], u(a.typ), attrNames[i][1])
	}
	if len(d.Procs) > 0 {
		// MPI_COMM_WORLD: rank i is process i's track 0.
		locs := make([][]ar.Value, len(d.Procs))
		ranks := make([][]ar.Value, len(d.Procs))
		for i, p := range d.Procs {
			locs[i] = []ar.Value{u(LocationID(p.Proc, 0))}
			ranks[i] = []ar.Value{u(i)}
		}
		// self, name, members, type, paradigm, flags
		def("Group", u(0), worldLocs, ar.Array(locs...), u(groupCommLocations), u(paradigmMPI), u(0))
		def("Group", u(1), worldGroup, ar.Array(ranks...), u(groupCommGroup), u(paradigmMPI), u(0))
		def("Comm", u(0), world, u(1), ar.U(undefined32), u(0))
		// Communicator i: group i+1, its members' ranks in MPI_COMM_WORLD in its rank
		// order; MPI_COMM_SELF's group is of type COMM_SELF, without members.
		for i := 1; i < len(d.Comms); i++ {
			if d.Comms[i].Self {
				def("Group", u(i+1), commNames[i], ar.Array(), u(groupCommSelf), u(paradigmMPI), u(0))
				def("Comm", u(i), commNames[i], u(i+1), ar.U(undefined32), u(0))
				continue
			}
			m := make([][]ar.Value, len(d.Comms[i].Members))
			for j, r := range d.Comms[i].Members {
				m[j] = []ar.Value{u(r)}
			}
			def("Group", u(i+1), commNames[i], ar.Array(m...), u(groupCommGroup), u(paradigmMPI), u(0))
			def("Comm", u(i), commNames[i], u(i+1), u(0), u(0))
		}
		for i, win := range d.Windows {
			def("RmaWin", u(i), winNames[i], u(win.Comm), u(0))
		}
	}
	for i := range d.Metrics {
		// One member and one asynchronous class per metric, both numbered i.
		def("MetricMember", u(i), metNames[i], metNames[i], u(metricTypeUser), u(metricAbsolutePoint),
			u(ar.TypeInt64), u(baseDecimal), ar.I(0), ar.U(undefined32))
		def("MetricClass", u(i), ar.Array([]ar.Value{u(i)}), u(metricAsynchronous), u(recorderAbstract))
	}
	if err != nil {
		w.Abort()
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("otf2: close the archive in %s: %w", s.dir, err)
	}
	return nil
}
