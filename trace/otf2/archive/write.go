package archive

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Options tune a written archive.
type Options struct {
	// Chunk sizes in bytes; 0: 1 MiB for events and 4 MiB for definitions
	// (gclock's libotf2 sink's sizes). Records never span chunks.
	ChunkSizeEvents, ChunkSizeDefs uint64
	Machine, Creator, Description  string
	// TraceID is the anchor's trace identifier; 0: one is made from the
	// path and the time (libotf2 hashes the same and more).
	TraceID uint64
	// Version is the OTF2 version written in the anchor; zero: 3.0.2.
	Version [3]uint8
}

// Writer writes an archive. Every location's events go to their own
// file, each location's records in time order; global definitions may
// come at any point before Close.
type Writer struct {
	dir, name string
	opt       Options
	global    *chunkWriter
	globals   uint64
	locations uint64
	locDefs   map[uint64]*chunkWriter
	events    map[uint64]*chunkWriter
	props     []Property
	err       error
	closed    bool
}

// Create starts an archive in dir: dir/name.otf2, dir/name.def and
// dir/name/. Existing files of that name are replaced (the directory
// dir/name is emptied of .evt and .def files).
func Create(dir, name string, opt Options) (*Writer, error) {
	if name == "" || filepath.Base(name) != name {
		return nil, fmt.Errorf("otf2 archive: invalid archive name %q", name)
	}
	if opt.ChunkSizeEvents == 0 {
		opt.ChunkSizeEvents = 1 << 20
	}
	if opt.ChunkSizeDefs == 0 {
		opt.ChunkSizeDefs = 4 << 20
	}
	if opt.ChunkSizeEvents < 256 || opt.ChunkSizeDefs < 256 || opt.ChunkSizeEvents > 1<<34 || opt.ChunkSizeDefs > 1<<34 {
		return nil, fmt.Errorf("otf2 archive: chunk sizes %d and %d out of range [256, 2^34]", opt.ChunkSizeEvents, opt.ChunkSizeDefs)
	}
	if opt.Version == ([3]uint8{}) {
		opt.Version = [3]uint8{3, 0, 2}
	}
	sub := filepath.Join(dir, name)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return nil, fmt.Errorf("otf2 archive: %w", err)
	}
	for _, p := range []string{name + ".otf2", name + ".def"} {
		if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("otf2 archive: replace %s: %w", p, err)
		}
	}
	old, _ := filepath.Glob(filepath.Join(sub, "*.evt"))
	olddefs, _ := filepath.Glob(filepath.Join(sub, "*.def"))
	for _, p := range append(old, olddefs...) {
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("otf2 archive: replace %s: %w", p, err)
		}
	}
	w := &Writer{dir: dir, name: name, opt: opt, locDefs: map[uint64]*chunkWriter{}, events: map[uint64]*chunkWriter{}}
	w.global = newChunkWriter(filepath.Join(dir, name+".def"), opt.ChunkSizeDefs, false)
	return w, nil
}

func (w *Writer) check(r *Record, c Class) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("otf2 archive: write after close")
	}
	if r.Spec != nil && r.Spec.class != c {
		return fmt.Errorf("otf2 archive: %s is a %s record, not a %s", r.Spec.Name, r.Spec.class, c)
	}
	if r.Spec == nil && LookupID(c, r.Type) != nil {
		return fmt.Errorf("otf2 archive: record %d without its type description", r.Type)
	}
	if r.Spec != nil && r.Type != r.Spec.ID {
		return fmt.Errorf("otf2 archive: %s record with type %d, not %d", r.Spec.Name, r.Type, r.Spec.ID)
	}
	return nil
}

// Global writes a global definition.
func (w *Writer) Global(r *Record) error {
	if err := w.check(r, GlobalDef); err != nil {
		return err
	}
	if err := w.global.add(r, nil, 0); err != nil {
		return w.fail(err)
	}
	w.globals++
	if r.Spec != nil && r.Spec.Name == "Location" {
		w.locations++
	}
	return nil
}

// LocalDef writes a local definition of a location (ClockOffset,
// MappingTable, ...).
func (w *Writer) LocalDef(loc uint64, r *Record) error {
	if err := w.check(r, LocalDef); err != nil {
		return err
	}
	return w.fail(w.localDefs(loc).add(r, nil, 0))
}

// TouchLocalDefs makes sure the location has a local definition file, even
// an empty one (libotf2 writes one per location that opened a writer).
func (w *Writer) TouchLocalDefs(loc uint64) { w.localDefs(loc) }

func (w *Writer) localDefs(loc uint64) *chunkWriter {
	c, ok := w.locDefs[loc]
	if !ok {
		c = newChunkWriter(filepath.Join(w.dir, w.name, strconv.FormatUint(loc, 10)+".def"), w.opt.ChunkSizeDefs, false)
		w.locDefs[loc] = c
	}
	return c
}

// Event writes an event of a location at r.Time with r.Attrs; a location's
// events come in non-decreasing time.
func (w *Writer) Event(loc uint64, r *Record) error {
	if err := w.check(r, Event); err != nil {
		return err
	}
	c, ok := w.events[loc]
	if !ok {
		c = newChunkWriter(filepath.Join(w.dir, w.name, strconv.FormatUint(loc, 10)+".evt"), w.opt.ChunkSizeEvents, true)
		w.events[loc] = c
	}
	if c.done {
		return fmt.Errorf("otf2 archive: event of location %d after its events were finished", loc)
	}
	if r.Time < c.time {
		return fmt.Errorf("otf2 archive: location %d: %s at %d after an event at %d (events must be in time order)", loc, r.Name(), r.Time, c.time)
	}
	return w.fail(c.add(r, r.Attrs, r.Time))
}

// FinishEvents completes a location's event file now (Close does it for
// the rest), freeing its buffer; the location gets an (empty) event file
// if it had no events.
func (w *Writer) FinishEvents(loc uint64) error {
	c, ok := w.events[loc]
	if !ok {
		c = newChunkWriter(filepath.Join(w.dir, w.name, strconv.FormatUint(loc, 10)+".evt"), w.opt.ChunkSizeEvents, true)
		w.events[loc] = c
	}
	return w.fail(c.finish())
}

// SetProperty sets an archive property ("NAMESPACE::NAME"); a second call
// for a name replaces its value.
func (w *Writer) SetProperty(name, value string) {
	for i := range w.props {
		if w.props[i].Name == name {
			w.props[i].Value = value
			return
		}
	}
	w.props = append(w.props, Property{name, value})
}

func (w *Writer) fail(err error) error {
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

// Close finishes every file and writes the anchor file last.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil {
		return w.err
	}
	for _, c := range w.events {
		if err := c.finish(); err != nil {
			return w.fail(err)
		}
	}
	for _, c := range w.locDefs {
		if err := c.finish(); err != nil {
			return w.fail(err)
		}
	}
	if err := w.global.finish(); err != nil {
		return w.fail(err)
	}
	return w.fail(w.writeAnchor())
}

// Abort gives up the archive, leaving what was written so far (no anchor file).
func (w *Writer) Abort() {
	w.closed = true
	if w.err == nil {
		w.err = errors.New("otf2 archive: aborted")
	}
}

func (w *Writer) writeAnchor() error {
	b := []byte{markChunkHeader, littleEndian}
	b = append(b, "OTF2\x00"...)
	b = append(b, 3, 2, w.opt.Version[0], w.opt.Version[1], w.opt.Version[2]) // anchor format, trace format, version
	b = putU64Full(b, w.opt.ChunkSizeEvents)
	b = putU64Full(b, w.opt.ChunkSizeDefs)
	b = append(b, 1, 1) // POSIX substrate, no compression
	b = putU64Full(b, w.locations)
	b = putU64Full(b, w.globals)
	for _, s := range []string{w.opt.Machine, w.opt.Creator, w.opt.Description} {
		b = append(append(b, s...), 0)
	}
	b = appendU32(b, uint32(len(w.props)))
	for _, p := range w.props {
		b = append(append(b, p.Name...), 0)
		b = append(append(b, p.Value...), 0)
	}
	id := w.opt.TraceID
	if id == 0 {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%s %d %d", w.dir, w.name, time.Now().UnixNano(), os.Getpid())
		h.Write(b)
		id = h.Sum64()
	}
	b = putU64Full(b, id)
	b = appendU32(b, 0) // snapshots
	b = appendU32(b, 0) // thumbnails
	b = append(b, markEndOfFile, markEndOfBuffer, markEndOfChunk)
	path := filepath.Join(w.dir, w.name+".otf2")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("otf2 archive: %w", err)
	}
	return nil
}

func appendU32(b []byte, v uint32) []byte {
	return append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
}

// chunkWriter fills one file's chunks as libotf2's buffer does: a chunk
// header, records, zeros to the chunk's end; the last chunk ends with the
// end-of-file and end-of-buffer markers and is not padded.
type chunkWriter struct {
	path     string
	size     uint64
	events   bool
	buf      []byte
	created  bool
	time     uint64 // last timestamp written
	count    uint64 // events so far
	done     bool
	scratch  []byte
	attrsBuf []byte
}

func newChunkWriter(path string, size uint64, events bool) *chunkWriter {
	c := &chunkWriter{path: path, size: size, events: events}
	c.header()
	return c
}

func (c *chunkWriter) header() {
	c.buf = append(c.buf[:0], markChunkHeader, littleEndian)
	c.buf = putU64Full(c.buf, c.count+1) // first event number
	c.buf = putU64Full(c.buf, 0)         // last, set when the chunk is complete
}

func (c *chunkWriter) setLast() {
	if c.events {
		for i := 0; i < 8; i++ {
			c.buf[10+i] = byte(c.count >> (8 * i))
		}
	}
}

func (c *chunkWriter) write(data []byte) error {
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if c.created {
		flag = os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(c.path, flag, 0o644)
	if err != nil {
		return fmt.Errorf("otf2 archive: %w", err)
	}
	c.created = true
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("otf2 archive: write %s: %w", c.path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("otf2 archive: write %s: %w", c.path, err)
	}
	return nil
}

// add appends a record (with its attribute list and, for events, the
// timestamp record it needs), starting a new chunk when libotf2 would.
func (c *chunkWriter) add(r *Record, attrs []Attr, t uint64) error {
	if c.done {
		return fmt.Errorf("otf2 archive: %s: record after the end of the file", c.path)
	}
	var err error
	c.attrsBuf = c.attrsBuf[:0]
	if len(attrs) > 0 {
		if c.attrsBuf, err = appendAttrs(c.attrsBuf, attrs); err != nil {
			return fmt.Errorf("otf2 archive: %s: %s: %w", c.path, r.Name(), err)
		}
	}
	if c.scratch, err = appendRecord(c.scratch[:0], r, c.events); err != nil {
		return fmt.Errorf("otf2 archive: %s: %w", c.path, err)
	}
	// libotf2's bound: type byte, length, data, attribute list, timestamp;
	// a record goes to a new chunk unless it fits with a byte to spare.
	need := uint64(len(c.scratch))
	if r.Spec != nil {
		d := estimate(r.Spec.Fields, r.Fields, c.events)
		need = 1 + d
		if !r.Spec.Singleton {
			need++
			if d >= math.MaxUint8 {
				need += 8
			}
		}
	}
	need = max(need+attrListSize(len(attrs)), uint64(len(c.scratch)+len(c.attrsBuf)))
	if c.events {
		need += 9
	}
	if need >= c.size-uint64(len(c.buf)) {
		c.setLast()
		for uint64(len(c.buf)) < c.size {
			c.buf = append(c.buf, markEndOfChunk)
		}
		if err := c.write(c.buf); err != nil {
			return err
		}
		c.header()
		if c.events {
			c.buf = append(c.buf, markTimestamp)
			c.buf = putU64Full(c.buf, t)
			c.time = t
		}
		if need >= c.size-uint64(len(c.buf)) {
			return fmt.Errorf("otf2 archive: %s: %s of up to %d bytes does not fit a chunk of %d", c.path, r.Name(), need, c.size)
		}
	}
	if c.events {
		if t > c.time || t == 0 && c.time == 0 {
			c.buf = append(c.buf, markTimestamp)
			c.buf = putU64Full(c.buf, t)
			c.time = t
		}
		c.count++
	}
	c.buf = append(c.buf, c.attrsBuf...)
	c.buf = append(c.buf, c.scratch...)
	return nil
}

func (c *chunkWriter) finish() error {
	if c.done {
		return nil
	}
	c.done = true
	c.buf = append(c.buf, markEndOfFile, markEndOfBuffer)
	c.setLast()
	err := c.write(c.buf)
	c.buf = nil
	return err
}
