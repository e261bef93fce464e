package gtime

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
	"golang.org/x/sys/unix"
)

const sec = int64(time.Second)

func baseUpdate(local int64) Update {
	return Update{
		Local: local,
		Mapping: estimate.Mapping{
			X0: local, Y0: local + 5*sec, Skew: 20e-6, W0: 1000,
			SkewErr: 1e-7, Wander: 0, Valid: true,
		},
		Status: StatusSynced, StaleAfter: 10 * time.Second,
		MaxDrift: 100e-6, MaxSlewRate: 500e-6,
	}
}

func newPair(t *testing.T) (*Writer, *Reader, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "page")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return w, r, path
}

func TestEval(t *testing.T) {
	const x0 = 1000 * sec
	m := pageData{
		valid: true, status: StatusSynced, x0: x0, y0: 2000 * sec, skew: 10e-6, w0: 500,
		skewErr: 1e-6, wander: 0, updated: x0, staleAfter: 10 * sec, maxDrift: 100e-6,
		slewX: x0, slewRate: 500e-6,
	}
	with := func(f func(*pageData)) pageData { d := m; f(&d); return d }
	tests := []struct {
		name                  string
		d                     pageData
		x                     int64
		est, earliest, latest int64
		status                Status
	}{
		{"unsynced", pageData{}, x0, 0, math.MinInt64, math.MaxInt64, StatusUnsynced},
		{"closed unsynced", pageData{closed: true}, x0, 0, math.MinInt64, math.MaxInt64, StatusNoDaemon},
		{"at anchor", m, x0, 2000 * sec, 2000*sec - 500, 2000*sec + 500, StatusSynced},
		// 1 s later: +1 s +10 us skew, width 500 + 1 us.
		{"one second", m, x0 + sec, 2001*sec + 10000, 2001*sec + 10000 - 1500, 2001*sec + 10000 + 1500, StatusSynced},
		// 12 s: stale for 2 s, extra 100e-6*2 s = 200 us.
		{"stale", m, x0 + 12*sec, 2012*sec + 120000, 2012*sec + 120000 - 500 - 12000 - 200000, 2012*sec + 120000 + 500 + 12000 + 200000, StatusStale},
		{"closed fresh", with(func(d *pageData) { d.closed = true }), x0, 2000 * sec, 2000*sec - 500, 2000*sec + 500, StatusNoDaemon},
		{"engine stale kept", with(func(d *pageData) { d.status = StatusStale }), x0, 2000 * sec, 2000*sec - 500, 2000*sec + 500, StatusStale},
		// slew: +300 ns correction at anchor, decays 500 ns/ms: after 0.2 ms 200 ns left.
		{"slew ahead", with(func(d *pageData) { d.slewC = 300 }), x0, 2000*sec + 300, 2000*sec - 500, 2000*sec + 500, StatusSynced},
		// est = +200000 +2 (skew); width ceil(500+0.2); correction 300-100.
		{"slew decays", with(func(d *pageData) { d.slewC = 300 }), x0 + 200000, 2000*sec + 200002 + 200, 2000*sec + 200002 - 501, 2000*sec + 200002 + 501, StatusSynced},
		{"slew gone", with(func(d *pageData) { d.slewC = -300 }), x0 + sec, 2001*sec + 10000, 2001*sec + 10000 - 1500, 2001*sec + 10000 + 1500, StatusSynced},
		// a correction larger than the bounds is clamped into them.
		{"slew clamped", with(func(d *pageData) { d.slewC = -5000 }), x0, 2000*sec - 500, 2000*sec - 500, 2000*sec + 500, StatusSynced},
	}
	for _, x := range []int64{math.MinInt64, math.MinInt64 + 1, -1, math.MaxInt64 - 1, math.MaxInt64} {
		for _, d := range []pageData{m, with(func(d *pageData) { d.slewC = math.MaxInt64; d.wander = 1 }),
			with(func(d *pageData) { d.slewC = math.MinInt64; d.y0 = math.MinInt64; d.skew = -0.4 })} {
			got := eval(&d, x)
			if got.Earliest > got.Est || got.Est > got.Latest {
				t.Errorf("extreme x=%d: %+v, Est outside bounds", x, got)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := eval(&tt.d, tt.x)
			want := Time{tt.est, tt.earliest, tt.latest, tt.status}
			if got != want {
				t.Errorf("eval(x=%d) = %+v, want %+v", tt.x, got, want)
			}
		})
	}
}

// TestEvalMatchesMapping: while fresh and unslewed the page gives exactly
// estimate.Mapping.At.
func TestEvalMatchesMapping(t *testing.T) {
	m := estimate.Mapping{X0: 7 * sec, Y0: 9 * sec, Skew: -33.3e-6, W0: 77, SkewErr: 3e-7, Wander: 1e-19, Valid: true}
	d := pageData{valid: true, status: StatusSynced, x0: m.X0, y0: m.Y0, skew: m.Skew, w0: m.W0,
		skewErr: m.SkewErr, wander: m.Wander, updated: m.X0, staleAfter: math.MaxInt64, slewRate: 1e-4}
	for _, dx := range []int64{-sec, -1, 0, 1, 12345, sec, 100 * sec, 3600 * sec} {
		est, lo, hi := m.At(m.X0 + dx)
		got := eval(&d, m.X0+dx)
		if got.Est != est || got.Earliest != lo || got.Latest != hi {
			t.Errorf("dx=%d: page %+v, Mapping.At %d [%d, %d]", dx, got, est, lo, hi)
		}
	}
}

func TestPublishAndRead(t *testing.T) {
	w, r, _ := newPair(t)
	tm, err := r.At(123)
	if err != nil {
		t.Fatal(err)
	}
	if tm.Status != StatusUnsynced || tm.Earliest != math.MinInt64 || tm.Latest != math.MaxInt64 {
		t.Fatalf("fresh page: %+v, want unsynced and unbounded", tm)
	}
	u := baseUpdate(100 * sec)
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	tm, err = r.At(101 * sec)
	if err != nil {
		t.Fatal(err)
	}
	est, lo, hi := u.Mapping.At(101 * sec)
	if tm != (Time{est, lo, hi, StatusSynced}) {
		t.Fatalf("read %+v, want %d [%d, %d] synced", tm, est, lo, hi)
	}
	in, err := r.Info()
	if err != nil {
		t.Fatal(err)
	}
	if in.WriterPID != os.Getpid() || !in.WriterAlive || in.Updated != 100*sec || in.StaleAfter != 10*time.Second {
		t.Fatalf("info %+v", in)
	}
}

// TestMonotoneAcrossPublishes drives a writer through corrections in both
// directions and checks, on a dense grid of local times, that the pure
// function every process computes never decreases and stays in bounds.
func TestMonotoneAcrossPublishes(t *testing.T) {
	w, r, _ := newPair(t)
	corrections := []int64{0, -800, +900, -50, -3000, +2500, 0, -1, 1}
	skews := []float64{20e-6, 21e-6, 19e-6, 20e-6, -30e-6, 40e-6, 0, 1e-6, 1e-6}
	local := 50 * sec
	prev := int64(math.MinInt64)
	for i, c := range corrections {
		u := baseUpdate(local)
		u.Mapping.X0 = local
		// The daemon's new estimate at `local`: the old one plus c.
		old, _ := r.At(local)
		if i == 0 {
			old.Est = local + 5*sec
		}
		u.Mapping.Y0 = old.Est + c
		u.Mapping.Skew = skews[i]
		u.Mapping.W0 = 4000 // every correction stays inside the new bounds
		if err := w.Publish(u); err != nil {
			t.Fatal(err)
		}
		for x := local; x < local+10*int64(time.Millisecond); x += 997 {
			tm, err := r.At(x)
			if err != nil {
				t.Fatal(err)
			}
			if tm.Est < prev {
				t.Fatalf("publish %d (correction %d ns): Est went back at x=%d: %d < %d", i, c, x, tm.Est, prev)
			}
			if tm.Est < tm.Earliest || tm.Est > tm.Latest {
				t.Fatalf("publish %d: Est %d outside [%d, %d]", i, tm.Est, tm.Earliest, tm.Latest)
			}
			prev = tm.Est
		}
		local += 10 * int64(time.Millisecond)
	}
	// After the slew has had time, Est meets the point estimate.
	tm, _ := r.At(local + sec)
	if est, _, _ := w.cur.mappingAt(local + sec); tm.Est != est {
		t.Errorf("after slewing, Est %d != estimate %d", tm.Est, est)
	}
}

func (d *pageData) mappingAt(x int64) (est, lo, hi int64) {
	m := estimate.Mapping{X0: d.x0, Y0: d.y0, Skew: d.skew, W0: d.w0, SkewErr: d.skewErr, Wander: d.wander, Valid: d.valid}
	return m.At(x)
}

func TestNowNeverBackwards(t *testing.T) {
	w, r, _ := newPair(t)
	var local atomic.Int64
	local.Store(10 * sec)
	r.now = func() int64 { return local.Load() }
	u := baseUpdate(10 * sec)
	u.Mapping.W0 = 100
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	a, _ := r.Now()
	// A correction that puts the new bounds entirely below what was read.
	u.Mapping.Y0 -= 10000
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	b, _ := r.Now()
	if b.Est < a.Est {
		t.Fatalf("Now went back: %d then %d", a.Est, b.Est)
	}
	if at, _ := r.At(10 * sec); at.Est >= a.Est {
		t.Fatalf("test setup: the page itself should have moved back, got %d >= %d", at.Est, a.Est)
	}
}

func TestStaleWidensAndDaemonGone(t *testing.T) {
	w, r, path := newPair(t)
	u := baseUpdate(10 * sec)
	u.Mapping.SkewErr = 0
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	var widths []int64
	for _, age := range []int64{0, 10 * sec, 11 * sec, 20 * sec} {
		tm, _ := r.At(10*sec + age)
		widths = append(widths, tm.Width())
		wantSt := StatusSynced
		if age > 10*sec {
			wantSt = StatusStale
		}
		if tm.Status != wantSt {
			t.Errorf("age %v: status %v, want %v", time.Duration(age), tm.Status, wantSt)
		}
	}
	// 100 ppm of 1 s each side = 200 us wider per extra second.
	if got := widths[2] - widths[1]; got != 200000 {
		t.Errorf("width growth over the first stale second = %d ns, want 200000", got)
	}
	if got := widths[3] - widths[1]; got != 2000000 {
		t.Errorf("width growth over 10 stale seconds = %d ns, want 2000000", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tm, err := r.At(10 * sec)
	if err != nil || tm.Status != StatusNoDaemon || tm.Width() != widths[0] {
		t.Fatalf("after writer close: %+v, %v; want no-daemon with width %d", tm, err, widths[0])
	}
	if in, _ := r.Info(); in.WriterPID != 0 || in.WriterAlive {
		t.Errorf("info after close: %+v", in)
	}
	// A restarted daemon keeps the old mapping until it publishes.
	w2, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	tm, err = r.At(40 * sec)
	if err != nil || tm.Status != StatusStale || tm.Width() <= widths[3] {
		t.Fatalf("after restart: %+v, %v; want stale, wider than %d", tm, err, widths[3])
	}
}

func TestWriterLockAndOpenErrors(t *testing.T) {
	_, _, path := newPair(t)
	if _, err := NewWriter(path); err == nil || !strings.Contains(err.Error(), "another writer") || !strings.Contains(err.Error(), path) {
		t.Errorf("second writer: err = %v, want one naming the lock and %s", err, path)
	}
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("hello"), 0o644)
	foreign := filepath.Join(dir, "foreign")
	os.WriteFile(foreign, make([]byte, PageSize), 0o644)
	tests := []struct {
		name, path string
		is         error
	}{
		{"missing", filepath.Join(dir, "nope"), os.ErrNotExist},
		{"short", short, ErrNotPage},
		{"zero page", foreign, ErrNotPage},
		{"directory", dir, ErrNotPage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.path)
			if !errors.Is(err, tt.is) {
				t.Errorf("Open(%s) = %v, want %v", tt.path, err, tt.is)
			}
		})
	}
}

func TestPublishRejects(t *testing.T) {
	w, _, _ := newPair(t)
	if err := w.Publish(baseUpdate(100 * sec)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		f     func(*Update)
		field string
	}{
		{"stale after", func(u *Update) { u.StaleAfter = 0 }, "StaleAfter"},
		{"drift nan", func(u *Update) { u.MaxDrift = math.NaN() }, "MaxDrift"},
		{"slew zero", func(u *Update) { u.MaxSlewRate = 0 }, "MaxSlewRate"},
		{"skew inf", func(u *Update) { u.Mapping.Skew = math.Inf(1) }, "Mapping.Skew"},
		{"skew err negative", func(u *Update) { u.Mapping.SkewErr = -1 }, "Mapping.SkewErr"},
		{"w0 negative", func(u *Update) { u.Mapping.W0 = -1 }, "Mapping.W0"},
		{"status", func(u *Update) { u.Status = 9 }, "Status"},
		{"backwards", func(u *Update) { u.Local = 99 * sec }, "Local"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := baseUpdate(200 * sec)
			tt.f(&u)
			if err := w.Publish(u); !errors.Is(err, ErrUpdate) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("Publish = %v, want an error naming %s", err, tt.field)
			}
		})
	}
	w.Close()
	if err := w.Publish(baseUpdate(300 * sec)); !errors.Is(err, ErrClosed) {
		t.Errorf("publish after close = %v", err)
	}
}

// TestConcurrentNoTornReads: one writer publishes pages whose fields are
// all derived from one counter; readers check every copy they get is one
// page. Run with -race: the seqlock uses only sync/atomic.
func TestConcurrentNoTornReads(t *testing.T) {
	w, r, _ := newPair(t)
	const n = 20000
	var done atomic.Bool
	var wg sync.WaitGroup
	var reads, mismatches atomic.Int64
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				d, err := r.cur.Load().w.load()
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				if !d.valid {
					continue
				}
				k := d.updated
				if d.x0 != k || d.y0 != 3*k || d.w0 != k%1000 || d.skew != float64(k)*1e-12 || d.slewX != k {
					mismatches.Add(1)
				}
			}
		}()
	}
	for k := int64(1); k <= n; k++ {
		u := Update{Local: k, Mapping: estimate.Mapping{X0: k, Y0: 3 * k, W0: k % 1000, Skew: float64(k) * 1e-12, Valid: true},
			Status: StatusSynced, StaleAfter: time.Second, MaxDrift: 1e-4, MaxSlewRate: 1e-4}
		if err := w.Publish(u); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()
	if mismatches.Load() != 0 {
		t.Fatalf("%d torn reads out of %d", mismatches.Load(), reads.Load())
	}
	t.Logf("%d reads during %d publishes, none torn", reads.Load(), n)
}

func TestRealClockMonotone(t *testing.T) {
	w, r, _ := newPair(t)
	now := RawNow()
	u := baseUpdate(now)
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	prev := int64(math.MinInt64)
	for i := 0; i < 20000; i++ {
		if i%1000 == 999 {
			u.Local = RawNow()
			u.Mapping.Y0 += int64(i%3-1) * 700 // corrections both ways
			if err := w.Publish(u); err != nil {
				t.Fatal(err)
			}
		}
		tm, err := r.Now()
		if err != nil {
			t.Fatal(err)
		}
		if tm.Est < prev || tm.Status != StatusSynced {
			t.Fatalf("read %d: %+v after %d", i, tm, prev)
		}
		prev = tm.Est
	}
}

// FuzzPage: any page content with our header must load without panicking,
// and a page that loads gives Earliest <= Est <= Latest.
func FuzzPage(f *testing.F) {
	seed := make([]byte, layoutEnd-offPID)
	f.Add(seed, int64(0))
	binary.LittleEndian.PutUint64(seed[offFlags-offPID:], flagValid|uint64(StatusSynced))
	binary.LittleEndian.PutUint64(seed[offStaleAfter-offPID:], uint64(sec))
	binary.LittleEndian.PutUint64(seed[offSlewRate-offPID:], math.Float64bits(1e-4))
	f.Add(seed, int64(5*sec))
	f.Fuzz(func(t *testing.T, payload []byte, x int64) {
		mem := make([]byte, PageSize+8)
		// 8-byte aligned view.
		base := mem
		for uintptr(len(mem)-len(base)) < 8 && (uintptr(unsafePtr(base))%8) != 0 {
			base = base[1:]
		}
		base = base[:PageSize]
		binary.LittleEndian.PutUint64(base[offMagic:], Magic)
		binary.LittleEndian.PutUint64(base[offVersion:], uint64(Version)|PageSize<<32)
		copy(base[offPID:layoutEnd], payload)
		w := newWords(base)
		d, err := w.load()
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		tm := eval(&d, x)
		if tm.Earliest > tm.Est || tm.Est > tm.Latest {
			t.Fatalf("eval = %+v: Est outside bounds (page %+v, x %d)", tm, d, x)
		}
	})
}

// TestWriterDiedMidUpdate: a counter left odd makes reads fail with ErrBusy
// after the busy limit instead of hanging; a new writer repairs the page
// and drops the possibly torn mapping.
func TestWriterDiedMidUpdate(t *testing.T) {
	w, r, path := newPair(t)
	if err := w.Publish(baseUpdate(100 * sec)); err != nil {
		t.Fatal(err)
	}
	w.w.u(offSeq).Add(1) // as if the writer stopped between its two increments
	start := time.Now()
	_, err := r.At(100 * sec)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("read of a page stuck mid-update: %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("ErrBusy took %v", d)
	}
	w.Close()
	w2, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if tm, err := r.At(100 * sec); err != nil || tm.Status != StatusUnsynced {
		t.Fatalf("after a new writer: %+v, %v", tm, err)
	}
}

// TestNowFollowsPage: Now's cached copy is dropped as soon as the page
// changes.
func TestNowFollowsPage(t *testing.T) {
	w, r, _ := newPair(t)
	r.now = func() int64 { return 10 * sec }
	u := baseUpdate(10 * sec)
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	a, _ := r.Now()
	b, _ := r.Now() // from the cache
	if a != b {
		t.Fatalf("same instant, same page: %+v then %+v", a, b)
	}
	u.Mapping.Y0 += sec // far beyond the old bounds: Est jumps to the new ones
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Now()
	if c.Est < a.Est+sec-2*u.Mapping.W0 || c.Earliest != a.Earliest+sec {
		t.Fatalf("after a 1 s correction: %+v, before %+v", c, a)
	}
	w.Close()
	if d, _ := r.Now(); d.Status != StatusNoDaemon {
		t.Fatalf("after close: %+v", d)
	}
}

// TestMappingForTraces checks that Reader.Mapping hands a trace recorder
// exactly what the daemon published, and nothing valid before a publish.
func TestMappingForTraces(t *testing.T) {
	w, r, _ := newPair(t)
	if _, m, err := r.Mapping(); err != nil || m.Valid {
		t.Fatalf("fresh page: mapping %+v, err %v; want invalid, nil", m, err)
	}
	u := baseUpdate(100 * sec)
	if err := w.Publish(u); err != nil {
		t.Fatal(err)
	}
	from, m, err := r.Mapping()
	if err != nil {
		t.Fatal(err)
	}
	if from != 100*sec || m != u.Mapping {
		t.Fatalf("mapping from %d: %+v; want from %d: %+v", from, m, int64(100*sec), u.Mapping)
	}
	r.Close()
	if _, _, err := r.Mapping(); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed reader: err %v, want ErrClosed", err)
	}
}

// TestContinuousWidens: with Update.Continuous, a correction far outside
// the new bounds (a realtime step) makes no jump in either direction: Est
// continues from the previous page and slews at MaxSlewRate, the bounds
// widen to hold it and still hold the new estimate's own bounds. Without
// it, Est jumps to the nearest new bound.
func TestContinuousWidens(t *testing.T) {
	for _, step := range []int64{-50 * 1000 * 1000, +30 * 1000 * 1000} {
		for _, cont := range []bool{false, true} {
			w, r, _ := newPair(t)
			local := 50 * sec
			u := baseUpdate(local)
			u.Continuous = cont
			if err := w.Publish(u); err != nil {
				t.Fatal(err)
			}
			local += 100 * int64(time.Millisecond)
			before, _ := r.At(local)
			u = baseUpdate(local)
			u.Continuous = cont
			est0, _, _ := w.cur.mappingAt(local)
			u.Mapping.Y0 = est0 + step // the truth moved by step
			if err := w.Publish(u); err != nil {
				t.Fatal(err)
			}
			_, lo, hi := w.cur.mappingAt(local)
			after, _ := r.At(local)
			jump := after.Est - before.Est
			if !cont {
				if max(jump, -jump) < 1000*1000 {
					t.Errorf("step %d, clamping: jump %d ns, want the step (to the nearest bound)", step, jump)
				}
				continue
			}
			if max(jump, -jump) > 1 {
				t.Errorf("step %d: Est jumped by %d ns", step, jump)
			}
			// The truth (new estimate +- the normal 1000 ns) stays inside.
			if lo > u.Mapping.Y0-1000 || hi < u.Mapping.Y0+1000 {
				t.Errorf("step %d: bounds [%d, %d] lost the new estimate %d +- 1000", step, lo, hi, u.Mapping.Y0)
			}
			// Est moves at 1+skew+-MaxSlewRate until it meets the estimate,
			// inside the bounds, and never backwards.
			prev := after.Est
			for x := local; x <= local+int64(time.Minute)+20*sec; x += sec / 10 {
				tm, _ := r.At(x)
				if tm.Est < prev || tm.Est < tm.Earliest || tm.Est > tm.Latest {
					t.Fatalf("step %d at +%d ns: Est %d (previous %d) bounds [%d, %d]", step, x-local, tm.Est, prev, tm.Earliest, tm.Latest)
				}
				prev = tm.Est
			}
			if tm, _ := r.At(local + 2*int64(time.Minute)); tm.Est != func() int64 { e, _, _ := w.cur.mappingAt(local + 2*int64(time.Minute)); return e }() {
				t.Errorf("step %d: Est %d has not met the estimate after the slew", step, tm.Est)
			}
		}
	}
}

// The daemon's node id and its current reference go through the page as
// published, the full uint32 range included, and change with a publish.
func TestInfoNodes(t *testing.T) {
	w, r, _ := newPair(t)
	in, err := r.Info()
	if err != nil {
		t.Fatal(err)
	}
	if in.Node != 0 || in.Reference != 0 {
		t.Fatalf("fresh page: node %d reference %d, want 0 0 (unknown)", in.Node, in.Reference)
	}
	u := baseUpdate(RawNow())
	for _, c := range []struct{ node, ref uint32 }{{2, 1}, {2, 3}, {1<<32 - 1, 1<<32 - 2}} {
		u.Local++
		u.Node, u.Reference = c.node, c.ref
		if err := w.Publish(u); err != nil {
			t.Fatal(err)
		}
		if in, err = r.Info(); err != nil {
			t.Fatal(err)
		}
		if in.Node != c.node || in.Reference != c.ref {
			t.Errorf("published node %d reference %d, read %d %d", c.node, c.ref, in.Node, in.Reference)
		}
	}
}

// A reading's term and its scale definition go through the page from the
// same copy as the reading; a scale whose term is not the update's, or
// whose rate is not finite, is refused; a page without one says the term
// only.
func TestScaleThroughPage(t *testing.T) {
	w, r, _ := newPair(t)
	u := baseUpdate(RawNow())
	tests := []struct {
		name  string
		term  uint32
		scale Scale
		want  Scale
		ok    bool
	}{
		{"follower", 3, Scale{}, Scale{Term: 3}, true},
		{"identity", 0, Scale{Defined: true}, Scale{Defined: true}, true},
		{"frozen", 7, Scale{Term: 7, Defined: true, X0: 1 << 50, Y0: -(1 << 40), Skew: -12.5e-6},
			Scale{Term: 7, Defined: true, X0: 1 << 50, Y0: -(1 << 40), Skew: -12.5e-6}, true},
		{"undefined scale fields dropped", 4, Scale{Term: 9, X0: 5}, Scale{Term: 4}, true},
		{"other term", 5, Scale{Term: 4, Defined: true}, Scale{}, false},
		{"rate", 5, Scale{Term: 5, Defined: true, Skew: math.NaN()}, Scale{}, false},
	}
	for _, tt := range tests {
		u.Local++
		u.Term, u.Scale = tt.term, tt.scale
		err := w.Publish(u)
		if (err == nil) != tt.ok {
			t.Errorf("%s: publish error %v, want ok %v", tt.name, err, tt.ok)
			continue
		}
		if !tt.ok {
			if !errors.Is(err, ErrUpdate) {
				t.Errorf("%s: %v, want ErrUpdate", tt.name, err)
			}
			continue
		}
		tm, sc, err := r.AtScale(u.Local)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if sc != tt.want || tm.Status != StatusSynced {
			t.Errorf("%s: read %+v (%v), want %+v", tt.name, sc, tm.Status, tt.want)
		}
		if in, _ := r.Info(); in.Term != tt.term {
			t.Errorf("%s: Info term %d, want %d", tt.name, in.Term, tt.term)
		}
	}
	s := Scale{Defined: true, X0: 1000, Y0: 5000, Skew: 1e-3}
	for _, c := range []struct{ l, want int64 }{{1000, 5000}, {2000, 6001}, {0, 3999}} {
		if got := s.At(c.l); got != c.want {
			t.Errorf("Scale.At(%d) = %d, want %d", c.l, got, c.want)
		}
	}
}

// TestBusyReadSleeps: a reader waiting for a page stuck mid-update gives
// its thread up (sleeps) instead of spinning through the whole busy limit:
// a reader at a real-time priority must leave the CPU to the descheduled
// writer it waits for. The reader's thread used most of its 100 ms of
// waiting before yield slept (Gosched only); now a few ms.
func TestBusyReadSleeps(t *testing.T) {
	w, r, _ := newPair(t)
	if err := w.Publish(baseUpdate(100 * sec)); err != nil {
		t.Fatal(err)
	}
	w.w.u(offSeq).Add(1)
	defer w.w.u(offSeq).Add(1)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after syscall.Rusage
	if err := syscall.Getrusage(unix.RUSAGE_THREAD, &before); err != nil {
		t.Skip(err)
	}
	start := time.Now()
	if _, err := r.At(100 * sec); !errors.Is(err, ErrBusy) {
		t.Fatalf("read of a page stuck mid-update: %v, want ErrBusy", err)
	}
	wall := time.Since(start)
	if err := syscall.Getrusage(unix.RUSAGE_THREAD, &after); err != nil {
		t.Fatal(err)
	}
	cpu := time.Duration(syscall.TimevalToNsec(after.Utime) + syscall.TimevalToNsec(after.Stime) -
		syscall.TimevalToNsec(before.Utime) - syscall.TimevalToNsec(before.Stime))
	t.Logf("busy read: %v waiting, %v on the CPU", wall, cpu)
	if cpu > wall/4 {
		t.Errorf("the reader spent %v of its %v wait on the CPU: it spins instead of sleeping", cpu, wall)
	}
}
