package archive

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FormatError is a malformed or truncated archive file: which file, where
// and in what.
type FormatError struct {
	File   string
	Offset int64  // byte offset in File
	What   string // the record or part being read
	Err    error
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("otf2 archive: %s: offset %d: %s: %v", e.File, e.Offset, e.What, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// ErrTruncated is wrapped by the FormatError of a file that ends early.
var ErrTruncated = errors.New("file ends before its end-of-file marker (truncated)")

// Property is an archive property of the anchor file.
type Property struct{ Name, Value string }

// Anchor is what the anchor file (NAME.otf2) holds.
type Anchor struct {
	AnchorFormat, TraceFormat uint8
	Version                   [3]uint8 // the OTF2 version that wrote the archive
	ChunkSizeEvents           uint64
	ChunkSizeDefs             uint64
	Substrate, Compression    uint8
	NumLocations              uint64
	NumGlobalDefs             uint64
	Machine, Creator          string
	Description               string
	Properties                []Property
	TraceID                   uint64
	Snapshots, Thumbnails     uint32
}

// Archive is an opened OTF2 archive: its anchor and global definitions.
type Archive struct {
	Anchor
	Dir, Name string   // the archive is Dir/Name.otf2, Dir/Name.def, Dir/Name/
	Global    []Record // the global definitions, in file order
	Locations []uint64 // the Location definitions' ids, in definition order
	// Unknown counts the records of types this package does not know
	// (a newer OTF2) read so far; they are kept with Spec nil.
	Unknown int
}

// Open reads the anchor file at path (DIR/NAME.otf2) and the global
// definitions.
func Open(path string) (*Archive, error) {
	dir, base := filepath.Split(path)
	name, ok := strings.CutSuffix(base, ".otf2")
	if !ok {
		return nil, fmt.Errorf("otf2 archive: %s: not an anchor file (NAME.otf2)", path)
	}
	if dir == "" {
		dir = "."
	}
	a := &Archive{Dir: filepath.Clean(dir), Name: name}
	if err := a.readAnchor(path); err != nil {
		return nil, err
	}
	err := a.readFile(filepath.Join(a.Dir, name+".def"), GlobalDef, a.ChunkSizeDefs, false, func(r *Record) error {
		a.Global = append(a.Global, *r)
		if r.Spec != nil && r.Spec.Name == "Location" {
			a.Locations = append(a.Locations, r.Uint("self"))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Property returns the archive property's value.
func (a *Archive) Property(name string) (string, bool) {
	for _, p := range a.Properties {
		if p.Name == name {
			return p.Value, true
		}
	}
	return "", false
}

// LocalDefsPath and EventsPath name a location's files.
func (a *Archive) LocalDefsPath(loc uint64) string {
	return filepath.Join(a.Dir, a.Name, strconv.FormatUint(loc, 10)+".def")
}

// EventsPath names a location's event file.
func (a *Archive) EventsPath(loc uint64) string {
	return filepath.Join(a.Dir, a.Name, strconv.FormatUint(loc, 10)+".evt")
}

// LocalDefs reads a location's local definitions (ClockOffset,
// MappingTable, ...); none if the location has no such file.
func (a *Archive) LocalDefs(loc uint64) ([]Record, error) {
	var out []Record
	err := a.readFile(a.LocalDefsPath(loc), LocalDef, a.ChunkSizeDefs, true, func(r *Record) error {
		out = append(out, *r)
		return nil
	})
	return out, err
}

// Events reads a location's events; none if it has no event file.
func (a *Archive) Events(loc uint64) ([]Record, error) {
	var out []Record
	err := a.EachEvent(loc, func(r *Record) error {
		out = append(out, *r)
		return nil
	})
	return out, err
}

// EachEvent calls fn for each of a location's events in file order, one
// chunk in memory at a time; an error from fn stops it and is returned.
// The record passed is fn's to keep.
func (a *Archive) EachEvent(loc uint64, fn func(*Record) error) error {
	return a.readFile(a.EventsPath(loc), Event, a.ChunkSizeEvents, true, fn)
}

func (a *Archive) readAnchor(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("otf2 archive: %w", err)
	}
	d := &decoder{b: b}
	what := "chunk header"
	fail := func(err error) error {
		if d.short {
			err = fmt.Errorf("%w (%v)", ErrTruncated, err)
		}
		return &FormatError{File: path, Offset: int64(d.pos), What: "anchor file: " + what, Err: err}
	}
	if d.u8() != markChunkHeader {
		return fail(errors.New("no chunk header"))
	}
	switch d.u8() {
	case littleEndian:
	case bigEndian:
		d.be = true
	default:
		if d.err == nil {
			return fail(errors.New("invalid endianness byte"))
		}
	}
	what = "magic"
	if m := d.str(); d.err == nil && m != "OTF2" {
		return fail(fmt.Errorf("magic %q, not OTF2", m))
	}
	what = "header"
	an := &a.Anchor
	an.AnchorFormat = d.u8()
	if d.err == nil && an.AnchorFormat == 0 {
		return fail(errors.New("anchor format 0"))
	}
	an.TraceFormat = d.u8()
	an.Version = [3]uint8{d.u8(), d.u8(), d.u8()}
	an.ChunkSizeEvents, an.ChunkSizeDefs = d.fixed(8), d.fixed(8)
	an.Substrate, an.Compression = d.u8(), d.u8()
	an.NumLocations, an.NumGlobalDefs = d.fixed(8), d.fixed(8)
	what = "machine, creator, description"
	an.Machine, an.Creator, an.Description = d.str(), d.str(), d.str()
	if d.err == nil && (an.ChunkSizeEvents < 256 || an.ChunkSizeDefs < 256 || an.ChunkSizeEvents > 1<<34 || an.ChunkSizeDefs > 1<<34) {
		return fail(fmt.Errorf("chunk sizes %d and %d out of range", an.ChunkSizeEvents, an.ChunkSizeDefs))
	}
	if an.Compression > 1 && d.err == nil {
		return fail(fmt.Errorf("compression %d not supported (only none)", an.Compression))
	}
	if an.AnchorFormat > 1 {
		what = "properties"
		n := d.fixed(4)
		if d.err == nil && n > uint64(len(b)) {
			return fail(fmt.Errorf("%d properties in %d bytes", n, len(b)))
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			p := Property{Name: d.str()}
			p.Value = d.str()
			an.Properties = append(an.Properties, p)
		}
		what = "trace id"
		an.TraceID = d.fixed(8)
	}
	if an.AnchorFormat > 2 {
		what = "snapshots and thumbnails"
		an.Snapshots, an.Thumbnails = uint32(d.fixed(4)), uint32(d.fixed(4))
	}
	if an.AnchorFormat == 3 {
		what = "end of file"
		if m := d.u8(); d.err == nil && m != markEndOfFile {
			return fail(fmt.Errorf("byte %d, not the end-of-file marker", m))
		}
	}
	if d.err != nil {
		return fail(d.err)
	}
	return nil
}

// readFile reads the records of a chunked file; a missing file is empty if
// optional.
func (a *Archive) readFile(path string, c Class, chunkSize uint64, optional bool, fn func(*Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		if optional && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("otf2 archive: %w", err)
	}
	defer f.Close()
	buf := make([]byte, chunkSize)
	var off int64
	var time uint64
	for {
		n, err := io.ReadFull(f, buf)
		if err == io.EOF {
			return &FormatError{File: path, Offset: off, What: "chunk header", Err: ErrTruncated}
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			return fmt.Errorf("otf2 archive: %w", err)
		}
		done, t, err := a.readChunk(path, off, buf[:n], uint64(n) < chunkSize, c, time, fn)
		if err != nil || done {
			return err
		}
		time = t
		if uint64(n) < chunkSize {
			return &FormatError{File: path, Offset: off + int64(n), What: "end of chunk", Err: ErrTruncated}
		}
		off += int64(n)
	}
}

// readChunk reads one chunk at file offset off (partial: the file's last,
// shorter than a chunk): done when it held the end-of-file marker.
func (a *Archive) readChunk(path string, off int64, b []byte, partial bool, c Class, time uint64, fn func(*Record) error) (done bool, t uint64, err error) {
	d := &decoder{b: b}
	what := "chunk header"
	start := 0
	fail := func() error {
		e := d.err
		if partial && d.short {
			e = fmt.Errorf("%w (%v)", ErrTruncated, e)
		}
		return &FormatError{File: path, Offset: off + int64(start), What: what, Err: e}
	}
	if m := d.u8(); d.err == nil && m != markChunkHeader {
		d.fail("byte %d, not a chunk header", m)
	}
	switch e := d.u8(); {
	case d.err != nil:
	case e == bigEndian:
		d.be = true
	case e != littleEndian:
		d.fail("invalid endianness byte %#x", e)
	}
	d.fixed(8) // first and last event numbers (also in definition files since OTF2 3.0)
	d.fixed(8)
	if d.err != nil {
		return false, 0, fail()
	}
	var attrs []Attr
	for {
		start = d.pos
		what = "record type"
		m := d.u8()
		if d.err != nil {
			return false, 0, fail()
		}
		switch {
		case m == markEndOfChunk:
			if attrs != nil {
				what = "attribute list"
				d.fail("attribute list without its event")
				return false, 0, fail()
			}
			return false, time, nil
		case m == markEndOfFile:
			if attrs != nil {
				what = "attribute list"
				d.fail("attribute list without its event")
				return false, 0, fail()
			}
			return true, time, nil
		case m == markEndOfBuffer || m == markChunkHeader || m == 4:
			d.fail("unexpected buffer marker %d", m)
			return false, 0, fail()
		case c == Event && m == markTimestamp:
			what = "timestamp"
			t := d.fixed(8)
			if d.err != nil {
				return false, 0, fail()
			}
			time = t
			continue
		case c == Event && m == markAttrList:
			what = "attribute list"
			if attrs != nil {
				d.fail("two attribute lists for one event")
			}
			attrs = d.attrs()
			if d.err != nil {
				return false, 0, fail()
			}
			continue
		}
		what = c.String() + " record " + strconv.Itoa(int(m))
		if s := LookupID(c, m); s != nil {
			what = s.Name + " record"
		}
		r := d.record(c, m)
		if d.err != nil {
			return false, 0, fail()
		}
		if r.Spec == nil {
			a.Unknown++
		}
		if c == Event {
			r.Time, r.Attrs = time, attrs
		}
		attrs = nil
		if err := fn(&r); err != nil {
			return false, 0, err
		}
	}
}
