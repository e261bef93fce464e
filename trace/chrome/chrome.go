package chrome

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/gclock/gclock/trace/format"
)

// Options tune the output.
type Options struct {
	// Origin is subtracted from every global time (ns). If OriginSet is
	// false the first event's time is used.
	Origin    int64
	OriginSet bool
	// Metadata is written, in order, as string fields of the top-level
	// "metadata" object after origin_ns (Perfetto keeps that object, as
	// json_metadata.* rows of its metadata table; it drops "otherData").
	Metadata []KV
}

// KV is one metadata field.
type KV struct{ Key, Value string }

// FlowCategory is the cat of every message slice and of its flow events.
// Chrome's viewer (DevTools FlowsHandler) binds a flow event to the slice
// with the same ts, pid, tid and cat, so both carry it.
const FlowCategory = "msg"

type nameKey struct {
	proc uint32
	id   uint64
}

type flowKey struct {
	from, to uint32
	id       uint64
}

type trackKey struct {
	proc  uint32
	track uint16
}

// Writer writes Chrome trace-event JSON.
type Writer struct {
	w        *bufio.Writer
	opt      Options
	names    map[nameKey]string // already JSON-quoted
	procName map[uint32]string
	procs    map[uint32]bool
	tracks   map[trackKey]bool
	sent     map[flowKey]uint64 // messages in flight: their flow id
	nextFlow uint64             // the last flow id handed out
	first    bool
	closed   bool
	buf      []byte
	err      error
	// Unbound counts receives whose send was not seen earlier: no arrow.
	Unbound int64
}

// NewWriter starts a trace on w.
func NewWriter(w io.Writer, opt Options) *Writer {
	return &Writer{
		w: bufio.NewWriterSize(w, 1<<16), opt: opt,
		names: map[nameKey]string{}, procName: map[uint32]string{},
		procs: map[uint32]bool{}, tracks: map[trackKey]bool{},
		sent: map[flowKey]uint64{}, first: true,
	}
}

// SetNames registers the string table of the traces.
func (w *Writer) SetNames(ns []format.Name) {
	for _, n := range ns {
		w.names[nameKey{n.Proc, n.ID}] = quote(n.Name)
	}
}

// SetProcess names a process.
func (w *Writer) SetProcess(proc uint32, name string) { w.procName[proc] = name }

func (w *Writer) name(proc uint32, id uint64, kind string) string {
	if s, ok := w.names[nameKey{proc, id}]; ok {
		return s
	}
	s := quote(kind + " " + strconv.FormatUint(id, 10))
	w.names[nameKey{proc, id}] = s
	return s
}

// AppendMicros appends ns as microseconds with exactly three decimals.
func AppendMicros(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		if ns == -1<<63 {
			return append(b, "9223372036854775.808"...)
		}
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	f := ns % 1000
	b = append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
	return b
}

func (w *Writer) begin() {
	if w.first {
		w.buf = append(w.buf, `{"traceEvents":[`...)
		w.buf = append(w.buf, '\n')
		w.first = false
	} else {
		w.buf = append(w.buf, ",\n"...)
	}
}

func (w *Writer) head(ph string, name string, pid uint32, tid uint16) {
	w.begin()
	w.buf = append(w.buf, `{"ph":"`...)
	w.buf = append(w.buf, ph...)
	w.buf = append(w.buf, `","name":`...)
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, `,"pid":`...)
	w.buf = strconv.AppendUint(w.buf, uint64(pid), 10)
	w.buf = append(w.buf, `,"tid":`...)
	w.buf = strconv.AppendUint(w.buf, uint64(tid), 10)
}

func (w *Writer) ts(t int64) {
	w.buf = append(w.buf, `,"ts":`...)
	w.buf = AppendMicros(w.buf, t-w.opt.Origin)
}

func (w *Writer) meta(m *format.Merged) {
	if !w.procs[m.Proc] {
		w.procs[m.Proc] = true
		n, ok := w.procName[m.Proc]
		if !ok {
			n = "process " + strconv.FormatUint(uint64(m.Proc), 10)
		}
		w.head("M", `"process_name"`, m.Proc, 0)
		w.buf = append(w.buf, `,"args":{"name":`...)
		w.buf = append(w.buf, quote(n)...)
		w.buf = append(w.buf, "}}"...)
	}
	k := trackKey{m.Proc, m.Track}
	if !w.tracks[k] {
		w.tracks[k] = true
		w.head("M", `"thread_name"`, m.Proc, m.Track)
		w.buf = append(w.buf, `,"args":{"name":"track `...)
		w.buf = strconv.AppendUint(w.buf, uint64(m.Track), 10)
		w.buf = append(w.buf, `"}}`...)
	}
}

// flowID appends the cat and the numeric id of a flow event. Perfetto's
// JSON importer takes a flow id as a JSON number or a string of hex digits
// only (json_trace_parser_impl.cc, MaybeExtractFlowIdentifier) and keys v1
// flows by (id, cat, name) without ever closing them (flow_tracker.cc), so
// every message gets its own number, counted from 1; JavaScript viewers
// read ids as doubles, which hold every integer up to 2^53 exactly.
func (w *Writer) flowID(id uint64) {
	w.buf = append(w.buf, `,"cat":"`+FlowCategory+`","id":`...)
	w.buf = strconv.AppendUint(w.buf, id, 10)
}

func (w *Writer) local(raw int64) {
	w.buf = append(w.buf, `"local_ns":`...)
	w.buf = strconv.AppendInt(w.buf, raw, 10)
}

// Write emits one merged event. Events must come in global time order.
func (w *Writer) Write(m *format.Merged) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return fmt.Errorf("chrome: write after close")
	}
	if !w.opt.OriginSet {
		w.opt.Origin, w.opt.OriginSet = m.Time, true
	}
	w.meta(m)
	switch m.Kind {
	case format.Enter:
		w.head("B", w.name(m.Proc, m.ID, "region"), m.Proc, m.Track)
		w.ts(m.Time)
		w.buf = append(w.buf, `,"args":{`...)
		w.local(m.Raw)
		w.buf = append(w.buf, "}}"...)
	case format.Leave:
		w.head("E", w.name(m.Proc, m.ID, "region"), m.Proc, m.Track)
		w.ts(m.Time)
		w.buf = append(w.buf, '}')
	case format.Instant:
		w.head("i", w.name(m.Proc, m.ID, "instant"), m.Proc, m.Track)
		w.ts(m.Time)
		w.buf = append(w.buf, `,"s":"t","args":{`...)
		w.local(m.Raw)
		w.buf = append(w.buf, "}}"...)
	case format.Counter:
		w.head("C", w.name(m.Proc, m.ID, "counter"), m.Proc, m.Track)
		w.ts(m.Time)
		w.buf = append(w.buf, `,"args":{"value":`...)
		w.buf = strconv.AppendInt(w.buf, m.Value, 10)
		w.buf = append(w.buf, "}}"...)
	case format.Send, format.Recv:
		send := m.Kind == format.Send
		k := flowKey{m.Proc, m.Peer, m.ID}
		name, peer := `"send"`, `"to"`
		if !send {
			k = flowKey{m.Peer, m.Proc, m.ID}
			name, peer = `"recv"`, `"from"`
		}
		w.head("X", name, m.Proc, m.Track)
		w.ts(m.Time)
		w.buf = append(w.buf, `,"dur":0,"cat":"`+FlowCategory+`","args":{`...)
		w.buf = append(w.buf, peer...)
		w.buf = append(w.buf, ':')
		w.buf = strconv.AppendUint(w.buf, uint64(m.Peer), 10)
		w.buf = append(w.buf, `,"msg":`...)
		w.buf = strconv.AppendUint(w.buf, m.ID, 10)
		w.buf = append(w.buf, `,"bytes":`...)
		w.buf = strconv.AppendInt(w.buf, m.Value, 10)
		w.buf = append(w.buf, ',')
		w.local(m.Raw)
		w.buf = append(w.buf, "}}"...)
		// The flow event follows its slice at the same ts on the same
		// track: Perfetto binds it to the topmost open slice of the track
		// (the zero-length slice stays on the stack until the next slice
		// begins), DevTools to the slice with equal ts, pid, tid and cat.
		if send {
			w.nextFlow++
			w.sent[k] = w.nextFlow
			w.head("s", `"msg"`, m.Proc, m.Track)
			w.ts(m.Time)
			w.flowID(w.nextFlow)
			w.buf = append(w.buf, '}')
		} else if id, ok := w.sent[k]; ok {
			delete(w.sent, k)
			w.head("f", `"msg"`, m.Proc, m.Track)
			w.ts(m.Time)
			w.flowID(id)
			// bp "e": bind to the enclosing slice (the recv slice), not to
			// the next slice that begins on the track.
			w.buf = append(w.buf, `,"bp":"e"}`...)
		} else {
			w.Unbound++
		}
	default:
		return fmt.Errorf("chrome: event kind %d", m.Kind)
	}
	if len(w.buf) > 1<<15 {
		_, w.err = w.w.Write(w.buf)
		w.buf = w.buf[:0]
	}
	return w.err
}

// Close ends the JSON document and flushes it. It does not close the
// underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.first {
		w.buf = append(w.buf, `{"traceEvents":[`...)
	}
	// Run metadata goes under "metadata": Perfetto's tokenizer skips
	// unknown top-level keys such as "otherData" and imports "metadata"
	// (google/perfetto#6653); the legacy viewer keeps every top-level key.
	// There is no displayTimeUnit: the format says ts is in microseconds,
	// and Perfetto's importer before late 2021 read "ns" there as the unit
	// of ts (google/perfetto#106, #274).
	w.buf = append(w.buf, "\n],\"metadata\":{\"origin_ns\":\""...)
	w.buf = strconv.AppendInt(w.buf, w.opt.Origin, 10)
	w.buf = append(w.buf, '"')
	for _, kv := range w.opt.Metadata {
		w.buf = append(w.buf, ',')
		w.buf = append(w.buf, quote(kv.Key)...)
		w.buf = append(w.buf, ':')
		w.buf = append(w.buf, quote(kv.Value)...)
	}
	w.buf = append(w.buf, "}}\n"...)
	if w.err == nil {
		_, w.err = w.w.Write(w.buf)
	}
	w.buf = w.buf[:0]
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if w.err != nil {
		w.err = fmt.Errorf("chrome: %w", w.err)
	}
	return w.err
}

// quote returns s as a JSON string literal; invalid UTF-8 becomes U+FFFD.
func quote(s string) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(append(b, '"'))
}
