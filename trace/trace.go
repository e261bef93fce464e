package trace

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/trace/format"
)

// ErrClosed is returned by recording calls after Close.
var ErrClosed = errors.New("trace: recorder closed")

// Prober performs one sync exchange with the reference and returns it in
// the recording process's orientation: LocSend and LocRecv on this
// process's clock, SrcRecv and SrcSend on the reference's.
type Prober interface {
	Probe() (estimate.Sample, error)
}

// Defaults. SyncMaxMessages and SyncMaxDuration follow seed 001's
// SYNC-MAX-MESSAGES and SYNC-MAX-DURATION: enough exchanges that dropping
// the 10% slowest still leaves a good midpoint estimate, bounded in time so
// that a slow network cannot stall start-up.
const (
	DefaultChunkEvents     = 4096
	DefaultSyncMaxMessages = 100
	DefaultSyncMaxDuration = 200 * time.Millisecond
)

// Config configures a Recorder.
type Config struct {
	Proc       uint32      // this process's number, unique in the run
	Host       uint32      // host number; processes with equal Host share a clock
	Name       string      // human name
	Clock      clock.Clock // the local clock (clock.Raw in production)
	ClockName  string      // recorded in the file, e.g. "CLOCK_MONOTONIC_RAW"
	Reference  bool        // this process's clock is global time
	RefProc    uint32      // the reference process (recorded with each session)
	SyncedHost bool        // record no sessions; share the host's (SYNCED-HOST)
	// Prober runs sync exchanges; nil for the reference and SyncedHost
	// processes (and then Timesync does nothing).
	Prober          Prober
	ChunkEvents     int           // events per chunk; DefaultChunkEvents if 0
	SyncMaxMessages int           // exchanges per session; DefaultSyncMaxMessages if 0
	SyncMaxDuration time.Duration // session time limit (local clock); DefaultSyncMaxDuration if 0
	NoStartSession  bool          // do not run the start session in New
	NoEndSession    bool          // do not run the end session in Close
}

// Recorder records one process's events into one trace file. Its methods
// are safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	clk     clock.Clock
	w       *format.Writer
	buf     []format.Event
	names   []format.Name // not yet written
	nextID  uint64
	byName  map[string]uint64
	cfg     Config
	session uint32
	closed  bool
	err     error
	log     *slog.Logger

	lastMap  estimate.Mapping // last daemon mapping recorded by PollMapping
	lastFrom int64
	haveMap  bool
}

// New starts a recording on w: it writes the file's meta chunk and, when a
// Prober is set, runs the start sync session.
func New(w io.Writer, cfg Config, log *slog.Logger) (*Recorder, error) {
	if cfg.Clock == nil {
		return nil, errors.New("trace: new recorder: Config.Clock is nil")
	}
	if cfg.ChunkEvents == 0 {
		cfg.ChunkEvents = DefaultChunkEvents
	}
	if cfg.ChunkEvents < 0 || cfg.ChunkEvents*format.EventSize > format.MaxPayload {
		return nil, fmt.Errorf("trace: new recorder: ChunkEvents %d outside 1..%d", cfg.ChunkEvents, format.MaxPayload/format.EventSize)
	}
	if cfg.SyncMaxMessages == 0 {
		cfg.SyncMaxMessages = DefaultSyncMaxMessages
	}
	if cfg.SyncMaxDuration == 0 {
		cfg.SyncMaxDuration = DefaultSyncMaxDuration
	}
	if cfg.SyncMaxMessages < 0 || cfg.SyncMaxDuration < 0 {
		return nil, errors.New("trace: new recorder: negative SyncMaxMessages or SyncMaxDuration")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{
		clk:    cfg.Clock,
		w:      format.NewWriter(w),
		buf:    make([]format.Event, 0, cfg.ChunkEvents),
		byName: map[string]uint64{},
		nextID: 1,
		cfg:    cfg,
		log:    log.With("proc", cfg.Proc),
	}
	var flags uint32
	if cfg.Reference {
		flags |= format.FlagReference
	}
	if cfg.SyncedHost {
		flags |= format.FlagSyncedHost
	}
	if err := r.w.WriteMeta(format.Meta{Proc: cfg.Proc, Host: cfg.Host, Flags: flags, Name: cfg.Name, Clock: cfg.ClockName}); err != nil {
		return nil, fmt.Errorf("trace: new recorder: %w", err)
	}
	if !cfg.NoStartSession {
		if err := r.sync(format.SessionStart); err != nil {
			return nil, fmt.Errorf("trace: start session: %w", err)
		}
	}
	return r, nil
}

// Name registers a name (of a region, instant or counter) and returns its
// id. The same string always gets the same id. It allocates; call it once
// per name, outside the hot path.
func (r *Recorder) Name(s string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.byName[s]; ok {
		return id
	}
	id := r.nextID
	r.nextID++
	r.byName[s] = id
	r.names = append(r.names, format.Name{Proc: r.cfg.Proc, ID: id, Name: s})
	return id
}

// Track is a handle on one track (a thread or goroutine) of the recorder.
// Regions must nest per track. Copy it freely.
type Track struct {
	r  *Recorder
	id uint16
}

// Track returns the handle of track id.
func (r *Recorder) Track(id uint16) Track { return Track{r: r, id: id} }

// add stamps and appends one event.
func (r *Recorder) add(track uint16, kind format.Kind, id uint64, peer uint32, value int64) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.buf = append(r.buf, format.Event{Time: r.clk.Now(), ID: id, Value: value, Peer: peer, Track: track, Kind: kind})
	if len(r.buf) == cap(r.buf) {
		r.flushLocked()
	}
	r.mu.Unlock()
}

// Record appends an event stamped by the caller (generators, importers of
// other trace formats). Times must not decrease.
func (r *Recorder) Record(e format.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if n := len(r.buf); n > 0 && e.Time < r.buf[n-1].Time {
		return fmt.Errorf("trace: event at %d before the previous at %d", e.Time, r.buf[n-1].Time)
	}
	r.buf = append(r.buf, e)
	if len(r.buf) == cap(r.buf) {
		r.flushLocked()
	}
	return r.err
}

// Enter records that region id starts.
func (t Track) Enter(id uint64) { t.r.add(t.id, format.Enter, id, 0, 0) }

// Leave records that region id ends.
func (t Track) Leave(id uint64) { t.r.add(t.id, format.Leave, id, 0, 0) }

// Instant records a point event.
func (t Track) Instant(id uint64) { t.r.add(t.id, format.Instant, id, 0, 0) }

// Counter records a counter value.
func (t Track) Counter(id uint64, v int64) { t.r.add(t.id, format.Counter, id, 0, v) }

// Send records that message msgID of size bytes left for process peer.
// Message ids must be unique per (sender, receiver) pair.
func (t Track) Send(peer uint32, msgID uint64, size int64) {
	t.r.add(t.id, format.Send, msgID, peer, size)
}

// Recv records that message msgID (the sender's id) from process peer
// arrived.
func (t Track) Recv(peer uint32, msgID uint64, size int64) {
	t.r.add(t.id, format.Recv, msgID, peer, size)
}

// flushLocked writes pending names and the buffered events.
func (r *Recorder) flushLocked() {
	if r.err != nil {
		r.buf = r.buf[:0]
		return
	}
	if len(r.names) > 0 {
		if err := r.w.WriteNames(r.names); err != nil {
			r.err = err
			r.log.Error("trace write failed", "err", err)
		}
		r.names = r.names[:0]
	}
	if len(r.buf) > 0 && r.err == nil {
		if err := r.w.WriteEvents(r.buf); err != nil {
			r.err = err
			r.log.Error("trace write failed", "err", err)
		}
	}
	r.buf = r.buf[:0]
}

// Flush writes buffered events and names as a chunk and returns the first
// write error so far.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked()
	return r.err
}

// RecordMapping stores a local->global mapping published by the sync
// daemon, valid from local time from on.
func (r *Recorder) RecordMapping(from int64, m estimate.Mapping) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.flushLocked()
	if r.err != nil {
		return r.err
	}
	if err := r.w.WriteMappings([]format.DaemonMapping{{From: from, Mapping: m}}); err != nil {
		r.err = err
	}
	return r.err
}

// Timesync runs an on-demand sync session (seed 001's VT_timesync). It
// does nothing without a Prober.
func (r *Recorder) Timesync() error { return r.sync(format.SessionDemand) }

// sync runs one session and writes it. Events recorded meanwhile by other
// goroutines wait on the lock only between exchanges.
func (r *Recorder) sync(kind format.SessionKind) error {
	if r.cfg.Prober == nil || r.cfg.SyncedHost || r.cfg.Reference {
		return nil
	}
	start := r.clk.Now()
	limit := r.cfg.SyncMaxDuration.Nanoseconds()
	samples := make([]estimate.Sample, 0, r.cfg.SyncMaxMessages)
	for len(samples) < r.cfg.SyncMaxMessages {
		s, err := r.cfg.Prober.Probe()
		if err != nil {
			r.log.Warn("sync exchange failed", "err", err, "done", len(samples))
			if len(samples) == 0 {
				return fmt.Errorf("sync exchange: %w", err)
			}
			break
		}
		samples = append(samples, s)
		if r.clk.Now()-start >= limit {
			break
		}
	}
	return r.RecordSession(kind, samples)
}

// RecordSession stores a session whose exchanges were made by the caller
// (generators, or a program that syncs through its own messages).
func (r *Recorder) RecordSession(kind format.SessionKind, samples []estimate.Sample) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.flushLocked()
	if r.err != nil {
		return r.err
	}
	idx := r.session
	r.session++
	if err := r.w.WriteSession(format.Session{Index: idx, Ref: r.cfg.RefProc, Kind: kind, Samples: samples}); err != nil {
		r.err = err
		return err
	}
	r.log.Debug("sync session", "index", idx, "exchanges", len(samples))
	return nil
}

// Close runs the end sync session, flushes, and stops recording; later
// events are dropped. It does not close the underlying writer.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.err
	}
	r.mu.Unlock()
	var serr error
	if !r.cfg.NoEndSession {
		serr = r.sync(format.SessionEnd)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked()
	r.closed = true
	if serr != nil {
		return fmt.Errorf("trace: end session: %w", serr)
	}
	return r.err
}

// MappingSource is what the recorder needs from the sync daemon: its
// current local->global mapping and the local time from which it holds
// (for gtime, the page's publish time). The daemon's API is not fixed yet;
// any adapter with this method works.
type MappingSource interface {
	Mapping() (from int64, m estimate.Mapping, err error)
}

// PollMapping reads src and records its mapping if it differs from the
// last one recorded; call it periodically (say every 100 ms) from any
// goroutine. It reports whether a mapping was recorded.
func (r *Recorder) PollMapping(src MappingSource) (bool, error) {
	from, m, err := src.Mapping()
	if err != nil {
		return false, fmt.Errorf("trace: daemon mapping: %w", err)
	}
	if !m.Valid {
		return false, nil
	}
	r.mu.Lock()
	same := r.haveMap && r.lastMap == m && r.lastFrom == from
	r.mu.Unlock()
	if same {
		return false, nil
	}
	if err := r.RecordMapping(from, m); err != nil {
		return false, err
	}
	r.mu.Lock()
	r.lastMap, r.lastFrom, r.haveMap = m, from, true
	r.mu.Unlock()
	return true, nil
}
