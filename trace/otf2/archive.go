//go:build otf2 && cgo

package otf2

/*
#cgo pkg-config: otf2
#include <stdlib.h>
#include <stdbool.h>
#include <otf2/otf2.h>

static OTF2_FlushType gc_pre_flush(void* user, OTF2_FileType ft, OTF2_LocationRef loc, void* caller, bool final) { return OTF2_FLUSH; }
static OTF2_TimeStamp gc_post_flush(void* user, OTF2_FileType ft, OTF2_LocationRef loc) { return 0; }
static OTF2_FlushCallbacks gc_flush = { .otf2_pre_flush = gc_pre_flush, .otf2_post_flush = gc_post_flush };

static OTF2_Archive* gc_open(const char* dir) {
	OTF2_Archive* a = OTF2_Archive_Open(dir, "traces", OTF2_FILEMODE_WRITE, 1024 * 1024, 4 * 1024 * 1024, OTF2_SUBSTRATE_POSIX, OTF2_COMPRESSION_NONE);
	if (!a) return NULL;
	if (OTF2_Archive_SetFlushCallbacks(a, &gc_flush, NULL) != OTF2_SUCCESS ||
	    OTF2_Archive_SetSerialCollectiveCallbacks(a) != OTF2_SUCCESS ||
	    OTF2_Archive_SetCreator(a, "gclock") != OTF2_SUCCESS ||
	    OTF2_Archive_OpenEvtFiles(a) != OTF2_SUCCESS) {
		OTF2_Archive_Close(a);
		return NULL;
	}
	return a;
}

enum { A_LOCAL = 0, A_BOUND = 1, A_MSGID = 2 };

typedef struct {
	int kind;
	uint64_t time;
	uint32_t region, peer, tag, root, metric, comm, win;
	uint64_t size, received, match, request;
	uint8_t op, lock;
	int64_t value, raw, bound;
	uint64_t msgid;
	int has_bound, has_msgid;
} gc_rec;

static OTF2_ErrorCode gc_event(OTF2_EvtWriter* w, OTF2_AttributeList* al, const gc_rec* r) {
	OTF2_ErrorCode e = OTF2_AttributeList_AddInt64(al, A_LOCAL, r->raw);
	if (e == OTF2_SUCCESS && r->has_bound) e = OTF2_AttributeList_AddUint64(al, A_BOUND, (uint64_t)r->bound);
	if (e == OTF2_SUCCESS && r->has_msgid) e = OTF2_AttributeList_AddUint64(al, A_MSGID, r->msgid);
	if (e != OTF2_SUCCESS) return e;
	switch (r->kind) {
	case 1: return OTF2_EvtWriter_Enter(w, al, r->time, r->region);
	case 2: return OTF2_EvtWriter_Leave(w, al, r->time, r->region);
	case 3: return OTF2_EvtWriter_MpiSend(w, al, r->time, r->peer, r->comm, r->tag, r->size);
	case 4: return OTF2_EvtWriter_MpiRecv(w, al, r->time, r->peer, r->comm, r->tag, r->size);
	case 5: return OTF2_EvtWriter_MpiCollectiveBegin(w, al, r->time);
	case 6: return OTF2_EvtWriter_MpiCollectiveEnd(w, al, r->time, r->op, r->comm, r->root, r->size, r->received);
	case 7: {
		OTF2_Type t = OTF2_TYPE_INT64;
		OTF2_MetricValue v;
		v.signed_int = r->value;
		return OTF2_EvtWriter_Metric(w, al, r->time, r->metric, 1, &t, &v);
	}
	case 8: return OTF2_EvtWriter_RmaWinCreate(w, al, r->time, r->win);
	case 9: return OTF2_EvtWriter_RmaWinDestroy(w, al, r->time, r->win);
	case 10: return OTF2_EvtWriter_RmaPut(w, al, r->time, r->win, r->peer, r->size, r->match);
	case 11: return OTF2_EvtWriter_RmaGet(w, al, r->time, r->win, r->peer, r->received, r->match);
	case 12: return OTF2_EvtWriter_RmaAtomic(w, al, r->time, r->win, r->peer, OTF2_RMA_ATOMIC_TYPE_ACCUMULATE, r->size, 0, r->match);
	case 13: return OTF2_EvtWriter_RmaCollectiveBegin(w, al, r->time);
	case 14: return OTF2_EvtWriter_RmaCollectiveEnd(w, al, r->time, OTF2_COLLECTIVE_OP_BARRIER,
		OTF2_RMA_SYNC_LEVEL_PROCESS | OTF2_RMA_SYNC_LEVEL_MEMORY, r->win, r->root, 0, 0);
	case 15: return OTF2_EvtWriter_RmaAcquireLock(w, al, r->time, r->win, r->peer, r->match, r->lock);
	case 16: return OTF2_EvtWriter_RmaReleaseLock(w, al, r->time, r->win, r->peer, r->match);
	case 17: return OTF2_EvtWriter_MpiIsend(w, al, r->time, r->peer, r->comm, r->tag, r->size, r->request);
	case 18: return OTF2_EvtWriter_MpiIsendComplete(w, al, r->time, r->request);
	case 19: return OTF2_EvtWriter_MpiIrecvRequest(w, al, r->time, r->request);
	case 20: return OTF2_EvtWriter_MpiIrecv(w, al, r->time, r->peer, r->comm, r->tag, r->size, r->request);
	case 21: return OTF2_EvtWriter_MpiRequestTest(w, al, r->time, r->request);
	case 22: return OTF2_EvtWriter_MpiRequestCancelled(w, al, r->time, r->request);
	case 23: return OTF2_EvtWriter_NonBlockingCollectiveRequest(w, al, r->time, r->request);
	case 24: return OTF2_EvtWriter_NonBlockingCollectiveComplete(w, al, r->time, r->op, r->comm, r->root, r->size, r->received, r->request);
	}
	return OTF2_ERROR_INVALID_ARGUMENT;
}

static OTF2_ErrorCode gc_locprop(OTF2_GlobalDefWriter* g, uint64_t loc, uint32_t name, int64_t v) {
	OTF2_AttributeValue a;
	a.int64 = v;
	return OTF2_GlobalDefWriter_WriteLocationProperty(g, loc, name, OTF2_TYPE_INT64, a);
}

static OTF2_ErrorCode gc_metric(OTF2_GlobalDefWriter* g, uint32_t id, uint32_t name) {
	OTF2_ErrorCode e = OTF2_GlobalDefWriter_WriteMetricMember(g, id, name, name, OTF2_METRIC_TYPE_USER,
		OTF2_METRIC_ABSOLUTE_POINT, OTF2_TYPE_INT64, OTF2_BASE_DECIMAL, 0, OTF2_UNDEFINED_STRING);
	if (e != OTF2_SUCCESS) return e;
	OTF2_MetricMemberRef m = id;
	return OTF2_GlobalDefWriter_WriteMetricClass(g, id, 1, &m, OTF2_METRIC_ASYNCHRONOUS, OTF2_RECORDER_KIND_ABSTRACT);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Available reports whether this build can write OTF2 archives.
const Available = true

// archive is the libotf2 sink.
type archive struct {
	dir   string
	a     *C.OTF2_Archive
	al    *C.OTF2_AttributeList
	evw   map[uint64]*C.OTF2_EvtWriter
	order []uint64
}

// Create opens an OTF2 archive in dir: dir/traces.otf2 (the anchor file),
// dir/traces.def and dir/traces/. An archive already there is replaced;
// other files in dir are left alone.
func Create(dir string, opt Options) (*Writer, error) {
	if err := replaceArchive(dir); err != nil {
		return nil, err
	}
	cdir := C.CString(dir)
	defer C.free(unsafe.Pointer(cdir))
	a := C.gc_open(cdir)
	if a == nil {
		return nil, fmt.Errorf("otf2: libotf2 could not open an archive for writing in %s", dir)
	}
	s := &archive{dir: dir, a: a, al: C.OTF2_AttributeList_New(), evw: map[uint64]*C.OTF2_EvtWriter{}}
	return newWriter(s, opt), nil
}

func (s *archive) check(e C.OTF2_ErrorCode, what string) error {
	if e == C.OTF2_SUCCESS {
		return nil
	}
	return fmt.Errorf("otf2: %s in %s: %s (%s)", what, s.dir, C.GoString(C.OTF2_Error_GetName(e)), C.GoString(C.OTF2_Error_GetDescription(e)))
}

func (s *archive) writer(loc uint64) (*C.OTF2_EvtWriter, error) {
	if w, ok := s.evw[loc]; ok {
		return w, nil
	}
	w := C.OTF2_Archive_GetEvtWriter(s.a, C.OTF2_LocationRef(loc))
	if w == nil {
		return nil, fmt.Errorf("otf2: no event writer for location %d in %s", loc, s.dir)
	}
	s.evw[loc] = w
	s.order = append(s.order, loc)
	return w, nil
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func (s *archive) event(r *Record) error {
	w, err := s.writer(r.Loc)
	if err != nil {
		return err
	}
	c := C.gc_rec{kind: C.int(r.Kind), time: C.uint64_t(r.Time), region: C.uint32_t(r.Region), peer: C.uint32_t(r.Peer),
		tag: C.uint32_t(r.Tag), root: C.uint32_t(r.Root), metric: C.uint32_t(r.Metric), size: C.uint64_t(r.Size),
		comm: C.uint32_t(r.Comm), win: C.uint32_t(r.Win), received: C.uint64_t(r.Received), match: C.uint64_t(r.Match), request: C.uint64_t(r.Request),
		lock: C.uint8_t(r.Lock), op: C.uint8_t(r.Op), value: C.int64_t(r.Value), raw: C.int64_t(r.Raw), bound: C.int64_t(r.Bound),
		msgid: C.uint64_t(r.MsgID), has_bound: cbool(r.HasBound), has_msgid: cbool(r.HasMsgID)}
	return s.check(C.gc_event(w, s.al, &c), fmt.Sprintf("write %s of location %d at %d ns", r.Kind, r.Loc, r.Time))
}

func (s *archive) abort() {
	if s.a != nil {
		C.OTF2_Archive_Close(s.a)
		s.a = nil
	}
	if s.al != nil {
		C.OTF2_AttributeList_Delete(s.al)
		s.al = nil
	}
}

// strtab numbers the definition strings.
type strtab struct {
	ids  map[string]uint32
	list []string
}

func (t *strtab) ref(s string) C.OTF2_StringRef {
	if id, ok := t.ids[s]; ok {
		return C.OTF2_StringRef(id)
	}
	id := uint32(len(t.list))
	t.ids[s] = id
	t.list = append(t.list, s)
	return C.OTF2_StringRef(id)
}

func (s *archive) finish(d *Defs) (err error) {
	defer s.abort()
	// Every location needs an event file, even one without events.
	for _, l := range d.Locations {
		if _, err := s.writer(l.ID); err != nil {
			return err
		}
	}
	for _, loc := range s.order {
		if err := s.check(C.OTF2_Archive_CloseEvtWriter(s.a, s.evw[loc]), fmt.Sprintf("close the events of location %d", loc)); err != nil {
			return err
		}
	}
	if err := s.check(C.OTF2_Archive_CloseEvtFiles(s.a), "close the event files"); err != nil {
		return err
	}
	if err := s.check(C.OTF2_Archive_OpenDefFiles(s.a), "open the local definition files"); err != nil {
		return err
	}
	for _, l := range d.Locations {
		dw := C.OTF2_Archive_GetDefWriter(s.a, C.OTF2_LocationRef(l.ID))
		if dw == nil {
			return fmt.Errorf("otf2: no definition writer for location %d in %s", l.ID, s.dir)
		}
		for _, o := range l.ClockOffsets() {
			if err := s.check(C.OTF2_DefWriter_WriteClockOffset(dw, C.OTF2_TimeStamp(o.Time), C.int64_t(o.Offset), C.double(o.StdDev)), fmt.Sprintf("write the clock offsets of location %d", l.ID)); err != nil {
				return err
			}
		}
		if err := s.check(C.OTF2_Archive_CloseDefWriter(s.a, dw), "close a local definition file"); err != nil {
			return err
		}
	}
	if err := s.check(C.OTF2_Archive_CloseDefFiles(s.a), "close the local definition files"); err != nil {
		return err
	}
	for _, kv := range d.Metadata {
		n, v := C.CString(PropertyName(kv.Key)), C.CString(kv.Value)
		e := C.OTF2_Archive_SetProperty(s.a, n, v, C.bool(true))
		C.free(unsafe.Pointer(n))
		C.free(unsafe.Pointer(v))
		if err := s.check(e, "set property "+PropertyName(kv.Key)); err != nil {
			return err
		}
	}
	g := C.OTF2_Archive_GetGlobalDefWriter(s.a)
	if g == nil {
		return fmt.Errorf("otf2: no global definition writer in %s", s.dir)
	}
	var errs []error
	chk := func(e C.OTF2_ErrorCode, what string) {
		if err := s.check(e, what); err != nil {
			errs = append(errs, err)
		}
	}
	st := &strtab{ids: map[string]uint32{}}
	// Strings are referenced before they are written: collect them first.
	type region struct{ name, desc C.OTF2_StringRef }
	empty := st.ref("")
	machine, nodeClass, hostClass := st.ref("gclock"), st.ref("machine"), st.ref("node")
	hostNames := make([]C.OTF2_StringRef, len(d.Hosts))
	for i, h := range d.Hosts {
		if i < len(d.HostNames) && d.HostNames[i] != "" {
			hostNames[i] = st.ref(d.HostNames[i])
		} else {
			hostNames[i] = st.ref(fmt.Sprintf("host %d", h))
		}
	}
	// The correction's mapping at each location's first and last event.
	offProps := [4]C.OTF2_StringRef{st.ref("GCLOCK::FIRST_LOCAL_NS"), st.ref("GCLOCK::FIRST_OFFSET_NS"),
		st.ref("GCLOCK::LAST_LOCAL_NS"), st.ref("GCLOCK::LAST_OFFSET_NS")}
	procNames := make([]C.OTF2_StringRef, len(d.Procs))
	for i, p := range d.Procs {
		procNames[i] = st.ref(p.Name)
	}
	locNames := make([]C.OTF2_StringRef, len(d.Locations))
	for i, l := range d.Locations {
		locNames[i] = st.ref(l.Name)
	}
	regNames := make([]C.OTF2_StringRef, len(d.Regions))
	for i, r := range d.Regions {
		regNames[i] = st.ref(r.Name)
	}
	metNames := make([]C.OTF2_StringRef, len(d.Metrics))
	for i, m := range d.Metrics {
		metNames[i] = st.ref(m)
	}
	attrRefs := make([]region, len(attrDefs))
	for i, a := range attrDefs {
		attrRefs[i] = region{st.ref(a.name), st.ref(a.desc)}
	}
	mpi, user := st.ref("MPI"), st.ref("User")
	world, worldGroup, worldLocs := st.ref("MPI_COMM_WORLD"), st.ref("MPI_COMM_WORLD group"), st.ref("MPI ranks")
	commNames := make([]C.OTF2_StringRef, len(d.Comms))
	for i := 1; i < len(d.Comms); i++ {
		commNames[i] = st.ref(d.Comms[i].Name)
	}
	winNames := make([]C.OTF2_StringRef, len(d.Windows))
	for i, w := range d.Windows {
		winNames[i] = st.ref(w.Name)
	}
	for i, x := range st.list {
		cs := C.CString(x)
		chk(C.OTF2_GlobalDefWriter_WriteString(g, C.OTF2_StringRef(i), cs), "write a string")
		C.free(unsafe.Pointer(cs))
	}
	realtime := C.uint64_t(C.OTF2_UNDEFINED_TIMESTAMP)
	if d.HasRealtime {
		realtime = C.uint64_t(d.Realtime)
	}
	chk(C.OTF2_GlobalDefWriter_WriteClockProperties(g, 1_000_000_000, C.uint64_t(d.Offset), C.uint64_t(d.Length), realtime), "write the clock properties")
	chk(C.OTF2_GlobalDefWriter_WriteParadigm(g, C.OTF2_PARADIGM_MPI, mpi, C.OTF2_PARADIGM_CLASS_PROCESS), "write the MPI paradigm")
	chk(C.OTF2_GlobalDefWriter_WriteParadigm(g, C.OTF2_PARADIGM_USER, user, C.OTF2_PARADIGM_CLASS_PROCESS), "write the user paradigm")
	chk(C.OTF2_GlobalDefWriter_WriteSystemTreeNode(g, 0, machine, nodeClass, C.OTF2_UNDEFINED_SYSTEM_TREE_NODE), "write the system tree root")
	hostNode := map[uint32]C.OTF2_SystemTreeNodeRef{}
	for i, h := range d.Hosts {
		hostNode[h] = C.OTF2_SystemTreeNodeRef(i + 1)
		chk(C.OTF2_GlobalDefWriter_WriteSystemTreeNode(g, C.OTF2_SystemTreeNodeRef(i+1), hostNames[i], hostClass, 0), "write a host")
	}
	for i, p := range d.Procs {
		chk(C.OTF2_GlobalDefWriter_WriteLocationGroup(g, C.OTF2_LocationGroupRef(i), procNames[i], C.OTF2_LOCATION_GROUP_TYPE_PROCESS, hostNode[p.Host], C.OTF2_UNDEFINED_LOCATION_GROUP), "write a process")
	}
	for i, l := range d.Locations {
		chk(C.OTF2_GlobalDefWriter_WriteLocation(g, C.OTF2_LocationRef(l.ID), locNames[i], C.OTF2_LOCATION_TYPE_CPU_THREAD, C.uint64_t(l.Events), C.OTF2_LocationGroupRef(l.Group)), "write a location")
	}
	for _, l := range d.Locations {
		if l.HasOffsets {
			for j, v := range [4]int64{l.FirstLocal, l.FirstOffset, l.LastLocal, l.LastOffset} {
				chk(C.gc_locprop(g, C.uint64_t(l.ID), C.uint32_t(offProps[j]), C.int64_t(v)), "write a location's clock mapping")
			}
		}
	}
	for i, r := range d.Regions {
		chk(C.OTF2_GlobalDefWriter_WriteRegion(g, C.OTF2_RegionRef(i), regNames[i], regNames[i], empty, C.OTF2_RegionRole(r.Role), C.OTF2_Paradigm(r.Paradigm), C.OTF2_REGION_FLAG_NONE, empty, 0, 0), "write a region")
	}
	for i, a := range attrDefs {
		chk(C.OTF2_GlobalDefWriter_WriteAttribute(g, C.OTF2_AttributeRef(i), attrRefs[i].name, attrRefs[i].desc, C.OTF2_Type(a.typ)), "write an attribute")
	}
	// MPI_COMM_WORLD: rank i is process i's track 0.
	if len(d.Procs) > 0 {
		locs := make([]C.uint64_t, len(d.Procs))
		ranks := make([]C.uint64_t, len(d.Procs))
		for i, p := range d.Procs {
			locs[i] = C.uint64_t(LocationID(p.Proc, 0))
			ranks[i] = C.uint64_t(i)
		}
		chk(C.OTF2_GlobalDefWriter_WriteGroup(g, 0, worldLocs, C.OTF2_GROUP_TYPE_COMM_LOCATIONS, C.OTF2_PARADIGM_MPI, C.OTF2_GROUP_FLAG_NONE, C.uint32_t(len(locs)), &locs[0]), "write the MPI locations")
		chk(C.OTF2_GlobalDefWriter_WriteGroup(g, 1, worldGroup, C.OTF2_GROUP_TYPE_COMM_GROUP, C.OTF2_PARADIGM_MPI, C.OTF2_GROUP_FLAG_NONE, C.uint32_t(len(ranks)), &ranks[0]), "write MPI_COMM_WORLD's group")
		chk(C.OTF2_GlobalDefWriter_WriteComm(g, 0, world, 1, C.OTF2_UNDEFINED_COMM, C.OTF2_COMM_FLAG_NONE), "write MPI_COMM_WORLD")
		// Communicator i: group i+1, its members' ranks in MPI_COMM_WORLD in its rank
		// order; MPI_COMM_SELF's group is of type COMM_SELF, without members.
		for i := 1; i < len(d.Comms); i++ {
			if d.Comms[i].Self {
				chk(C.OTF2_GlobalDefWriter_WriteGroup(g, C.OTF2_GroupRef(i+1), commNames[i], C.OTF2_GROUP_TYPE_COMM_SELF, C.OTF2_PARADIGM_MPI, C.OTF2_GROUP_FLAG_NONE, 0, nil), "write MPI_COMM_SELF's group")
				chk(C.OTF2_GlobalDefWriter_WriteComm(g, C.OTF2_CommRef(i), commNames[i], C.OTF2_GroupRef(i+1), C.OTF2_UNDEFINED_COMM, C.OTF2_COMM_FLAG_NONE), "write MPI_COMM_SELF")
				continue
			}
			m := make([]C.uint64_t, len(d.Comms[i].Members))
			for j, r := range d.Comms[i].Members {
				m[j] = C.uint64_t(r)
			}
			chk(C.OTF2_GlobalDefWriter_WriteGroup(g, C.OTF2_GroupRef(i+1), commNames[i], C.OTF2_GROUP_TYPE_COMM_GROUP, C.OTF2_PARADIGM_MPI, C.OTF2_GROUP_FLAG_NONE, C.uint32_t(len(m)), &m[0]), "write a communicator's group")
			chk(C.OTF2_GlobalDefWriter_WriteComm(g, C.OTF2_CommRef(i), commNames[i], C.OTF2_GroupRef(i+1), 0, C.OTF2_COMM_FLAG_NONE), "write a communicator")
		}
		for i, w := range d.Windows {
			chk(C.OTF2_GlobalDefWriter_WriteRmaWin(g, C.OTF2_RmaWinRef(i), winNames[i], C.OTF2_CommRef(w.Comm), C.OTF2_RMA_WIN_FLAG_NONE), "write a window")
		}
	}
	for i := range d.Metrics {
		chk(C.gc_metric(g, C.uint32_t(i), C.uint32_t(metNames[i])), "write a metric")
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := s.check(C.OTF2_Archive_CloseGlobalDefWriter(s.a, g), "close the global definitions"); err != nil {
		return err
	}
	e := C.OTF2_Archive_Close(s.a)
	s.a = nil
	return s.check(e, "close the archive")
}
