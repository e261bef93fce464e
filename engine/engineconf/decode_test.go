package engineconf

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/conf"
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
	_, err := conf.Unmarshal([]byte(s), &v)
	return v, err
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
		{"unknown key", "engine:\n  estimator: hull\n  colour: red\n", []string{"unknown field \"colour\"", "line 3: engine.colour", "known: profile, estimator"}},
		{"twice", "engine:\n  window: 4\n  window: 8\n", []string{"given twice", "line 3: engine.window"}},
		{"bare number", "engine:\n  stale_after: 120\n", []string{"duration \"120\"", "unit", "line 2: engine.stale_after"}},
		{"duration mapping", "engine:\n  probe_timeout: {a: 1}\n", []string{"want a duration", "line 2: engine.probe_timeout"}},
		{"not a number", "engine:\n  pings_per_round: three\n", []string{`want a whole number, got "three"`, "line 2: engine.pings_per_round"}},
		{"section a list", "engine: [1]\n", []string{"want a mapping", "line 1: engine"}},
		{"list a scalar", "list: 3\n", []string{"want a list", "line 1: list"}},
		{"negative uint", "id: -1\n", []string{`want a whole number in 0..4294967295, got "-1"`, "line 1: id"}},
		{"top a scalar", "3\n", []string{"line 1: want a mapping"}},
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
			if strings.Contains(err.Error(), "line") && errors.Is(err, conf.ErrConfig) {
				return
			}
			t.Fatalf("error without a line, or not wrapping ErrConfig: %v", err)
		}
		if v.Engine.Validate() != nil {
			return
		}
		if _, err := v.Engine.ToEngine(); err != nil {
			t.Fatalf("valid keys %+v, but the engine refuses them: %v", v.Engine, err)
		}
	})
}
