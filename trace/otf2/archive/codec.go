package archive

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Buffer markers (OTF2_Buffer.h).
const (
	markEndOfChunk  = 0
	markEndOfBuffer = 1
	markEndOfFile   = 2
	markChunkHeader = 3
	markTimestamp   = 5
	markAttrList    = 6

	littleEndian = 0x42
	bigEndian    = 0x23
)

// ---- encoding (always little endian, as libotf2 writes on x86 and arm64) ----

func putU64Full(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// putCompressed writes v in OTF2's compressed form: a length byte and the
// low-order bytes; 0 and the all-ones value of the width as a single byte.
func putCompressed(b []byte, v uint64, width int) []byte {
	if v == 0 {
		return append(b, 0)
	}
	if width == 4 && v == math.MaxUint32 || width == 8 && v == math.MaxUint64 {
		return append(b, 0xff)
	}
	n := 1
	for n < width && v>>(8*n) != 0 {
		n++
	}
	b = append(b, byte(n))
	for i := 0; i < n; i++ {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

// putSigned writes a compressed signed value: negative ones in full width.
func putSigned(b []byte, v int64, width int) []byte {
	if v == 0 {
		return append(b, 0)
	}
	n := width
	if v > 0 {
		n = 1
		for n < width && uint64(v)>>(8*n) != 0 {
			n++
		}
	}
	b = append(b, byte(n))
	for i := 0; i < n; i++ {
		b = append(b, byte(uint64(v)>>(8*i)))
	}
	return b
}

func putValue(b []byte, t FieldType, v Value) ([]byte, error) {
	switch t {
	case Uint8, Int8:
		return append(b, byte(v.U)), nil
	case Uint16, Int16:
		return binary.LittleEndian.AppendUint16(b, uint16(v.U)), nil
	case Uint32:
		return putCompressed(b, uint64(uint32(v.U)), 4), nil
	case Uint64, MetricValue:
		return putCompressed(b, v.U, 8), nil
	case Int32:
		return putSigned(b, int64(int32(v.U)), 4), nil
	case Int64:
		return putSigned(b, int64(v.U), 8), nil
	case Float:
		return binary.LittleEndian.AppendUint32(b, uint32(v.U)), nil
	case Double, Timestamp:
		return putU64Full(b, v.U), nil
	case String:
		for i := 0; i < len(v.S); i++ {
			if v.S[i] == 0 {
				return b, fmt.Errorf("string %q has a NUL byte", v.S)
			}
		}
		return append(append(b, v.S...), 0), nil
	case IdMap:
		if v.Map == nil {
			return b, fmt.Errorf("id map missing")
		}
		n := uint64(len(v.Map.Items))
		if v.Map.Mode == 1 {
			if n%2 != 0 {
				return b, fmt.Errorf("sparse id map with an odd number of items")
			}
			n /= 2
		}
		b = putCompressed(b, n, 8)
		b = append(b, v.Map.Mode)
		for _, x := range v.Map.Items {
			b = putCompressed(b, x, 8)
		}
		return b, nil
	}
	return b, fmt.Errorf("field type %s", t)
}

// encodeFields appends the fields' values; typ is the last OTF2_Type value,
// which decides how an AttributeValue is encoded.
func encodeFields(b []byte, fields []Field, vals []Value, typ *uint8) ([]byte, error) {
	if len(vals) > len(fields) {
		return b, fmt.Errorf("%d values for %d fields", len(vals), len(fields))
	}
	var err error
	for i, v := range vals {
		f := fields[i]
		if f.Members != nil {
			n := uint64(len(v.Rows))
			if f.Type == Uint8 && n > math.MaxUint8 || n > math.MaxUint32 {
				return b, fmt.Errorf("%s: %d elements do not fit its %s count", f.Name, n, f.Type)
			}
			if b, err = putValue(b, f.Type, U(n)); err != nil {
				return b, err
			}
			for _, row := range v.Rows {
				if len(row) != len(f.Members) {
					return b, fmt.Errorf("%s: an element has %d values for %d members", f.Name, len(row), len(f.Members))
				}
				if b, err = encodeFields(b, f.Members, row, typ); err != nil {
					return b, err
				}
			}
			continue
		}
		t := f.Type
		if t == AttributeValue {
			if t = attrEncoding(*typ); t == 0 {
				return b, fmt.Errorf("%s: attribute value of unknown OTF2_Type %d", f.Name, *typ)
			}
		}
		if b, err = putValue(b, t, v); err != nil {
			return b, fmt.Errorf("%s: %w", f.Name, err)
		}
		if f.CType == "OTF2_Type" {
			*typ = uint8(v.U)
		}
	}
	return b, nil
}

// estimate is libotf2's upper bound of a record's data size, which decides
// whether its length takes one byte or nine: event writers count every
// compressed field at its largest, definition writers at its actual size.
func estimate(fields []Field, vals []Value, event bool) uint64 {
	var n uint64
	for i, v := range vals {
		f := fields[i]
		n += fieldSize(f.Type, v, event)
		if f.Members != nil {
			for _, row := range v.Rows {
				n += estimate(f.Members, row, event)
			}
		}
	}
	return n
}

func fieldSize(t FieldType, v Value, event bool) uint64 {
	switch t {
	case Uint8, Int8:
		return 1
	case Uint16, Int16:
		return 2
	case Float:
		return 4
	case Double, Timestamp:
		return 8
	case String:
		return uint64(len(v.S)) + 1
	case AttributeValue:
		return 9
	case IdMap:
		b, _ := putValue(nil, IdMap, v)
		return uint64(len(b))
	}
	if event {
		if t == Uint32 || t == Int32 {
			return 5
		}
		return 9
	}
	var b []byte
	switch t {
	case Uint32:
		b = putCompressed(b, uint64(uint32(v.U)), 4)
	case Int32:
		b = putSigned(b, int64(int32(v.U)), 4)
	case Int64:
		b = putSigned(b, int64(v.U), 8)
	default:
		b = putCompressed(b, v.U, 8)
	}
	return uint64(len(b))
}

// appendRecord appends the record (type, length, fields); est is the
// estimated data size (see estimate), singleton records have no length.
func appendRecord(b []byte, r *Record, event bool) ([]byte, error) {
	if r.Spec == nil {
		b = append(b, r.Type)
		b = appendLength(b, uint64(len(r.Raw)), uint64(len(r.Raw)))
		return append(b, r.Raw...), nil
	}
	b = append(b, r.Spec.ID)
	var typ uint8
	if r.Spec.Singleton && len(r.Fields) == 1 {
		return encodeFields(b, r.Spec.Fields, r.Fields, &typ)
	}
	if r.Spec.Singleton {
		return b, fmt.Errorf("%s needs its one field", r.Spec.Name)
	}
	data, err := encodeFields(nil, r.Spec.Fields, r.Fields, &typ)
	if err != nil {
		return b, fmt.Errorf("%s: %w", r.Spec.Name, err)
	}
	est := estimate(r.Spec.Fields, r.Fields, event)
	b = appendLength(b, uint64(len(data)), est)
	return append(b, data...), nil
}

// appendLength writes a record length: one byte if the estimate is below
// 255, else 0xff and eight bytes.
func appendLength(b []byte, n, est uint64) []byte {
	if est < 0xff && n < 0xff {
		return append(b, byte(n))
	}
	return putU64Full(append(b, 0xff), n)
}

// appendAttrs appends an attribute list record.
func appendAttrs(b []byte, attrs []Attr) ([]byte, error) {
	var data []byte
	data = putCompressed(data, uint64(len(attrs)), 4)
	for _, a := range attrs {
		data = putCompressed(data, uint64(a.ID), 4)
		data = append(data, a.Type)
		t := attrEncoding(a.Type)
		if t == 0 {
			return b, fmt.Errorf("attribute %d of unknown OTF2_Type %d", a.ID, a.Type)
		}
		data, _ = putValue(data, t, Value{U: a.Value})
	}
	b = append(b, markAttrList)
	b = appendLength(b, uint64(len(data)), uint64(len(attrs))*15+5)
	return append(b, data...), nil
}

// attrListSize is libotf2's upper bound of an attribute list's size.
func attrListSize(n int) uint64 {
	if n == 0 {
		return 0
	}
	s := uint64(n)*15 + 5
	if s < 0xff {
		return s + 2
	}
	return s + 10
}

// ---- decoding ----

// decoder reads one chunk; errors are sticky.
type decoder struct {
	b     []byte
	pos   int
	be    bool
	err   error
	short bool // ran out of data
}

func (d *decoder) fail(format string, a ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, a...)
	}
}

func (d *decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	if n < 0 || len(d.b)-d.pos < n {
		d.short = true
		d.fail("need %d bytes, %d left", n, len(d.b)-d.pos)
		return false
	}
	return true
}

func (d *decoder) u8() uint8 {
	if !d.need(1) {
		return 0
	}
	d.pos++
	return d.b[d.pos-1]
}

func (d *decoder) fixed(n int) uint64 {
	if !d.need(n) {
		return 0
	}
	var v uint64
	p := d.b[d.pos : d.pos+n]
	d.pos += n
	for i := 0; i < n; i++ {
		if d.be {
			v = v<<8 | uint64(p[i])
		} else {
			v |= uint64(p[i]) << (8 * i)
		}
	}
	return v
}

func (d *decoder) compressed(width int) uint64 {
	n := int(d.u8())
	switch {
	case d.err != nil:
		return 0
	case n == 0:
		return 0
	case n == 0xff && width == 4:
		return math.MaxUint32
	case n == 0xff:
		return math.MaxUint64
	case n > width:
		d.fail("invalid compressed length %d for a %d-byte value", n, width)
		return 0
	}
	return d.fixed(n)
}

func (d *decoder) str() string {
	if d.err != nil {
		return ""
	}
	for i := d.pos; i < len(d.b); i++ {
		if d.b[i] == 0 {
			s := string(d.b[d.pos:i])
			d.pos = i + 1
			return s
		}
	}
	d.short = true
	d.fail("string without its terminating NUL")
	return ""
}

func (d *decoder) value(t FieldType) Value {
	switch t {
	case Uint8:
		return U(uint64(d.u8()))
	case Int8: // signed values sign-extended, so that Value.Int works
		return I(int64(int8(d.u8())))
	case Uint16:
		return U(d.fixed(2))
	case Int16:
		return I(int64(int16(d.fixed(2))))
	case Uint32:
		return U(d.compressed(4))
	case Int32:
		return I(int64(int32(d.compressed(4))))
	case Uint64, Int64, MetricValue:
		return U(d.compressed(8))
	case Float:
		return U(d.fixed(4))
	case Double, Timestamp:
		return U(d.fixed(8))
	case String:
		return S(d.str())
	case IdMap:
		n := d.compressed(8)
		mode := d.u8()
		if mode > 1 {
			d.fail("id map of unknown mode %d", mode)
			return Value{}
		}
		items := n
		if mode == 1 {
			items = 2 * n
		}
		if d.err != nil || items > uint64(len(d.b)-d.pos) || mode == 1 && n > math.MaxUint64/2 {
			d.fail("id map of %d entries in %d bytes", n, len(d.b)-d.pos)
			return Value{}
		}
		m := &Map{Mode: mode, Items: make([]uint64, items)}
		for i := range m.Items {
			m.Items[i] = d.compressed(8)
		}
		return Value{Map: m}
	}
	d.fail("field type %s", t)
	return Value{}
}

// fields decodes fields of a record whose data ends at end; fields added
// after the record's own version are absent when the data ends before them.
func (d *decoder) fields(fields []Field, since Version, end int, typ *uint8) []Value {
	vals := make([]Value, 0, len(fields))
	for i, f := range fields {
		if d.err != nil {
			return nil
		}
		if since.less(f.Since) && (i == 0 || fields[i-1].Since != f.Since) && d.pos >= end {
			break
		}
		if f.Members != nil {
			n := d.value(f.Type).U
			if d.err == nil && n > uint64(end-d.pos) {
				d.fail("%s: %d elements in %d bytes", f.Name, n, end-d.pos)
			}
			if d.err != nil {
				return nil
			}
			v := Value{Rows: make([][]Value, n)}
			for j := range v.Rows {
				v.Rows[j] = d.fields(f.Members, f.Since, end, typ)
			}
			vals = append(vals, v)
			continue
		}
		t := f.Type
		if t == AttributeValue {
			if t = attrEncoding(*typ); t == 0 {
				d.fail("%s: attribute value of unknown OTF2_Type %d", f.Name, *typ)
				return nil
			}
		}
		v := d.value(t)
		if f.CType == "OTF2_Type" {
			*typ = uint8(v.U)
		}
		vals = append(vals, v)
		if d.pos > end {
			d.fail("%s runs past the record's end", f.Name)
		}
	}
	return vals
}

// length reads a record length.
func (d *decoder) length() int {
	n := uint64(d.u8())
	if n == 0xff {
		n = d.fixed(8)
	}
	if d.err == nil && n > uint64(len(d.b)-d.pos) {
		d.short = true
		d.fail("record length %d, %d bytes left in the chunk", n, len(d.b)-d.pos)
	}
	return int(n)
}

// record decodes the record of type id (already read) of class c.
func (d *decoder) record(c Class, id uint8) Record {
	s := LookupID(c, id)
	var typ uint8
	if s != nil && s.Singleton {
		return Record{Spec: s, Type: id, Fields: d.fields(s.Fields, s.Since, len(d.b), &typ)}
	}
	n := d.length()
	if d.err != nil {
		return Record{}
	}
	end := d.pos + n
	if s == nil {
		r := Record{Type: id, Raw: append([]byte(nil), d.b[d.pos:end]...)}
		d.pos = end
		return r
	}
	r := Record{Spec: s, Type: id, Fields: d.fields(s.Fields, s.Since, end, &typ)}
	if d.err == nil && d.pos > end {
		d.fail("record data runs %d bytes past its length %d", d.pos-end, n)
	}
	d.pos = end // skip what a newer OTF2 added
	return r
}

// attrs decodes an attribute list (its marker already read).
func (d *decoder) attrs() []Attr {
	n := d.length()
	end := d.pos + n
	count := d.compressed(4)
	if d.err == nil && count > uint64(n) {
		d.fail("attribute list of %d entries in %d bytes", count, n)
	}
	if d.err != nil {
		return nil
	}
	out := make([]Attr, 0, count)
	for i := uint64(0); i < count && d.err == nil; i++ {
		id := uint32(d.compressed(4))
		t := d.u8()
		enc := attrEncoding(t)
		if d.err == nil && enc == 0 {
			d.fail("attribute %d of unknown OTF2_Type %d", id, t)
		}
		v := d.value(enc)
		out = append(out, Attr{ID: id, Type: t, Value: v.U})
	}
	if d.err == nil && d.pos > end {
		d.fail("attribute list runs past its length")
	}
	d.pos = end
	return out
}
