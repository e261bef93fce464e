package gtime

import (
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
)

// Reader reads a page. It is safe for concurrent use; the no-backwards
// clamp is shared by every goroutine using the same Reader.
//
// A Reader follows its path: when a restarted daemon replaces the page (it
// marks the old one replaced), when the mapped file shrinks (a memory fault
// caught as ErrTruncated), and, at most every checkEvery while the page does
// not read synced, when the path names another file (the page was removed
// and created again), it maps the page the path names now. Mappings it
// leaves stay mapped until Close (goroutines may still be reading them):
// 4 KiB of address space per daemon restart.
type Reader struct {
	path   string
	opts   OpenOptions
	cur    atomic.Pointer[mapping]
	mu     sync.Mutex   // serializes reopen; guards old
	old    []*mapping   // mappings left after a reopen, unmapped by Close
	last   atomic.Int64 // largest Est returned so far
	now    func() int64 // RawNow; replaced in tests
	closed atomic.Bool
	cache  atomic.Pointer[snapshot] // last checked copy, shared by goroutines
	next   atomic.Int64             // local time before which the path is not checked again
}

// OpenOptions tunes OpenWith.
type OpenOptions struct {
	// Owner, when > 0, is a uid trusted to own the page (the daemon's
	// user). Root, the reader's own uid and the owner of a page directory
	// that nobody else can write to are always trusted.
	Owner int
}

// checkEvery is how often a Reader whose page does not read synced checks
// whether its path names another file.
const checkEvery = 100 * 1000 * 1000 // ns

// mapping is one mapped page file.
type mapping struct {
	mem      []byte
	w        words
	dev, ino uint64
	stuck    atomic.Bool // a reopen after this page read as replaced failed
}

// snapshot is a checked copy of a page and the counter it belongs to.
type snapshot struct {
	m   *mapping
	seq uint64
	d   pageData
}

// seq loads the page's counter, turning a memory fault into ErrTruncated.
func (m *mapping) seq() (s uint64, err error) {
	defer guard(&err, debug.SetPanicOnFault(true))
	return m.w.u(offSeq).Load(), nil
}

// load is words.loadSeq, turning a memory fault into ErrTruncated.
func (m *mapping) load() (d pageData, s uint64, err error) {
	defer guard(&err, debug.SetPanicOnFault(true))
	return m.w.loadSeq()
}

// Open is OpenWith(path, OpenOptions{}).
func Open(path string) (*Reader, error) { return OpenWith(path, OpenOptions{}) }

// OpenWith maps the page at path read-only. It refuses (ErrUnsafe, naming
// the owner or mode) a page that someone other than a trusted owner could
// have written: a symbolic link, a file owned by an untrusted uid, writable
// by group or others, or with several links. It fails with ErrNotPage
// (wrapped) if the file is not a gclock page of this version, so that a typo
// in a path gives a clear error instead of nonsense.
func OpenWith(path string, opts OpenOptions) (*Reader, error) {
	m, err := openMapping(path, opts)
	if err != nil {
		return nil, fmt.Errorf("gtime: open: %w", err)
	}
	r := &Reader{path: path, opts: opts, now: RawNow}
	r.cur.Store(m)
	r.last.Store(math.MinInt64)
	return r, nil
}

// openMapping opens (O_NOFOLLOW, O_NONBLOCK: no symlink, no FIFO), checks
// and maps the page at path.
func openMapping(path string, opts OpenOptions) (*mapping, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%s is a symbolic link: refused, anyone may have made it point to a forged page (open the target itself): %w", path, ErrUnsafe)
		}
		return nil, fmt.Errorf("%s: %w (is the daemon running? it creates the page)", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkReadable(&st, path, opts.Owner); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, PageSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	m := &mapping{mem: mem, w: newWords(mem), dev: st.Dev, ino: st.Ino}
	if _, _, err := m.load(); err != nil && !errors.Is(err, ErrBusy) {
		unix.Munmap(mem)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// needsCheck says whether a reading of d at x is not synced, so that the
// Reader looks at its path now and then.
func needsCheck(d *pageData, x int64) bool {
	return !d.valid || d.closed || d.status != StatusSynced || satmath.Sub(x, d.updated) > d.staleAfter
}

// snapshot returns a checked copy of the current page: the cached one while
// the counter has not moved (one atomic load), following the path as the
// Reader's documentation says.
func (r *Reader) snapshot(x int64) (*snapshot, error) {
	for attempt := 0; ; attempt++ {
		m := r.cur.Load()
		c := r.cache.Load()
		seq, err := m.seq()
		if err == nil && (c == nil || c.m != m || c.seq != seq) {
			var d pageData
			d, seq, err = m.load()
			if err == nil {
				c = &snapshot{m: m, seq: seq, d: d}
				r.cache.Store(c)
			}
		}
		if attempt > 0 {
			return c, err
		}
		switch {
		case errors.Is(err, ErrTruncated):
			// The writer replaces a page it finds truncated.
			if r.due(x) && r.reopen(m, true) == nil {
				continue
			}
		case err != nil:
		case c.d.replaced:
			// The path holds the restarted daemon's page: follow it at
			// once (waiting for a goroutine doing so), then, if that
			// failed, at most every checkEvery.
			if !m.stuck.Load() || r.due(x) {
				if r.reopen(m, true) == nil {
					continue
				}
				m.stuck.Store(true)
			}
		case needsCheck(&c.d, x):
			if r.due(x) && r.reopen(m, false) == nil {
				continue
			}
		}
		return c, err
	}
}

// due says whether the path may be checked at local time x (at most every
// checkEvery, one goroutine at a time).
func (r *Reader) due(x int64) bool {
	n := r.next.Load()
	return x >= n && r.next.CompareAndSwap(n, satmath.Add(x, checkEvery))
}

// errSame: the path still names the mapped file.
var errSame = errors.New("same page")

// reopen maps the page the path names now in place of old, unless another
// goroutine already did or (when !always) the path names the same file.
func (r *Reader) reopen(old *mapping, always bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return ErrClosed
	}
	if r.cur.Load() != old {
		return nil
	}
	if !always {
		var st unix.Stat_t
		if err := unix.Stat(r.path, &st); err != nil {
			return err
		}
		if st.Dev == old.dev && st.Ino == old.ino {
			return errSame
		}
	}
	m, err := openMapping(r.path, r.opts)
	if err != nil {
		return err
	}
	if m.dev == old.dev && m.ino == old.ino {
		unix.Munmap(m.mem)
		return errSame
	}
	r.old = append(r.old, old)
	r.cur.Store(m)
	return nil
}

// Now reads global time: one CLOCK_MONOTONIC_RAW read, a seqlock copy of
// the page and some arithmetic. Est never decreases between calls on the
// same Reader (nor, up to the writer's publication latency, across
// processes: see the package documentation). An error means the page
// cannot be read at all (closed reader, foreign or corrupt page, writer
// stuck mid-update, a page file that shrank and was not replaced); a daemon
// that is gone or late is a Status, not an error.
//
// While the page's counter has not moved since the previous read, the
// Reader's checked copy is used: one atomic load instead of a seqlock copy.
func (r *Reader) Now() (Time, error) {
	x := r.now()
	if r.closed.Load() {
		return Time{}, fmt.Errorf("gtime: read %s: %w", r.path, ErrClosed)
	}
	c, err := r.snapshot(x)
	if err != nil {
		return Time{}, fmt.Errorf("gtime: read %s: %w", r.path, err)
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
	c, err := r.snapshot(r.now())
	if err != nil {
		return Time{}, fmt.Errorf("gtime: read %s: %w", r.path, err)
	}
	return eval(&c.d, local), nil
}

// AtScale is At with the election term the reading belongs to, from the
// same copy of the page: Scale.Term is the term, and Scale is that term's
// definition of global time when the page's writer is the term's reference
// (Scale.Defined; see Scale). A reading claims the scale of its term: an
// evaluator judges a synced reading against that scale, which changes
// with the term after a failover.
func (r *Reader) AtScale(local int64) (Time, Scale, error) {
	if r.closed.Load() {
		return Time{}, Scale{}, fmt.Errorf("gtime: read %s: %w", r.path, ErrClosed)
	}
	c, err := r.snapshot(r.now())
	if err != nil {
		return Time{}, Scale{}, fmt.Errorf("gtime: read %s: %w", r.path, err)
	}
	return eval(&c.d, local), c.d.scale, nil
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
	c, err := r.snapshot(r.now())
	if err != nil {
		return 0, estimate.Mapping{}, fmt.Errorf("gtime: mapping %s: %w", r.path, err)
	}
	d := c.d
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
	// Term is the election term of the last publish (0 without failover
	// or from older daemons).
	Term uint32
	// UpstreamUnsynced: the daemon serves no synced UTC because the
	// reference's own CLOCK_REALTIME is unsynchronised (its kernel says so).
	UpstreamUnsynced bool
}

// Info reads the page's metadata and checks whether the writer's process
// still exists (one extra system call, so it is not part of Now).
func (r *Reader) Info() (Info, error) {
	if r.closed.Load() {
		return Info{}, fmt.Errorf("gtime: info %s: %w", r.path, ErrClosed)
	}
	c, err := r.snapshot(r.now())
	if err != nil {
		return Info{}, fmt.Errorf("gtime: info %s: %w", r.path, err)
	}
	d := c.d
	in := Info{
		Path: r.path, WriterPID: int(d.pid), Updated: d.updated,
		Age: time.Duration(satmath.Sub(r.now(), d.updated)), StaleAfter: time.Duration(d.staleAfter),
		MaxDrift: d.maxDrift, Timescale: d.timescale, Valid: d.valid,
		Node: d.node, Reference: d.reference, Term: d.term, UpstreamUnsynced: d.upstreamUnsync,
	}
	if d.pid > 0 && d.pid <= math.MaxInt32 {
		err := unix.Kill(int(d.pid), 0)
		in.WriterAlive = err == nil || errors.Is(err, unix.EPERM)
	}
	return in, nil
}

// Close unmaps the page (and the pages left by reopens). Later reads
// return ErrClosed. Close must not race with reads on the same Reader.
func (r *Reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var err error
	for _, m := range append(r.old, r.cur.Load()) {
		if e := unix.Munmap(m.mem); e != nil && err == nil {
			err = fmt.Errorf("gtime: close %s: %w", r.path, e)
		}
	}
	r.old = nil
	return err
}

// BusyRetries is how many more times ReadPatiently reads a page for one
// instant when it is busy: each read waits up to 100 ms for the daemon to
// finish its update, and a daemon descheduled in the middle of one on a
// loaded machine may take longer (a lab run at load 20 lost a read that
// way). Only a writer dead mid-update still fails, after about two seconds.
const BusyRetries = 20

// ReadPatiently is at(local), read again up to retries more times while it
// fails with ErrBusy; busy counts the reads that did. local is fixed, so a
// later read gives that instant's global time as exactly. at is e.g.
// (*Reader).At.
func ReadPatiently(at func(int64) (Time, error), local int64, retries int) (t Time, busy int, err error) {
	for {
		t, err = at(local)
		if !errors.Is(err, ErrBusy) {
			return t, busy, err
		}
		busy++
		if busy > retries {
			return t, busy, err
		}
	}
}
