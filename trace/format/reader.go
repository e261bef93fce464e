package format

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

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
	src  *pushback
	// Loss accounting: the stretch of bad bytes being skipped starts at
	// skipFrom (-1: none); heads are the chunk headers seen in it.
	loss     Loss
	lastSeq  int64
	skipFrom int64
	heads    []seenHeader
	// scanWork is the payload bytes of the candidate chunks Resync has
	// checked, bounded by maxScanWork + 64 × the bytes read.
	scanWork int64
}

// maxScanWork, plus 64 times the bytes read, bounds the payload bytes of the
// candidate chunks Resync checks in a file. Real damage comes nowhere near
// it (a false header with a consistent length and count is as rare as four
// given bytes); a file of forged headers would otherwise cost time
// quadratic in its size.
const maxScanWork = 256 << 20

// Loss is what a reader skipped to go on past corrupt or cut chunks
// (Resync, or the end of a cut file).
type Loss struct {
	// Chunks lost: the gaps in the sequence numbers of the good chunks on
	// either side of each skipped stretch, plus the chunk headers found in
	// a skipped stretch that runs to the end of the file.
	Chunks int64
	// Events in the events chunks whose headers lie in the skipped bytes:
	// each header's count, but no more records than fit before the next
	// header or good chunk (the whole count for a chunk cut by the end of
	// the file). Exact when the damage is in a payload or in a length
	// field; a header whose magic is destroyed is not found (Bytes/32
	// bounds the loss).
	Events int64
	// Bytes skipped.
	Bytes int64
}

// seenHeader is a chunk header met in a stretch of bad bytes.
type seenHeader struct {
	off       int64
	kind      ChunkKind
	count     uint32
	plausible bool // its length agrees with its kind and count
}

// pushback is the reader's source: bytes given back after a large chunk
// failed its checksum, then the file.
type pushback struct {
	buf []byte
	r   io.Reader
}

func (p *pushback) Read(b []byte) (int, error) {
	if len(p.buf) > 0 {
		n := copy(b, p.buf)
		p.buf = p.buf[n:]
		return n, nil
	}
	return p.r.Read(b)
}

// NewReader returns a Reader; name is used in error messages (a file name).
func NewReader(r io.Reader, name string) *Reader {
	src := &pushback{r: r}
	return &Reader{r: bufio.NewReaderSize(src, readBuf), src: src, name: name, lastSeq: -1, skipFrom: -1}
}

// Loss returns what the reader has skipped so far.
func (r *Reader) Loss() Loss { return r.loss }

// giveBack makes the bytes of a large chunk that failed, from its second
// byte on, readable again, so that good chunks its corrupt length field
// swallowed are found by Resync. The reader is left at start+1.
func (r *Reader) giveBack(start int64, chunk []byte) {
	buffered, _ := r.r.Peek(r.r.Buffered())
	b := make([]byte, 0, len(chunk)-1+len(buffered)+len(r.src.buf))
	b = append(b, chunk[1:]...)
	b = append(b, buffered...)
	b = append(b, r.src.buf...)
	r.src.buf = b
	r.r.Reset(r.src)
	r.off = start + 1
}

// sawHeader notes a header with the chunk magic at a bad offset.
func (r *Reader) sawHeader(start int64, h []byte) {
	if r.skipFrom < 0 {
		r.skipFrom = start
	}
	r.heads = append(r.heads, seenHeader{off: start, kind: ChunkKind(h[4]), count: binary.LittleEndian.Uint32(h[12:]), plausible: headerFault(h) == ""})
}

// settle closes the skipped stretch at end: the offset of the next good
// chunk (seq its sequence number), or the end of the file (seq -1).
func (r *Reader) settle(end, seq int64) {
	if r.skipFrom < 0 {
		if seq >= 0 {
			r.lastSeq = seq
		}
		return
	}
	r.loss.Bytes += end - r.skipFrom
	slices.SortFunc(r.heads, func(a, b seenHeader) int { return cmp.Compare(a.off, b.off) })
	for i, h := range r.heads {
		if h.kind < KindMeta || h.kind > KindMerged || (i > 0 && h.off == r.heads[i-1].off) {
			continue
		}
		if seq < 0 {
			r.loss.Chunks++
		}
		if h.kind != KindEvents {
			continue
		}
		// The chunk's events run at most to the next header or the end.
		boundary := end
		if i+1 < len(r.heads) {
			boundary = r.heads[i+1].off
		}
		n := int64(h.count)
		if fit := max(0, (boundary-h.off-HeaderSize)/EventSize); n > fit && !(seq < 0 && h.plausible && i+1 == len(r.heads)) {
			n = fit // a count destroyed with the header; a cut last chunk keeps its count
		}
		r.loss.Events += n
	}
	if seq >= 0 {
		if seq > r.lastSeq+1 {
			r.loss.Chunks += seq - r.lastSeq - 1
		}
		r.lastSeq = seq
	}
	r.skipFrom, r.heads = -1, r.heads[:0]
}

// headerFault says what makes a chunk header impossible, or "": a known
// kind, zero reserved bytes, and a length that fits the kind and count
// (fixed-size records; meta and names within their bounds). A corrupt
// length or count is caught here, before any payload is read.
func headerFault(h []byte) string {
	kind := ChunkKind(h[4])
	length := uint64(binary.LittleEndian.Uint32(h[8:]))
	count := uint64(binary.LittleEndian.Uint32(h[12:]))
	if kind < KindMeta || kind > KindMerged {
		return fmt.Sprintf("unknown chunk kind %d", h[4])
	}
	if h[5] != 0 || h[6] != 0 || h[7] != 0 {
		return "reserved header bytes not zero"
	}
	want := func(n uint64) string {
		if length != n {
			return fmt.Sprintf("%s chunk of %d records has length %d, want %d", kind, count, length, n)
		}
		return ""
	}
	switch kind {
	case KindEvents:
		return want(count * EventSize)
	case KindMerged:
		return want(count * MergedSize)
	case KindMappings:
		return want(count * MappingSize)
	case KindSync:
		return want(sessionHead + count*SampleSize)
	case KindMeta:
		if count != 1 || length < 16 || length > 16+2*0xffff {
			return fmt.Sprintf("meta chunk with count %d and length %d", count, length)
		}
	case KindNames:
		if length < 14*count || length > count*(14+0xffff) {
			return fmt.Sprintf("names chunk of %d entries cannot have length %d", count, length)
		}
	}
	return ""
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
		if r.skipFrom < 0 {
			r.skipFrom = start
		}
		return Chunk{}, r.errf(start, ErrCorrupt, "bad chunk magic %#08x", m)
	}
	length := int(binary.LittleEndian.Uint32(h[8:]))
	if length > MaxPayload {
		r.bad = true
		r.sawHeader(start, h)
		return Chunk{}, r.errf(start, ErrCorrupt, "chunk length %d exceeds the %d limit", length, MaxPayload)
	}
	if f := headerFault(h); f != "" {
		r.bad = true
		r.sawHeader(start, h)
		return Chunk{}, r.errf(start, ErrCorrupt, "%s", f)
	}
	total := HeaderSize + length
	var payload []byte
	crc := crc32.Update(0, castagnoli, r.hdr[:20])
	if total <= r.r.Size() {
		all, err := r.r.Peek(total)
		if len(all) < total {
			r.sawHeader(start, all)
			if err == io.EOF && validChunkIn(all[1:]) {
				// A good chunk follows: this length field is wrong, the
				// file is not cut here.
				r.bad = true
				return Chunk{}, r.errf(start, ErrCorrupt, "chunk length %d runs past the end of the file over a good chunk", length)
			}
			if err == io.EOF {
				d, _ := r.r.Discard(len(all))
				r.off += int64(d)
				r.settle(r.off, -1)
				return Chunk{}, r.errf(start, ErrTruncated, "chunk payload cut after %d of %d bytes", len(all)-HeaderSize, length)
			}
			return Chunk{}, fmt.Errorf("%s: offset %d: read chunk payload: %w", r.name, start, err)
		}
		crc = crc32.Update(crc, castagnoli, all[HeaderSize:])
		if want := binary.LittleEndian.Uint32(r.hdr[20:]); crc != want {
			r.bad = true
			r.sawHeader(start, all)
			return Chunk{}, r.errf(start, ErrCorrupt, "checksum %#08x, header says %#08x", crc, want)
		}
		// The payload stays in the bufio buffer: Discard of buffered bytes
		// only advances the read index, and the buffer is not refilled
		// before the next Next (Chunk.Payload is valid until then).
		payload = all[HeaderSize:total:total]
		d, _ := r.r.Discard(total)
		r.off += int64(d)
	} else {
		// Larger than the read buffer: read it; if it is bad, give its
		// bytes back so that the scan for the next chunk starts at its
		// second byte (its length field may be what is wrong).
		if cap(r.buf) < length {
			r.buf = make([]byte, length)
		}
		r.buf = r.buf[:length]
		payload = r.buf
		d, _ := r.r.Discard(HeaderSize)
		r.off += int64(d)
		n, err := io.ReadFull(r.r, r.buf)
		r.off += int64(n)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return Chunk{}, fmt.Errorf("%s: offset %d: read chunk payload: %w", r.name, start, err)
		}
		if err != nil || crc32.Update(crc, castagnoli, r.buf) != binary.LittleEndian.Uint32(r.hdr[20:]) {
			r.sawHeader(start, r.hdr[:])
			if err != nil && !validChunkIn(r.buf[:n]) {
				r.settle(r.off, -1)
				return Chunk{}, r.errf(start, ErrTruncated, "chunk payload cut after %d of %d bytes", n, length)
			}
			r.giveBack(start, append(r.hdr[:], r.buf[:n]...))
			r.buf = nil
			if err != nil {
				return Chunk{}, r.errf(start, ErrCorrupt, "chunk length %d runs past the end of the file over a good chunk", length)
			}
			return Chunk{}, r.errf(start, ErrCorrupt, "checksum %#08x, header says %#08x", crc32.Update(crc, castagnoli, payload[:n]), binary.LittleEndian.Uint32(r.hdr[20:]))
		}
	}
	c := Chunk{
		Kind:    ChunkKind(r.hdr[4]),
		Count:   binary.LittleEndian.Uint32(r.hdr[12:]),
		Seq:     binary.LittleEndian.Uint32(r.hdr[16:]),
		Offset:  start,
		Payload: payload,
	}
	r.settle(start, int64(c.Seq))
	return c, nil
}

// Resync scans forward for the next chunk whose header and checksum are
// good and returns it, or io.EOF when the rest of the file holds none. Use
// it after a corrupt (not truncated) chunk to go on with what is readable.
// If the candidate chunks it checks add up to more than maxScanWork plus 64
// times the bytes read, it skips the rest of the file and says so in a
// *CorruptError.
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
			d, _ := r.r.Discard(len(peek))
			r.off += int64(d)
			r.settle(r.off, -1)
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
		if headerFault(peek) == "" {
			r.scanWork += int64(binary.LittleEndian.Uint32(peek[8:]))
			if r.scanWork > maxScanWork+64*r.off {
				at := r.off
				n, err := io.Copy(io.Discard, r.r)
				r.off += n
				r.sawHeader(at, peek)
				r.settle(r.off, -1)
				if err != nil {
					return Chunk{}, fmt.Errorf("%s: offset %d: %w", r.name, r.off, err)
				}
				return Chunk{}, r.errf(at, ErrCorrupt, "gave up the resync after checking %d MiB of chunks whose headers look right but whose checksums fail: the rest of the file (%d bytes) is skipped", r.scanWork>>20, n)
			}
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
