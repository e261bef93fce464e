package gtime

import (
	"path/filepath"
	"testing"
	"time"
)

func benchReader(b *testing.B) *Reader {
	path := filepath.Join(b.TempDir(), "page")
	w, err := NewWriter(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { w.Close() })
	now := RawNow()
	if err := w.Publish(baseUpdate(now)); err != nil {
		b.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	return r
}

var sink int64

// BenchmarkClockGettimeRaw is the yardstick: one clock_gettime(CLOCK_MONOTONIC_RAW).
func BenchmarkClockGettimeRaw(b *testing.B) {
	for b.Loop() {
		sink += RawNow()
	}
}

// BenchmarkRead is one bounded read: clock, seqlock copy, arithmetic, clamp.
func BenchmarkRead(b *testing.B) {
	r := benchReader(b)
	for b.Loop() {
		t, err := r.Now()
		if err != nil {
			b.Fatal(err)
		}
		sink += t.Est
	}
}

// BenchmarkReadVsClock measures both in alternating batches of one run, so
// that frequency scaling and noisy neighbours hit both alike, and reports
// the ratio (the bound: at most 2).
func BenchmarkReadVsClock(b *testing.B) {
	r := benchReader(b)
	const batch = 1000
	var tRead, tClock time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range batch {
			sink += RawNow()
		}
		t1 := time.Now()
		for range batch {
			t, _ := r.Now()
			sink += t.Est
		}
		t2 := time.Now()
		tClock += t1.Sub(t0)
		tRead += t2.Sub(t1)
	}
	n := float64(b.N) * batch
	b.ReportMetric(float64(tClock.Nanoseconds())/n, "clock-ns/op")
	b.ReportMetric(float64(tRead.Nanoseconds())/n, "read-ns/op")
	b.ReportMetric(float64(tRead)/float64(tClock), "read/clock")
}

// BenchmarkReadNoClock is Now without the clock read (a fixed local time):
// the page path alone, including the SIGBUS guard around the mapping.
func BenchmarkReadNoClock(b *testing.B) {
	r := benchReader(b)
	x := RawNow()
	r.now = func() int64 { return x }
	for b.Loop() {
		t, err := r.Now()
		if err != nil {
			b.Fatal(err)
		}
		sink += t.Est
	}
}

// BenchmarkSeqLoad is the counter load of Now's fast path, with and without
// the guard that turns a fault of a shrunk page into ErrTruncated.
func BenchmarkSeqLoad(b *testing.B) {
	r := benchReader(b)
	m := r.cur.Load()
	b.Run("guarded", func(b *testing.B) {
		for b.Loop() {
			s, _ := m.seq()
			sink += int64(s)
		}
	})
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			sink += int64(m.w.u(offSeq).Load())
		}
	})
}
