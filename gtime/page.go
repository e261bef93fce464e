package gtime

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/gclock/gclock/internal/satmath"
)

// The page layout. Every field is a naturally aligned 64-bit word read and
// written with atomic operations; include/gclock.h mirrors these offsets.
const (
	// Magic marks a gclock page: the bytes "GCLKSHM1" read as a
	// little-endian uint64.
	Magic uint64 = 0x314d48534b4c4347
	// Version is the layout version; a reader refuses any other. Version 2
	// added TimescaleMeanDrift (same words, one more timescale value).
	Version uint32 = 2
	// PageSize is the file size the writer creates: one memory page, so
	// the mapping costs one TLB entry and the hot fields share two cache lines.
	PageSize = 4096
	// DefaultPath is where the daemon publishes by default: /run is a
	// tmpfs, so the page never touches a disk, and /run/gclock is the
	// daemon's own directory (systemd's RuntimeDirectory=gclock, or made
	// 0755 by the daemon), so no other local user can plant or remove
	// files beside the page, as anyone can in the world-writable /dev/shm.
	DefaultPath = "/run/gclock/page"

	offMagic      = 0   // uint64 Magic
	offVersion    = 8   // uint64: Version | PageSize<<32
	offSeq        = 16  // uint64 seqlock counter, odd while the writer is mid-update
	offPID        = 24  // int64 writer pid, 0 after Close
	offX0         = 32  // int64 Mapping.X0 (local CLOCK_MONOTONIC_RAW ns)
	offY0         = 40  // int64 Mapping.Y0 (global ns)
	offSkew       = 48  // float64 bits Mapping.Skew
	offW0         = 56  // int64 Mapping.W0 ns
	offSkewErr    = 64  // float64 bits Mapping.SkewErr
	offWander     = 72  // float64 bits Mapping.Wander (per ns)
	offUpdated    = 80  // int64 local time of the last Publish
	offStaleAfter = 88  // int64 ns: older than this, the page is stale
	offMaxDrift   = 96  // float64 bits: widening rate once stale
	offSlewX      = 104 // int64 local anchor of the slew
	offSlewC      = 112 // int64 ns correction at SlewX, decays to 0
	offSlewRate   = 120 // float64 bits: decay rate of the correction
	offFlags      = 128 // uint64: status | timescale<<8 | valid<<16 | closed<<17 | replaced<<18 | upstream_unsync<<19
	offNodes      = 136 // uint64: node id | reference id<<32 (0: unknown; pages of older daemons)
	offTerm       = 144 // uint64: election term | scale defined<<32 (0: none; pages of older daemons)
	offScaleX0    = 152 // int64 Scale.X0 (the reference's own clock, ns)
	offScaleY0    = 160 // int64 Scale.Y0 (global ns)
	offScaleSkew  = 168 // float64 bits Scale.Skew
	layoutEnd     = 176

	termScaleDefined = 1 << 32

	flagValid  = 1 << 16
	flagClosed = 1 << 17
	// flagReplaced: a restarted writer put a new page at the path and
	// closed this one; readers reopen the path. Readers that predate the
	// flag ignore it and see the page closed.
	flagReplaced = 1 << 18
	// flagUpstreamUnsync: the served UTC is unsynced because the
	// reference's own CLOCK_REALTIME is unsynchronised (its kernel says
	// STA_UNSYNC or TIME_ERROR), not because of the cluster's sync.
	// Readers that predate it ignore it.
	flagUpstreamUnsync = 1 << 19
)

// maxHalfWidth caps a bound's half-width, as estimate.Mapping.At does, so
// that est +- width never overflows in later arithmetic.
const maxHalfWidth = math.MaxInt64 / 4

// Status says how much a reading can be trusted. Its values are
// engine.Status's (convert with gtime.Status(s)) plus the page-only
// StatusNoDaemon. Only StatusSynced promises that the truth is inside
// [Earliest, Latest].
type Status uint8

// Statuses.
const (
	StatusUnsynced Status = iota // no estimate yet: bounds are unbounded
	StatusSynced                 // the daemon vouched for the mapping recently
	StatusStale                  // no update for longer than the page's limit: bounds widen at the worst-case drift
	StatusNoDaemon               // the writer closed the page (or its pid is gone): bounds widen as for stale
	// StatusDegraded: the data contradicted the daemon's clock model (an
	// exchange outside the bounds, an empty hull, a residual beyond the
	// model). The bounds are what the engine still holds certain (it
	// widened them), but the reading is not synced until re-acquisition
	// ends. engine.StatusDegraded has the same value.
	StatusDegraded
)

// String names the status.
func (s Status) String() string {
	switch s {
	case StatusUnsynced:
		return "unsynced"
	case StatusSynced:
		return "synced"
	case StatusStale:
		return "stale"
	case StatusNoDaemon:
		return "no-daemon"
	case StatusDegraded:
		return "degraded"
	default:
		return fmt.Sprintf("status(%d)", uint8(s))
	}
}

// Timescale says what global time counts.
type Timescale uint8

// Timescales.
const (
	// TimescaleReference is the reference node's CLOCK_MONOTONIC_RAW, in ns.
	TimescaleReference Timescale = iota
	// TimescaleRealtime is UTC, ns since the Unix epoch: the reference's
	// CLOCK_REALTIME (daemon real_time.mode reference-realtime).
	TimescaleRealtime
	// TimescaleMeanDrift is ns since the Unix epoch, started from the
	// reference's CLOCK_REALTIME once and then running at the mean rate of
	// all the cluster's clocks (Jezequel 5.4; daemon real_time.mode
	// mean-drift). It follows no NTP.
	TimescaleMeanDrift
)

// String names the timescale.
func (t Timescale) String() string {
	switch t {
	case TimescaleReference:
		return "reference"
	case TimescaleRealtime:
		return "realtime"
	case TimescaleMeanDrift:
		return "mean-drift"
	default:
		return fmt.Sprintf("timescale(%d)", uint8(t))
	}
}

// Epoch reports whether the timescale counts ns since the Unix epoch (so
// that it prints as a UTC date).
func (t Timescale) Epoch() bool { return t == TimescaleRealtime || t == TimescaleMeanDrift }

// Time is global time read at one local instant.
type Time struct {
	// Est is the estimate of global time, slewed so that it never goes
	// backwards (see the package documentation) and kept inside
	// [Earliest, Latest] unless holding it still would require otherwise.
	Est int64
	// Earliest and Latest bound the true global time; unbounded
	// (math.MinInt64, math.MaxInt64) while unsynced.
	Earliest, Latest int64
	Status           Status
}

// Width is Latest-Earliest, saturated at math.MaxInt64.
func (t Time) Width() int64 { return satmath.Sub(t.Latest, t.Earliest) }

// Errors of the package, wrapped with the page path and the field.
var (
	// ErrNotPage: the file is not a gclock page (magic, version or size).
	ErrNotPage = errors.New("not a gclock page")
	// ErrBusy: the seqlock stayed odd (a writer died mid-update, or is
	// being starved) for the whole retry budget.
	ErrBusy = errors.New("page is being written for too long")
	// ErrCorrupt: a field holds a value no writer would publish.
	ErrCorrupt = errors.New("page holds an invalid value")
	// ErrUpdate: Publish refused an update (the message names the field).
	ErrUpdate = errors.New("invalid update")
	// ErrClosed: the reader or writer was closed.
	ErrClosed = errors.New("page is closed")
	// ErrTruncated: the page file shrank under a mapping of it (a memory
	// fault on the mapped page, caught instead of dying of SIGBUS).
	ErrTruncated = errors.New("page file shrank under its mapping")
	// ErrUnsafe: the page, its directory or the lock file could be written
	// by someone other than the daemon's user (owner, mode, symlink, hard
	// link): refused, so that no local user can forge global time.
	ErrUnsafe = errors.New("refused: not safe")
)

// pageData is one consistent copy of the page's payload.
type pageData struct {
	pid                   int64
	x0, y0, w0            int64
	skew, skewErr, wander float64
	updated, staleAfter   int64
	maxDrift              float64
	slewX, slewC          int64
	slewRate              float64
	status                Status
	timescale             Timescale
	valid, closed         bool
	replaced              bool   // a new page replaced this one at the path (readers reopen)
	upstreamUnsync        bool   // flagUpstreamUnsync
	node, reference       uint32 // the publishing daemon's node id and its current reference (0: unknown)
	term                  uint32 // the election term the reading claims (0 without failover)
	scale                 Scale  // the term's scale, published by its reference (Defined false elsewhere)
}

// Scale is the definition of global time in one election term, as the
// term's reference publishes it on its page (docs/daemon.md, "Reference
// failover"): global time is Y0 + (L - X0)(1 + Skew), where L is the
// reference's own local clock (its CLOCK_MONOTONIC_RAW, or the emulated
// clock it runs on). The first reference of a cluster defines the identity
// (X0 = Y0 = 0, Skew = 0: global time is its clock); a node that took
// over defines the line it froze at the takeover. It is a definition, not
// an estimate: it lets a reader with access to the reference's clock (an
// auditor, the lab's evaluator) compute global time of that term exactly.
type Scale struct {
	Term    uint32
	Defined bool // this page's writer is the term's reference and says so
	X0, Y0  int64
	Skew    float64
}

// At is the scale's global time at the reference's local time l.
func (s Scale) At(l int64) int64 {
	dx := satmath.Sub(l, s.X0)
	return satmath.Add(satmath.Add(s.Y0, dx), satmath.FromFloat(math.Round(s.Skew*float64(dx))))
}

// words is the page seen as 64-bit atomic words.
type words struct{ base unsafe.Pointer }

func newWords(mem []byte) words {
	return words{unsafe.Pointer(unsafe.SliceData(mem))}
}

func (w words) u(off uintptr) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(w.base, off))
}

func (w words) i(off uintptr) int64 { return int64(w.u(off).Load()) }

func (w words) f(off uintptr) float64 { return math.Float64frombits(w.u(off).Load()) }

// A reader retries a copy that overlapped an update: first spinning, then
// yielding the processor (to goroutines, then sleeping: yield), for at most
// busyLimit. An update takes well
// under a microsecond, so a counter still odd after that means the writer
// died (or is stopped) mid-update: the read fails with ErrBusy rather than
// hanging. The limit is generous because a loaded host may deschedule the
// writer for milliseconds.
const (
	spinTries = 64
	busyLimit = 100 * 1000 * 1000 // ns
)

// load copies the payload under the seqlock.
func (w words) load() (pageData, error) {
	d, _, err := w.loadSeq()
	return d, err
}

// loadSeq is load that also returns the (even) counter the copy belongs to.
func (w words) loadSeq() (pageData, uint64, error) {
	var d pageData
	seq := w.u(offSeq)
	var start int64
	for i := 0; ; i++ {
		if i >= spinTries {
			if start == 0 {
				start = RawNow()
			} else if RawNow()-start > busyLimit {
				return d, 0, ErrBusy
			}
			yield(i - spinTries)
		}
		s1 := seq.Load()
		if s1&1 != 0 {
			continue
		}
		magic := w.u(offMagic).Load()
		ver := w.u(offVersion).Load()
		d.pid = w.i(offPID)
		d.x0 = w.i(offX0)
		d.y0 = w.i(offY0)
		d.skew = w.f(offSkew)
		d.w0 = w.i(offW0)
		d.skewErr = w.f(offSkewErr)
		d.wander = w.f(offWander)
		d.updated = w.i(offUpdated)
		d.staleAfter = w.i(offStaleAfter)
		d.maxDrift = w.f(offMaxDrift)
		d.slewX = w.i(offSlewX)
		d.slewC = w.i(offSlewC)
		d.slewRate = w.f(offSlewRate)
		flags := w.u(offFlags).Load()
		nodes := w.u(offNodes).Load()
		term := w.u(offTerm).Load()
		d.scale.X0 = w.i(offScaleX0)
		d.scale.Y0 = w.i(offScaleY0)
		d.scale.Skew = w.f(offScaleSkew)
		if seq.Load() != s1 {
			continue
		}
		if magic != Magic || uint32(ver) != Version || ver>>32 != PageSize {
			return d, 0, fmt.Errorf("magic %#x version %d size %d: %w", magic, uint32(ver), ver>>32, ErrNotPage)
		}
		d.status = Status(flags & 0xff)
		d.timescale = Timescale(flags >> 8 & 0xff)
		d.valid = flags&flagValid != 0
		d.closed = flags&flagClosed != 0
		d.replaced = flags&flagReplaced != 0
		d.upstreamUnsync = flags&flagUpstreamUnsync != 0
		d.node, d.reference = uint32(nodes), uint32(nodes>>32)
		d.term = uint32(term)
		d.scale.Term, d.scale.Defined = d.term, term&termScaleDefined != 0
		if !d.scale.Defined {
			d.scale = Scale{Term: d.term}
		}
		return d, s1, d.check()
	}
}

// store writes the payload under the seqlock. The caller is the only writer
// (the file lock guarantees it across processes).
func (w words) store(d *pageData) {
	seq := w.u(offSeq)
	seq.Add(1) // odd: readers retry
	w.u(offPID).Store(uint64(d.pid))
	w.u(offX0).Store(uint64(d.x0))
	w.u(offY0).Store(uint64(d.y0))
	w.u(offSkew).Store(math.Float64bits(d.skew))
	w.u(offW0).Store(uint64(d.w0))
	w.u(offSkewErr).Store(math.Float64bits(d.skewErr))
	w.u(offWander).Store(math.Float64bits(d.wander))
	w.u(offUpdated).Store(uint64(d.updated))
	w.u(offStaleAfter).Store(uint64(d.staleAfter))
	w.u(offMaxDrift).Store(math.Float64bits(d.maxDrift))
	w.u(offSlewX).Store(uint64(d.slewX))
	w.u(offSlewC).Store(uint64(d.slewC))
	w.u(offSlewRate).Store(math.Float64bits(d.slewRate))
	flags := uint64(d.status) | uint64(d.timescale)<<8
	if d.valid {
		flags |= flagValid
	}
	if d.closed {
		flags |= flagClosed
	}
	if d.replaced {
		flags |= flagReplaced
	}
	if d.upstreamUnsync {
		flags |= flagUpstreamUnsync
	}
	w.u(offFlags).Store(flags)
	w.u(offNodes).Store(uint64(d.node) | uint64(d.reference)<<32)
	term := uint64(d.term)
	if d.scale.Defined {
		term |= termScaleDefined
	}
	w.u(offTerm).Store(term)
	w.u(offScaleX0).Store(uint64(d.scale.X0))
	w.u(offScaleY0).Store(uint64(d.scale.Y0))
	w.u(offScaleSkew).Store(math.Float64bits(d.scale.Skew))
	w.u(offMagic).Store(Magic)
	w.u(offVersion).Store(uint64(Version) | PageSize<<32)
	seq.Add(1) // even: consistent again
}

// check rejects values no writer publishes, so that eval's arithmetic stays
// meaningful (NaN or negative widths would make bounds lie).
func (d *pageData) check() error {
	bad := func(name string, v any) error {
		return fmt.Errorf("field %s = %v: %w", name, v, ErrCorrupt)
	}
	switch {
	case d.status > StatusDegraded:
		return bad("status", d.status)
	case d.timescale > TimescaleMeanDrift:
		return bad("timescale", d.timescale)
	case d.scale.Defined && (!finite(d.scale.Skew) || math.Abs(d.scale.Skew) >= 0.5):
		return bad("scale_skew", d.scale.Skew)
	case !d.valid:
		return nil // nothing else is used
	case !finite(d.skew):
		return bad("skew", d.skew)
	case !finite(d.skewErr) || d.skewErr < 0:
		return bad("skew_err", d.skewErr)
	case !finite(d.wander) || d.wander < 0:
		return bad("wander", d.wander)
	case d.w0 < 0:
		return bad("w0", d.w0)
	case d.staleAfter <= 0:
		return bad("stale_after", d.staleAfter)
	case !finite(d.maxDrift) || d.maxDrift < 0:
		return bad("max_drift", d.maxDrift)
	case !finite(d.slewRate) || d.slewRate <= 0 || d.slewRate >= 1:
		return bad("slew_rate", d.slewRate)
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// eval is the reading at local time x: a pure function of the page and x,
// shared by every reader in every process (include/gclock.h computes the
// same). It never panics on any checked page.
func eval(d *pageData, x int64) Time {
	st := d.status
	if d.closed {
		st = StatusNoDaemon
	}
	if !d.valid {
		return Time{Est: 0, Earliest: math.MinInt64, Latest: math.MaxInt64, Status: st}
	}
	dx := satmath.Sub(x, d.x0)
	fdx := float64(dx)
	est := satmath.Add(satmath.Add(d.y0, dx), satmath.FromFloat(math.Round(d.skew*fdx)))
	w := float64(d.w0) + d.skewErr*math.Abs(fdx) + d.wander*fdx*fdx/2
	if age := satmath.Sub(x, d.updated); age > d.staleAfter {
		w += d.maxDrift * float64(age-d.staleAfter)
		if st == StatusSynced {
			st = StatusStale
		}
	}
	iw := int64(maxHalfWidth)
	if w < maxHalfWidth {
		iw = int64(math.Ceil(w))
	}
	lo, hi := satmath.Sub(est, iw), satmath.Add(est, iw)
	corr := d.slewC
	if corr != 0 && x > d.slewX {
		dec := d.slewRate * float64(satmath.Sub(x, d.slewX))
		switch {
		case dec >= math.Abs(float64(corr)):
			corr = 0
		case corr > 0:
			corr -= int64(dec)
		default:
			corr += int64(dec)
		}
	}
	mono := min(max(satmath.Add(est, corr), lo), hi)
	return Time{Est: mono, Earliest: lo, Latest: hi, Status: st}
}
