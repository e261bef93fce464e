package measure

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gclock/gclock/gtime"
)

// Mode says how an execution was started, or that a stamp belongs to a
// one-way latency message.
type Mode uint8

// Modes.
const (
	// ModeBarrier: every node left a message barrier and started at once
	// (the MPI_Barrier way).
	ModeBarrier Mode = iota + 1
	// ModeScheduled: every node started when its global time reached a
	// scheduled instant (the PGCCS way, in software; ReproMPI's window).
	ModeScheduled
	// ModeLatency: a one-way message of the latency test.
	ModeLatency
)

// String names the mode as the stamp files spell it.
func (m Mode) String() string {
	switch m {
	case ModeBarrier:
		return "barrier"
	case ModeScheduled:
		return "scheduled"
	case ModeLatency:
		return "latency"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Event says which moment a stamp records.
type Event uint8

// Events.
const (
	EventStart Event = iota + 1 // the node starts its part of the operation
	EventEnd                    // the node's part is done
	EventTx                     // a latency message left (kernel transmit stamp of its first datagram)
	EventRx                     // a latency message arrived (kernel receive stamp of its last datagram)
)

// String names the event as the stamp files spell it.
func (e Event) String() string {
	switch e {
	case EventStart:
		return "start"
	case EventEnd:
		return "end"
	case EventTx:
		return "tx"
	case EventRx:
		return "rx"
	}
	return fmt.Sprintf("event(%d)", uint8(e))
}

// Stamp is one moment on one node, read from one CLOCK_MONOTONIC_RAW
// instant: the node's own clock and its daemon's global time at that
// instant. Raw is recorded so that an evaluator that knows every clock
// (the lab) can compute the true time of the moment; the measurement
// methods never use it.
type Stamp struct {
	Exec  int   // execution number (latency: message number)
	Mode  Mode  // how the execution started
	Rank  int   // the node that stamped
	Event Event // which moment
	Peer  int   // latency: the other end of the message (-1 otherwise)
	Size  int   // latency: payload bytes; operations: bytes each node contributes
	Raw   int64 // CLOCK_MONOTONIC_RAW reading, ns
	Local int64 // the node's own clock at Raw, ns
	// Global is the node's global time at Raw: the estimate, its bounds
	// and the daemon's status.
	Global gtime.Time
	// Target is the scheduled global instant of a ModeScheduled start (0
	// otherwise). A node that fell behind may aim at a later instant than
	// the others; how late it started is Global.Est minus the earliest
	// Target of the execution's nodes (Analyze).
	Target int64
	// Retro is the node's global time at Raw as its daemon's page gives it
	// at the end of the measurement: the mapping of then, fitted over the
	// exchanges on both sides of the stamp (a correction after the fact, as
	// a trace is corrected); Status unsynced when not read.
	Retro gtime.Time
}

// header is the first line of a stamp file; the columns of every line.
const header = "exec,mode,rank,event,peer,size,raw_ns,local_ns,global_ns,earliest_ns,latest_ns,status,target_ns," +
	"retro_ns,retro_earliest_ns,retro_latest_ns,retro_status"

const columns = 17

// WriteStamps writes stamps as CSV with a header line.
func WriteStamps(w io.Writer, ss []Stamp) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, header)
	for _, s := range ss {
		fmt.Fprintf(bw, "%d,%s,%d,%s,%d,%d,%d,%d,%d,%d,%d,%s,%d,%d,%d,%d,%s\n", s.Exec, s.Mode, s.Rank, s.Event, s.Peer, s.Size,
			s.Raw, s.Local, s.Global.Est, s.Global.Earliest, s.Global.Latest, s.Global.Status, s.Target,
			s.Retro.Est, s.Retro.Earliest, s.Retro.Latest, s.Retro.Status)
	}
	return bw.Flush()
}

// ErrStampFile is wrapped by every ReadStamps error.
var ErrStampFile = errors.New("bad stamp file")

// maxRank and maxExec bound the numbers a stamp file may hold, so that a
// corrupt file cannot make the analysis allocate per rank or execution.
const (
	maxRank = 1 << 16
	maxExec = 1 << 30
	maxSize = 1 << 30
)

// ReadStamps reads a file written by WriteStamps; name is used in errors,
// which give the line and the column.
func ReadStamps(r io.Reader, name string) ([]Stamp, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 4096)
	var out []Stamp
	line := 0
	bad := func(col, format string, a ...any) error {
		return fmt.Errorf("%w: %s line %d: %s: %s", ErrStampFile, name, line, col, fmt.Sprintf(format, a...))
	}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if line == 1 {
			if text != header {
				return nil, bad("header", "got %.80q, want %q", text, header)
			}
			continue
		}
		if text == "" {
			continue
		}
		f := strings.Split(text, ",")
		if len(f) != columns {
			return nil, bad("line", "%d columns, want %d", len(f), columns)
		}
		var s Stamp
		var err error
		ints := []struct {
			col    string
			v      *int
			lo, hi int
		}{{"exec", &s.Exec, 0, maxExec}, {"rank", &s.Rank, 0, maxRank}, {"peer", &s.Peer, -1, maxRank}, {"size", &s.Size, 0, maxSize}}
		idx := []int{0, 2, 4, 5}
		for k, c := range ints {
			n, e := strconv.Atoi(f[idx[k]])
			if e != nil || n < c.lo || n > c.hi {
				return nil, bad(c.col, "%.40q: want an integer in [%d, %d]", f[idx[k]], c.lo, c.hi)
			}
			*c.v = n
		}
		if s.Mode, err = parseMode(f[1]); err != nil {
			return nil, bad("mode", "%v", err)
		}
		if s.Event, err = parseEvent(f[3]); err != nil {
			return nil, bad("event", "%v", err)
		}
		i64 := []struct {
			col string
			v   *int64
			i   int
		}{{"raw_ns", &s.Raw, 6}, {"local_ns", &s.Local, 7}, {"global_ns", &s.Global.Est, 8},
			{"earliest_ns", &s.Global.Earliest, 9}, {"latest_ns", &s.Global.Latest, 10}, {"target_ns", &s.Target, 12},
			{"retro_ns", &s.Retro.Est, 13}, {"retro_earliest_ns", &s.Retro.Earliest, 14}, {"retro_latest_ns", &s.Retro.Latest, 15}}
		for _, c := range i64 {
			if *c.v, err = strconv.ParseInt(f[c.i], 10, 64); err != nil {
				return nil, bad(c.col, "%.40q: want an integer (ns)", f[c.i])
			}
		}
		if s.Global.Earliest > s.Global.Latest {
			return nil, bad("earliest_ns", "%d after latest_ns %d", s.Global.Earliest, s.Global.Latest)
		}
		if s.Global.Status, err = parseStatus(f[11]); err != nil {
			return nil, bad("status", "%v", err)
		}
		if s.Retro.Earliest > s.Retro.Latest {
			return nil, bad("retro_earliest_ns", "%d after retro_latest_ns %d", s.Retro.Earliest, s.Retro.Latest)
		}
		if s.Retro.Status, err = parseStatus(f[16]); err != nil {
			return nil, bad("retro_status", "%v", err)
		}
		if (s.Mode == ModeLatency) != (s.Event == EventTx || s.Event == EventRx) {
			return nil, bad("event", "%s in a %s stamp", s.Event, s.Mode)
		}
		if (s.Mode == ModeLatency) != (s.Peer >= 0) {
			return nil, bad("peer", "%d: want a rank for latency stamps and -1 otherwise", s.Peer)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s line %d: %w", ErrStampFile, name, line+1, err)
	}
	if line == 0 {
		return nil, fmt.Errorf("%w: %s: empty (want the header %q)", ErrStampFile, name, header)
	}
	return out, nil
}

func parseMode(s string) (Mode, error) {
	for _, m := range []Mode{ModeBarrier, ModeScheduled, ModeLatency} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("%.20q: want barrier, scheduled or latency", s)
}

func parseEvent(s string) (Event, error) {
	for _, e := range []Event{EventStart, EventEnd, EventTx, EventRx} {
		if s == e.String() {
			return e, nil
		}
	}
	return 0, fmt.Errorf("%.20q: want start, end, tx or rx", s)
}

func parseStatus(s string) (gtime.Status, error) {
	for st := gtime.StatusUnsynced; st <= gtime.StatusDegraded; st++ {
		if s == st.String() {
			return st, nil
		}
	}
	return 0, fmt.Errorf("%.20q: want synced, stale, unsynced, no-daemon or degraded", s)
}

// unbounded reports whether a reading has no usable bounds.
func unbounded(t gtime.Time) bool { return t.Earliest == math.MinInt64 || t.Latest == math.MaxInt64 }
