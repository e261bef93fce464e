package format

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/gclock/gclock/estimate"
)

// Chunk is one chunk as read: its kind, record count, sequence number, the
// byte offset of its header in the file, and its payload. Payload is only
// valid until the next call to Next.
type Chunk struct {
	Kind    ChunkKind
	Count   uint32
	Seq     uint32
	Offset  int64
	Payload []byte
}

// readBuf holds a whole events chunk of 4096 events (the recorder's
// default) plus slack, so that such a chunk is checked before it is
// consumed and its payload is used in place; a merge of k files holds k of
// these buffers.
const readBuf = HeaderSize + 4096*EventSize + 4096

// Reader reads chunks from one trace file.
type Reader struct {
	r    *bufio.Reader
	name string
	off  int64 // offset of the next unread byte
	hdr  [HeaderSize]byte
	buf  []byte
	init bool
	bad  bool // a corrupt chunk at off was not consumed
}

// NewReader returns a Reader; name is used in error messages (a file name).
func NewReader(r io.Reader, name string) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, readBuf), name: name}
}

// Offset is the byte offset of the next chunk.
func (r *Reader) Offset() int64 { return r.off }

func (r *Reader) errf(off int64, base error, format string, a ...any) error {
	return &CorruptError{File: r.name, Offset: off, Reason: fmt.Sprintf(format, a...), Err: base}
}

// readMagic checks the file magic.
func (r *Reader) readMagic() error {
	var m [len(FileMagic)]byte
	n, err := io.ReadFull(r.r, m[:])
	r.off += int64(n)
	if err != nil {
		if err == io.EOF {
			return r.errf(0, ErrTruncated, "empty file (no %q magic)", FileMagic)
		}
		if err == io.ErrUnexpectedEOF {
			return r.errf(0, ErrTruncated, "file shorter than its magic")
		}
		return fmt.Errorf("%s: read magic: %w", r.name, err)
	}
	if string(m[:]) != FileMagic {
		return r.errf(0, ErrCorrupt, "not a gclock trace (magic %q, want %q)", m[:], FileMagic)
	}
	return nil
}

// Next returns the next chunk, io.EOF at a clean end of file, or a
// *CorruptError. After a corrupt error, call Resync to go on with the next
// good chunk (a bad chunk that fits the read buffer is not consumed, so
// good chunks swallowed by a corrupt length field are still found); after a
// truncation the file has nothing more to give.
func (r *Reader) Next() (Chunk, error) {
	if !r.init {
		r.init = true
		if err := r.readMagic(); err != nil {
			return Chunk{}, err
		}
	}
	if r.bad {
		// A corrupt chunk is pending and Next was called again instead of
		// Resync: step over its first byte so that callers always progress.
		r.bad = false
		d, _ := r.r.Discard(1)
		r.off += int64(d)
	}
	return r.chunk()
}

// chunk parses the chunk at the current offset.
func (r *Reader) chunk() (Chunk, error) {
	start := r.off
	h, err := r.r.Peek(HeaderSize)
	if len(h) < HeaderSize {
		if len(h) == 0 && err == io.EOF {
			return Chunk{}, io.EOF
		}
		if err == io.EOF {
			d, _ := r.r.Discard(len(h))
			r.off += int64(d)
			return Chunk{}, r.errf(start, ErrTruncated, "chunk header cut after %d of %d bytes", len(h), HeaderSize)
		}
		return Chunk{}, fmt.Errorf("%s: offset %d: read chunk header: %w", r.name, start, err)
	}
	copy(r.hdr[:], h)
	if m := binary.LittleEndian.Uint32(h[0:]); m != chunkMagic {
		r.bad = true
		return Chunk{}, r.errf(start, ErrCorrupt, "bad chunk magic %#08x", m)
	}
	length := int(binary.LittleEndian.Uint32(h[8:]))
	if length > MaxPayload {
		r.bad = true
		return Chunk{}, r.errf(start, ErrCorrupt, "chunk length %d exceeds the %d limit", length, MaxPayload)
	}
	total := HeaderSize + length
	var payload []byte
	crc := crc32.Update(0, castagnoli, r.hdr[:20])
	if total <= r.r.Size() {
		all, err := r.r.Peek(total)
		if len(all) < total {
			if err == io.EOF && validChunkIn(all[1:]) {
				// A good chunk follows: this length field is wrong, the
				// file is not cut here.
				r.bad = true
				return Chunk{}, r.errf(start, ErrCorrupt, "chunk length %d runs past the end of the file over a good chunk", length)
			}
			if err == io.EOF {
				d, _ := r.r.Discard(len(all))
				r.off += int64(d)
				return Chunk{}, r.errf(start, ErrTruncated, "chunk payload cut after %d of %d bytes", len(all)-HeaderSize, length)
			}
			return Chunk{}, fmt.Errorf("%s: offset %d: read chunk payload: %w", r.name, start, err)
		}
		crc = crc32.Update(crc, castagnoli, all[HeaderSize:])
		if want := binary.LittleEndian.Uint32(r.hdr[20:]); crc != want {
			r.bad = true
			return Chunk{}, r.errf(start, ErrCorrupt, "checksum %#08x, header says %#08x", crc, want)
		}
		// The payload stays in the bufio buffer: Discard of buffered bytes
		// only advances the read index, and the buffer is not refilled
		// before the next Next (Chunk.Payload is valid until then).
		payload = all[HeaderSize:total:total]
		d, _ := r.r.Discard(total)
		r.off += int64(d)
	} else {
		// Larger than the read buffer: read it; if it is bad, the scan for
		// the next chunk starts after it.
		if cap(r.buf) < length {
			r.buf = make([]byte, length)
		}
		r.buf = r.buf[:length]
		payload = r.buf
		d, _ := r.r.Discard(HeaderSize)
		r.off += int64(d)
		n, err := io.ReadFull(r.r, r.buf)
		r.off += int64(n)
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return Chunk{}, r.errf(start, ErrTruncated, "chunk payload cut after %d of %d bytes", n, length)
			}
			return Chunk{}, fmt.Errorf("%s: offset %d: read chunk payload: %w", r.name, start, err)
		}
		crc = crc32.Update(crc, castagnoli, r.buf)
		if want := binary.LittleEndian.Uint32(r.hdr[20:]); crc != want {
			return Chunk{}, r.errf(start, ErrCorrupt, "checksum %#08x, header says %#08x", crc, want)
		}
	}
	c := Chunk{
		Kind:    ChunkKind(r.hdr[4]),
		Count:   binary.LittleEndian.Uint32(r.hdr[12:]),
		Seq:     binary.LittleEndian.Uint32(r.hdr[16:]),
		Offset:  start,
		Payload: payload,
	}
	if c.Kind < KindMeta || c.Kind > KindMerged {
		return Chunk{}, r.errf(start, ErrCorrupt, "unknown chunk kind %d", r.hdr[4])
	}
	return c, nil
}

// Resync scans forward for the next chunk whose header and checksum are
// good and returns it, or io.EOF when the rest of the file holds none. Use
// it after a corrupt (not truncated) chunk to go on with what is readable.
func (r *Reader) Resync() (Chunk, error) {
	if r.bad {
		r.bad = false
		d, _ := r.r.Discard(1)
		r.off += int64(d)
	}
	magic := []byte{'C', 'H', 'N', 'K'}
	for {
		peek, _ := r.r.Peek(HeaderSize)
		if len(peek) < HeaderSize {
			return Chunk{}, io.EOF
		}
		if i := bytes.Index(peek, magic); i != 0 {
			skip := i
			if i < 0 {
				skip = HeaderSize - len(magic) + 1
			}
			d, _ := r.r.Discard(skip)
			r.off += int64(d)
			continue
		}
		c, err := r.chunk()
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrTruncated) {
			return Chunk{}, io.EOF
		}
		var ce *CorruptError
		if !errors.As(err, &ce) {
			return Chunk{}, err
		}
		if r.bad {
			r.bad = false
			d, _ := r.r.Discard(1)
			r.off += int64(d)
		}
	}
}

// DecodeMeta decodes a KindMeta payload.
func DecodeMeta(p []byte) (Meta, error) {
	var m Meta
	if len(p) < 12 {
		return m, fmt.Errorf("meta: %d bytes, want at least 12: %w", len(p), ErrCorrupt)
	}
	m.Proc = binary.LittleEndian.Uint32(p[0:])
	m.Host = binary.LittleEndian.Uint32(p[4:])
	m.Flags = binary.LittleEndian.Uint32(p[8:])
	rest := p[12:]
	var err error
	if m.Name, rest, err = getString(rest); err != nil {
		return m, fmt.Errorf("meta name: %w", err)
	}
	if m.Clock, rest, err = getString(rest); err != nil {
		return m, fmt.Errorf("meta clock: %w", err)
	}
	if len(rest) != 0 {
		return m, fmt.Errorf("meta: %d trailing bytes: %w", len(rest), ErrCorrupt)
	}
	return m, nil
}

func getString(p []byte) (string, []byte, error) {
	if len(p) < 2 {
		return "", nil, fmt.Errorf("string length cut: %w", ErrCorrupt)
	}
	n := int(binary.LittleEndian.Uint16(p))
	if len(p) < 2+n {
		return "", nil, fmt.Errorf("string of %d bytes cut at %d: %w", n, len(p)-2, ErrCorrupt)
	}
	return string(p[2 : 2+n]), p[2+n:], nil
}

// DecodeEvents decodes the events of a KindEvents chunk into dst (reused
// when large enough) and returns it. It checks every event's kind and that
// times never decrease.
func DecodeEvents(c Chunk, dst []Event) ([]Event, error) {
	if err := checkCount(len(c.Payload), c.Count, EventSize); err != nil {
		return dst[:0], fmt.Errorf("events: %v: %w", err, ErrCorrupt)
	}
	n := int(c.Count)
	if cap(dst) < n {
		dst = make([]Event, n)
	}
	dst = dst[:n]
	for i := range dst {
		getEvent(c.Payload[i*EventSize:], &dst[i])
		if dst[i].Kind < Enter || dst[i].Kind > maxKind {
			return dst[:0], fmt.Errorf("event %d: unknown kind %d: %w", i, dst[i].Kind, ErrCorrupt)
		}
		if i > 0 && dst[i].Time < dst[i-1].Time {
			return dst[:0], fmt.Errorf("event %d: time %d before the previous %d: %w", i, dst[i].Time, dst[i-1].Time, ErrCorrupt)
		}
	}
	return dst, nil
}

// DecodeMerged decodes the records of a KindMerged chunk into dst.
func DecodeMerged(c Chunk, dst []Merged) ([]Merged, error) {
	if err := checkCount(len(c.Payload), c.Count, MergedSize); err != nil {
		return dst[:0], fmt.Errorf("merged: %v: %w", err, ErrCorrupt)
	}
	n := int(c.Count)
	if cap(dst) < n {
		dst = make([]Merged, n)
	}
	dst = dst[:n]
	for i := range dst {
		getMerged(c.Payload[i*MergedSize:], &dst[i])
		if dst[i].Kind < Enter || dst[i].Kind > maxKind {
			return dst[:0], fmt.Errorf("merged record %d: unknown kind %d: %w", i, dst[i].Kind, ErrCorrupt)
		}
	}
	return dst, nil
}

// DecodeSession decodes a KindSync chunk.
func DecodeSession(c Chunk) (Session, error) {
	var s Session
	p := c.Payload
	if len(p) < sessionHead {
		return s, fmt.Errorf("session: %d bytes, want at least %d: %w", len(p), sessionHead, ErrCorrupt)
	}
	s.Index = binary.LittleEndian.Uint32(p[0:])
	s.Ref = binary.LittleEndian.Uint32(p[4:])
	s.Kind = SessionKind(p[8])
	if s.Kind < SessionStart || s.Kind > SessionDemand {
		return s, fmt.Errorf("session %d: unknown kind %d: %w", s.Index, p[8], ErrCorrupt)
	}
	p = p[sessionHead:]
	if err := checkCount(len(p), c.Count, SampleSize); err != nil {
		return s, fmt.Errorf("session %d: %v: %w", s.Index, err, ErrCorrupt)
	}
	s.Samples = make([]estimate.Sample, c.Count)
	for i := range s.Samples {
		b := p[i*SampleSize:]
		s.Samples[i] = estimate.Sample{
			SrcSend: int64(binary.LittleEndian.Uint64(b[0:])),
			LocRecv: int64(binary.LittleEndian.Uint64(b[8:])),
			LocSend: int64(binary.LittleEndian.Uint64(b[16:])),
			SrcRecv: int64(binary.LittleEndian.Uint64(b[24:])),
		}
	}
	return s, nil
}

// DecodeMappings decodes a KindMappings chunk.
func DecodeMappings(c Chunk) ([]DaemonMapping, error) {
	if err := checkCount(len(c.Payload), c.Count, MappingSize); err != nil {
		return nil, fmt.Errorf("mappings: %v: %w", err, ErrCorrupt)
	}
	out := make([]DaemonMapping, c.Count)
	for i := range out {
		b := c.Payload[i*MappingSize:]
		m := estimate.Mapping{
			X0:      int64(binary.LittleEndian.Uint64(b[8:])),
			Y0:      int64(binary.LittleEndian.Uint64(b[16:])),
			Skew:    f64from(binary.LittleEndian.Uint64(b[24:])),
			W0:      int64(binary.LittleEndian.Uint64(b[32:])),
			SkewErr: f64from(binary.LittleEndian.Uint64(b[40:])),
			Wander:  f64from(binary.LittleEndian.Uint64(b[48:])),
		}
		switch binary.LittleEndian.Uint64(b[56:]) {
		case 0:
		case 1:
			m.Valid = true
		default:
			return nil, fmt.Errorf("mapping %d: bad valid flag: %w", i, ErrCorrupt)
		}
		for _, f := range []float64{m.Skew, m.SkewErr, m.Wander} {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("mapping %d: non-finite coefficient: %w", i, ErrCorrupt)
			}
		}
		if m.Skew <= -1 {
			return nil, fmt.Errorf("mapping %d: skew %g would run time backwards: %w", i, m.Skew, ErrCorrupt)
		}
		out[i] = DaemonMapping{From: int64(binary.LittleEndian.Uint64(b[0:])), Mapping: m}
	}
	return out, nil
}

// DecodeNames decodes a KindNames chunk.
func DecodeNames(c Chunk) ([]Name, error) {
	p := c.Payload
	// Each entry is at least 14 bytes: bound the allocation by the payload.
	if uint64(c.Count)*14 > uint64(len(p)) {
		return nil, fmt.Errorf("names: %d entries cannot fit in %d bytes: %w", c.Count, len(p), ErrCorrupt)
	}
	out := make([]Name, 0, c.Count)
	for i := uint32(0); i < c.Count; i++ {
		if len(p) < 12 {
			return nil, fmt.Errorf("name %d: cut: %w", i, ErrCorrupt)
		}
		n := Name{Proc: binary.LittleEndian.Uint32(p[0:]), ID: binary.LittleEndian.Uint64(p[4:])}
		var err error
		if n.Name, p, err = getString(p[12:]); err != nil {
			return nil, fmt.Errorf("name %d: %w", i, err)
		}
		out = append(out, n)
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("names: %d trailing bytes: %w", len(p), ErrCorrupt)
	}
	return out, nil
}

// validChunkIn reports whether b contains a complete chunk with a good
// checksum.
func validChunkIn(b []byte) bool {
	magic := []byte{'C', 'H', 'N', 'K'}
	for {
		i := bytes.Index(b, magic)
		if i < 0 {
			return false
		}
		b = b[i:]
		if len(b) >= HeaderSize {
			n := int(binary.LittleEndian.Uint32(b[8:]))
			if n <= len(b)-HeaderSize {
				crc := crc32.Update(0, castagnoli, b[:20])
				crc = crc32.Update(crc, castagnoli, b[HeaderSize:HeaderSize+n])
				if crc == binary.LittleEndian.Uint32(b[20:]) {
					return true
				}
			}
		}
		b = b[1:]
	}
}
