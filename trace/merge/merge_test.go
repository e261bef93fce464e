package merge

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gclock/gclock/trace/format"
)

// shift maps local to local+d (a constant offset).
type shift int64

func (s shift) Global(l int64) int64 { return l + int64(s) }

// backstep maps local times at or after 500 ns back by 100 ns: a mapping
// that steps backwards, which the merge must clamp and count.
type backstep struct{}

func (backstep) Global(l int64) int64 {
	if l >= 500 {
		return l - 100
	}
	return l
}

func file(t testing.TB, proc uint32, chunks [][]int64) []byte {
	t.Helper()
	var b bytes.Buffer
	w := format.NewWriter(&b)
	if err := w.WriteMeta(format.Meta{Proc: proc}); err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		ev := make([]format.Event, len(c))
		for i, tm := range c {
			ev[i] = format.Event{Time: tm, Kind: format.Instant, ID: uint64(i)}
		}
		if err := w.WriteEvents(ev); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func drain(t testing.TB, m *Merger, bufSize int) ([]format.Merged, error) {
	var out []format.Merged
	buf := make([]format.Merged, bufSize)
	for {
		n, err := m.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

func TestMergeOrder(t *testing.T) {
	tests := []struct {
		name    string
		files   [][][]int64
		maps    []Mapper
		want    []int64 // global times
		procs   []uint32
		clamped int64
	}{
		{"two interleaved", [][][]int64{{{1, 3, 5}}, {{2, 4}, {6}}}, nil,
			[]int64{1, 2, 3, 4, 5, 6}, []uint32{0, 1, 0, 1, 0, 1}, 0},
		{"offset mapping", [][][]int64{{{10, 20}}, {{10, 20}}}, []Mapper{nil, shift(5)},
			[]int64{10, 15, 20, 25}, []uint32{0, 1, 0, 1}, 0},
		{"ties by source", [][][]int64{{{7}}, {{7}}, {{7}}}, nil,
			[]int64{7, 7, 7}, []uint32{0, 1, 2}, 0},
		{"empty source", [][][]int64{{}, {{1}, {}, {2}}}, nil,
			[]int64{1, 2}, []uint32{1, 1}, 0},
		{"backward mapping clamped", [][][]int64{{{400, 450, 500, 650}}}, []Mapper{backstep{}},
			[]int64{400, 450, 450, 550}, []uint32{0, 0, 0, 0}, 1},
	}
	for _, tc := range tests {
		for _, bs := range []int{1, 3, 100} {
			t.Run(tc.name, func(t *testing.T) {
				var srcs []Source
				for i, f := range tc.files {
					s := Source{Name: "f", R: bytes.NewReader(file(t, uint32(i), f)), Proc: uint32(i)}
					if tc.maps != nil {
						s.Map = tc.maps[i]
					}
					srcs = append(srcs, s)
				}
				m, err := New(srcs, Options{})
				if err != nil {
					t.Fatal(err)
				}
				out, err := drain(t, m, bs)
				if err != nil {
					t.Fatal(err)
				}
				if len(out) != len(tc.want) {
					t.Fatalf("%d events, want %d", len(out), len(tc.want))
				}
				for i := range out {
					if out[i].Time != tc.want[i] || out[i].Proc != tc.procs[i] {
						t.Fatalf("event %d: time %d proc %d, want %d %d", i, out[i].Time, out[i].Proc, tc.want[i], tc.procs[i])
					}
				}
				var cl int64
				for _, s := range m.Stats() {
					cl += s.Clamped
				}
				if cl != tc.clamped {
					t.Fatalf("clamped %d, want %d", cl, tc.clamped)
				}
			})
		}
	}
}

func TestRawKept(t *testing.T) {
	m, err := New([]Source{{Name: "a", R: bytes.NewReader(file(t, 4, [][]int64{{100}})), Proc: 4, Map: shift(-30)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := drain(t, m, 8)
	if err != nil || len(out) != 1 || out[0].Raw != 100 || out[0].Time != 70 || out[0].Proc != 4 {
		t.Fatalf("%+v %v", out, err)
	}
}

func TestCorruptAndTruncated(t *testing.T) {
	good := file(t, 0, [][]int64{{1, 2}, {3, 4}, {5, 6}})
	// Offsets: magic 8, meta chunk 24+12+4=40, events chunks 24+64 each.
	second := 8 + 40 + 88
	corrupt := bytes.Clone(good)
	corrupt[second+HeaderPayload] ^= 0xff
	truncated := good[:len(good)-5]
	tests := []struct {
		name      string
		data      []byte
		keepGoing bool
		wantN     int
		wantErr   error
		wantOff   int64
	}{
		{"corrupt fails", corrupt, false, 2, format.ErrCorrupt, int64(second)},
		{"corrupt keep going", corrupt, true, 4, nil, int64(second)},
		{"truncated fails", truncated, false, 4, format.ErrTruncated, int64(second + 88)},
		{"truncated keep going", truncated, true, 4, nil, int64(second + 88)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New([]Source{{Name: "bad.gct", R: bytes.NewReader(tc.data)}}, Options{KeepGoing: tc.keepGoing})
			if err != nil {
				t.Fatal(err)
			}
			out, err := drain(t, m, 16)
			if len(out) != tc.wantN {
				t.Errorf("%d events, want %d", len(out), tc.wantN)
			}
			var ce *format.CorruptError
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &ce) || ce.File != "bad.gct" || ce.Offset != tc.wantOff {
					t.Fatalf("error %v, want %v in bad.gct at %d", err, tc.wantErr, tc.wantOff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := m.Stats()[0]
			if len(st.Problems) != 1 || !errors.As(st.Problems[0], &ce) || ce.Offset != tc.wantOff {
				t.Fatalf("problems %v, want one at %d", st.Problems, tc.wantOff)
			}
		})
	}
}

const HeaderPayload = format.HeaderSize + 3

// benchFiles builds k traces of n events each with random gaps.
func benchFiles(b testing.TB, k, n int) [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	out := make([][]byte, k)
	for p := range k {
		var buf bytes.Buffer
		w := format.NewWriter(&buf)
		_ = w.WriteMeta(format.Meta{Proc: uint32(p)})
		ev := make([]format.Event, 4096)
		t := int64(p) * 1000
		for done := 0; done < n; done += len(ev) {
			for i := range ev {
				t += 1 + rng.Int64N(2000)
				ev[i] = format.Event{Time: t, Kind: format.Instant}
			}
			if err := w.WriteEvents(ev); err != nil {
				panic(err)
			}
		}
		out[p] = buf.Bytes()
	}
	return out
}

// linear is a Mapper as package correct builds them (offset and skew).
type linear struct {
	x0, y0 int64
	skew   float64
}

func (l linear) Global(x int64) int64 {
	dx := x - l.x0
	return l.y0 + dx + int64(l.skew*float64(dx))
}

// BenchmarkMerge reports merged events per second over 8 processes with a
// linear mapping each (the target: >= 20 M events/s).
func BenchmarkMerge(b *testing.B) {
	const k, n = 8, 256 * 1024
	files := benchFiles(b, k, n)
	buf := make([]format.Merged, 4096)
	b.ReportAllocs()
	b.SetBytes(int64(k * n * format.EventSize))
	var total int64
	for b.Loop() {
		srcs := make([]Source, k)
		for i := range srcs {
			srcs[i] = Source{Name: "b", R: bytes.NewReader(files[i]), Proc: uint32(i), Map: linear{x0: 0, y0: int64(i), skew: 3e-5}}
		}
		m, err := New(srcs, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			nn, err := m.Read(buf)
			total += int64(nn)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}

// TestMemoryIndependentOfLength: merging a trace 8 times longer allocates
// no more (the merge keeps one decoded chunk per source).
func TestMemoryIndependentOfLength(t *testing.T) {
	alloc := func(n int) uint64 {
		files := benchFiles(nil, 4, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		srcs := make([]Source, len(files))
		for i := range srcs {
			srcs[i] = Source{Name: "m", R: bytes.NewReader(files[i]), Proc: uint32(i), Map: shift(3)}
		}
		m, err := New(srcs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]format.Merged, 1024)
		total := 0
		for {
			k, err := m.Read(buf)
			total += k
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		if total < 4*n {
			t.Fatalf("merged %d of %d events", total, 4*n)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	short, long := alloc(16*1024), alloc(128*1024)
	t.Logf("allocated %d bytes for 64 Ki events, %d for 512 Ki", short, long)
	if long > short+64*1024 {
		t.Fatalf("allocation grows with trace length: %d -> %d bytes", short, long)
	}
}
