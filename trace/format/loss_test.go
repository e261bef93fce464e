package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// bigFile writes a meta chunk and n events chunks of per events each (the
// recorder's 4096 by default), and returns the file and the offset of each
// events chunk.
func bigFile(t *testing.T, n, per int) ([]byte, []int64) {
	t.Helper()
	var b bytes.Buffer
	w := NewWriter(&b)
	if err := w.WriteMeta(Meta{Proc: 1, Name: "p", Clock: "c"}); err != nil {
		t.Fatal(err)
	}
	ev := make([]Event, per)
	var offs []int64
	tm := int64(0)
	for range n {
		for i := range ev {
			tm += 10
			ev[i] = Event{Time: tm, Kind: Instant, ID: 1}
		}
		offs = append(offs, int64(b.Len()))
		if err := w.WriteEvents(ev); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes(), offs
}

// TestCorruptLengthLosesOneChunk: whatever a corrupt length field says (a
// little more, more than the read buffer, the limit, past the end, zero, or
// a length and count grown together so that the header looks right), the
// reader loses that chunk only, finds every chunk after it, and the loss
// it reports is that chunk's events.
func TestCorruptLengthLosesOneChunk(t *testing.T) {
	const chunks, per = 12, 4096
	data, offs := bigFile(t, chunks, per)
	set := func(d []byte, at int64, length, count uint32) {
		binary.LittleEndian.PutUint32(d[at+8:], length)
		if count != 0 {
			binary.LittleEndian.PutUint32(d[at+12:], count)
		}
	}
	length := uint32(per * EventSize)
	tests := []struct {
		name          string
		chunk         int
		length, count uint32
		flip          int64 // instead: flip a payload byte at this offset in the chunk
		// cut: nothing follows the chunk, and its header agrees with
		// itself: the reader cannot tell it from a file cut inside a chunk
		// that long, and trusts its count.
		cut bool
	}{
		{name: "plus 32", chunk: 4, length: length + 32},
		{name: "over the read buffer", chunk: 4, length: length | 1<<20},
		{name: "the limit", chunk: 4, length: MaxPayload},
		{name: "over the limit", chunk: 4, length: 0xffffffff},
		{name: "zero", chunk: 4, length: 0},
		{name: "grown with its count", chunk: 4, length: (per + 40000) * EventSize, count: per + 40000},
		{name: "grown with its count past the end", chunk: 4, length: (per + 400000) * EventSize, count: per + 400000},
		{name: "first chunk", chunk: 0, length: length | 1<<22},
		{name: "last chunk past the end", chunk: chunks - 1, length: length | 1<<20},
		{name: "last chunk grown with its count", chunk: chunks - 1, length: (per + 40000) * EventSize, count: per + 40000, cut: true},
		{name: "payload", chunk: 4, flip: HeaderSize + 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := bytes.Clone(data)
			at := offs[tc.chunk]
			if tc.flip != 0 {
				d[at+tc.flip] ^= 0x20
			} else {
				set(d, at, tc.length, tc.count)
			}
			wantErr := ErrCorrupt
			if tc.cut {
				wantErr = ErrTruncated
			}
			if _, err := Summarize(bytes.NewReader(d), "x.gct", false); !errors.Is(err, wantErr) {
				t.Fatalf("without keepGoing: %v, want %v", err, wantErr)
			}
			s, err := Summarize(bytes.NewReader(d), "x.gct", true)
			if err != nil {
				t.Fatal(err)
			}
			if s.Events != (chunks-1)*per {
				t.Errorf("read %d events, want %d (every chunk but the corrupt one); problems %v", s.Events, (chunks-1)*per, s.Problems)
			}
			want := Loss{Chunks: 1, Events: per, Bytes: HeaderSize + int64(length)}
			if tc.cut {
				want.Events = per + 40000
			}
			if s.Lost != want {
				t.Errorf("lost %+v, want %+v", s.Lost, want)
			}
			if len(s.Problems) == 0 {
				t.Error("no problem reported")
			}
		})
	}
}

// TestLossOfCutFile: a file cut inside its last chunk loses that chunk's
// events, all of them.
func TestLossOfCutFile(t *testing.T) {
	const chunks, per = 3, 100
	data, offs := bigFile(t, chunks, per)
	for _, cut := range []int64{offs[2] + 10, offs[2] + HeaderSize, offs[2] + HeaderSize + 33, int64(len(data)) - 1} {
		s, err := Summarize(bytes.NewReader(data[:cut]), "x.gct", true)
		if err != nil {
			t.Fatal(err)
		}
		wantEvents := int64(per)
		if cut < offs[2]+HeaderSize {
			wantEvents = 0 // the header itself is cut: nothing says how many
		}
		if s.Events != 2*per || s.Lost.Events != wantEvents || !errors.Is(s.Problems[0], ErrTruncated) {
			t.Errorf("cut at %d: %d events, lost %+v, problems %v", cut, s.Events, s.Lost, s.Problems)
		}
	}
}

// TestForgedHeadersBounded: a stretch of forged headers that agree with
// themselves and claim 16 MiB each would make every candidate a read of the
// rest of the file; the resync checks at most maxScanWork bytes, then skips
// the rest of the file and says so.
func TestForgedHeadersBounded(t *testing.T) {
	data, _ := bigFile(t, 2, 100)
	goodEvents := int64(200)
	const forged = 400
	h := make([]byte, 64)
	copy(h, "CHNK")
	h[4] = byte(KindEvents)
	binary.LittleEndian.PutUint32(h[8:], MaxPayload)
	binary.LittleEndian.PutUint32(h[12:], MaxPayload/EventSize)
	regionAt := int64(len(data))
	for range forged {
		data = append(data, h...)
	}
	tail, _ := bigFile(t, 1, 100)
	data = append(data, tail[len(FileMagic):]...) // a good chunk after the forgery
	s, err := Summarize(bytes.NewReader(data), "forged.gct", true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Events != goodEvents {
		t.Errorf("%d events, want the %d before the forgery", s.Events, goodEvents)
	}
	if s.Lost.Bytes != int64(len(data))-regionAt {
		t.Errorf("lost %d bytes, want the %d from the forgery on", s.Lost.Bytes, int64(len(data))-regionAt)
	}
	var gaveUp bool
	for _, p := range s.Problems {
		gaveUp = gaveUp || bytes.Contains([]byte(p.Error()), []byte("gave up the resync"))
	}
	if !gaveUp {
		t.Errorf("no problem says the resync gave up: %v", s.Problems)
	}
}
