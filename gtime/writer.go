package gtime

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
)

// Update is what the daemon publishes: its current local->global mapping
// and how readers should treat it as it ages.
type Update struct {
	// Local is the CLOCK_MONOTONIC_RAW reading (ns) at which the daemon
	// vouches for Mapping: the page's last-update time and the slew anchor.
	// It must not decrease from one Publish to the next.
	Local int64
	// Mapping is the local->global mapping (local = CLOCK_MONOTONIC_RAW).
	// An invalid mapping publishes "unsynced" with unbounded bounds.
	Mapping estimate.Mapping
	// Status is the engine's view (engine.Status converts directly).
	// Readers turn StatusSynced into StatusStale once the page is older
	// than StaleAfter.
	Status Status
	// StaleAfter is how long after Local readers trust the mapping's own
	// bounds; past it they add MaxDrift per ns of further age. The daemon
	// should publish at least every StaleAfter/2.
	StaleAfter time.Duration
	// MaxDrift is the worst-case |skew| error assumed once stale (e.g. 100e-6).
	MaxDrift float64
	// MaxSlewRate is how fast a correction is absorbed by Est (e.g. 500e-6):
	// Est moves at (1+skew)±MaxSlewRate until it meets the new estimate.
	MaxSlewRate float64
	// Timescale says what the global time counts.
	Timescale Timescale
	// Continuous: when the new bounds at Local exclude what readers of the
	// previous page got there, widen the new W0 to include it instead of
	// clamping Est into the new bounds, so Est never jumps: it continues
	// from the previous value and slews to the new estimate at MaxSlewRate
	// (the bounds stay those of the truth, only wider). False clamps: Est
	// jumps to the nearest new bound.
	Continuous bool
	// Node is the publishing daemon's node id and Reference the node whose
	// clock global time currently is (it changes on failover); 0: unknown.
	Node, Reference uint32
	// UpstreamUnsynced says why a UTC timescale is not synced: the
	// reference's own CLOCK_REALTIME is unsynchronised (Info reports it).
	UpstreamUnsynced bool
	// Term is the election term the published reading belongs to (0
	// without failover); Scale, when Defined, is that term's definition
	// of global time, published by the term's reference only (its Term
	// must be Term).
	Term  uint32
	Scale Scale
}

// Writer publishes to a page. There is one writer per page: NewWriter
// takes an exclusive flock on the page's lock file (the page path +
// ".lock", mode 0600), released by Close or by the writer's death. Readers
// cannot open that file, so no reader can block a restart.
type Writer struct {
	mu    sync.Mutex
	path  string
	dir   string
	name  string
	opts  WriterOptions
	dirf  *os.File // the page's directory, for *at calls
	lock  *os.File // holds the flock
	mem   []byte
	w     words
	cur   pageData
	isSet bool   // cur holds a published valid mapping
	seq   uint64 // the page's counter after the last store
	notes []string
}

// WriterOptions tunes NewWriterWith.
type WriterOptions struct {
	// Group, when > 0, is the gid the page belongs to, with mode 0640:
	// only root, the daemon's user and that group's members can read
	// global time. 0 (the default) gives mode 0644: every user can.
	Group int
}

// NewWriter is NewWriterWith(path, WriterOptions{}): a page of mode 0644.
func NewWriter(path string) (*Writer, error) { return NewWriterWith(path, WriterOptions{}) }

// NewWriterWith creates the page at path and maps it. The directory must
// be owned by root or the caller's uid and, if writable by group or
// others, sticky (as /dev/shm is). The page is written under a temporary
// name created with O_EXCL|O_NOFOLLOW and renamed into place, so nobody
// can plant or pre-open it. An existing page is replaced only if it is the
// caller's own (a regular file owned by its uid, one link, not writable by
// group or others); anything else at the page's, the temporary's or the
// lock's name is a leftover, removed without being read or followed
// (Leftovers lists them), unless a live writer holds the lock (refused) or
// the directory does not let the caller remove it (refused with ErrUnsafe,
// naming the file). If the old page held a valid mapping, the new page
// starts from it, so readers keep bounded (stale, widening) readings across
// a daemon restart until the first Publish; the old page is marked closed
// and replaced, and readers that still map it reopen the path.
func NewWriterWith(path string, opts WriterOptions) (*Writer, error) {
	if opts.Group < 0 {
		return nil, fmt.Errorf("gtime: writer: %s: group %d: %w", path, opts.Group, ErrUpdate)
	}
	dir, name := filepath.Split(filepath.Clean(path))
	dir = filepath.Clean(dir)
	fail := func(err error) (*Writer, error) {
		return nil, fmt.Errorf("gtime: writer: %w", err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(fmt.Errorf("directory %s of page %s: %w", dir, name, err))
	}
	dirf := os.NewFile(uintptr(dfd), dir)
	if err := checkDir(dfd, dir); err != nil {
		dirf.Close()
		return fail(err)
	}
	var notes []string
	lock, err := openLock(dfd, dir, name+".lock", &notes)
	if err != nil {
		dirf.Close()
		return fail(fmt.Errorf("%s: %w", path, err))
	}
	w := &Writer{path: path, dir: dir, name: name, opts: opts, dirf: dirf, lock: lock}
	old, err := openOld(dfd, path, name, &notes)
	if err != nil {
		w.release()
		return fail(err)
	}
	w.notes = notes
	if old != nil && old.valid {
		w.cur, w.isSet = old.d, true
	} else {
		w.cur = pageData{status: StatusUnsynced}
	}
	w.cur.pid = int64(os.Getpid())
	w.cur.closed, w.cur.replaced = false, false
	if old != nil {
		w.seq = old.seq
	}
	if err := w.replace(); err != nil {
		if old != nil && old.mem != nil {
			unix.Munmap(old.mem)
		}
		w.release()
		return fail(err)
	}
	old.markReplaced()
	return w, nil
}

// Leftovers lists what NewWriterWith removed or replaced because it was
// not the daemon's own: a foreign page, temporary file or lock file that no
// live writer held (each entry names the file, its owner and mode). The
// daemon logs them.
func (w *Writer) Leftovers() []string { return append([]string(nil), w.notes...) }

// replace puts a new page holding w.cur at the path (temporary file,
// rename) and maps it in place of the current mapping, if any.
func (w *Writer) replace() error {
	mem, err := createPage(int(w.dirf.Fd()), w.dir, w.name, w.opts, &w.cur, w.seq, &w.notes)
	if err != nil {
		return err
	}
	w.seq = w.seq&^1 + 2
	if w.mem != nil {
		unix.Munmap(w.mem)
	}
	w.mem, w.w = mem, newWords(mem)
	return nil
}

// store writes d to the page. A memory fault (someone with the daemon's
// uid truncated the page file) is caught: the writer then puts a fresh
// page at the path, stores d there, and returns an error wrapping
// ErrTruncated that says so (readers fault too, and reopen the path).
func (w *Writer) store(d *pageData) error {
	err := func() (err error) {
		defer guard(&err, debug.SetPanicOnFault(true))
		w.w.store(d)
		return nil
	}()
	if err == nil {
		w.seq += 2
		return nil
	}
	saved := w.cur
	w.cur = *d
	rerr := w.replace()
	w.cur = saved
	if rerr != nil {
		return fmt.Errorf("%s: %w; and could not replace it: %v", w.path, err, rerr)
	}
	return fmt.Errorf("%s: %w; the update went to a new page at the same path", w.path, err)
}

// release drops the lock and the directory.
func (w *Writer) release() {
	w.lock.Close()
	w.dirf.Close()
}

// Path is the page's file name.
func (w *Writer) Path() string { return w.path }

// Publish checks u and writes it under the seqlock. The slew correction is
// chosen so that Est at u.Local equals what readers of the previous page
// got at that instant (clamped into the new bounds), then decays at
// MaxSlewRate: readers in every process see one continuous, non-decreasing
// curve.
func (w *Writer) Publish(u Update) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mem == nil {
		return fmt.Errorf("gtime: publish: %s: %w", w.path, ErrClosed)
	}
	if err := u.check(); err != nil {
		return fmt.Errorf("gtime: publish: %s: %w", w.path, err)
	}
	if w.cur.updated > u.Local && w.cur.updated != 0 {
		return fmt.Errorf("gtime: publish: %s: update field Local = %d went backwards (previous %d): %w", w.path, u.Local, w.cur.updated, ErrUpdate)
	}
	m := u.Mapping
	next := pageData{
		pid: w.cur.pid, x0: m.X0, y0: m.Y0, w0: m.W0,
		skew: m.Skew, skewErr: m.SkewErr, wander: m.Wander,
		updated: u.Local, staleAfter: int64(u.StaleAfter), maxDrift: u.MaxDrift,
		slewX: u.Local, slewRate: u.MaxSlewRate,
		status: u.Status, timescale: u.Timescale, valid: m.Valid,
		node: u.Node, reference: u.Reference, upstreamUnsync: u.UpstreamUnsynced,
		term: u.Term, scale: u.Scale,
	}
	if !u.Scale.Defined {
		next.scale = Scale{Term: u.Term}
	}
	if next.valid && w.isSet && w.cur.timescale == next.timescale {
		prev := eval(&w.cur, u.Local).Est
		now := eval(&next, u.Local)
		target := min(max(prev, now.Earliest), now.Latest)
		// est + corr = target, with no wrap (both sides are within
		// maxHalfWidth of the same estimate or saturated).
		mono := now.Est // slewC is 0 so far: this is the clamped estimate
		if u.Continuous && target != prev {
			// Widen by the excess (one ns more for the rounding of
			// ceil(w)); |corr| then stays within W0 <= w(x) for every
			// x >= Local, as it only decays.
			gap := satmath.Sub(prev, mono)
			hw := max(satmath.Sub(mono, now.Earliest), satmath.Sub(now.Latest, mono))
			if gap < 0 {
				gap = satmath.Sub(0, gap)
			}
			next.w0 = min(satmath.Add(next.w0, satmath.Add(satmath.Sub(gap, hw), 1)), maxHalfWidth)
			target = prev
		}
		next.slewC = satmath.Sub(target, mono)
	}
	err := w.store(&next)
	w.cur = next
	w.isSet = next.valid
	if err != nil {
		return fmt.Errorf("gtime: publish: %w", err)
	}
	return nil
}

func (u *Update) check() error {
	m := u.Mapping
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("update field %s = %v: %s: %w", field, v, why, ErrUpdate)
	}
	switch {
	case u.Status > StatusDegraded:
		return bad("Status", u.Status, "unknown status")
	case u.Timescale > TimescaleMeanDrift:
		return bad("Timescale", u.Timescale, "unknown timescale")
	case u.StaleAfter <= 0:
		return bad("StaleAfter", u.StaleAfter, "must be > 0")
	case u.Scale.Defined && u.Scale.Term != u.Term:
		return bad("Scale.Term", u.Scale.Term, fmt.Sprintf("must be the update's Term %d", u.Term))
	case u.Scale.Defined && (!finite(u.Scale.Skew) || math.Abs(u.Scale.Skew) >= 0.5):
		return bad("Scale.Skew", u.Scale.Skew, "must be finite, |skew| < 0.5")
	case !finite(u.MaxDrift) || u.MaxDrift < 0 || u.MaxDrift >= 0.5:
		return bad("MaxDrift", u.MaxDrift, "must be in [0, 0.5)")
	case !finite(u.MaxSlewRate) || u.MaxSlewRate <= 0 || u.MaxSlewRate >= 0.5:
		return bad("MaxSlewRate", u.MaxSlewRate, "must be in (0, 0.5)")
	case !m.Valid:
		return nil
	case !finite(m.Skew) || math.Abs(m.Skew) >= 0.5:
		return bad("Mapping.Skew", m.Skew, "must be finite, |skew| < 0.5")
	case !finite(m.SkewErr) || m.SkewErr < 0:
		return bad("Mapping.SkewErr", m.SkewErr, "must be finite and >= 0")
	case !finite(m.Wander) || m.Wander < 0:
		return bad("Mapping.Wander", m.Wander, "must be finite and >= 0")
	case m.W0 < 0:
		return bad("Mapping.W0", m.W0, "must be >= 0")
	}
	return nil
}

// Close marks the page closed (readers report StatusNoDaemon, bounds keep
// widening from the last update), unmaps it and releases the lock. The
// files stay, so that readers holding the page keep working and a
// restarted daemon resumes from its mapping.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mem == nil {
		return nil
	}
	w.cur.closed = true
	w.cur.pid = 0
	func() (err error) { // a page that shrank is simply left
		defer guard(&err, debug.SetPanicOnFault(true))
		w.w.store(&w.cur)
		return nil
	}()
	err := unix.Munmap(w.mem)
	w.mem = nil
	if cerr := w.lock.Close(); err == nil {
		err = cerr
	}
	if cerr := w.dirf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("gtime: close %s: %w", w.path, err)
	}
	return nil
}
