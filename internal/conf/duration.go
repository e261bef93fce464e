package conf

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration is a time span in nanoseconds, written in YAML and JSON with its
// unit, as a Go duration string ("250ms", "16s", "1h30m", "1.5us"). A bare
// number is refused: the unit is part of the value.
type Duration time.Duration

// D is the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes d as a duration string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// UnmarshalYAML parses a duration with a unit; a bad one is a
// *DurationError naming the line (yaml's decoder does not say which field
// it was filling: FieldAt finds it, and Decode names it itself).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &DurationError{Line: n.Line, Column: n.Column, Msg: "want a duration such as 250ms, got a " + kindName(n.Kind)}
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return &DurationError{Line: n.Line, Column: n.Column, Msg: err.Error()}
	}
	*d = v
	return nil
}

// DurationError is a bad duration met by UnmarshalYAML: where it is and
// what is wrong. Field is empty until the caller fills it (FieldAt).
type DurationError struct {
	Line, Column int
	Field        string // the field path, sync.stale_after
	Msg          string
}

// Error formats "line N: field: msg".
func (e *DurationError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d: %s: %s", e.Line, e.Field, e.Msg)
}

// FieldAt returns the field path (sync.stale_after, peers[1].address) of
// the value at line and column of the YAML tree root, or "".
func FieldAt(root *yaml.Node, line, column int) string {
	var walk func(n *yaml.Node, path string) string
	walk = func(n *yaml.Node, path string) string {
		if n == nil {
			return ""
		}
		if n.Line == line && n.Column == column && n.Kind != yaml.DocumentNode {
			return path
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if p := walk(c, path); p != "" {
					return p
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
				if f := walk(n.Content[i+1], p); f != "" {
					return f
				}
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				if p := walk(c, fmt.Sprintf("%s[%d]", path, i)); p != "" {
					return p
				}
			}
		}
		return ""
	}
	return walk(root, "")
}

// ParseDuration parses a Go duration string with its unit ("250ms").
func ParseDuration(s string) (Duration, error) {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a number with a unit (ns, us, ms, s, m, h), e.g. 250ms or 1h30m", s)
	}
	return Duration(v), nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "sequence"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	default:
		return "scalar"
	}
}
