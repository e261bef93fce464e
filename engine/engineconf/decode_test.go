package engineconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type section struct {
	Engine Config   `yaml:"engine"`
	Seed   uint64   `yaml:"seed"`
	ID     uint32   `yaml:"id"`
	List   []int    `yaml:"list"`
	Opt    *float64 `yaml:"opt"`
}

func decodeString(t testing.TB, s string) (section, error) {
	t.Helper()
	v := section{Engine: Default()}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return v, err
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		return v, Decode(doc.Content[0], "", &v)
	}
	return v, Decode(&doc, "", &v)
}

func TestDecode(t *testing.T) {
	v, err := decodeString(t, "engine:\n  estimator: hull\n  stale_after: 90s\n  hull_min_delay: 2us\nseed: 7\nid: 3\nlist: [1, 2]\nopt: 0.5\n")
	if err != nil {
		t.Fatal(err)
	}
	if v.Engine.Estimator != "hull" || v.Engine.StaleAfter != Duration(90*time.Second) || v.Engine.HullMinDelay != Duration(2*time.Microsecond) ||
		v.Seed != 7 || v.ID != 3 || len(v.List) != 2 || v.Opt == nil || *v.Opt != 0.5 {
		t.Errorf("decoded %+v", v)
	}
	if v.Engine.PingsPerRound != Default().PingsPerRound {
		t.Errorf("pings_per_round %d: an absent key must keep its default", v.Engine.PingsPerRound)
	}
}

func TestDecodeErrorsNameFieldAndLine(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "engine:\n  estimator: hull\n  colour: red\n", []string{"unknown field \"colour\"", "engine.colour, line 3", "known: estimator"}},
		{"twice", "engine:\n  window: 4\n  window: 8\n", []string{"given twice", "engine.window, line 3"}},
		{"bare number", "engine:\n  stale_after: 120\n", []string{"bad duration \"120\"", "unit", "engine.stale_after, line 2"}},
		{"duration mapping", "engine:\n  probe_timeout: {a: 1}\n", []string{"want a duration", "engine.probe_timeout, line 2"}},
		{"not a number", "engine:\n  pings_per_round: three\n", []string{"bad int", "engine.pings_per_round, line 2"}},
		{"section a list", "engine: [1]\n", []string{"want a mapping", "engine, line 1"}},
		{"list a scalar", "list: 3\n", []string{"want a list", "list, line 1"}},
		{"negative uint", "id: -1\n", []string{"bad uint32", "id, line 1"}},
		{"top a scalar", "3\n", []string{"top level, line 1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeString(t, tt.yaml)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// The daemon decodes with yaml's own decoder: Duration's UnmarshalYAML
// gives the line and a hint.
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
	// The error is a *DurationError, and FieldAt finds its field.
	src := "a:\n  b:\n    - {x: 1, d: 9}\n  c: 10\n"
	var w struct {
		A struct {
			B []struct {
				X int      `yaml:"x"`
				D Duration `yaml:"d"`
			} `yaml:"b"`
			C Duration `yaml:"c"`
		} `yaml:"a"`
	}
	err := yaml.Unmarshal([]byte(src), &w)
	var de *DurationError
	if !errors.As(err, &de) || de.Line != 3 {
		t.Fatalf("error %v, want a *DurationError on line 3", err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(src), &root); err != nil {
		t.Fatal(err)
	}
	if f := FieldAt(&root, de.Line, de.Column); f != "a.b[0].d" {
		t.Errorf("FieldAt(line 3, column %d) = %q, want a.b[0].d", de.Column, f)
	}
	de.Field = "a.b[0].d"
	if !strings.HasPrefix(de.Error(), `line 3: a.b[0].d: duration "9"`) {
		t.Errorf("Error() = %q", de.Error())
	}
	if f := FieldAt(&root, 4, 6); f != "a.c" {
		t.Errorf("FieldAt(4, 6) = %q, want a.c", f)
	}
	if f := FieldAt(&root, 9, 1); f != "" {
		t.Errorf("FieldAt past the end = %q", f)
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

// FuzzDecode: any YAML gives a value or an error naming a line; a value
// that decodes and validates converts to an engine.Config the engine
// accepts.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"engine:\n  estimator: hull\n  stale_after: 90s\n",
		"engine:\n  window: 0\n  max_concurrent_rounds: 0\n  hull_max_span: -1ns\n",
		"engine: &a\n  adaptive: false\nlist: [1, 2, 3]\nopt: ~\n",
		"engine:\n  pings_per_round: 1e3\n  max_drift_ppm: .nan\n",
		"seed: 18446744073709551615\nid: 4294967296\n",
		"engine:\n  probe_timeout: 9223372036854775807ns\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := decodeString(t, s)
		if err != nil {
			if strings.Contains(err.Error(), "line") || strings.HasPrefix(err.Error(), "yaml:") {
				return
			}
			t.Fatalf("error without a line: %v", err)
		}
		if v.Engine.Validate() != nil {
			return
		}
		if _, err := v.Engine.ToEngine(); err != nil {
			t.Fatalf("valid keys %+v, but the engine refuses them: %v", v.Engine, err)
		}
	})
}
