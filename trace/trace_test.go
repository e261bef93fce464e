package trace

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/trace/format"
)

// tick is a clock advancing 10 ns per read.
type tick struct{ t atomic.Int64 }

func (c *tick) Now() int64 { return c.t.Add(10) }

// fakeProber answers with a reference running 1000 ns ahead, 100 ns each way.
type fakeProber struct {
	c   clock.Clock
	n   int
	err error
}

func (p *fakeProber) Probe() (estimate.Sample, error) {
	if p.err != nil {
		return estimate.Sample{}, p.err
	}
	p.n++
	t1 := p.c.Now()
	return estimate.Sample{LocSend: t1, SrcRecv: t1 + 1100, SrcSend: t1 + 1100, LocRecv: t1 + 200}, nil
}

type chunkSummary struct {
	events   []format.Event
	sessions []format.Session
	names    []format.Name
	maps     []format.DaemonMapping
	meta     format.Meta
}

func read(t *testing.T, data []byte) chunkSummary {
	t.Helper()
	var s chunkSummary
	r := format.NewReader(bytes.NewReader(data), "t")
	for {
		c, err := r.Next()
		if err == io.EOF {
			return s
		}
		if err != nil {
			t.Fatal(err)
		}
		switch c.Kind {
		case format.KindMeta:
			s.meta, err = format.DecodeMeta(c.Payload)
		case format.KindEvents:
			var ev []format.Event
			ev, err = format.DecodeEvents(c, nil)
			s.events = append(s.events, ev...)
		case format.KindSync:
			var ss format.Session
			ss, err = format.DecodeSession(c)
			s.sessions = append(s.sessions, ss)
		case format.KindNames:
			var ns []format.Name
			ns, err = format.DecodeNames(c)
			s.names = append(s.names, ns...)
		case format.KindMappings:
			var ms []format.DaemonMapping
			ms, err = format.DecodeMappings(c)
			s.maps = append(s.maps, ms...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestRecorderSessionsAndEvents(t *testing.T) {
	clk := &tick{}
	p := &fakeProber{c: clk}
	var b bytes.Buffer
	rec, err := New(&b, Config{Proc: 2, Host: 1, Name: "p2", Clock: clk, Prober: p, SyncMaxMessages: 7, ChunkEvents: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := rec.Track(1)
	work := rec.Name("work")
	if rec.Name("work") != work {
		t.Fatal("name ids differ for one string")
	}
	tr.Enter(work)
	tr.Send(3, 42, 8)
	tr.Counter(rec.Name("queue"), 5)
	tr.Leave(work)
	if err := rec.Timesync(); err != nil {
		t.Fatal(err)
	}
	tr.Instant(work)
	if err := rec.RecordMapping(123, estimate.Mapping{X0: 1, Y0: 2, Valid: true}); err != nil {
		t.Fatal(err)
	}
	tr.Recv(3, 9, 8)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	tr.Instant(work) // dropped after Close
	if err := rec.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := rec.Record(format.Event{Time: 1 << 40, Kind: format.Instant}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Record after Close: %v", err)
	}
	if err := rec.Timesync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Timesync after Close: %v", err)
	}
	s := read(t, b.Bytes())
	if s.meta.Proc != 2 || s.meta.Host != 1 || s.meta.Name != "p2" {
		t.Errorf("meta %+v", s.meta)
	}
	kinds := []format.Kind{format.Enter, format.Send, format.Counter, format.Leave, format.Instant, format.Recv}
	if len(s.events) != len(kinds) {
		t.Fatalf("%d events, want %d", len(s.events), len(kinds))
	}
	for i, k := range kinds {
		if s.events[i].Kind != k || s.events[i].Track != 1 {
			t.Errorf("event %d: %+v, want kind %v on track 1", i, s.events[i], k)
		}
	}
	if s.events[1].Peer != 3 || s.events[1].ID != 42 || s.events[1].Value != 8 {
		t.Errorf("send %+v", s.events[1])
	}
	want := []format.SessionKind{format.SessionStart, format.SessionDemand, format.SessionEnd}
	if len(s.sessions) != 3 {
		t.Fatalf("%d sessions, want 3", len(s.sessions))
	}
	for i, k := range want {
		if s.sessions[i].Kind != k || len(s.sessions[i].Samples) != 7 || s.sessions[i].Index != uint32(i) {
			t.Errorf("session %d: kind %v, %d samples", i, s.sessions[i].Kind, len(s.sessions[i].Samples))
		}
	}
	if len(s.names) != 2 || len(s.maps) != 1 || s.maps[0].From != 123 {
		t.Errorf("names %v maps %v", s.names, s.maps)
	}
}

func TestSessionLimits(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		probes  int
		wantErr bool
	}{
		{"max messages", Config{SyncMaxMessages: 5, SyncMaxDuration: 1 << 40}, 5, false},
		// Each probe reads the clock once and the loop once: 20 ns per exchange.
		{"max duration", Config{SyncMaxMessages: 1000, SyncMaxDuration: 200}, 10, false},
		{"synced host", Config{SyncedHost: true}, 0, false},
		{"reference", Config{Reference: true}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := &tick{}
			p := &fakeProber{c: clk}
			cfg := tc.cfg
			cfg.Clock = clk
			cfg.Prober = p
			cfg.NoEndSession = true
			if _, err := New(io.Discard, cfg, nil); err != nil {
				t.Fatal(err)
			}
			if p.n != tc.probes {
				t.Fatalf("%d exchanges, want %d", p.n, tc.probes)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	if _, err := New(io.Discard, Config{}, nil); err == nil {
		t.Error("nil clock accepted")
	}
	if _, err := New(io.Discard, Config{Clock: &tick{}, ChunkEvents: -1}, nil); err == nil {
		t.Error("negative chunk size accepted")
	}
	boom := errors.New("boom")
	_, err := New(io.Discard, Config{Clock: &tick{}, Prober: &fakeProber{err: boom}}, nil)
	if !errors.Is(err, boom) {
		t.Errorf("probe error lost: %v", err)
	}
	rec, err := New(&failWriter{n: 2}, Config{Clock: &tick{}, ChunkEvents: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec.Track(0).Instant(1)
	if err := rec.Close(); !errors.Is(err, errFull) {
		t.Errorf("write error lost: %v", err)
	}
}

var errFull = errors.New("disk full")

// failWriter fails every write after the first n.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errFull
	}
	w.n--
	return len(p), nil
}

func TestConcurrentTracksStayOrdered(t *testing.T) {
	clk := &tick{}
	var b bytes.Buffer
	rec, err := New(&b, Config{Clock: clk, ChunkEvents: 64}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := rec.Track(uint16(g))
			for i := range 1000 {
				tr.Enter(1)
				tr.Counter(2, int64(i))
				tr.Leave(1)
			}
		}()
	}
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	s := read(t, b.Bytes()) // DecodeEvents checks the order inside chunks
	if len(s.events) != 12000 {
		t.Fatalf("%d events, want 12000", len(s.events))
	}
	for i := 1; i < len(s.events); i++ {
		if s.events[i].Time < s.events[i-1].Time {
			t.Fatalf("event %d out of order across chunks", i)
		}
	}
}

func BenchmarkRecord(b *testing.B) {
	rec, err := New(io.Discard, Config{Clock: clock.Func(func() int64 { return 1 })}, nil)
	if err != nil {
		b.Fatal(err)
	}
	tr := rec.Track(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		tr.Counter(1, int64(i))
	}
}

func BenchmarkRecordParallel(b *testing.B) {
	rec, err := New(io.Discard, Config{Clock: clock.Func(func() int64 { return 1 })}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		tr := rec.Track(1)
		for pb.Next() {
			tr.Instant(1)
		}
	})
}

func TestHotPathAllocs(t *testing.T) {
	rec, err := New(io.Discard, Config{Clock: &tick{}, ChunkEvents: 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := rec.Track(0)
	tr.Instant(1)
	n := testing.AllocsPerRun(1000, func() {
		tr.Enter(1)
		tr.Send(1, 2, 3)
		tr.Recv(1, 2, 3)
		tr.Counter(1, 2)
		tr.Leave(1)
	})
	if n != 0 {
		t.Fatalf("%v allocations per 5 events, want 0", n)
	}
}

// BenchmarkRecordRaw stamps with CLOCK_MONOTONIC_RAW, as in production.
func BenchmarkRecordRaw(b *testing.B) {
	rec, err := New(io.Discard, Config{Clock: clock.Raw{}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	tr := rec.Track(0)
	b.ReportAllocs()
	for b.Loop() {
		tr.Enter(1)
	}
}

// daemonFake publishes a new mapping every third call (a synthetic daemon).
type daemonFake struct {
	calls int
	fail  error
}

func (d *daemonFake) Mapping() (int64, estimate.Mapping, error) {
	if d.fail != nil {
		return 0, estimate.Mapping{}, d.fail
	}
	d.calls++
	v := int64(d.calls / 3)
	return v * 1000, estimate.Mapping{X0: v * 1000, Y0: v*1000 + 50, Skew: 1e-6 * float64(v), Valid: v > 0}, nil
}

func TestPollMapping(t *testing.T) {
	var b bytes.Buffer
	rec, err := New(&b, Config{Clock: &tick{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemonFake{}
	recorded := 0
	for range 10 {
		ok, err := rec.PollMapping(d)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			recorded++
		}
	}
	// calls 1..10 give v = 0,0,1,1,1,2,2,2,3,3: v=0 is invalid, then 3 changes.
	if recorded != 3 {
		t.Fatalf("%d mappings recorded, want 3", recorded)
	}
	d.fail = errors.New("no page")
	if _, err := rec.PollMapping(d); !errors.Is(err, d.fail) {
		t.Fatalf("error lost: %v", err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	s := read(t, b.Bytes())
	if len(s.maps) != 3 || s.maps[2].From != 3000 || s.maps[2].Mapping.Skew != 3e-6 {
		t.Fatalf("mappings %+v", s.maps)
	}
}
