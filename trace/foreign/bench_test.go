package foreign

import (
	"math/rand/v2"
	"testing"
)

// synthetic builds a model of n locations with events every ~10 us and a
// message every ~4 ms per location, clocks with offsets and drift (for
// speed only: the accuracy tests use the python3-otf2 generator's truth).
func synthetic(n, events int) *Trace {
	rng := rand.New(rand.NewPCG(1, 2))
	const base = int64(1_732_000_000_000_000_000)
	tr := &Trace{}
	for i := range n {
		off, drift := int64(rng.IntN(10_000_000))-5_000_000, (rng.Float64()-0.5)*4e-5
		if i == 0 {
			off, drift = 0, 0
		}
		l := Location{}
		for e := range events {
			g := int64(e) * 10_000
			l.Times = append(l.Times, base+g+off+int64(drift*float64(g)))
		}
		span := int64(events) * 10_000
		l.Offsets = []OffsetRecord{{Local: base + off, Offset: -off}, {Local: base + span + off + int64(drift*float64(span)), Offset: -off - int64(drift*float64(span))}}
		tr.Locs = append(tr.Locs, l)
	}
	for e := 0; e+10 < events; e += 400 / n * n {
		for p := range n {
			q := (p + 1 + rng.IntN(n-1)) % n
			tr.Msgs = append(tr.Msgs, Message{From: p, To: q, Send: e + p, Recv: e + p + 2 + rng.IntN(4)})
		}
	}
	return tr
}

// BenchmarkCorrect: the refinement and CLC per event.
func BenchmarkCorrect(b *testing.B) {
	tr := synthetic(8, 100_000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Correct(tr, Options{Reference: -1, CLC: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(8*100_000), "ns/event")
}
