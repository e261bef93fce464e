package archive

//go:generate sh -c "python3 gen/gen.py ${OTF2_SHARE:-/usr/share/otf2} spec_gen.go"

import "fmt"

// FieldType is how a record field is encoded.
type FieldType uint8

// Field encodings (OTF2_Buffer's routines).
const (
	Uint8          FieldType = iota + 1 // 1 byte
	Uint16                              // 2 bytes
	Uint32                              // compressed: 0 and 0xff single bytes, else a length byte and 1-4 bytes
	Uint64                              // compressed, 1-8 bytes
	Int8                                // 1 byte
	Int16                               // 2 bytes
	Int32                               // compressed like Uint32 (negative: 4 bytes)
	Int64                               // compressed like Uint64 (negative: 8 bytes)
	Float                               // 4 bytes IEEE 754
	Double                              // 8 bytes IEEE 754
	Timestamp                           // 8 bytes, uncompressed
	MetricValue                         // compressed 64 bits (the type is a sibling field)
	String                              // NUL-terminated
	AttributeValue                      // encoded by the preceding OTF2_Type field
	IdMap                               // count, mode, ids
)

var fieldTypeNames = [...]string{"", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
	"float", "double", "timestamp", "metric value", "string", "attribute value", "id map"}

func (t FieldType) String() string {
	if int(t) < len(fieldTypeNames) && t > 0 {
		return fieldTypeNames[t]
	}
	return fmt.Sprintf("fieldtype(%d)", uint8(t))
}

// Version is an OTF2 version (major, minor): when a record or field appeared.
type Version struct{ Major, Minor uint8 }

func (v Version) less(w Version) bool {
	return v.Major < w.Major || v.Major == w.Major && v.Minor < w.Minor
}

// Field describes one field of a record.
type Field struct {
	Name  string
	Type  FieldType
	CType string  // the C type of the OTF2 API, e.g. OTF2_RegionRef, OTF2_Type
	Since Version // fields newer than their record are absent from older archives
	// Attic: the field was superseded in this version but is still written
	// (for older readers); zero if current.
	Attic Version
	// Members: for an array's count field, the fields of each element
	// (written interleaved, element by element).
	Members []Field
}

// Spec describes one record type.
type Spec struct {
	ID    uint8
	Name  string
	Since Version
	// Singleton events (OTF2 <= 1.1 records of one compressed field) carry
	// no record length.
	Singleton bool
	Fields    []Field
	class     Class
	index     map[string]int
}

// Class is the kind of file a record lives in.
type Class uint8

// Record classes.
const (
	Event     Class = iota + 1 // NAME/LOC.evt
	GlobalDef                  // NAME.def
	LocalDef                   // NAME/LOC.def
)

func (c Class) String() string {
	switch c {
	case Event:
		return "event"
	case GlobalDef:
		return "global definition"
	case LocalDef:
		return "local definition"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Class returns the file kind of the record type.
func (s *Spec) Class() Class { return s.class }

// FieldIndex returns the position of the named field in Fields, or -1.
func (s *Spec) FieldIndex(name string) int {
	if i, ok := s.index[name]; ok {
		return i
	}
	return -1
}

type specTable struct {
	byID   [256]*Spec
	byName map[string]*Spec
}

var tables [4]specTable

func init() {
	for c, list := range map[Class][]Spec{Event: eventSpecs, GlobalDef: globalDefSpecs, LocalDef: localDefSpecs} {
		t := &tables[c]
		t.byName = map[string]*Spec{}
		for i := range list {
			s := &list[i]
			s.class = c
			s.index = map[string]int{}
			for j, f := range s.Fields {
				s.index[f.Name] = j
			}
			t.byID[s.ID] = s
			t.byName[s.Name] = s
		}
	}
}

// Lookup returns the record type of class c named name (as in the OTF2
// specification: "Enter", "MpiIsend", "ClockProperties", ...), or nil.
func Lookup(c Class, name string) *Spec {
	if c < Event || c > LocalDef {
		return nil
	}
	return tables[c].byName[name]
}

// LookupID returns the record type of class c with the record id, or nil.
func LookupID(c Class, id uint8) *Spec {
	if c < Event || c > LocalDef {
		return nil
	}
	return tables[c].byID[id]
}

// Specs returns every record type of class c, by id.
func Specs(c Class) []*Spec {
	var out []*Spec
	if c < Event || c > LocalDef {
		return nil
	}
	for _, s := range tables[c].byID {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}
