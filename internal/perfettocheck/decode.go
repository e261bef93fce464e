// Package perfettocheck decodes a Perfetto protobuf trace as
// trace/perfetto's Writer writes it, strictly, for tests: the writer's
// round-trip, the timeline and CLI tests read its output back with Decode.
// It is test support, kept out of the trace/perfetto API.
package perfettocheck

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/gclock/gclock/internal/perfettopb"
)

// ErrInvalid is wrapped by every error Decode returns.
var ErrInvalid = errors.New("invalid perfetto trace")

// Track is a TrackDescriptor.
type Track struct {
	UUID, Parent uint64
	Name         string
	Process      bool // has a ProcessDescriptor
	Pid          int32
	ProcessName  string
	Counter      bool // has a CounterDescriptor
}

// Annotation is a debug annotation with its name resolved.
type Annotation struct {
	Name   string
	Kind   byte // 'i' int, 'u' uint, 's' string
	Int    int64
	Uint   uint64
	String string
}

// Event is a TrackEvent with its packet's timestamp and its names resolved.
type Event struct {
	Time        uint64
	Type        int
	Track       uint64
	Name        string
	Counter     int64
	Flows       []uint64 // flow_ids
	Terminating []uint64 // terminating_flow_ids
	Annotations []Annotation
}

// Arg returns the annotation called name.
func (e *Event) Arg(name string) (Annotation, bool) {
	for _, a := range e.Annotations {
		if a.Name == name {
			return a, true
		}
	}
	return Annotation{}, false
}

// Trace is a decoded trace.
type Trace struct {
	Tracks  map[uint64]Track
	Events  []Event
	Packets int
}

// Decode reads a trace as Writer writes it, strictly: every field must be
// one Writer uses, with the wire type Perfetto's protos declare for it, on
// one packet sequence whose first packet clears the incremental state;
// interned names must be defined before use, tracks described before
// events use them, and timestamps must not decrease. Errors name the
// packet and field.
func Decode(b []byte) (*Trace, error) {
	t := &Trace{Tracks: map[uint64]Track{}}
	d := &decoder{t: t, evNames: map[uint64]string{}, annNames: map[uint64]string{}}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, d.errf("tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		if num != pb.TracePacket || typ != protowire.BytesType {
			return nil, d.errf("Trace field %d (wire type %d), want packet = 1 (bytes)", num, typ)
		}
		p, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, d.errf("packet length: %v", protowire.ParseError(n))
		}
		if len(p) > maxPacket {
			return nil, d.errf("packet of %d bytes", len(p))
		}
		b = b[n:]
		if err := d.packet(p); err != nil {
			return nil, err
		}
		t.Packets++
	}
	return t, nil
}

// maxPacket is the largest packet Decode reads: gclock's packets are a few
// hundred bytes, so a larger length is a corrupt file, not a real packet.
const maxPacket = 1 << 24

type decoder struct {
	t        *Trace
	evNames  map[uint64]string
	annNames map[uint64]string
	lastTs   uint64
	cleared  bool
}

func (d *decoder) errf(format string, a ...any) error {
	return fmt.Errorf("packet %d: %s: %w", d.t.Packets, fmt.Sprintf(format, a...), ErrInvalid)
}

// field is one decoded field: a varint, fixed64 or length-delimited value.
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	b   []byte
}

// fields splits a message into its fields; want gives the wire type of
// every field allowed.
func (d *decoder) fields(msg string, b []byte, want map[protowire.Number]protowire.Type) ([]field, error) {
	var out []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, d.errf("%s: tag: %v", msg, protowire.ParseError(n))
		}
		b = b[n:]
		wt, ok := want[num]
		if !ok {
			return nil, d.errf("%s: field %d is not one gclock writes", msg, num)
		}
		if typ != wt {
			return nil, d.errf("%s: field %d has wire type %d, declared %d", msg, num, typ, wt)
		}
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			f.v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		}
		if n < 0 {
			return nil, d.errf("%s: field %d: %v", msg, num, protowire.ParseError(n))
		}
		b = b[n:]
		out = append(out, f)
	}
	return out, nil
}

func (d *decoder) str(msg string, f field) (string, error) {
	if !utf8.Valid(f.b) {
		return "", d.errf("%s: field %d is not UTF-8", msg, f.num)
	}
	return string(f.b), nil
}

var (
	vt = protowire.VarintType
	bt = protowire.BytesType
	ft = protowire.Fixed64Type
)

func (d *decoder) packet(p []byte) error {
	fs, err := d.fields("TracePacket", p, map[protowire.Number]protowire.Type{
		pb.PacketTimestamp: vt, pb.PacketSequenceID: vt, pb.PacketTrackEvent: bt,
		pb.PacketInternedData: bt, pb.PacketSequenceFlags: vt, pb.PacketTrackDesc: bt})
	if err != nil {
		return err
	}
	var ts uint64
	var hasTs bool
	var seq, flags uint64
	var ev, desc, interned []byte
	var hasEv, hasDesc bool
	for _, f := range fs {
		switch f.num {
		case pb.PacketTimestamp:
			ts, hasTs = f.v, true
		case pb.PacketSequenceID:
			seq = f.v
		case pb.PacketSequenceFlags:
			flags = f.v
		case pb.PacketTrackEvent:
			ev, hasEv = f.b, true
		case pb.PacketTrackDesc:
			desc, hasDesc = f.b, true
		case pb.PacketInternedData:
			interned = f.b
		}
	}
	if seq != pb.SequenceID {
		return d.errf("trusted_packet_sequence_id %d, want %d", seq, pb.SequenceID)
	}
	if !d.cleared {
		if flags&pb.SeqIncrementalStateCleared == 0 {
			return d.errf("the first packet does not clear the incremental state (sequence_flags %d)", flags)
		}
		d.cleared = true
	}
	if hasEv == hasDesc {
		return d.errf("a packet holds one track event or one track descriptor")
	}
	if interned != nil {
		if err := d.interned(interned); err != nil {
			return err
		}
	}
	if hasDesc {
		if hasTs {
			return d.errf("track descriptor with a timestamp")
		}
		return d.descriptor(desc)
	}
	if !hasTs {
		return d.errf("track event without a timestamp")
	}
	if ts < d.lastTs {
		return d.errf("timestamp %d before the previous %d", ts, d.lastTs)
	}
	d.lastTs = ts
	if flags&pb.SeqNeedsIncrementalState == 0 {
		return d.errf("track event without SEQ_NEEDS_INCREMENTAL_STATE")
	}
	return d.event(ts, ev)
}

func (d *decoder) interned(b []byte) error {
	fs, err := d.fields("InternedData", b, map[protowire.Number]protowire.Type{pb.InternedEventNames: bt, pb.InternedAnnotationNames: bt})
	if err != nil {
		return err
	}
	for _, f := range fs {
		msg, table := "EventName", d.evNames
		if f.num == pb.InternedAnnotationNames {
			msg, table = "DebugAnnotationName", d.annNames
		}
		es, err := d.fields(msg, f.b, map[protowire.Number]protowire.Type{pb.InternedIID: vt, pb.InternedName: bt})
		if err != nil {
			return err
		}
		var iid uint64
		var name string
		for _, e := range es {
			if e.num == pb.InternedIID {
				iid = e.v
			} else if name, err = d.str(msg, e); err != nil {
				return err
			}
		}
		if iid == 0 {
			return d.errf("%s %q without an iid", msg, name)
		}
		if old, dup := table[iid]; dup && old != name {
			return d.errf("%s iid %d is %q and %q", msg, iid, old, name)
		}
		table[iid] = name
	}
	return nil
}

func (d *decoder) descriptor(b []byte) error {
	fs, err := d.fields("TrackDescriptor", b, map[protowire.Number]protowire.Type{
		pb.DescUUID: vt, pb.DescName: bt, pb.DescProcess: bt, pb.DescParentUUID: vt, pb.DescCounter: bt})
	if err != nil {
		return err
	}
	var tr Track
	for _, f := range fs {
		switch f.num {
		case pb.DescUUID:
			tr.UUID = f.v
		case pb.DescParentUUID:
			tr.Parent = f.v
		case pb.DescName:
			if tr.Name, err = d.str("TrackDescriptor", f); err != nil {
				return err
			}
		case pb.DescCounter:
			if len(f.b) != 0 {
				return d.errf("CounterDescriptor with fields")
			}
			tr.Counter = true
		case pb.DescProcess:
			ps, err := d.fields("ProcessDescriptor", f.b, map[protowire.Number]protowire.Type{pb.ProcessPid: vt, pb.ProcessName: bt})
			if err != nil {
				return err
			}
			tr.Process = true
			for _, p := range ps {
				if p.num == pb.ProcessPid {
					tr.Pid = int32(p.v)
				} else if tr.ProcessName, err = d.str("ProcessDescriptor", p); err != nil {
					return err
				}
			}
		}
	}
	if tr.UUID == 0 {
		return d.errf("track descriptor without a uuid")
	}
	if _, dup := d.t.Tracks[tr.UUID]; dup {
		return d.errf("track %d described twice", tr.UUID)
	}
	if tr.Parent != 0 {
		if _, ok := d.t.Tracks[tr.Parent]; !ok {
			return d.errf("track %d's parent %d is not described", tr.UUID, tr.Parent)
		}
	}
	d.t.Tracks[tr.UUID] = tr
	return nil
}

func (d *decoder) event(ts uint64, b []byte) error {
	fs, err := d.fields("TrackEvent", b, map[protowire.Number]protowire.Type{
		pb.EventDebugAnnotations: bt, pb.EventType: vt, pb.EventNameIID: vt, pb.EventTrackUUID: vt, pb.EventName: bt,
		pb.EventCounterValue: vt, pb.EventFlowIDs: ft, pb.EventTerminatingFlowIDs: ft})
	if err != nil {
		return err
	}
	e := Event{Time: ts}
	for _, f := range fs {
		switch f.num {
		case pb.EventType:
			if f.v < pb.TypeSliceBegin || f.v > pb.TypeCounter {
				return d.errf("track event type %d", f.v)
			}
			e.Type = int(f.v)
		case pb.EventTrackUUID:
			e.Track = f.v
		case pb.EventNameIID:
			n, ok := d.evNames[f.v]
			if !ok {
				return d.errf("event name iid %d not interned", f.v)
			}
			e.Name = n
		case pb.EventName:
			if e.Name, err = d.str("TrackEvent", f); err != nil {
				return err
			}
		case pb.EventCounterValue:
			e.Counter = int64(f.v)
		case pb.EventFlowIDs:
			e.Flows = append(e.Flows, f.v)
		case pb.EventTerminatingFlowIDs:
			e.Terminating = append(e.Terminating, f.v)
		case pb.EventDebugAnnotations:
			a, err := d.annotation(f.b)
			if err != nil {
				return err
			}
			e.Annotations = append(e.Annotations, a)
		}
	}
	if e.Type == 0 {
		return d.errf("track event without a type")
	}
	tr, ok := d.t.Tracks[e.Track]
	if !ok {
		return d.errf("track event on undescribed track %d", e.Track)
	}
	if (e.Type == pb.TypeCounter) != tr.Counter {
		return d.errf("track event of type %d on track %d (counter track: %v)", e.Type, e.Track, tr.Counter)
	}
	d.t.Events = append(d.t.Events, e)
	return nil
}

func (d *decoder) annotation(b []byte) (Annotation, error) {
	fs, err := d.fields("DebugAnnotation", b, map[protowire.Number]protowire.Type{
		pb.AnnotationNameIID: vt, pb.AnnotationUint: vt, pb.AnnotationInt: vt, pb.AnnotationString: bt, pb.AnnotationName: bt})
	if err != nil {
		return Annotation{}, err
	}
	var a Annotation
	for _, f := range fs {
		switch f.num {
		case pb.AnnotationNameIID:
			n, ok := d.annNames[f.v]
			if !ok {
				return a, d.errf("annotation name iid %d not interned", f.v)
			}
			a.Name = n
		case pb.AnnotationName:
			if a.Name, err = d.str("DebugAnnotation", f); err != nil {
				return a, err
			}
		case pb.AnnotationInt:
			a.Kind, a.Int = 'i', int64(f.v)
		case pb.AnnotationUint:
			a.Kind, a.Uint = 'u', f.v
		case pb.AnnotationString:
			a.Kind = 's'
			if a.String, err = d.str("DebugAnnotation", f); err != nil {
				return a, err
			}
		}
	}
	if a.Name == "" || a.Kind == 0 {
		return a, d.errf("debug annotation without a name or a value")
	}
	return a, nil
}
