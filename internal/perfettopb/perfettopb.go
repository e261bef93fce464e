// Package perfettopb lists the field numbers of Perfetto's trace protos
// that gclock writes, shared by the writer (trace/perfetto) and the strict
// decoder the tests read its output with (internal/perfettocheck). The
// numbers are those of Perfetto's protos/perfetto/trace; TestProtocDecodes
// in trace/perfetto checks them against protoc and a subset of those protos.
package perfettopb

import "google.golang.org/protobuf/encoding/protowire"

// Field numbers of Perfetto's trace protos (package perfetto.protos), with
// the type each is declared with.

// Trace.
const TracePacket protowire.Number = 1 // repeated TracePacket packet

// TracePacket.
const (
	PacketTimestamp     protowire.Number = 8  // uint64 timestamp (ns, default clock)
	PacketSequenceID    protowire.Number = 10 // uint32 trusted_packet_sequence_id
	PacketTrackEvent    protowire.Number = 11 // TrackEvent track_event
	PacketInternedData  protowire.Number = 12 // InternedData interned_data
	PacketSequenceFlags protowire.Number = 13 // uint32 sequence_flags
	PacketTrackDesc     protowire.Number = 60 // TrackDescriptor track_descriptor

	SeqIncrementalStateCleared = 1 // SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED
	SeqNeedsIncrementalState   = 2 // SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE
)

// TrackEvent.
const (
	EventDebugAnnotations   protowire.Number = 4  // repeated DebugAnnotation debug_annotations
	EventType               protowire.Number = 9  // Type type
	EventNameIID            protowire.Number = 10 // uint64 name_iid
	EventTrackUUID          protowire.Number = 11 // uint64 track_uuid
	EventName               protowire.Number = 23 // string name
	EventCounterValue       protowire.Number = 30 // int64 counter_value
	EventFlowIDs            protowire.Number = 47 // repeated fixed64 flow_ids
	EventTerminatingFlowIDs protowire.Number = 48 // repeated fixed64 terminating_flow_ids
)

// TrackEvent.Type.
const (
	TypeSliceBegin = 1
	TypeSliceEnd   = 2
	TypeInstant    = 3
	TypeCounter    = 4
)

// TrackDescriptor, ProcessDescriptor, CounterDescriptor.
const (
	DescUUID       protowire.Number = 1 // uint64 uuid
	DescName       protowire.Number = 2 // string name
	DescProcess    protowire.Number = 3 // ProcessDescriptor process
	DescParentUUID protowire.Number = 5 // uint64 parent_uuid
	DescCounter    protowire.Number = 8 // CounterDescriptor counter (empty here)

	ProcessPid  protowire.Number = 1 // int32 pid
	ProcessName protowire.Number = 6 // string process_name
)

// DebugAnnotation.
const (
	AnnotationNameIID protowire.Number = 1  // uint64 name_iid
	AnnotationUint    protowire.Number = 3  // uint64 uint_value
	AnnotationInt     protowire.Number = 4  // int64 int_value
	AnnotationString  protowire.Number = 6  // string string_value
	AnnotationName    protowire.Number = 10 // string name
)

// InternedData, EventName, DebugAnnotationName.
const (
	InternedEventNames      protowire.Number = 2 // repeated EventName event_names
	InternedAnnotationNames protowire.Number = 3 // repeated DebugAnnotationName debug_annotation_names
	InternedIID             protowire.Number = 1 // uint64 iid
	InternedName            protowire.Number = 2 // string name
)

// What gclock's writer fixes: it writes every packet on one sequence and
// puts the run's metadata on a track of its own.
const (
	SequenceID          = 1 // the one packet sequence of a file
	RunTrackUUID uint64 = 1 // the "gclock run" track
)
