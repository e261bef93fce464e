package archive

import (
	"os"
	"path/filepath"
	"testing"
)

// seeds returns the files of a small archive with every record type.
func seeds(f *testing.F) map[string][]byte {
	dir := f.TempDir()
	out := map[string][]byte{}
	w, err := Create(dir, "traces", Options{ChunkSizeEvents: 512, ChunkSizeDefs: 512})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range Specs(GlobalDef) {
		r := &Record{Spec: s, Type: s.ID, Fields: make([]Value, len(s.Fields))}
		for i, fl := range s.Fields {
			if fl.Members != nil {
				row := make([]Value, len(fl.Members))
				for j, m := range fl.Members {
					if m.CType == "OTF2_Type" {
						row[j] = U(uint64(TypeUint64))
					}
				}
				r.Fields[i] = Array(row)
			}
			if fl.Type == IdMap {
				r.Fields[i] = Value{Map: &Map{Items: []uint64{1, 2}}}
			}
			if fl.CType == "OTF2_Type" {
				r.Fields[i] = U(uint64(TypeUint64))
			}
		}
		if err := w.Global(r); err != nil {
			f.Fatal(err)
		}
	}
	if err := w.Event(0, MustRecord(Event, "Enter", 3, U(1))); err != nil {
		f.Fatal(err)
	}
	ev := MustRecord(Event, "Metric", 4, U(2), Array([]Value{U(uint64(TypeDouble)), F(1.5)}))
	ev.Attrs = []Attr{{ID: 1, Type: TypeInt64, Value: 1 << 63}, {ID: 2, Type: TypeString, Value: 7}}
	if err := w.Event(0, ev); err != nil {
		f.Fatal(err)
	}
	if err := w.LocalDef(0, MustRecord(LocalDef, "ClockOffset", 0, U(5), I(-3), F(0.25))); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	for _, name := range []string{"traces.otf2", "traces.def", "traces/0.evt", "traces/0.def"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			f.Fatal(err)
		}
		out[name] = b
	}
	return out
}

// FuzzChunk decodes arbitrary bytes as a chunk of each file class: errors,
// never a panic or a hang.
func FuzzChunk(f *testing.F) {
	for _, b := range seeds(f) {
		for len(b) > 512 {
			f.Add(b[:512])
			b = b[512:]
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []Class{Event, GlobalDef, LocalDef} {
			a := &Archive{}
			n := 0
			_, _, err := a.readChunk("fuzz", 0, b, true, c, 0, func(r *Record) error {
				n++
				// What was read writes back.
				if _, err := appendRecord(nil, r, c == Event); err != nil && r.Spec != nil && !r.Spec.Singleton {
					t.Fatalf("%s read but not written back: %v", r.String(), err)
				}
				return nil
			})
			if err != nil {
				if _, ok := err.(*FormatError); !ok {
					t.Fatalf("error %v is not a FormatError", err)
				}
			}
		}
	})
}

// FuzzAnchor reads arbitrary bytes as an anchor file.
func FuzzAnchor(f *testing.F) {
	f.Add(seeds(f)["traces.otf2"])
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "traces.otf2")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		a := &Archive{}
		if err := a.readAnchor(path); err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error %v is not a FormatError", err)
			}
		}
	})
}
