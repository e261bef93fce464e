package engineconf

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

var durationType = reflect.TypeFor[Duration]()

// Decode walks a YAML node into v (a pointer), by the yaml tags of v's
// struct fields; path is the node's field path ("" at the top, "engine"
// for a section) for the messages. Unlike yaml's own decoder it rejects
// unknown fields and fields given twice, and names the field path and
// line in every error. It fills structs, pointers, slices, strings,
// bools, ints, uints, floats and Duration.
func Decode(n *yaml.Node, path string, v any) error {
	return decodeValue(n, path, reflect.ValueOf(v).Elem())
}

func where(path string, n *yaml.Node) string {
	if path == "" {
		path = "top level"
	}
	return fmt.Sprintf("%s, line %d", path, n.Line)
}

func decodeValue(n *yaml.Node, path string, v reflect.Value) error {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if v.Type() == durationType {
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("want a duration such as 10ms (%s)", where(path, n))
		}
		d, err := ParseDuration(n.Value)
		if err != nil {
			return fmt.Errorf("bad %w (%s)", err, where(path, n))
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			v.SetZero()
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := decodeValue(n, path, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("want a mapping of fields (%s)", where(path, n))
		}
		t := v.Type()
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			fp := k.Value
			if path != "" {
				fp = path + "." + k.Value
			}
			if seen[k.Value] {
				return fmt.Errorf("field given twice (%s)", where(fp, k))
			}
			seen[k.Value] = true
			idx := -1
			var names []string
			for j := 0; j < t.NumField(); j++ {
				tag, _, _ := strings.Cut(t.Field(j).Tag.Get("yaml"), ",")
				if tag == "" || tag == "-" {
					continue
				}
				names = append(names, tag)
				if tag == k.Value {
					idx = j
				}
			}
			if idx < 0 {
				return fmt.Errorf("unknown field %q (%s; known: %s)", k.Value, where(fp, k), strings.Join(names, ", "))
			}
			if err := decodeValue(val, fp, v.Field(idx)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			v.SetZero()
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return fmt.Errorf("want a list (%s)", where(path, n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			if err := decodeValue(e, fmt.Sprintf("%s[%d]", path, i), s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint32, reflect.Uint64, reflect.Float64:
		if n.Kind != yaml.ScalarNode {
			return fmt.Errorf("want a single %s value (%s)", v.Kind(), where(path, n))
		}
		p := reflect.New(v.Type())
		if err := n.Decode(p.Interface()); err != nil {
			return fmt.Errorf("bad %s %q (%s): %w", v.Kind(), n.Value, where(path, n), err)
		}
		v.Set(p.Elem())
		return nil
	}
	return fmt.Errorf("cannot decode into %s (%s)", v.Type(), where(path, n))
}
