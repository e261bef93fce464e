package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Writer writes one trace file chunk by chunk. It is not safe for
// concurrent use; the trace package's Recorder serialises its calls.
type Writer struct {
	w      io.Writer
	seq    uint32
	buf    []byte // header + payload of the chunk being built; reused
	err    error
	header bool
}

// NewWriter returns a Writer on w. The file magic is written with the first
// chunk.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: w, buf: make([]byte, HeaderSize, HeaderSize+4096)}
}

// Err returns the first error the writer met; after it every write fails.
func (w *Writer) Err() error { return w.err }

// begin resets the buffer to an empty chunk.
func (w *Writer) begin() { w.buf = w.buf[:HeaderSize] }

// finish fills in the header of the chunk in w.buf and writes it.
func (w *Writer) finish(kind ChunkKind, count uint32) error {
	if w.err != nil {
		return w.err
	}
	n := len(w.buf) - HeaderSize
	if n > MaxPayload {
		return fmt.Errorf("write %s chunk: payload of %d bytes exceeds %d", kind, n, MaxPayload)
	}
	h := w.buf[:HeaderSize]
	binary.LittleEndian.PutUint32(h[0:], chunkMagic)
	h[4] = byte(kind)
	h[5] = 0
	binary.LittleEndian.PutUint16(h[6:], 0)
	binary.LittleEndian.PutUint32(h[8:], uint32(n))
	binary.LittleEndian.PutUint32(h[12:], count)
	binary.LittleEndian.PutUint32(h[16:], w.seq)
	crc := crc32.Update(0, castagnoli, h[:20])
	crc = crc32.Update(crc, castagnoli, w.buf[HeaderSize:])
	binary.LittleEndian.PutUint32(h[20:], crc)
	if !w.header {
		if _, err := io.WriteString(w.w, FileMagic); err != nil {
			w.err = fmt.Errorf("write file magic: %w", err)
			return w.err
		}
		w.header = true
	}
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = fmt.Errorf("write %s chunk %d: %w", kind, w.seq, err)
		return w.err
	}
	w.seq++
	return nil
}

func (w *Writer) grow(n int) []byte {
	l := len(w.buf)
	w.buf = append(w.buf, make([]byte, n)...)
	return w.buf[l : l+n]
}

// WriteMeta writes the meta chunk; it should be the first chunk of a file.
func (w *Writer) WriteMeta(m Meta) error {
	if len(m.Name) > 0xffff || len(m.Clock) > 0xffff {
		return errors.New("write meta: name or clock longer than 65535 bytes")
	}
	w.begin()
	b := w.grow(12)
	binary.LittleEndian.PutUint32(b[0:], m.Proc)
	binary.LittleEndian.PutUint32(b[4:], m.Host)
	binary.LittleEndian.PutUint32(b[8:], m.Flags)
	w.putString(m.Name)
	w.putString(m.Clock)
	return w.finish(KindMeta, 1)
}

func (w *Writer) putString(s string) {
	b := w.grow(2)
	binary.LittleEndian.PutUint16(b, uint16(len(s)))
	w.buf = append(w.buf, s...)
}

// WriteEvents writes events as one chunk. It does not allocate once the
// writer's buffer has grown to the chunk size.
func (w *Writer) WriteEvents(ev []Event) error {
	if len(ev)*EventSize > MaxPayload {
		return fmt.Errorf("write events: %d events exceed the chunk limit", len(ev))
	}
	w.begin()
	n := len(ev) * EventSize
	if cap(w.buf) < HeaderSize+n {
		nb := make([]byte, HeaderSize, HeaderSize+n)
		w.buf = nb
	}
	w.buf = w.buf[:HeaderSize+n]
	p := w.buf[HeaderSize:]
	for i := range ev {
		putEvent(p[i*EventSize:], &ev[i])
	}
	return w.finish(KindEvents, uint32(len(ev)))
}

// WriteMerged writes merged records as one chunk.
func (w *Writer) WriteMerged(ms []Merged) error {
	if len(ms)*MergedSize > MaxPayload {
		return fmt.Errorf("write merged: %d records exceed the chunk limit", len(ms))
	}
	w.begin()
	n := len(ms) * MergedSize
	if cap(w.buf) < HeaderSize+n {
		w.buf = make([]byte, HeaderSize, HeaderSize+n)
	}
	w.buf = w.buf[:HeaderSize+n]
	p := w.buf[HeaderSize:]
	for i := range ms {
		PutMerged(p[i*MergedSize:], &ms[i])
	}
	return w.finish(KindMerged, uint32(len(ms)))
}

// WriteSession writes one sync session.
func (w *Writer) WriteSession(s Session) error {
	if (len(s.Samples)*SampleSize + sessionHead) > MaxPayload {
		return fmt.Errorf("write session %d: %d samples exceed the chunk limit", s.Index, len(s.Samples))
	}
	w.begin()
	b := w.grow(sessionHead)
	binary.LittleEndian.PutUint32(b[0:], s.Index)
	binary.LittleEndian.PutUint32(b[4:], s.Ref)
	b[8] = byte(s.Kind)
	for _, x := range s.Samples {
		b := w.grow(SampleSize)
		binary.LittleEndian.PutUint64(b[0:], uint64(x.SrcSend))
		binary.LittleEndian.PutUint64(b[8:], uint64(x.LocRecv))
		binary.LittleEndian.PutUint64(b[16:], uint64(x.LocSend))
		binary.LittleEndian.PutUint64(b[24:], uint64(x.SrcRecv))
	}
	return w.finish(KindSync, uint32(len(s.Samples)))
}

// WriteMappings writes daemon mappings as one chunk.
func (w *Writer) WriteMappings(ms []DaemonMapping) error {
	if len(ms)*MappingSize > MaxPayload {
		return fmt.Errorf("write mappings: %d mappings exceed the chunk limit", len(ms))
	}
	w.begin()
	for _, d := range ms {
		b := w.grow(MappingSize)
		m := d.Mapping
		binary.LittleEndian.PutUint64(b[0:], uint64(d.From))
		binary.LittleEndian.PutUint64(b[8:], uint64(m.X0))
		binary.LittleEndian.PutUint64(b[16:], uint64(m.Y0))
		binary.LittleEndian.PutUint64(b[24:], f64bits(m.Skew))
		binary.LittleEndian.PutUint64(b[32:], uint64(m.W0))
		binary.LittleEndian.PutUint64(b[40:], f64bits(m.SkewErr))
		binary.LittleEndian.PutUint64(b[48:], f64bits(m.Wander))
		var v uint64
		if m.Valid {
			v = 1
		}
		binary.LittleEndian.PutUint64(b[56:], v)
	}
	return w.finish(KindMappings, uint32(len(ms)))
}

// WriteNames writes string table entries as one chunk.
func (w *Writer) WriteNames(ns []Name) error {
	w.begin()
	for _, n := range ns {
		if len(n.Name) > 0xffff {
			return fmt.Errorf("write names: name %d is longer than 65535 bytes", n.ID)
		}
		b := w.grow(12)
		binary.LittleEndian.PutUint32(b[0:], n.Proc)
		binary.LittleEndian.PutUint64(b[4:], n.ID)
		w.putString(n.Name)
	}
	return w.finish(KindNames, uint32(len(ns)))
}
