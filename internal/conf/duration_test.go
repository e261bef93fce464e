package conf

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// Duration's UnmarshalYAML, for yaml's own decoder, gives the line and a
// hint; Marshal writes the unit.
func TestDurationYAMLAndJSON(t *testing.T) {
	var v struct {
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 250ms\n"), &v); err != nil || v.D != Duration(250*time.Millisecond) {
		t.Fatalf("250ms: %v, %v", v.D, err)
	}
	for _, in := range []string{"x: 1\nd: 120\n", "x: 1\nd: [1s]\n"} {
		var w struct {
			X int      `yaml:"x"`
			D Duration `yaml:"d"`
		}
		err := yaml.Unmarshal([]byte(in), &w)
		if err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: error %v, want one naming line 2", in, err)
		}
	}
	// The error is a *FieldError with the line.
	err := yaml.Unmarshal([]byte("a: 1\nd: 9\n"), &v)
	if fe, ok := errors.AsType[*FieldError](err); !ok || fe.Line != 2 || !errors.Is(err, ErrConfig) {
		t.Fatalf("error %v, want a *FieldError on line 2 wrapping ErrConfig", err)
	}
	out, err := yaml.Marshal(v)
	if err != nil || !bytes.Equal(out, []byte("d: 250ms\n")) {
		t.Errorf("MarshalYAML: %q, %v", out, err)
	}
	j, err := json.Marshal(v)
	if err != nil || string(j) != `{"D":"250ms"}` {
		t.Errorf("MarshalJSON: %s, %v", j, err)
	}
}

func TestParseDuration(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Duration
		ok   bool
	}{
		{"500ms", Duration(500 * time.Millisecond), true},
		{"2s", Duration(2 * time.Second), true},
		{" 1h30m ", Duration(90 * time.Minute), true},
		{"1.5us", Duration(1500), true},
		{"-1ns", -1, true},
		{"0", 0, true}, // Go accepts a bare 0
		{"120", 0, false},
		{"2 s", 0, false},
		{"", 0, false},
		{"10 minutes", 0, false},
	} {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "unit") {
			t.Errorf("ParseDuration(%q) error %q gives no hint about the unit", tt.in, err)
		}
	}
}
