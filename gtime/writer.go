package gtime

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gclock/gclock/estimate"
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
}

// Writer publishes to a page. There is one writer per page: NewWriter takes
// an exclusive file lock, released by Close or by the writer's death.
type Writer struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	mem   []byte
	w     words
	cur   pageData
	isSet bool // cur holds a published valid mapping
}

// NewWriter opens or creates the page at path (mode 0644), locks it and
// maps it. An existing valid page keeps its last mapping, so readers keep
// bounded (stale, widening) readings across a daemon restart until the
// first Publish; anything else at path of the right size is reinitialised.
func NewWriter(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("gtime: writer: %w", err)
	}
	fail := func(what string, err error) (*Writer, error) {
		f.Close()
		return nil, fmt.Errorf("gtime: writer: %s: %s: %w", path, what, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fail("another writer (daemon) holds the page lock", err)
		}
		return fail("lock", err)
	}
	st, err := f.Stat()
	if err != nil {
		return fail("stat", err)
	}
	if !st.Mode().IsRegular() {
		return fail("not a regular file", ErrNotPage)
	}
	if st.Size() != PageSize {
		if err := f.Truncate(PageSize); err != nil {
			return fail("resize", err)
		}
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	w := &Writer{path: path, f: f, mem: mem, w: newWords(mem)}
	seq := w.w.u(offSeq)
	torn := seq.Load()&1 != 0
	if torn {
		// A writer died mid-update: its payload may be torn, so it is not
		// kept. Make the counter even again before store, which adds two,
		// so readers see a new, consistent version.
		seq.Add(1)
	}
	old, err := w.w.load()
	if err == nil && old.valid && !torn {
		w.cur, w.isSet = old, true
	} else {
		w.cur = pageData{status: StatusUnsynced}
	}
	w.cur.pid = int64(os.Getpid())
	w.cur.closed = false
	w.w.store(&w.cur)
	return w, nil
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
		node: u.Node, reference: u.Reference,
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
			gap := satSub(prev, mono)
			hw := max(satSub(mono, now.Earliest), satSub(now.Latest, mono))
			if gap < 0 {
				gap = satSub(0, gap)
			}
			next.w0 = min(satAdd(next.w0, satAdd(satSub(gap, hw), 1)), maxHalfWidth)
			target = prev
		}
		next.slewC = satSub(target, mono)
	}
	w.w.store(&next)
	w.cur = next
	w.isSet = next.valid
	return nil
}

func (u *Update) check() error {
	m := u.Mapping
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("update field %s = %v: %s: %w", field, v, why, ErrUpdate)
	}
	switch {
	case u.Status > StatusNoDaemon:
		return bad("Status", u.Status, "unknown status")
	case u.Timescale > TimescaleMeanDrift:
		return bad("Timescale", u.Timescale, "unknown timescale")
	case u.StaleAfter <= 0:
		return bad("StaleAfter", u.StaleAfter, "must be > 0")
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
// file stays, so that readers holding it keep working and a restarted
// daemon resumes it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mem == nil {
		return nil
	}
	w.cur.closed = true
	w.cur.pid = 0
	w.w.store(&w.cur)
	err := unix.Munmap(w.mem)
	w.mem = nil
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("gtime: close %s: %w", w.path, err)
	}
	return nil
}
