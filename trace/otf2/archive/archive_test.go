package archive

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var edges32 = []uint64{0, 1, 0x7f, 0xff, 0x100, 0xffff, 0x10000, 0xffffff, 0x1000000, math.MaxUint32 - 1, math.MaxUint32}
var edges64 = []uint64{0, 1, 0xff, 0x100, 0xffffffff, 1 << 32, 1<<40 - 1, 1 << 48, 1<<56 - 1, 1 << 56, math.MaxUint64 - 1, math.MaxUint64}
var strs = []string{"", "a", "MPI_COMM_WORLD", "héllo wörld ✓ 時間 🕐", strings.Repeat("long ", 80)}

// sample makes a value of the field; typ is the record's last OTF2_Type.
func sample(f Field, rnd *rand.Rand, typ *uint8) Value {
	if f.Members != nil {
		v := Value{Rows: make([][]Value, rnd.IntN(4))}
		for i := range v.Rows {
			row := make([]Value, len(f.Members))
			for j, m := range f.Members {
				row[j] = sample(m, rnd, typ)
			}
			v.Rows[i] = row
		}
		return v
	}
	t := f.Type
	if f.CType == "OTF2_Type" {
		x := uint8(1 + rnd.IntN(25))
		*typ = x
		return U(uint64(x))
	}
	if t == AttributeValue {
		t = attrEncoding(*typ)
	}
	return sampleOf(t, rnd)
}

func sampleOf(t FieldType, rnd *rand.Rand) Value {
	switch t {
	case Uint8:
		return U(uint64(rnd.IntN(256)))
	case Int8:
		return I(int64(int8(rnd.IntN(256))))
	case Uint16:
		return U(uint64(rnd.IntN(65536)))
	case Int16:
		return I(int64(int16(rnd.IntN(65536))))
	case Uint32:
		return U(edges32[rnd.IntN(len(edges32))])
	case Int32:
		return I(int64(int32(edges32[rnd.IntN(len(edges32))])))
	case Uint64, MetricValue, Int64, Timestamp:
		return U(edges64[rnd.IntN(len(edges64))])
	case Float:
		return F32(float32(rnd.NormFloat64()))
	case Double:
		return F(rnd.NormFloat64() * 1e6)
	case String:
		return S(strs[rnd.IntN(len(strs))])
	case IdMap:
		m := &Map{Mode: uint8(rnd.IntN(2))}
		for range 2 * rnd.IntN(4) {
			m.Items = append(m.Items, edges64[rnd.IntN(len(edges64))])
		}
		return Value{Map: m}
	}
	panic("sample of " + t.String())
}

func sampleRecord(s *Spec, rnd *rand.Rand) *Record {
	r := &Record{Spec: s, Type: s.ID, Fields: make([]Value, len(s.Fields))}
	var typ uint8
	for i, f := range s.Fields {
		r.Fields[i] = sample(f, rnd, &typ)
	}
	return r
}

func sampleAttrs(rnd *rand.Rand) []Attr {
	out := make([]Attr, rnd.IntN(4))
	for i := range out {
		t := uint8(1 + rnd.IntN(25))
		out[i] = Attr{ID: uint32(edges32[rnd.IntN(len(edges32))]), Type: t, Value: sampleOf(attrEncoding(t), rnd).U}
		switch attrEncoding(t) {
		case Uint32, Float:
			out[i].Value &= math.MaxUint32
		case Uint8:
			out[i].Value &= 0xff
		case Uint16:
			out[i].Value &= 0xffff
		}
	}
	return out
}

// written is an archive's content as written.
type written struct {
	global []*Record
	local  map[uint64][]*Record
	events map[uint64][]*Record
	locs   []uint64
}

// writeEverything writes every record type of the table (with sampled
// values) into an archive, plus n extra events per location.
func writeEverything(t *testing.T, dir string, opt Options, n int) *written {
	t.Helper()
	rnd := rand.New(rand.NewPCG(1, 2))
	w, err := Create(dir, "traces", opt)
	if err != nil {
		t.Fatal(err)
	}
	want := &written{local: map[uint64][]*Record{}, events: map[uint64][]*Record{}, locs: []uint64{0, 7, math.MaxUint64 - 1}}
	for _, s := range Specs(GlobalDef) {
		r := sampleRecord(s, rnd)
		if s.Name == "Location" {
			continue
		}
		want.global = append(want.global, r)
	}
	for i, loc := range want.locs {
		r := MustRecord(GlobalDef, "Location", 0, U(loc), U(uint64(i)), U(1), U(0), U(0))
		want.global = append(want.global, r)
	}
	for _, r := range want.global {
		if err := w.Global(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, loc := range want.locs {
		for _, s := range Specs(LocalDef) {
			r := sampleRecord(s, rnd)
			want.local[loc] = append(want.local[loc], r)
			if err := w.LocalDef(loc, r); err != nil {
				t.Fatal(err)
			}
		}
		var now uint64
		if loc == 7 {
			now = math.MaxUint64 - uint64(n)*1000 - 1e6 // times near the top of the range
		}
		emit := func(r *Record) {
			r.Time = now
			now += uint64(rnd.IntN(3))
			r.Attrs = sampleAttrs(rnd)
			want.events[loc] = append(want.events[loc], r)
			if err := w.Event(loc, r); err != nil {
				t.Fatal(err)
			}
		}
		for _, s := range Specs(Event) {
			emit(sampleRecord(s, rnd))
		}
		for i := range n {
			emit(MustRecord(Event, "Enter", 0, U(uint64(i%7))))
			emit(MustRecord(Event, "MpiIsend", 0, U(1), U(0), U(uint64(i)), U(uint64(i)*1000), U(math.MaxUint64-uint64(i))))
			emit(MustRecord(Event, "Leave", 0, U(uint64(i%7))))
		}
	}
	for _, p := range []Property{{"GCLOCK::A", "1"}, {"GCLOCK::UTF8", "zeit ✓"}, {"GCLOCK::A", "2"}} {
		w.SetProperty(p.Name, p.Value)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

func compare(t *testing.T, what string, got []Record, want []*Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: read %d records, wrote %d", what, len(got), len(want))
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			t.Fatalf("%s: record %d:\nread  %s\nwrote %s", what, i, got[i].String(), want[i].String())
		}
	}
}

func TestRoundTripEveryRecord(t *testing.T) {
	for _, chunk := range []uint64{4096, 1 << 20} {
		dir := t.TempDir()
		want := writeEverything(t, dir, Options{ChunkSizeEvents: chunk, ChunkSizeDefs: chunk, Creator: "gclock test"}, 2000)
		a, err := Open(filepath.Join(dir, "traces.otf2"))
		if err != nil {
			t.Fatal(err)
		}
		if a.Creator != "gclock test" || a.NumGlobalDefs != uint64(len(want.global)) || a.NumLocations != 3 || a.Unknown != 0 {
			t.Errorf("anchor %+v", a.Anchor)
		}
		if len(a.Properties) != 2 || a.Properties[0] != (Property{"GCLOCK::A", "2"}) || a.Properties[1].Value != "zeit ✓" {
			t.Errorf("properties %v", a.Properties)
		}
		compare(t, "global definitions", a.Global, want.global)
		if len(a.Locations) != 3 || a.Locations[2] != math.MaxUint64-1 {
			t.Errorf("locations %v", a.Locations)
		}
		for _, loc := range want.locs {
			defs, err := a.LocalDefs(loc)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "local definitions", defs, want.local[loc])
			ev, err := a.Events(loc)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "events", ev, want.events[loc])
		}
		st, err := os.Stat(a.EventsPath(0))
		if err != nil {
			t.Fatal(err)
		}
		if chunk == 4096 && st.Size() < 10*4096 {
			t.Errorf("event file of %d bytes: expected many chunks", st.Size())
		}
	}
}

func TestCompressed(t *testing.T) {
	for _, c := range []struct {
		t    FieldType
		v    uint64
		want string
	}{
		{Uint32, 0, "00"}, {Uint32, 1, "0101"}, {Uint32, 0xff, "01ff"}, {Uint32, 0x100, "020001"},
		{Uint32, math.MaxUint32, "ff"}, {Uint32, math.MaxUint32 - 1, "04feffffff"},
		{Uint64, math.MaxUint64, "ff"}, {Uint64, 1 << 56, "080000000000000001"}, {Uint64, math.MaxUint32, "04ffffffff"},
		{Int64, uint64(1<<64 - 1), "08ffffffffffffffff"}, {Int64, 5, "0105"}, {Int32, uint64(1<<64 - 2), "04feffffff"},
		{Timestamp, 1, "0100000000000000"},
	} {
		b, err := putValue(nil, c.t, U(c.v))
		if err != nil {
			t.Fatal(err)
		}
		if got := hex(b); got != c.want {
			t.Errorf("%s %#x: encoded %s, want %s", c.t, c.v, got, c.want)
		}
		d := &decoder{b: b}
		if got := d.value(c.t); got.U != c.v || d.err != nil || d.pos != len(b) {
			t.Errorf("%s %s: decoded %#x (%v), want %#x", c.t, c.want, got.U, d.err, c.v)
		}
	}
	// Big-endian chunks store the low-order bytes most significant first.
	d := &decoder{b: []byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 5}, be: true}
	if v := d.compressed(4); v != 0x100 {
		t.Errorf("big endian compressed: %#x", v)
	}
	if v := d.fixed(8); v != 5 {
		t.Errorf("big endian fixed: %#x", v)
	}
}

func hex(b []byte) string {
	const digits = "0123456789abcdef"
	var s strings.Builder
	for _, x := range b {
		s.WriteByte(digits[x>>4])
		s.WriteByte(digits[x&15])
	}
	return s.String()
}

func TestNewRecordChecks(t *testing.T) {
	if _, err := NewRecord(Event, "Enter", 0); err == nil {
		t.Error("Enter without its region accepted")
	}
	if _, err := NewRecord(Event, "NoSuch", 0); err == nil {
		t.Error("unknown record accepted")
	}
	if _, err := NewRecord(GlobalDef, "Group", 0, U(0), U(1), U(5)); err == nil {
		t.Error("Group without members accepted")
	}
	if _, err := NewRecord(GlobalDef, "MetricClass", 0, U(0), Array([]Value{U(1), U(2)}), U(0), U(0)); err == nil {
		t.Error("metric class element of two values accepted")
	}
	r := MustRecord(GlobalDef, "Region", 0, U(3), U(1), U(2), U(0), U(0), U(0), U(1), U(15), U(4), U(0))
	if r.Uint("regionType") != 22 || r.Uint("regionRole") != 15 || r.Uint("paradigm") != 4 {
		t.Errorf("region %s: attic regionType should be MPI_COLL_BARRIER (22)", r)
	}
	g := MustRecord(GlobalDef, "Group", 0, U(0), U(1), Array([]Value{U(0)}, []Value{U(1)}), U(4), U(4), U(0))
	if g.Uint("groupTypePre12") != 6 {
		t.Errorf("group %s: attic type should be MPI_LOCATIONS (6)", g)
	}
}

// TestTruncated cuts the files of an archive at many offsets: every cut is
// an error that names the file, never a panic or silent loss.
func TestTruncated(t *testing.T) {
	dir := t.TempDir()
	writeEverything(t, dir, Options{ChunkSizeEvents: 4096, ChunkSizeDefs: 4096}, 300)
	for _, name := range []string{"traces.otf2", "traces.def", "traces/7.evt", "traces/7.def"} {
		path := filepath.Join(dir, name)
		full, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		step := max(1, len(full)/300)
		// The bytes after the end-of-file marker (end of buffer, of chunk) are not needed.
		tail := 1
		if name == "traces.otf2" {
			tail = 2
		}
		for cut := 0; cut < len(full)-tail; cut += step {
			if err := os.WriteFile(path, full[:cut], 0o644); err != nil {
				t.Fatal(err)
			}
			err := readAll(filepath.Join(dir, "traces.otf2"))
			var fe *FormatError
			if err == nil || !strings.Contains(err.Error(), name) && !strings.Contains(err.Error(), filepath.Base(name)) {
				t.Fatalf("%s cut at %d of %d: err %v, want an error naming the file", name, cut, len(full), err)
			}
			if cut > 0 && !errors.As(err, &fe) {
				t.Fatalf("%s cut at %d: %v is not a FormatError", name, cut, err)
			}
		}
		if err := os.WriteFile(path, full, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := readAll(filepath.Join(dir, "traces.otf2")); err != nil {
		t.Fatal(err)
	}
}

func readAll(path string) error {
	a, err := Open(path)
	if err != nil {
		return err
	}
	for _, loc := range a.Locations {
		if _, err := a.LocalDefs(loc); err != nil {
			return err
		}
		if _, err := a.Events(loc); err != nil {
			return err
		}
	}
	return nil
}

// TestUnknownRecords: records of types a newer OTF2 adds are skipped by
// their length, counted and written back unchanged; fields a newer OTF2
// appends to a known record are skipped.
func TestUnknownRecords(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(dir, "traces", Options{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Global(MustRecord(GlobalDef, "Location", 0, U(0), U(0), U(1), U(3), U(0))))
	must(w.Event(0, MustRecord(Event, "Enter", 5, U(1))))
	must(w.Event(0, &Record{Type: 200, Time: 6, Raw: []byte{1, 2, 3}, Attrs: []Attr{{ID: 1, Type: TypeUint8, Value: 9}}}))
	// A Leave record with a length byte and an extra field is not valid
	// (Leave is a singleton); an MpiSend with an extra byte is.
	send := MustRecord(Event, "MpiSend", 7, U(1), U(2), U(3), U(4))
	must(w.Event(0, send))
	must(w.Close())
	// Append a byte to MpiSend's data: patch the file.
	path := filepath.Join(dir, "traces", "0.evt")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), string([]byte{14, 8, 1, 1, 1, 2, 1, 3, 1, 4}))
	if i < 0 {
		t.Fatalf("MpiSend not found in %x", b)
	}
	b = append(b[:i:i], append([]byte{14, 9, 1, 1, 1, 2, 1, 3, 1, 4, 0x77}, b[i+10:]...)...)
	must(os.WriteFile(path, b, 0o644))
	a, err := Open(filepath.Join(dir, "traces.otf2"))
	must(err)
	ev, err := a.Events(0)
	must(err)
	if len(ev) != 3 || ev[1].Spec != nil || ev[1].Type != 200 || string(ev[1].Raw) != "\x01\x02\x03" || ev[1].Time != 6 || len(ev[1].Attrs) != 1 || a.Unknown != 1 {
		t.Fatalf("events %v, unknown %d", ev, a.Unknown)
	}
	if !ev[2].Equal(send) {
		t.Errorf("MpiSend with an appended field read as %s", ev[2].String())
	}
}

// TestCopyErrors: a hook's error and an event hook that breaks a
// location's time order stop Copy with an error naming the record.
func TestCopyErrors(t *testing.T) {
	dir := t.TempDir()
	writeEverything(t, dir, Options{}, 10)
	a, err := Open(filepath.Join(dir, "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	err = Copy(a, t.TempDir(), "out", Transform{LocalDef: func(loc uint64, r *Record) error {
		return errors.New("no offsets here")
	}})
	if err == nil || !strings.Contains(err.Error(), "no offsets here") || !strings.Contains(err.Error(), "of location 0") {
		t.Errorf("hook error: %v", err)
	}
	var n uint64
	err = Copy(a, t.TempDir(), "out", Transform{Event: func(loc uint64, r *Record) error {
		n++
		r.Time = 1000 - n // backwards
		return nil
	}})
	if err == nil || !strings.Contains(err.Error(), "time order") {
		t.Errorf("backwards times: %v", err)
	}
	out := t.TempDir()
	if err := Copy(a, out, "same", Transform{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"traces.def", "traces/7.evt", "traces/0.def"} {
		x, _ := os.ReadFile(filepath.Join(dir, f))
		y, _ := os.ReadFile(filepath.Join(out, strings.Replace(f, "traces", "same", 1)))
		if len(x) == 0 || string(x) != string(y) {
			t.Errorf("%s changed in an identity copy (%d and %d bytes)", f, len(x), len(y))
		}
	}
}
