package archive

import (
	"path/filepath"
	"testing"
)

// benchArchive writes n events (Enter, MpiIsend, Leave with two
// attributes) on one location.
func benchArchive(b *testing.B, dir string, n int) {
	w, err := Create(dir, "traces", Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := w.Global(MustRecord(GlobalDef, "Location", 0, U(0), U(0), U(1), U(uint64(n)), U(0))); err != nil {
		b.Fatal(err)
	}
	attrs := []Attr{{ID: 0, Type: TypeInt64, Value: 1 << 60}, {ID: 1, Type: TypeUint64, Value: 120}}
	t := uint64(1_700_000_000_000_000_000)
	for i := 0; i < n; i += 3 {
		for _, r := range []*Record{
			MustRecord(Event, "Enter", t, U(3)),
			MustRecord(Event, "MpiIsend", t+100, U(1), U(0), U(7), U(4096), U(uint64(i))),
			MustRecord(Event, "Leave", t+250, U(3)),
		} {
			r.Attrs = attrs
			if err := w.Event(0, r); err != nil {
				b.Fatal(err)
			}
		}
		t += 1000
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkWriteEvents: ns per event record written (records built with
// NewRecord, attribute lists, 1 MiB chunks to a file).
func BenchmarkWriteEvents(b *testing.B) {
	dir := b.TempDir()
	b.ResetTimer()
	for b.Loop() {
		benchArchive(b, dir, 300_000)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/300_000, "ns/event")
}

// BenchmarkReadEvents: ns per event record read (EachEvent).
func BenchmarkReadEvents(b *testing.B) {
	dir := b.TempDir()
	benchArchive(b, dir, 300_000)
	a, err := Open(filepath.Join(dir, "traces.otf2"))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		n := 0
		if err := a.EachEvent(0, func(r *Record) error { n++; return nil }); err != nil || n != 300_000 {
			b.Fatal(n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/300_000, "ns/event")
}
