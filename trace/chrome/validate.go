package chrome

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Report is what Validate found in a valid file.
type Report struct {
	Events    int            // trace events (metadata included)
	ByPhase   map[string]int // events per phase
	Processes int            // distinct pids
	Flows     int            // bound flow pairs (s ... f)
	TimesNs   []int64        // ts of every non-metadata event in ns, in file order
}

type slice struct {
	name string
	ts   int64
}

type trackID struct{ pid, tid int64 }

// ErrInvalid is wrapped by every rule violation Validate reports.
var ErrInvalid = errors.New("invalid trace-event JSON")

// Validate checks a Chrome trace-event JSON document against the format's
// rules as this package uses them: a traceEvents array; known phases; pid,
// tid and name present; ts with at most three decimals (µs) on every
// non-metadata event; dur >= 0 on X; scope on i; numeric args on C; B/E
// properly nested per (pid, tid) with matching names and all closed at the
// end; ts non-decreasing per (pid, tid); every flow with cat and id, every
// "f" preceded by its "s", each flow event inside a slice of its track, and
// every "s" finished. Errors name the event index.
func Validate(r io.Reader) (*Report, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode: %w: %w", ErrInvalid, err)
	}
	if doc.TraceEvents == nil {
		return nil, fmt.Errorf("no traceEvents array: %w", ErrInvalid)
	}
	rep := &Report{ByPhase: map[string]int{}}
	stacks := map[trackID][]slice{}
	lastTs := map[trackID]int64{}
	lastX := map[trackID]slice{} // the last zero-or-more-length X slice, for binding
	lastXEnd := map[trackID]int64{}
	open := map[string]bool{}
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
			lastX[k] = slice{name, ts}
			lastXEnd[k] = ts + int64(d*1000)
		case "i", "I":
			s, _ := e["s"].(string)
			if s != "" && s != "g" && s != "p" && s != "t" {
				return nil, bad("instant scope %q", s)
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
			cat, _ := e["cat"].(string)
			id, ok := e["id"]
			if cat == "" || !ok {
				return nil, bad("flow without cat or id")
			}
			key := cat + "\x00" + name + "\x00" + fmt.Sprint(id)
			// A flow event binds to the slice enclosing it on its track.
			x, hasX := lastX[k]
			bound := len(stacks[k]) > 0 || (hasX && x.ts <= ts && ts <= lastXEnd[k])
			if !bound {
				return nil, bad("flow %v not inside a slice of pid %d tid %d", id, pid, tid)
			}
			switch ph {
			case "s":
				if open[key] {
					return nil, bad("flow id %v started twice", id)
				}
				open[key] = true
			case "t", "f":
				if !open[key] {
					return nil, bad("flow %v finished without a start", id)
				}
				if ph == "f" {
					delete(open, key)
					rep.Flows++
					if bp, ok := e["bp"]; ok && bp != "e" {
						return nil, bad("flow end bp %v", bp)
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
	rep.Processes = len(pids)
	return rep, nil
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
