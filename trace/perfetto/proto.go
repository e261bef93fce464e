package perfetto

import "google.golang.org/protobuf/encoding/protowire"

// Field numbers of Perfetto's trace protos (package perfetto.protos), with
// the type each is declared with.

// Trace.
const fTracePacket protowire.Number = 1 // repeated TracePacket packet

// TracePacket.
const (
	fPacketTimestamp     protowire.Number = 8  // uint64 timestamp (ns, default clock)
	fPacketSequenceID    protowire.Number = 10 // uint32 trusted_packet_sequence_id
	fPacketTrackEvent    protowire.Number = 11 // TrackEvent track_event
	fPacketInternedData  protowire.Number = 12 // InternedData interned_data
	fPacketSequenceFlags protowire.Number = 13 // uint32 sequence_flags
	fPacketTrackDesc     protowire.Number = 60 // TrackDescriptor track_descriptor

	seqIncrementalStateCleared = 1 // SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED
	seqNeedsIncrementalState   = 2 // SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE
)

// TrackEvent.
const (
	fEventDebugAnnotations   protowire.Number = 4  // repeated DebugAnnotation debug_annotations
	fEventType               protowire.Number = 9  // Type type
	fEventNameIID            protowire.Number = 10 // uint64 name_iid
	fEventTrackUUID          protowire.Number = 11 // uint64 track_uuid
	fEventName               protowire.Number = 23 // string name
	fEventCounterValue       protowire.Number = 30 // int64 counter_value
	fEventFlowIDs            protowire.Number = 47 // repeated fixed64 flow_ids
	fEventTerminatingFlowIDs protowire.Number = 48 // repeated fixed64 terminating_flow_ids
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
	fDescUUID       protowire.Number = 1 // uint64 uuid
	fDescName       protowire.Number = 2 // string name
	fDescProcess    protowire.Number = 3 // ProcessDescriptor process
	fDescParentUUID protowire.Number = 5 // uint64 parent_uuid
	fDescCounter    protowire.Number = 8 // CounterDescriptor counter (empty here)

	fProcessPid  protowire.Number = 1 // int32 pid
	fProcessName protowire.Number = 6 // string process_name
)

// DebugAnnotation.
const (
	fAnnotationNameIID protowire.Number = 1  // uint64 name_iid
	fAnnotationUint    protowire.Number = 3  // uint64 uint_value
	fAnnotationInt     protowire.Number = 4  // int64 int_value
	fAnnotationString  protowire.Number = 6  // string string_value
	fAnnotationName    protowire.Number = 10 // string name
)

// InternedData, EventName, DebugAnnotationName.
const (
	fInternedEventNames      protowire.Number = 2 // repeated EventName event_names
	fInternedAnnotationNames protowire.Number = 3 // repeated DebugAnnotationName debug_annotation_names
	fInternedIID             protowire.Number = 1 // uint64 iid
	fInternedName            protowire.Number = 2 // string name
)

const (
	sequenceID          = 1       // the one packet sequence of a file
	runTrackUUID uint64 = 1       // the "gclock run" track
	maxPacket           = 1 << 24 // Decode refuses larger packets
)
