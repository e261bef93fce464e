package perfetto

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/gclock/gclock/internal/perfettopb"
	"github.com/gclock/gclock/trace/format"
)

// Options tune the output.
type Options struct {
	// Origin is subtracted from every global time (ns). If OriginSet is
	// false the first event's time is used. No event may come before it.
	Origin    int64
	OriginSet bool
	// Metadata is written, in order, as string annotations of the "gclock
	// run" instant, after origin_ns.
	Metadata []KV
}

// KV is one metadata field.
type KV struct{ Key, Value string }

type nameKey struct {
	proc uint32
	id   uint64
}

type trackKey struct {
	proc  uint32
	track uint16
}

type iidKey struct {
	proc uint32
	id   uint64
	kind format.Kind
}

type flowKey struct {
	from, to uint32
	id       uint64
}

// Writer writes a Perfetto protobuf trace.
type Writer struct {
	w                 *bufio.Writer
	opt               Options
	names             map[nameKey]string
	procName          map[uint32]string
	procs             map[uint32]uint64   // process -> track uuid
	tracks            map[trackKey]uint64 // recorder track -> track uuid
	counters          map[nameKey]uint64  // counter -> track uuid
	nextUUID          uint64
	evNames           map[string]uint64 // interned event names
	iidOf             map[iidKey]uint64 // the iid of a process's name id, once looked up
	annNames          map[string]uint64 // interned annotation names
	newEv             []string          // names to intern in the next event packet
	newAnn            []string
	sent              map[flowKey]uint64 // messages in flight: their flow id
	nextFlow          uint64
	started           bool
	closed            bool
	err               error
	out, pkt, ev, sub []byte
	// Unbound counts receives whose send was not seen earlier: no arrow.
	Unbound int64
}

// NewWriter starts a trace on w.
func NewWriter(w io.Writer, opt Options) *Writer {
	return &Writer{
		w: bufio.NewWriterSize(w, 1<<16), opt: opt,
		names: map[nameKey]string{}, procName: map[uint32]string{},
		procs: map[uint32]uint64{}, tracks: map[trackKey]uint64{}, counters: map[nameKey]uint64{},
		nextUUID: pb.RunTrackUUID + 1, evNames: map[string]uint64{}, iidOf: map[iidKey]uint64{}, annNames: map[string]uint64{},
		sent: map[flowKey]uint64{},
	}
}

// SetNames registers the string table of the traces.
func (w *Writer) SetNames(ns []format.Name) {
	for _, n := range ns {
		w.names[nameKey{n.Proc, n.ID}] = validUTF8(n.Name)
	}
}

// SetProcess names a process.
func (w *Writer) SetProcess(proc uint32, name string) { w.procName[proc] = validUTF8(name) }

// validUTF8 replaces invalid bytes: protobuf strings must be UTF-8.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func (w *Writer) name(proc uint32, id uint64, kind string) string {
	if s, ok := w.names[nameKey{proc, id}]; ok {
		return s
	}
	s := kind + " " + strconv.FormatUint(id, 10)
	w.names[nameKey{proc, id}] = s
	return s
}

// packet appends w.pkt as one TracePacket to the output.
func (w *Writer) packet() {
	w.out = protowire.AppendTag(w.out, pb.TracePacket, protowire.BytesType)
	w.out = protowire.AppendBytes(w.out, w.pkt)
	w.pkt = w.pkt[:0]
}

// head starts a packet on the sequence: its sequence id and flags.
func (w *Writer) head(flags uint64) {
	w.pkt = protowire.AppendTag(w.pkt, pb.PacketSequenceID, protowire.VarintType)
	w.pkt = protowire.AppendVarint(w.pkt, pb.SequenceID)
	w.pkt = protowire.AppendTag(w.pkt, pb.PacketSequenceFlags, protowire.VarintType)
	w.pkt = protowire.AppendVarint(w.pkt, flags)
}

// descriptor writes a TrackDescriptor packet; w.sub holds its body.
func (w *Writer) descriptor() {
	w.head(pb.SeqNeedsIncrementalState)
	w.pkt = protowire.AppendTag(w.pkt, pb.PacketTrackDesc, protowire.BytesType)
	w.pkt = protowire.AppendBytes(w.pkt, w.sub)
	w.sub = w.sub[:0]
	w.packet()
}

func appendUint(b []byte, f protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, f, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendString(b []byte, f protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, f, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// start writes the first packets: the cleared sequence, the run track and
// the run instant with the metadata.
func (w *Writer) start() {
	w.started = true
	w.sub = appendUint(w.sub, pb.DescUUID, pb.RunTrackUUID)
	w.sub = appendString(w.sub, pb.DescName, "gclock run")
	w.head(pb.SeqIncrementalStateCleared)
	w.pkt = protowire.AppendTag(w.pkt, pb.PacketTrackDesc, protowire.BytesType)
	w.pkt = protowire.AppendBytes(w.pkt, w.sub)
	w.sub = w.sub[:0]
	w.packet()

	w.ev = appendUint(w.ev, pb.EventType, pb.TypeInstant)
	w.ev = appendUint(w.ev, pb.EventTrackUUID, pb.RunTrackUUID)
	w.ev = appendString(w.ev, pb.EventName, "gclock run")
	kv := append([]KV{{"origin_ns", strconv.FormatInt(w.opt.Origin, 10)}}, w.opt.Metadata...)
	for _, m := range kv {
		if m.Key == "" {
			m.Key = "(no key)" // an annotation needs a name
		}
		w.sub = appendString(w.sub, pb.AnnotationName, validUTF8(m.Key))
		w.sub = appendString(w.sub, pb.AnnotationString, validUTF8(m.Value))
		w.ev = protowire.AppendTag(w.ev, pb.EventDebugAnnotations, protowire.BytesType)
		w.ev = protowire.AppendBytes(w.ev, w.sub)
		w.sub = w.sub[:0]
	}
	w.event(0)
}

// event writes w.ev as the TrackEvent of a packet at ts, with the names
// interned since the last event.
func (w *Writer) event(ts uint64) {
	w.pkt = appendUint(w.pkt, pb.PacketTimestamp, ts)
	w.head(pb.SeqNeedsIncrementalState)
	if len(w.newEv)+len(w.newAnn) > 0 {
		var in []byte
		for _, s := range w.newEv {
			e := appendUint(nil, pb.InternedIID, w.evNames[s])
			e = appendString(e, pb.InternedName, s)
			in = protowire.AppendTag(in, pb.InternedEventNames, protowire.BytesType)
			in = protowire.AppendBytes(in, e)
		}
		for _, s := range w.newAnn {
			e := appendUint(nil, pb.InternedIID, w.annNames[s])
			e = appendString(e, pb.InternedName, s)
			in = protowire.AppendTag(in, pb.InternedAnnotationNames, protowire.BytesType)
			in = protowire.AppendBytes(in, e)
		}
		w.pkt = protowire.AppendTag(w.pkt, pb.PacketInternedData, protowire.BytesType)
		w.pkt = protowire.AppendBytes(w.pkt, in)
		w.newEv, w.newAnn = w.newEv[:0], w.newAnn[:0]
	}
	w.pkt = protowire.AppendTag(w.pkt, pb.PacketTrackEvent, protowire.BytesType)
	w.pkt = protowire.AppendBytes(w.pkt, w.ev)
	w.ev = w.ev[:0]
	w.packet()
}

func (w *Writer) evName(s string) uint64 {
	if id, ok := w.evNames[s]; ok {
		return id
	}
	id := uint64(len(w.evNames) + 1)
	w.evNames[s] = id
	w.newEv = append(w.newEv, s)
	return id
}

// annotation appends a debug annotation with an interned name; v is a
// uint64 when unsigned, else an int64.
func (w *Writer) annotation(name string, v uint64, unsigned bool) {
	id, ok := w.annNames[name]
	if !ok {
		id = uint64(len(w.annNames) + 1)
		w.annNames[name] = id
		w.newAnn = append(w.newAnn, name)
	}
	w.sub = appendUint(w.sub[:0], pb.AnnotationNameIID, id)
	if unsigned {
		w.sub = appendUint(w.sub, pb.AnnotationUint, v)
	} else {
		w.sub = appendUint(w.sub, pb.AnnotationInt, v) // int64 is sent as its two's complement
	}
	w.ev = protowire.AppendTag(w.ev, pb.EventDebugAnnotations, protowire.BytesType)
	w.ev = protowire.AppendBytes(w.ev, w.sub)
	w.sub = w.sub[:0]
}

func (w *Writer) processTrack(proc uint32) uint64 {
	if u, ok := w.procs[proc]; ok {
		return u
	}
	u := w.nextUUID
	w.nextUUID++
	w.procs[proc] = u
	n, ok := w.procName[proc]
	if !ok {
		n = "process " + strconv.FormatUint(uint64(proc), 10)
	}
	var pd []byte
	pd = appendUint(pd, pb.ProcessPid, uint64(int64(int32(proc+1))))
	pd = appendString(pd, pb.ProcessName, n)
	w.sub = appendUint(w.sub, pb.DescUUID, u)
	w.sub = protowire.AppendTag(w.sub, pb.DescProcess, protowire.BytesType)
	w.sub = protowire.AppendBytes(w.sub, pd)
	w.descriptor()
	return u
}

func (w *Writer) track(proc uint32, track uint16) uint64 {
	k := trackKey{proc, track}
	if u, ok := w.tracks[k]; ok {
		return u
	}
	parent := w.processTrack(proc)
	u := w.nextUUID
	w.nextUUID++
	w.tracks[k] = u
	w.sub = appendUint(w.sub, pb.DescUUID, u)
	w.sub = appendUint(w.sub, pb.DescParentUUID, parent)
	w.sub = appendString(w.sub, pb.DescName, "track "+strconv.FormatUint(uint64(track), 10))
	w.descriptor()
	return u
}

func (w *Writer) counter(proc uint32, id uint64) uint64 {
	k := nameKey{proc, id}
	if u, ok := w.counters[k]; ok {
		return u
	}
	parent := w.processTrack(proc)
	u := w.nextUUID
	w.nextUUID++
	w.counters[k] = u
	w.sub = appendUint(w.sub, pb.DescUUID, u)
	w.sub = appendUint(w.sub, pb.DescParentUUID, parent)
	w.sub = appendString(w.sub, pb.DescName, w.name(proc, id, "counter"))
	w.sub = protowire.AppendTag(w.sub, pb.DescCounter, protowire.BytesType)
	w.sub = protowire.AppendBytes(w.sub, nil)
	w.descriptor()
	return u
}

// Write emits one merged event. Events must come in global time order.
func (w *Writer) Write(m *format.Merged) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("perfetto: write after close")
	}
	if !w.opt.OriginSet {
		w.opt.Origin, w.opt.OriginSet = m.Time, true
	}
	if !w.started {
		w.start()
	}
	if m.Time < w.opt.Origin {
		w.err = fmt.Errorf("perfetto: event at %d ns before the origin %d ns (process %d)", m.Time, w.opt.Origin, m.Proc)
		return w.err
	}
	ts := uint64(m.Time - w.opt.Origin)
	if m.Kind == format.Counter {
		u := w.counter(m.Proc, m.ID)
		w.ev = appendUint(w.ev, pb.EventType, pb.TypeCounter)
		w.ev = appendUint(w.ev, pb.EventTrackUUID, u)
		w.ev = appendUint(w.ev, pb.EventCounterValue, uint64(m.Value))
		w.event(ts)
		return w.flush()
	}
	u := w.track(m.Proc, m.Track)
	switch m.Kind {
	case format.Enter, format.Instant:
		typ, kind := uint64(pb.TypeSliceBegin), "region"
		if m.Kind == format.Instant {
			typ, kind = pb.TypeInstant, "instant"
		}
		w.ev = appendUint(w.ev, pb.EventType, typ)
		w.ev = appendUint(w.ev, pb.EventTrackUUID, u)
		k := iidKey{m.Proc, m.ID, m.Kind}
		iid, ok := w.iidOf[k]
		if !ok {
			iid = w.evName(w.name(m.Proc, m.ID, kind))
			w.iidOf[k] = iid
		}
		w.ev = appendUint(w.ev, pb.EventNameIID, iid)
		w.annotation("local_ns", uint64(m.Raw), false)
	case format.Leave:
		w.ev = appendUint(w.ev, pb.EventType, pb.TypeSliceEnd)
		w.ev = appendUint(w.ev, pb.EventTrackUUID, u)
	case format.Send, format.Recv:
		send := m.Kind == format.Send
		k := flowKey{m.Proc, m.Peer, m.ID}
		name, peer := "send", "to"
		if !send {
			k = flowKey{m.Peer, m.Proc, m.ID}
			name, peer = "recv", "from"
		}
		w.ev = appendUint(w.ev, pb.EventType, pb.TypeInstant)
		w.ev = appendUint(w.ev, pb.EventTrackUUID, u)
		w.ev = appendUint(w.ev, pb.EventNameIID, w.evName(name))
		if send {
			w.nextFlow++
			w.sent[k] = w.nextFlow
			w.ev = protowire.AppendTag(w.ev, pb.EventFlowIDs, protowire.Fixed64Type)
			w.ev = protowire.AppendFixed64(w.ev, w.nextFlow)
		} else if id, ok := w.sent[k]; ok {
			delete(w.sent, k)
			w.ev = protowire.AppendTag(w.ev, pb.EventTerminatingFlowIDs, protowire.Fixed64Type)
			w.ev = protowire.AppendFixed64(w.ev, id)
		} else {
			w.Unbound++
		}
		w.annotation(peer, uint64(m.Peer), true)
		w.annotation("msg", m.ID, true)
		w.annotation("bytes", uint64(m.Value), false)
		w.annotation("local_ns", uint64(m.Raw), false)
	default:
		return fmt.Errorf("perfetto: event kind %d", m.Kind)
	}
	w.event(ts)
	return w.flush()
}

func (w *Writer) flush() error {
	if len(w.out) > 1<<15 {
		_, w.err = w.w.Write(w.out)
		w.out = w.out[:0]
		if w.err != nil {
			w.err = fmt.Errorf("perfetto: %w", w.err)
		}
	}
	return w.err
}

// Close flushes the trace. It does not close the underlying writer. A
// trace without events still holds the run track and instant.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	if !w.started {
		w.start()
	}
	if _, err := w.w.Write(w.out); err != nil {
		w.err = fmt.Errorf("perfetto: %w", err)
		return w.err
	}
	w.out = w.out[:0]
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("perfetto: %w", err)
	}
	return w.err
}
