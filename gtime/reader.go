package gtime

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gclock/gclock/estimate"
)

// Reader reads a page. It is safe for concurrent use; the no-backwards
// clamp is shared by every goroutine using the same Reader.
type Reader struct {
	path   string
	mem    []byte
	w      words
	last   atomic.Int64 // largest Est returned so far
	now    func() int64 // RawNow; replaced in tests
	closed atomic.Bool
	cache  atomic.Pointer[snapshot] // last checked copy, shared by goroutines
}

// snapshot is a checked copy of the page and the counter it belongs to.
type snapshot struct {
	seq uint64
	d   pageData
}

// Open maps the page at path read-only. It fails with ErrNotPage (wrapped)
// if the file is not a gclock page of this version, so that a typo in a
// path gives a clear error instead of nonsense.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gtime: open: %w (is the daemon running? it creates the page)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("gtime: open %s: %w", path, err)
	}
	if !st.Mode().IsRegular() || st.Size() != PageSize {
		return nil, fmt.Errorf("gtime: open %s: size %d, want %d: %w", path, st.Size(), PageSize, ErrNotPage)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, PageSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("gtime: open %s: mmap: %w", path, err)
	}
	r := &Reader{path: path, mem: mem, w: newWords(mem), now: RawNow}
	r.last.Store(math.MinInt64)
	if _, err := r.w.load(); err != nil && !errors.Is(err, ErrBusy) {
		unix.Munmap(mem)
		return nil, fmt.Errorf("gtime: open %s: %w", path, err)
	}
	return r, nil
}

// Now reads global time: one CLOCK_MONOTONIC_RAW read, a seqlock copy of
// the page and some arithmetic. Est never decreases between calls on the
// same Reader (nor, up to the writer's publication latency, across
// processes: see the package documentation). An error means the page
// cannot be read at all (closed reader, foreign or corrupt page, writer
// stuck mid-update); a daemon that is gone or late is a Status, not an error.
//
// While the page's counter has not moved since the previous read, the
// Reader's checked copy is used: one atomic load instead of a seqlock copy.
func (r *Reader) Now() (Time, error) {
	x := r.now()
	if r.closed.Load() {
		return Time{}, fmt.Errorf("gtime: read %s: %w", r.path, ErrClosed)
	}
	c := r.cache.Load()
	if c == nil || c.seq != r.w.u(offSeq).Load() {
		d, seq, err := r.w.loadSeq()
		if err != nil {
			return Time{}, fmt.Errorf("gtime: read %s: %w", r.path, err)
		}
		c = &snapshot{seq: seq, d: d}
		r.cache.Store(c)
	}
	t := eval(&c.d, x)
	for {
		l := r.last.Load()
		if t.Est <= l {
			t.Est = l
			return t, nil
		}
		if r.last.CompareAndSwap(l, t.Est) {
			return t, nil
		}
	}
}

// At evaluates the page at a given CLOCK_MONOTONIC_RAW reading, without the
// per-reader clamp: the pure function every reader (and gclock.h's
// gclock_at) computes.
func (r *Reader) At(local int64) (Time, error) {
	if r.closed.Load() {
		return Time{}, fmt.Errorf("gtime: read %s: %w", r.path, ErrClosed)
	}
	d, err := r.w.load()
	if err != nil {
		return Time{}, fmt.Errorf("gtime: read %s: %w", r.path, err)
	}
	return eval(&d, local), nil
}

// Mapping returns the daemon's current local->global mapping as published
// (local clock = CLOCK_MONOTONIC_RAW) and the local time it was published
// at. It satisfies trace.MappingSource, so a trace recorder can log a live
// daemon's mappings (trace.Recorder.PollMapping). Valid is false while the
// daemon is unsynced or has closed the page; the stale-page widening that Now
// applies is not part of the returned mapping.
func (r *Reader) Mapping() (from int64, m estimate.Mapping, err error) {
	if r.closed.Load() {
		return 0, estimate.Mapping{}, fmt.Errorf("gtime: mapping %s: %w", r.path, ErrClosed)
	}
	d, err := r.w.load()
	if err != nil {
		return 0, estimate.Mapping{}, fmt.Errorf("gtime: mapping %s: %w", r.path, err)
	}
	m = estimate.Mapping{
		X0: d.x0, Y0: d.y0, Skew: d.skew, W0: d.w0, SkewErr: d.skewErr, Wander: d.wander,
		Valid: d.valid && !d.closed && d.status != StatusUnsynced,
	}
	return d.updated, m, nil
}

// Info describes the page, for tools such as gclock now.
type Info struct {
	Path        string
	WriterPID   int           // 0 when the writer closed the page
	WriterAlive bool          // the pid exists (kill(pid, 0)); false when 0
	Updated     int64         // local time of the last publish
	Age         time.Duration // now - Updated
	StaleAfter  time.Duration
	MaxDrift    float64
	Timescale   Timescale
	Valid       bool
	// Node is the publishing daemon's node id, Reference the node whose
	// clock global time is at the last publish (it changes on failover);
	// 0 when the daemon did not say (older daemons).
	Node, Reference uint32
}

// Info reads the page's metadata and checks whether the writer's process
// still exists (one extra system call, so it is not part of Now).
func (r *Reader) Info() (Info, error) {
	if r.closed.Load() {
		return Info{}, fmt.Errorf("gtime: info %s: %w", r.path, ErrClosed)
	}
	d, err := r.w.load()
	if err != nil {
		return Info{}, fmt.Errorf("gtime: info %s: %w", r.path, err)
	}
	in := Info{
		Path: r.path, WriterPID: int(d.pid), Updated: d.updated,
		Age: time.Duration(satSub(r.now(), d.updated)), StaleAfter: time.Duration(d.staleAfter),
		MaxDrift: d.maxDrift, Timescale: d.timescale, Valid: d.valid,
		Node: d.node, Reference: d.reference,
	}
	if d.pid > 0 && d.pid <= math.MaxInt32 {
		err := unix.Kill(int(d.pid), 0)
		in.WriterAlive = err == nil || errors.Is(err, unix.EPERM)
	}
	return in, nil
}

// Close unmaps the page. Later reads return ErrClosed. Close must not race
// with reads on the same Reader.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if err := unix.Munmap(r.mem); err != nil {
		return fmt.Errorf("gtime: close %s: %w", r.path, err)
	}
	return nil
}
