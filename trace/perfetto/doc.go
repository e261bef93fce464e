// Package perfetto writes a merged trace in Perfetto's protobuf trace format
// (a Trace message of TracePackets carrying TrackDescriptors and
// TrackEvents), the format ui.perfetto.dev and trace_processor read
// natively. Its tests read the output back with the strict decoder in
// internal/perfettocheck.
//
// It uses protowire and no generated code: the field numbers are those of
// Perfetto's protos/perfetto/trace (trace.proto, trace_packet.proto,
// track_event/track_event.proto, track_descriptor.proto,
// process_descriptor.proto, counter_descriptor.proto, debug_annotation.proto
// and interned_data/interned_data.proto), listed as constants in internal/perfettopb.
//
// The mapping from the merged stream:
//
//   - every process is a process track (ProcessDescriptor, pid = process
//     number + 1, since Perfetto keeps pid 0 for the idle process) and every
//     recorder track a named child track of it;
//   - regions are TYPE_SLICE_BEGIN/TYPE_SLICE_END pairs, instants
//     TYPE_INSTANT, counters TYPE_COUNTER on a counter track per process and
//     counter name;
//   - a message is a "send" instant carrying flow_ids = [n] and a "recv"
//     instant carrying terminating_flow_ids = [n]: Perfetto draws the arrow.
//     n counts messages from 1, as in the Chrome JSON;
//   - the raw local time of every event is a debug annotation local_ns, as
//     args.local_ns in the JSON;
//   - timestamps are ns since the first event (the origin), exact integers;
//     the origin and the run metadata are debug annotations of a "gclock
//     run" instant at time 0 on a track of its own;
//   - event and annotation names are interned on one packet sequence, so an
//     event costs about 30 bytes against about 130 in the JSON.
package perfetto
