package archive

import (
	"fmt"
	"math"
	"strings"
)

// Value is one field's value. Numbers of every width are in U (signed ones
// as two's complement, floats as their IEEE 754 bits, so that a value
// survives a read and write bit for bit); strings in S; an array's count
// field has one row of member values per element in Rows (its count is
// len(Rows)); an IdMap field has Map.
type Value struct {
	U    uint64
	S    string
	Rows [][]Value
	Map  *Map
}

// Map is an OTF2_IdMap: Mode 0 (dense) lists the global id of each local id
// 0, 1, ... in Items; mode 1 (sparse) lists local, global pairs.
type Map struct {
	Mode  uint8
	Items []uint64
}

// U returns an unsigned or reference value.
func U(x uint64) Value { return Value{U: x} }

// I returns a signed value.
func I(x int64) Value { return Value{U: uint64(x)} }

// F returns a Double value.
func F(x float64) Value { return Value{U: math.Float64bits(x)} }

// F32 returns a Float value.
func F32(x float32) Value { return Value{U: uint64(math.Float32bits(x))} }

// S returns a String value.
func S(s string) Value { return Value{S: s} }

// Array returns an array count field's value from its elements' member values.
func Array(rows ...[]Value) Value { return Value{Rows: rows} }

// Int returns the value as a signed integer.
func (v Value) Int() int64 { return int64(v.U) }

// Float returns a Double value.
func (v Value) Float() float64 { return math.Float64frombits(v.U) }

// Float32 returns a Float value.
func (v Value) Float32() float32 { return math.Float32frombits(uint32(v.U)) }

// Equal reports whether two values are the same, bit for bit.
func (v Value) Equal(w Value) bool {
	if v.U != w.U || v.S != w.S || len(v.Rows) != len(w.Rows) || (v.Map == nil) != (w.Map == nil) {
		return false
	}
	for i := range v.Rows {
		if len(v.Rows[i]) != len(w.Rows[i]) {
			return false
		}
		for j := range v.Rows[i] {
			if !v.Rows[i][j].Equal(w.Rows[i][j]) {
				return false
			}
		}
	}
	if v.Map != nil {
		if v.Map.Mode != w.Map.Mode || len(v.Map.Items) != len(w.Map.Items) {
			return false
		}
		for i := range v.Map.Items {
			if v.Map.Items[i] != w.Map.Items[i] {
				return false
			}
		}
	}
	return true
}

// OTF2_Type values: the types of attribute values.
const (
	TypeNone               uint8 = 0
	TypeUint8              uint8 = 1
	TypeUint16             uint8 = 2
	TypeUint32             uint8 = 3
	TypeUint64             uint8 = 4
	TypeInt8               uint8 = 5
	TypeInt16              uint8 = 6
	TypeInt32              uint8 = 7
	TypeInt64              uint8 = 8
	TypeFloat              uint8 = 9
	TypeDouble             uint8 = 10
	TypeString             uint8 = 11 // a String definition's id
	TypeAttribute          uint8 = 12
	TypeLocation           uint8 = 13 // 64 bits
	TypeRegion             uint8 = 14
	TypeGroup              uint8 = 15
	TypeMetric             uint8 = 16
	TypeComm               uint8 = 17
	TypeParameter          uint8 = 18
	TypeRmaWin             uint8 = 19
	TypeSourceCodeLocation uint8 = 20
	TypeCallingContext     uint8 = 21
	TypeInterruptGenerator uint8 = 22
	TypeIoFile             uint8 = 23
	TypeIoHandle           uint8 = 24
	TypeLocationGroup      uint8 = 25
)

// attrEncoding returns how a value of OTF2_Type t is encoded; 0 if unknown.
func attrEncoding(t uint8) FieldType {
	switch t {
	case TypeUint8:
		return Uint8
	case TypeUint16:
		return Uint16
	case TypeUint32:
		return Uint32
	case TypeUint64, TypeLocation:
		return Uint64
	case TypeInt8:
		return Int8
	case TypeInt16:
		return Int16
	case TypeInt32:
		return Int32
	case TypeInt64:
		return Int64
	case TypeFloat:
		return Float
	case TypeDouble:
		return Double
	}
	if t >= TypeString && t <= TypeLocationGroup {
		return Uint32
	}
	return 0
}

// Attr is one entry of an event's attribute list: the Attribute
// definition's id, the value's OTF2_Type and the value (as in Value.U).
type Attr struct {
	ID    uint32
	Type  uint8
	Value uint64
}

// Record is one record of any class. Fields follow Spec.Fields (the order
// on the wire), attic fields included; a record written by an older OTF2
// may lack the fields added since (Fields is then shorter). A record type
// this package does not know (a newer OTF2) has Spec nil, its id in Type
// and its payload in Raw, and is written back as it was read.
type Record struct {
	Spec   *Spec
	Type   uint8
	Time   uint64 // events only
	Fields []Value
	Attrs  []Attr // events only
	Raw    []byte
}

// Name returns the record type's name ("Enter", "ClockProperties", ...).
func (r *Record) Name() string {
	if r.Spec == nil {
		return fmt.Sprintf("unknown record %d", r.Type)
	}
	return r.Spec.Name
}

// Field returns the named field's value; ok false if the record has no such
// field (or an older archive lacks it).
func (r *Record) Field(name string) (Value, bool) {
	if r.Spec == nil {
		return Value{}, false
	}
	i := r.Spec.FieldIndex(name)
	if i < 0 || i >= len(r.Fields) {
		return Value{}, false
	}
	return r.Fields[i], true
}

// Uint returns the named numeric field, 0 if absent.
func (r *Record) Uint(name string) uint64 {
	v, _ := r.Field(name)
	return v.U
}

// Set replaces the named field's value.
func (r *Record) Set(name string, v Value) error {
	if r.Spec == nil {
		return fmt.Errorf("otf2 archive: set %s of %s: unknown record type", name, r.Name())
	}
	i := r.Spec.FieldIndex(name)
	if i < 0 || i >= len(r.Fields) {
		return fmt.Errorf("otf2 archive: %s has no field %s", r.Spec.Name, name)
	}
	r.Fields[i] = v
	return nil
}

// Attr returns the value of the attribute with definition id, if present.
func (r *Record) Attr(id uint32) (Attr, bool) {
	for _, a := range r.Attrs {
		if a.ID == id {
			return a, true
		}
	}
	return Attr{}, false
}

// Equal reports whether two records are the same, bit for bit.
func (r *Record) Equal(s *Record) bool {
	if r.Spec != s.Spec || r.Type != s.Type || r.Time != s.Time || len(r.Fields) != len(s.Fields) ||
		len(r.Attrs) != len(s.Attrs) || string(r.Raw) != string(s.Raw) {
		return false
	}
	for i := range r.Fields {
		if !r.Fields[i].Equal(s.Fields[i]) {
			return false
		}
	}
	for i := range r.Attrs {
		if r.Attrs[i] != s.Attrs[i] {
			return false
		}
	}
	return true
}

// String formats the record for messages and tests: name, time and fields.
func (r *Record) String() string {
	var b strings.Builder
	b.WriteString(r.Name())
	if r.Spec != nil && r.Spec.class == Event || r.Spec == nil && r.Time != 0 {
		fmt.Fprintf(&b, " @%d", r.Time)
	}
	if r.Spec == nil {
		fmt.Fprintf(&b, " %x", r.Raw)
	}
	for i, v := range r.Fields {
		f := r.Spec.Fields[i]
		fmt.Fprintf(&b, " %s=%s", f.Name, formatValue(f, v))
	}
	for _, a := range r.Attrs {
		fmt.Fprintf(&b, " attr%d(type %d)=%d", a.ID, a.Type, a.Value)
	}
	return b.String()
}

func formatValue(f Field, v Value) string {
	switch {
	case f.Members != nil:
		rows := make([]string, len(v.Rows))
		for i, row := range v.Rows {
			m := make([]string, len(row))
			for j, x := range row {
				m[j] = formatValue(f.Members[j], x)
			}
			rows[i] = strings.Join(m, ",")
		}
		return "[" + strings.Join(rows, " ") + "]"
	case f.Type == String:
		return fmt.Sprintf("%q", v.S)
	case f.Type == IdMap:
		if v.Map == nil {
			return "nil"
		}
		return fmt.Sprintf("map%d%v", v.Map.Mode, v.Map.Items)
	case f.Type == Double:
		return fmt.Sprint(v.Float())
	case f.Type == Float:
		return fmt.Sprint(v.Float32())
	case f.Type == Int8:
		return fmt.Sprint(int8(v.U))
	case f.Type == Int16:
		return fmt.Sprint(int16(v.U))
	case f.Type == Int32:
		return fmt.Sprint(int32(v.U))
	case f.Type == Int64:
		return fmt.Sprint(int64(v.U))
	}
	return fmt.Sprint(v.U)
}

// NewRecord builds a record of class c by type name from the values of its
// current fields in specification order (attic fields are left out and
// filled as libotf2 fills them); it checks the name, the number of values
// and that array values are arrays of the right width.
func NewRecord(c Class, name string, t uint64, vals ...Value) (*Record, error) {
	s := Lookup(c, name)
	if s == nil {
		return nil, fmt.Errorf("otf2 archive: no %s record named %q", c, name)
	}
	r := &Record{Spec: s, Type: s.ID, Time: t, Fields: make([]Value, len(s.Fields))}
	n := 0
	for i, f := range s.Fields {
		if f.Attic != (Version{}) {
			continue
		}
		if n >= len(vals) {
			return nil, fmt.Errorf("otf2 archive: %s needs %d values, got %d", name, current(s), len(vals))
		}
		v := vals[n]
		n++
		if f.Members != nil {
			for _, row := range v.Rows {
				if len(row) != len(f.Members) {
					return nil, fmt.Errorf("otf2 archive: %s.%s: an element needs %d values, got %d", name, f.Name, len(f.Members), len(row))
				}
			}
		} else if v.Rows != nil {
			return nil, fmt.Errorf("otf2 archive: %s.%s is not an array", name, f.Name)
		}
		if f.Type == IdMap && v.Map == nil {
			return nil, fmt.Errorf("otf2 archive: %s.%s needs an id map", name, f.Name)
		}
		r.Fields[i] = v
	}
	if n != len(vals) {
		return nil, fmt.Errorf("otf2 archive: %s needs %d values, got %d", name, current(s), len(vals))
	}
	fillAttic(r)
	return r, nil
}

// MustRecord is NewRecord for tables known to be right; it panics on error.
func MustRecord(c Class, name string, t uint64, vals ...Value) *Record {
	r, err := NewRecord(c, name, t, vals...)
	if err != nil {
		panic(err)
	}
	return r
}

func current(s *Spec) int {
	n := 0
	for _, f := range s.Fields {
		if f.Attic == (Version{}) {
			n++
		}
	}
	return n
}

// fillAttic sets the fields OTF2 keeps for older readers from the current
// ones, as libotf2 3.0's writers do.
func fillAttic(r *Record) {
	switch r.Spec.Name {
	case "Region":
		role, paradigm, flags := r.Uint("regionRole"), r.Uint("paradigm"), r.Uint("regionFlags")
		_ = r.Set("regionType", U(regionTypePre11(role, paradigm, flags)))
	case "Group":
		t, paradigm, flags := r.Uint("groupType"), r.Uint("paradigm"), r.Uint("groupFlags")
		var pre uint64
		switch {
		case paradigm == 0 && flags == 0 && t >= 1 && t <= 3: // locations, regions, metric
			pre = t
		case paradigm == 4 && flags == 0 && t == 4: // MPI comm locations
			pre = 6
		case paradigm == 4 && flags == 0 && t == 5: // MPI comm group
			pre = 4
		case paradigm == 4 && flags == 0 && t == 6: // MPI comm self
			pre = 5
		}
		_ = r.Set("groupTypePre12", U(pre))
	case "SystemTreeNodeProperty", "LocationGroupProperty", "LocationProperty":
		sv := uint64(math.MaxUint32) // OTF2_UNDEFINED_STRING
		if uint8(r.Uint("type")) == TypeString {
			sv = r.Uint("value")
		}
		_ = r.Set("stringValue", U(sv))
	}
}

// regionTypePre11 is OTF2_RegionType for a region's role, paradigm and
// flags, for the unknown, user, compiler and MPI paradigms; others get
// OTF2_REGION_TYPE_UNKNOWN, which readers since OTF2 1.1 ignore.
func regionTypePre11(role, paradigm, flags uint64) uint64 {
	const (
		roleFunction, roleLoop, roleCode, roleFileIO                   = 1, 3, 4, 27
		roleBarrier, roleOne2All, roleAll2One, roleAll2All, roleCollOt = 15, 23, 24, 25, 26
		flagDynamic, flagPhase                                         = 1, 2
	)
	switch paradigm {
	case 0, 2: // unknown, compiler
		if role == roleFunction {
			return 1
		}
	case 1: // user
		dyn, phase := flags&flagDynamic != 0, flags&flagPhase != 0
		switch role {
		case roleFunction:
			if dyn {
				return 31
			}
			return 3
		case roleFileIO:
			return 4
		case roleLoop:
			switch {
			case dyn && phase:
				return 32
			case dyn:
				return 30
			case !phase:
				return 2
			}
		case roleCode:
			switch {
			case dyn && phase:
				return 29
			case dyn:
				return 28
			case phase:
				return 27
			}
			return 1
		}
	case 4: // MPI
		switch role {
		case roleBarrier:
			return 22
		case roleOne2All:
			return 23
		case roleAll2One:
			return 24
		case roleAll2All:
			return 25
		case roleCollOt:
			return 26
		}
	}
	return 0
}
