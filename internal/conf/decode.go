package conf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxBytes is the largest YAML document accepted: 1 MiB. The largest
// file gclock reads is a daemon config listing every peer of a big
// cluster (an explicit topology of 10000 nodes is about 300 KB); yaml's
// parser holds the whole tree, some 100 bytes per value, so a bigger
// limit would let a file alone take hundreds of MB.
const MaxBytes = 1 << 20

// MaxAliasValues is how many values aliases may expand to in one
// document, counting every value reached through an alias each time it is
// used. A configuration reuses an anchored section a few times (a few
// thousand values); an alias bomb (aliases of lists of aliases) expands
// exponentially and stops here, in milliseconds, instead of taking
// gigabytes.
const MaxAliasValues = 100_000

// ReadFile reads a configuration file of at most MaxBytes.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxBytes {
		return nil, &FieldError{Msg: fmt.Sprintf("%s: more than %d bytes, the most a configuration may have", path, MaxBytes)}
	}
	return data, nil
}

// Parse parses one YAML document of at most MaxBytes and returns its top
// node (nil for an empty document). A second document is refused.
func Parse(data []byte) (*yaml.Node, error) {
	if len(data) > MaxBytes {
		return nil, &FieldError{Msg: fmt.Sprintf("document of %d bytes: more than %d, the most a configuration may have", len(data), MaxBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, &FieldError{Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			line = 0
		}
		return nil, &FieldError{Line: line, Msg: "more than one YAML document (one configuration per file)"}
	}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	return &doc, nil
}

// Unmarshal parses data (Parse) and decodes it into v (Decode), over v's
// current values. It returns the top node, for LineOf and AddLines (nil
// for an empty document, which leaves v as it was).
func Unmarshal(data []byte, v any) (*yaml.Node, error) {
	root, err := Parse(data)
	if err != nil || root == nil {
		return root, err
	}
	return root, Decode(root, "", v)
}

var durationType = reflect.TypeFor[Duration]()

// Unmarshaler is a value that decodes itself from its node instead of
// being walked field by field: a section that must read one key before
// the others (engineconf.Config reads profile: first, then the keys
// written beside it over the profile's). path is the node's field path;
// the method decodes the rest with Decode and returns *FieldErrors.
type Unmarshaler interface {
	UnmarshalConf(n *yaml.Node, path string) error
}

// Decode walks a YAML node into v (a pointer), by the yaml tags of v's
// struct fields, over v's current values: a field the node does not name
// keeps its value, a list in the node replaces the list in v, null
// empties a list or a pointer and leaves anything else as it was (as
// yaml's own decoder does). path is the node's field path ("" at the top,
// "engine" for a section) for the messages.
//
// Unlike yaml's own decoder it refuses unknown fields and fields given
// twice, names the field path and line in every error (a *FieldError), and
// caps what aliases may expand to (MaxAliasValues). It fills structs,
// pointers, slices, arrays, strings, bools, integers, floats and Duration;
// merge keys (<<: *anchor) merge a mapping's fields.
func Decode(n *yaml.Node, path string, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("conf: Decode into %T: want a non-nil pointer", v)
	}
	d := decoder{}
	if err := d.value(n, path, rv.Elem()); err != nil {
		d.errs = append(d.errs, err)
	}
	return errors.Join(d.errs...)
}

type decoder struct {
	aliased   int  // values decoded through aliases
	aliasLine int  // line of the outermost alias being expanded (0: none)
	fatal     bool // an alias bomb: stop at once, report nothing more
	// errs are the bad fields found so far: a mapping's fields are all
	// decoded, each bad one reported, so that a file's errors come at once.
	errs []error
}

func bad(path string, n *yaml.Node, format string, args ...any) error {
	return &FieldError{Field: path, Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

func (d *decoder) value(n *yaml.Node, path string, v reflect.Value) error {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return bad(path, n, "alias to nothing")
		}
		if d.aliasLine == 0 {
			d.aliasLine = n.Line
			defer func() { d.aliasLine = 0 }()
		}
		n = n.Alias
	}
	if d.aliasLine > 0 {
		if d.aliased++; d.aliased > MaxAliasValues {
			d.fatal = true
			return &FieldError{Field: path, Line: d.aliasLine,
				Msg: fmt.Sprintf("aliases expand to more than %d values (an alias bomb?): write the values out", MaxAliasValues)}
		}
	}
	if isNull(n) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			v.SetZero()
		}
		return nil
	}
	if v.CanAddr() {
		if u, ok := v.Addr().Interface().(Unmarshaler); ok {
			return u.UnmarshalConf(n, path)
		}
	}
	if v.Type() == durationType {
		dur, err := durationOf(n)
		if err != nil {
			return bad(path, n, "%v", err)
		}
		v.SetInt(int64(dur))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if err := d.value(n, path, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		return d.fields(n, path, v)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return bad(path, n, "want a list, got a %s", kindName(n.Kind))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			if err := d.value(e, fmt.Sprintf("%s[%d]", path, i), s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Array:
		if n.Kind != yaml.SequenceNode || len(n.Content) != v.Len() {
			return bad(path, n, "want a list of %d values", v.Len())
		}
		for i, e := range n.Content {
			if err := d.value(e, fmt.Sprintf("%s[%d]", path, i), v.Index(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if n.Kind != yaml.ScalarNode {
			return bad(path, n, "want a single %s value, got a %s", v.Kind(), kindName(n.Kind))
		}
		p := reflect.New(v.Type())
		if err := n.Decode(p.Interface()); err != nil {
			return bad(path, n, "%s, got %q", wantScalar(v.Type()), n.Value)
		}
		v.Set(p.Elem())
		return nil
	}
	return bad(path, n, "cannot decode into %s", v.Type())
}

// wantScalar says in words what a scalar field takes.
func wantScalar(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "want true or false"
	case reflect.Int, reflect.Int64:
		return "want a whole number"
	case reflect.Int8, reflect.Int16, reflect.Int32:
		return fmt.Sprintf("want a whole number in %d..%d", int64(-1)<<(t.Bits()-1), int64(1)<<(t.Bits()-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("want a whole number in 0..%d", uint64(1)<<t.Bits()-1)
	case reflect.Float32, reflect.Float64:
		return "want a number"
	}
	return "want a " + t.Kind().String()
}

// fields decodes a mapping into a struct: merged mappings first (the
// struct's own keys override them), then its own keys.
func (d *decoder) fields(n *yaml.Node, path string, v reflect.Value) error {
	if n.Kind != yaml.MappingNode {
		return bad(path, n, "want a mapping of fields, got a %s", kindName(n.Kind))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.ShortTag() != "!!merge" {
			continue
		}
		merged := []*yaml.Node{val}
		if val.Kind == yaml.SequenceNode {
			merged = val.Content
		}
		// The first of a list of merges wins: decode it last.
		for j := len(merged) - 1; j >= 0; j-- {
			m := merged[j]
			if m.Kind == yaml.AliasNode && m.Alias != nil && m.Alias.Kind != yaml.MappingNode ||
				m.Kind != yaml.AliasNode && m.Kind != yaml.MappingNode {
				return bad(path, m, "a merge (<<) takes a mapping or a list of mappings")
			}
			if err := d.value(m, path, v); err != nil {
				return err
			}
		}
	}
	t := v.Type()
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.ShortTag() == "!!merge" {
			continue
		}
		fp := k.Value
		if path != "" {
			fp = path + "." + k.Value
		}
		if k.Kind != yaml.ScalarNode {
			return bad(path, k, "a field name must be a plain word, got a %s", kindName(k.Kind))
		}
		if seen[k.Value] {
			d.errs = append(d.errs, bad(fp, k, "given twice"))
			continue
		}
		seen[k.Value] = true
		idx := -1
		var names []string
		for j := 0; j < t.NumField(); j++ {
			tag, _, _ := strings.Cut(t.Field(j).Tag.Get("yaml"), ",")
			if tag == "" || tag == "-" || !t.Field(j).IsExported() {
				continue
			}
			names = append(names, tag)
			if tag == k.Value {
				idx = j
			}
		}
		if idx < 0 {
			d.errs = append(d.errs, bad(fp, k, "unknown field %q (known: %s)", k.Value, strings.Join(names, ", ")))
			continue
		}
		if err := d.value(val, fp, v.Field(idx)); err != nil {
			if d.fatal {
				return err
			}
			d.errs = append(d.errs, err) // and go on: every bad field at once
		}
	}
	return nil
}

// AddLines fills in the line of every *FieldError in err (joins walked
// down) that has none, from the YAML tree root: the line of its field, or
// of the nearest enclosing field in the file.
func AddLines(err error, root *yaml.Node) {
	if err == nil || root == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			AddLines(e, root)
		}
		return
	}
	if fe, ok := errors.AsType[*FieldError](err); ok && fe.Line == 0 {
		for path := fe.Field; path != ""; path = parentPath(path) {
			if l := LineOf(root, path); l > 0 {
				fe.Line = l
				break
			}
		}
	}
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// LineOf is the line of a field path such as peers[1].address in the YAML
// tree root (0: not in the file).
func LineOf(root *yaml.Node, path string) int {
	n := root
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, part := range splitPath(path) {
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch {
		case part.index >= 0:
			if n.Kind != yaml.SequenceNode || part.index >= len(n.Content) {
				return 0
			}
			n = n.Content[part.index]
			line = n.Line
		default:
			if n.Kind != yaml.MappingNode {
				return 0
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == part.key {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return 0
			}
		}
	}
	return line
}

type pathPart struct {
	key   string
	index int // -1 for a key
}

func splitPath(p string) []pathPart {
	var out []pathPart
	for _, seg := range strings.Split(p, ".") {
		key, rest, _ := strings.Cut(seg, "[")
		if key != "" {
			out = append(out, pathPart{key: key, index: -1})
		}
		for rest != "" {
			num, after, _ := strings.Cut(rest, "]")
			var i int
			if _, err := fmt.Sscanf(num, "%d", &i); err != nil || i < 0 {
				return out
			}
			out = append(out, pathPart{index: i})
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return out
}

// Field is the value of key in the mapping root (an alias followed), or
// nil: how a tool reads one section of a bigger file (measure reads the
// clock: section of a daemon config) without knowing the others.
func Field(root *yaml.Node, key string) *yaml.Node {
	if root == nil || root.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == key {
			if v := root.Content[i+1]; v.Kind == yaml.AliasNode {
				return v.Alias
			}
			return root.Content[i+1]
		}
	}
	return nil
}
