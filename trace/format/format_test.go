package format

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/gclock/gclock/estimate"
)

func sampleFile(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	w := NewWriter(&b)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteMeta(Meta{Proc: 3, Host: 1, Flags: FlagSyncedHost, Name: "rank3", Clock: "CLOCK_MONOTONIC_RAW"}))
	must(w.WriteNames([]Name{{Proc: 3, ID: 1, Name: "compute"}, {Proc: 3, ID: 2, Name: "io"}}))
	must(w.WriteSession(Session{Index: 0, Ref: 0, Kind: SessionStart, Samples: []estimate.Sample{{SrcSend: 10, LocRecv: 20, LocSend: 5, SrcRecv: 9}}}))
	ev := []Event{
		{Time: 100, Kind: Enter, ID: 1, Track: 2},
		{Time: 150, Kind: Send, ID: 7, Peer: 4, Value: 64},
		{Time: 150, Kind: Counter, ID: 2, Value: -5},
		{Time: 200, Kind: Leave, ID: 1, Track: 2},
	}
	must(w.WriteEvents(ev))
	must(w.WriteEvents(ev[3:]))
	must(w.WriteMappings([]DaemonMapping{{From: 100, Mapping: estimate.Mapping{X0: 100, Y0: 1000, Skew: 1e-6, W0: 50, Valid: true}}}))
	must(w.WriteMerged([]Merged{{Event: ev[1], Raw: 140, Proc: 3}}))
	return b.Bytes()
}

func readAll(t testing.TB, data []byte) (kinds []ChunkKind, err error) {
	r := NewReader(bytes.NewReader(data), "f.gct")
	for {
		c, err := r.Next()
		if err == io.EOF {
			return kinds, nil
		}
		if err != nil {
			return kinds, err
		}
		kinds = append(kinds, c.Kind)
		switch c.Kind {
		case KindMeta:
			_, err = DecodeMeta(c.Payload)
		case KindEvents:
			_, err = DecodeEvents(c, nil)
		case KindSync:
			_, err = DecodeSession(c)
		case KindMappings:
			_, err = DecodeMappings(c)
		case KindNames:
			_, err = DecodeNames(c)
		case KindMerged:
			_, err = DecodeMerged(c, nil)
		}
		if err != nil {
			return kinds, err
		}
	}
}

func TestRoundTrip(t *testing.T) {
	data := sampleFile(t)
	r := NewReader(bytes.NewReader(data), "f.gct")
	c, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeMeta(c.Payload)
	if err != nil || m.Proc != 3 || m.Host != 1 || m.Name != "rank3" || m.Flags != FlagSyncedHost || m.Clock != "CLOCK_MONOTONIC_RAW" {
		t.Fatalf("meta %+v %v", m, err)
	}
	c, _ = r.Next()
	ns, err := DecodeNames(c)
	if err != nil || len(ns) != 2 || ns[1].Name != "io" || ns[1].ID != 2 || ns[1].Proc != 3 {
		t.Fatalf("names %+v %v", ns, err)
	}
	c, _ = r.Next()
	s, err := DecodeSession(c)
	if err != nil || s.Kind != SessionStart || len(s.Samples) != 1 || s.Samples[0].LocRecv != 20 || s.Samples[0].SrcRecv != 9 {
		t.Fatalf("session %+v %v", s, err)
	}
	c, _ = r.Next()
	ev, err := DecodeEvents(c, nil)
	if err != nil || len(ev) != 4 || ev[2].Value != -5 || ev[1].Peer != 4 || ev[0].Track != 2 || ev[3].Kind != Leave {
		t.Fatalf("events %+v %v", ev, err)
	}
	if c.Seq != 3 {
		t.Errorf("seq %d, want 3", c.Seq)
	}
	c, _ = r.Next()
	if _, err := DecodeEvents(c, ev); err != nil {
		t.Fatal(err)
	}
	c, _ = r.Next()
	ms, err := DecodeMappings(c)
	if err != nil || len(ms) != 1 || ms[0].Mapping.Skew != 1e-6 || !ms[0].Mapping.Valid || ms[0].From != 100 {
		t.Fatalf("mappings %+v %v", ms, err)
	}
	c, _ = r.Next()
	mg, err := DecodeMerged(c, nil)
	if err != nil || len(mg) != 1 || mg[0].Raw != 140 || mg[0].Proc != 3 || mg[0].Time != 150 {
		t.Fatalf("merged %+v %v", mg, err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
}

// A crashed writer leaves a prefix of the file: every complete chunk must
// read, and the cut must be reported as a truncation at the chunk's offset.
func TestTruncatedAtEveryByte(t *testing.T) {
	data := sampleFile(t)
	full, err := readAll(t, data)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(data); n++ {
		kinds, err := readAll(t, data[:n])
		var ce *CorruptError
		atBoundary := false
		if err == nil {
			atBoundary = true
		} else if !errors.As(err, &ce) || !errors.Is(err, ErrTruncated) || ce.File != "f.gct" {
			t.Fatalf("cut at %d: error %v, want a truncation naming the file", n, err)
		}
		if atBoundary && n < len(FileMagic) {
			t.Fatalf("cut at %d: no error for a file without magic", n)
		}
		if len(kinds) > len(full) {
			t.Fatalf("cut at %d: %d chunks from a prefix", n, len(kinds))
		}
		if ce != nil && ce.Offset > int64(n) {
			t.Fatalf("cut at %d: offset %d beyond the end", n, ce.Offset)
		}
	}
}

func TestCorruption(t *testing.T) {
	data := sampleFile(t)
	tests := []struct {
		name string
		at   int // byte to flip
		want error
	}{
		{"magic", 0, ErrCorrupt},
		{"chunk magic", 8, ErrCorrupt},
		{"length", 8 + 9, ErrCorrupt},
		{"payload", 8 + HeaderSize + 2, ErrCorrupt},
		{"crc", 8 + 21, ErrCorrupt},
		{"last byte", len(data) - 1, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := bytes.Clone(data)
			d[tc.at] ^= 0x40
			_, err := readAll(t, d)
			if !errors.Is(err, tc.want) && !errors.Is(err, ErrTruncated) {
				t.Fatalf("flip at %d: %v, want %v", tc.at, err, tc.want)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("flip at %d: %v is not a CorruptError", tc.at, err)
			}
		})
	}
}

// After a corrupt chunk, Resync finds all the following good chunks,
// whatever field was hit (a grown length must not swallow good chunks).
func TestResync(t *testing.T) {
	data := sampleFile(t)
	r := NewReader(bytes.NewReader(data), "x")
	var offs []int64
	for {
		c, err := r.Next()
		if err != nil {
			break
		}
		offs = append(offs, c.Offset)
	}
	const bad = 3 // the first events chunk
	tests := []struct {
		name string
		at   int64 // byte offset within the chunk
		xor  byte
	}{
		{"payload", HeaderSize + 1, 1},
		{"magic", 0, 0xff},
		{"length grown", 9, 0x01}, // +256 bytes: would swallow the next chunks
		{"length shrunk", 8, 0x80},
		{"crc", 22, 0x10},
		{"kind", 4, 0x07},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := bytes.Clone(data)
			d[offs[bad]+tc.at] ^= tc.xor
			r := NewReader(bytes.NewReader(d), "x")
			var got []int64
			for {
				c, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					var ce *CorruptError
					if !errors.As(err, &ce) || ce.Offset != offs[bad] || !errors.Is(err, ErrCorrupt) {
						t.Fatalf("error %v, want corrupt chunk at %d", err, offs[bad])
					}
					c, err = r.Resync()
					if err != nil {
						break
					}
				}
				got = append(got, c.Offset)
			}
			want := append(append([]int64{}, offs[:bad]...), offs[bad+1:]...)
			if len(got) != len(want) {
				t.Fatalf("chunks after resync at %v, want %v", got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("chunks after resync at %v, want %v", got, want)
				}
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name string
		c    Chunk
		dec  func(Chunk) error
	}{
		{"events count", Chunk{Count: 2, Payload: make([]byte, EventSize)}, func(c Chunk) error { _, err := DecodeEvents(c, nil); return err }},
		{"events kind", Chunk{Count: 1, Payload: make([]byte, EventSize)}, func(c Chunk) error { _, err := DecodeEvents(c, nil); return err }},
		{"session short", Chunk{Count: 0, Payload: make([]byte, 3)}, func(c Chunk) error { _, err := DecodeSession(c); return err }},
		{"session kind", Chunk{Count: 0, Payload: make([]byte, sessionHead)}, func(c Chunk) error { _, err := DecodeSession(c); return err }},
		{"mappings count", Chunk{Count: 1 << 30, Payload: make([]byte, 64)}, func(c Chunk) error { _, err := DecodeMappings(c); return err }},
		{"names huge count", Chunk{Count: 1 << 31, Payload: make([]byte, 20)}, func(c Chunk) error { _, err := DecodeNames(c); return err }},
		{"meta short", Chunk{Payload: make([]byte, 5)}, func(c Chunk) error { _, err := DecodeMeta(c.Payload); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.dec(tc.c); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
	// Events out of time order are corrupt.
	var b bytes.Buffer
	w := NewWriter(&b)
	if err := w.WriteEvents([]Event{{Time: 5, Kind: Instant}, {Time: 4, Kind: Instant}}); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, b.Bytes()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("backwards events: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(sampleFile(f))
	f.Add([]byte(FileMagic))
	f.Add([]byte("GCLKTRC1CHNK"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data), "fuzz")
		last := int64(-1)
		defer func() {
			// The loss accounts for skipped bytes of this file only.
			if l := r.Loss(); l.Bytes < 0 || l.Bytes > int64(len(data)) || l.Events < 0 || l.Chunks < 0 {
				t.Fatalf("loss %+v of a %d-byte file", l, len(data))
			}
		}()
		for {
			c, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var ce *CorruptError
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a CorruptError", err)
				}
				if errors.Is(err, ErrTruncated) {
					return
				}
				if c, err = r.Resync(); err != nil {
					return
				}
			}
			// Every chunk returned lies after the previous one: the reader
			// always progresses and so always ends.
			if c.Offset <= last || r.Offset() <= c.Offset || r.Offset() > int64(len(data)) {
				t.Fatalf("chunk at %d after %d, reader at %d of %d", c.Offset, last, r.Offset(), len(data))
			}
			last = c.Offset
			switch c.Kind {
			case KindMeta:
				_, _ = DecodeMeta(c.Payload)
			case KindEvents:
				_, _ = DecodeEvents(c, nil)
			case KindSync:
				_, _ = DecodeSession(c)
			case KindMappings:
				_, _ = DecodeMappings(c)
			case KindNames:
				_, _ = DecodeNames(c)
			case KindMerged:
				_, _ = DecodeMerged(c, nil)
			}
		}
	})
}

// FuzzDecode feeds arbitrary payloads straight to the decoders (the
// checksum would stop most of them in Next).
func FuzzDecode(f *testing.F) {
	f.Add(uint8(KindEvents), uint32(1), make([]byte, EventSize))
	f.Add(uint8(KindNames), uint32(1), []byte{0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 'a'})
	f.Add(uint8(KindSync), uint32(0), make([]byte, 16))
	f.Fuzz(func(t *testing.T, kind uint8, count uint32, p []byte) {
		c := Chunk{Kind: ChunkKind(kind), Count: count, Payload: p}
		_, _ = DecodeMeta(p)
		_, _ = DecodeEvents(c, nil)
		_, _ = DecodeSession(c)
		_, _ = DecodeMappings(c)
		_, _ = DecodeMerged(c, nil)
		if ns, err := DecodeNames(c); err == nil && uint32(len(ns)) != count {
			t.Fatalf("names: %d entries for count %d", len(ns), count)
		}
	})
}

func TestSummarize(t *testing.T) {
	data := sampleFile(t)
	s, err := Summarize(bytes.NewReader(data), "f", false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Events != 5 || s.First != 100 || s.Last != 200 || len(s.Sessions) != 1 || len(s.Mappings) != 1 || len(s.Names) != 2 || s.Merged != 1 || s.Size != int64(len(data)) {
		t.Fatalf("summary %+v", s)
	}
	// Truncated: an error without keep-going, the readable part with it.
	cut := data[:len(data)-10]
	if _, err := Summarize(bytes.NewReader(cut), "f", false); !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated: %v", err)
	}
	s, err = Summarize(bytes.NewReader(cut), "f", true)
	if err != nil || len(s.Problems) != 1 || s.Events != 5 {
		t.Fatalf("keep-going: %v %+v", err, s)
	}
}
