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

// UnmarshalYAML parses a duration with a unit, for yaml's own decoder;
// a bad one is a *FieldError naming the line (yaml's decoder does not say
// which field it was filling; Decode names it).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := durationOf(n)
	if err != nil {
		return &FieldError{Line: n.Line, Msg: err.Error()}
	}
	*d = v
	return nil
}

func durationOf(n *yaml.Node) (Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("want a duration such as 250ms, got a %s", kindName(n.Kind))
	}
	return ParseDuration(n.Value)
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
