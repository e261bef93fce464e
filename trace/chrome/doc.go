// Package chrome writes a merged trace as Chrome trace-event JSON, the
// format Perfetto's UI (ui.perfetto.dev) and chrome://tracing open.
//
// Layout: one process (pid) per traced process, named by process_name
// metadata; one thread (tid) per recording track; regions are B/E pairs,
// instants are thread-scoped "i" events, counters are "C" events, and each
// message is drawn as a flow arrow: a zero-length "send" slice carrying a
// flow start ("s") and a zero-length "recv" slice carrying the flow end
// ("f", bound to the enclosing slice with "bp":"e"). Timestamps are
// microseconds printed with exactly three decimals from the integer
// nanoseconds (no float64 on the way), relative to Origin (by default the
// first event), so the sub-microsecond fraction survives. The raw local
// timestamp of every event is kept in args.local_ns.
//
// Writer streams: memory holds only the names and the messages in flight.
// Its tests re-read every file with internal/chromecheck, which checks
// phases, B/E nesting per track, per-track time order, bound flow ids and
// timestamp syntax.
package chrome
