// Package chromecheck checks a Chrome trace-event JSON file against the
// format's rules as the importers that draw it apply them, for tests: the
// writer in trace/chrome, the timeline and the CLI tests validate their
// output with Validate. It is test support, kept out of the trace/chrome
// API.
package chromecheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Report is what Validate found in a valid file.
type Report struct {
	Events    int            // trace events (metadata included)
	ByPhase   map[string]int // events per phase
	Processes int            // distinct pids
	Flows     int            // bound flow pairs (s ... f)
	// FlowsSameTs counts flows whose start and end share a ts: Chrome's
	// DevTools viewer keys a flow's slices by ts and draws no arrow for
	// them (Perfetto does).
	FlowsSameTs int
	// FlowsSharedSlice counts flow events bound to a slice that an earlier
	// flow event of the same track, ts and cat is bound to already.
	FlowsSharedSlice int
	// FlowsV2 counts flows given by bind_id/flow_out ... bind_id/flow_in on
	// B and X events (Perfetto draws them; DevTools does not read them).
	FlowsV2  int
	TimesNs  []int64        // ts of every non-metadata event in ns, in file order
	Metadata map[string]any // the top-level "metadata" object
}

type slice struct {
	name string
	ts   int64
}

// lastSlice is the latest event of a track that begins a slice (B, X, or a
// thread-scoped instant), the slice a flow event at its ts binds to.
type lastSlice struct {
	ts    int64
	cat   string
	index int
	flows int // flow events bound to it so far
}

type trackID struct{ pid, tid int64 }

// maxFlowID is the largest flow id every importer reads exactly:
// JavaScript viewers hold numbers as doubles.
const maxFlowID = 1 << 53

// ErrInvalid is wrapped by every rule violation Validate reports.
var ErrInvalid = errors.New("invalid trace-event JSON")

// Validate checks a Chrome trace-event JSON document against the format's
// rules as this package uses them and as the importers that draw it apply
// them (Perfetto's json_trace_parser_impl.cc, flow_tracker.cc and
// slice_tracker.cc; Chrome DevTools' FlowsHandler.ts; catapult's
// trace_event_importer.html, the legacy chrome://tracing):
//
//   - a top-level object with a traceEvents array; run metadata under
//     "metadata" (an object), not "otherData" (Perfetto skips it); no
//     other top-level key (older Perfetto tokenizers stop reading there); no
//     displayTimeUnit (Perfetto read it as the unit of ts until late 2021,
//     catapult throws on values other than "ms" and "ns");
//   - known phases; pid, tid and name present; ts with at most three
//     decimals (µs) on every non-metadata event; dur >= 0 on X; scope on i;
//     numeric args on C; cat, where present, a string;
//   - B/E properly nested per (pid, tid) with matching names and all closed
//     at the end; ts non-decreasing per (pid, tid);
//   - every flow event (s, t, f) has a name, a non-empty cat and an id that
//     Perfetto parses: a JSON integer in [0, 2^53] or a string of 1 to 16
//     hex digits with an optional 0x (anything else is flow_invalid_id
//     there, or is read in a way other importers do not share); an id
//     is started once in the whole file (Perfetto never closes a v1 flow,
//     so a second start is flow_duplicate_id, and catapult keys flows by id
//     alone); every t and f follows its s; every s is finished;
//   - every flow event binds to a slice: the latest slice-beginning event
//     of its track has the same ts and the same cat (DevTools binds a flow
//     event to the event with equal ts, pid, tid and cat; Perfetto to the
//     topmost open slice of the track, which that slice is); f carries
//     "bp":"e" (without it Perfetto and catapult bind to the next slice);
//   - flow v2 on B and X events: bind_id parsed like a v1 id, flow_in and
//     flow_out booleans, at least one true; flow_out alone starts (once per
//     id), flow_in alone ends a started flow; every started flow ends.
//
// Errors name the event index.
func Validate(r io.Reader) (*Report, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("decode: %w: %w", ErrInvalid, err)
	}
	var doc struct {
		TraceEvents []map[string]any
		Metadata    json.RawMessage
	}
	if _, ok := top["otherData"]; ok {
		return nil, fmt.Errorf("top-level otherData: Perfetto's importer skips it, put run metadata under \"metadata\": %w", ErrInvalid)
	}
	if v, ok := top["displayTimeUnit"]; ok {
		return nil, fmt.Errorf("top-level displayTimeUnit %s: Perfetto's importer read it as the unit of ts until late 2021 (google/perfetto#106), leave it out: %w", v, ErrInvalid)
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		switch k {
		case "traceEvents":
			d := json.NewDecoder(bytes.NewReader(top[k]))
			d.UseNumber()
			if err := d.Decode(&doc.TraceEvents); err != nil {
				return nil, fmt.Errorf("decode traceEvents: %w: %w", ErrInvalid, err)
			}
		case "metadata":
			doc.Metadata = top[k]
		default:
			return nil, fmt.Errorf("top-level key %q: Perfetto's JSON tokenizer stops reading a file at a key it does not know (json_trace_tokenizer.cc), so nothing after it would be drawn: %w", k, ErrInvalid)
		}
	}
	if doc.TraceEvents == nil {
		return nil, fmt.Errorf("no traceEvents array: %w", ErrInvalid)
	}
	rep := &Report{ByPhase: map[string]int{}}
	if doc.Metadata != nil {
		md := json.NewDecoder(bytes.NewReader(doc.Metadata))
		md.UseNumber()
		if err := md.Decode(&rep.Metadata); err != nil || rep.Metadata == nil {
			return nil, fmt.Errorf("top-level metadata is not an object: %w", ErrInvalid)
		}
	}
	stacks := map[trackID][]slice{}
	lastTs := map[trackID]int64{}
	last := map[trackID]*lastSlice{}
	started := map[uint64]int{} // flow id -> index of its s
	open := map[uint64]int64{}  // flow id -> ts of its s, while open
	openV2 := map[uint64]int64{}
	startedV2 := map[uint64]bool{}
	pids := map[int64]bool{}
	for i, e := range doc.TraceEvents {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("event %d (%v): %s: %w", i, e["ph"], fmt.Sprintf(format, a...), ErrInvalid)
		}
		rep.Events++
		ph, ok := e["ph"].(string)
		if !ok {
			return nil, bad("no ph")
		}
		rep.ByPhase[ph]++
		pid, err := intField(e, "pid")
		if err != nil {
			return nil, bad("%v", err)
		}
		tid, err := intField(e, "tid")
		if err != nil {
			return nil, bad("%v", err)
		}
		pids[pid] = true
		name, hasName := e["name"].(string)
		if ph != "E" && !hasName {
			return nil, bad("no name")
		}
		cat, hasCat := e["cat"].(string)
		if c, ok := e["cat"]; ok && !hasCat {
			return nil, bad("cat %v is not a string", c)
		}
		if ph == "M" {
			switch name {
			case "process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels":
			default:
				return nil, bad("unknown metadata %q", name)
			}
			if _, ok := e["args"].(map[string]any); !ok {
				return nil, bad("metadata without args")
			}
			continue
		}
		ts, err := tsField(e)
		if err != nil {
			return nil, bad("%v", err)
		}
		rep.TimesNs = append(rep.TimesNs, ts)
		if ph == "B" || ph == "X" {
			ended, err := flowV2(e, ts, openV2, startedV2)
			if err != nil {
				return nil, bad("%v", err)
			}
			if ended {
				rep.FlowsV2++
			}
		} else if _, ok := e["bind_id"]; ok {
			return nil, bad("bind_id on a %q event: Perfetto reads it on B and X slices only", ph)
		}
		k := trackID{pid, tid}
		if ph != "C" {
			if prev, ok := lastTs[k]; ok && ts < prev {
				return nil, bad("ts %d ns before the track's previous %d ns", ts, prev)
			}
			lastTs[k] = ts
		}
		switch ph {
		case "B":
			stacks[k] = append(stacks[k], slice{name, ts})
			last[k] = &lastSlice{ts: ts, cat: cat, index: i}
		case "E":
			st := stacks[k]
			if len(st) == 0 {
				return nil, bad("E without an open B on pid %d tid %d", pid, tid)
			}
			top := st[len(st)-1]
			if hasName && name != top.name {
				return nil, bad("E %q closes B %q", name, top.name)
			}
			stacks[k] = st[:len(st)-1]
		case "X":
			d, err := numField(e, "dur")
			if err != nil {
				return nil, bad("%v", err)
			}
			if d < 0 {
				return nil, bad("negative dur")
			}
			last[k] = &lastSlice{ts: ts, cat: cat, index: i}
		case "i", "I":
			s, _ := e["s"].(string)
			if s != "" && s != "g" && s != "p" && s != "t" {
				return nil, bad("instant scope %q", s)
			}
			if s == "" || s == "t" {
				// A thread instant is a zero-length slice of the track.
				last[k] = &lastSlice{ts: ts, cat: cat, index: i}
			}
		case "C":
			args, ok := e["args"].(map[string]any)
			if !ok || len(args) == 0 {
				return nil, bad("counter without args")
			}
			for an, v := range args {
				if _, ok := v.(json.Number); !ok {
					return nil, bad("counter arg %q is not a number", an)
				}
			}
		case "s", "t", "f":
			if name == "" {
				return nil, bad("flow without a name")
			}
			if cat == "" {
				return nil, bad("flow without a cat")
			}
			id, err := flowID(e)
			if err != nil {
				return nil, bad("%v", err)
			}
			ls := last[k]
			if ls == nil || ls.ts != ts || ls.cat != cat {
				where := "no slice on the track"
				if ls != nil {
					where = fmt.Sprintf("the track's latest slice (event %d) has ts %d ns, cat %q", ls.index, ls.ts, ls.cat)
				}
				return nil, bad("flow %d at ts %d ns, cat %q binds to no slice: %s", id, ts, cat, where)
			}
			if ls.flows++; ls.flows > 1 {
				rep.FlowsSharedSlice++
			}
			bp, hasBP := e["bp"]
			if hasBP && bp != "e" {
				return nil, bad("flow bp %v (only \"e\" binds to the enclosing slice)", bp)
			}
			switch ph {
			case "s":
				if j, dup := started[id]; dup {
					return nil, bad("flow id %d started again (first by event %d): importers pair the second end with the first start", id, j)
				}
				started[id] = i
				open[id] = ts
			case "t", "f":
				sts, ok := open[id]
				if !ok {
					return nil, bad("flow %d finished without a start", id)
				}
				if ph == "f" {
					if !hasBP {
						return nil, bad("flow end %d without \"bp\":\"e\": it would bind to the next slice", id)
					}
					delete(open, id)
					rep.Flows++
					if sts == ts {
						rep.FlowsSameTs++
					}
				}
			}
		default:
			return nil, bad("unknown phase %q", ph)
		}
	}
	for k, st := range stacks {
		if len(st) > 0 {
			return nil, fmt.Errorf("pid %d tid %d: %d B events never closed (first %q): %w", k.pid, k.tid, len(st), st[0].name, ErrInvalid)
		}
	}
	if len(open) > 0 {
		return nil, fmt.Errorf("%d flows started and never finished: %w", len(open), ErrInvalid)
	}
	if len(openV2) > 0 {
		return nil, fmt.Errorf("%d v2 flows (bind_id with flow_out) never flow in: %w", len(openV2), ErrInvalid)
	}
	rep.Processes = len(pids)
	return rep, nil
}

// flowID reads a flow event's id the way Perfetto's importer does
// (MaybeExtractFlowIdentifier): a JSON number, or a string parsed as hex.
// It accepts only what every importer reads alike: an integer in
// [0, 2^53], as a number or as a string of hex digits.
func flowID(e map[string]any) (uint64, error) {
	v, ok := e["id"]
	if !ok {
		if _, ok := e["id2"]; ok {
			return 0, errors.New("flow with id2 but no id: Perfetto's and catapult's importers read only id on s/t/f events")
		}
		return 0, errors.New("flow without an id")
	}
	return parseFlowID("flow id", v)
}

func parseFlowID(what string, v any) (uint64, error) {
	switch id := v.(type) {
	case json.Number:
		n, err := strconv.ParseUint(string(id), 10, 64)
		if err != nil || n > maxFlowID {
			return 0, fmt.Errorf("%s %s is not an integer in [0, 2^53]", what, id)
		}
		return n, nil
	case string:
		// Perfetto parses the string with strtoull(s, &end, 16) and keeps
		// it if all of it was read: hex digits, with an optional 0x, and
		// also leading blanks and a sign, which are refused here.
		digits := id
		if len(digits) > 2 && (digits[:2] == "0x" || digits[:2] == "0X") {
			digits = digits[2:]
		}
		if len(digits) == 0 || len(digits) > 16 || strings.Trim(digits, "0123456789abcdefABCDEF") != "" {
			if t := strings.TrimLeft(id, " \t\n\v\f\r+-"); t != id && t != "" && strings.Trim(t, "0123456789abcdefABCDEFxX") == "" {
				return 0, fmt.Errorf("%s %q: Perfetto reads it as strtoull does (blanks skipped, a minus wraps), other importers by its text: write hex digits or a number", what, id)
			}
			return 0, fmt.Errorf("%s %q is neither a number nor hex digits: Perfetto's importer drops it (flow_invalid_id)", what, id)
		}
		n, _ := strconv.ParseUint(digits, 16, 64)
		if n > maxFlowID {
			return 0, fmt.Errorf("%s %q is above 2^53: JavaScript viewers round it", what, id)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s %v is neither a number nor a string", what, v)
}

// flowV2 checks the flow v2 fields of a B or X event (bind_id, flow_in,
// flow_out) as Perfetto's importer reads them (MaybeAddFlow): bind_id
// parsed like a v1 id; flow_out alone starts a flow, flow_in alone ends it
// on this slice, both step it; neither is flow_without_direction. Chrome
// DevTools does not read v2 flows. It returns whether a flow ended here.
func flowV2(e map[string]any, ts int64, open map[uint64]int64, started map[uint64]bool) (bool, error) {
	v, has := e["bind_id"]
	in, hasIn := e["flow_in"]
	out, hasOut := e["flow_out"]
	if !has {
		if hasIn || hasOut {
			return false, errors.New("flow_in/flow_out without bind_id: Perfetto ignores them")
		}
		return false, nil
	}
	id, err := parseFlowID("bind_id", v)
	if err != nil {
		return false, err
	}
	fin, ok1 := in.(bool)
	fout, ok2 := out.(bool)
	if (hasIn && !ok1) || (hasOut && !ok2) {
		return false, errors.New("flow_in and flow_out must be JSON booleans")
	}
	switch {
	case fout && !fin:
		if started[id] {
			return false, fmt.Errorf("bind_id %d started again: Perfetto uses v2 ids as they are", id)
		}
		started[id] = true
		open[id] = ts
	case fin:
		if _, ok := open[id]; !ok {
			return false, fmt.Errorf("bind_id %d flows in without a start", id)
		}
		if !fout {
			delete(open, id)
			return true, nil
		}
	default:
		return false, fmt.Errorf("bind_id %d with neither flow_in nor flow_out: Perfetto counts flow_without_direction", id)
	}
	return false, nil
}

func intField(e map[string]any, f string) (int64, error) {
	n, ok := e[f].(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s missing or not a number", f)
	}
	v, err := n.Int64()
	if err != nil {
		return 0, fmt.Errorf("%s %q is not an integer", f, n)
	}
	return v, nil
}

func numField(e map[string]any, f string) (float64, error) {
	n, ok := e[f].(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s missing or not a number", f)
	}
	return n.Float64()
}

// tsField parses ts (µs) exactly into ns: digits, an optional point and at
// most three decimals.
func tsField(e map[string]any) (int64, error) {
	n, ok := e["ts"].(json.Number)
	if !ok {
		return 0, errors.New("ts missing or not a number")
	}
	return ParseMicros(string(n))
}

// ParseMicros parses a decimal microsecond string with at most three
// decimals into integer nanoseconds.
func ParseMicros(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	ip, fp, _ := strings.Cut(s, ".")
	if len(fp) > 3 {
		return 0, fmt.Errorf("ts %q has more than 3 decimals", s)
	}
	if ip == "" || strings.ContainsAny(ip, "eE+-") || strings.ContainsAny(fp, "eE+-") {
		return 0, fmt.Errorf("ts %q is not a plain decimal", s)
	}
	us, err := strconv.ParseInt(ip, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ts %q: %w", s, err)
	}
	var frac int64
	if fp != "" {
		f, err := strconv.ParseUint(fp, 10, 16)
		if err != nil {
			return 0, fmt.Errorf("ts %q: %w", s, err)
		}
		frac = int64(f)
		for i := len(fp); i < 3; i++ {
			frac *= 10
		}
	}
	if us > (1<<63-1-frac)/1000 {
		return 0, fmt.Errorf("ts %q overflows int64 ns", s)
	}
	v := us*1000 + frac
	if neg {
		v = -v
	}
	return v, nil
}
