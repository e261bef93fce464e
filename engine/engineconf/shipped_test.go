package engineconf_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/engine/engineconf"
	"github.com/gclock/gclock/sim"
)

const root = "../.."

// TestShippedYAMLDecodes loads every YAML file of the repository (and the
// YAML examples of the docs) the way its user does: scenarios with
// sim.Parse, daemon configs with daemon.Load, the DaemonSet's ConfigMap
// with daemon.Parse. A new YAML file must be classified here.
func TestShippedYAMLDecodes(t *testing.T) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d YAML files under %s: %v", len(files), root, files)
	}
	scenarios := 0
	for _, p := range files {
		rel, _ := filepath.Rel(root, p)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case strings.HasPrefix(rel, "sim/scenarios/"):
				scenarios++
				if _, err := sim.Parse(data, rel); err != nil {
					t.Error(err)
				}
			case strings.HasPrefix(rel, "sim/testdata/"):
				// Scenarios the sim's tests run, not shipped by name.
				if _, err := sim.Parse(data, rel); err != nil {
					t.Error(err)
				}
			case rel == "deploy/kubernetes/gclock-daemonset.yaml":
				n := 0
				for text := range configMapFiles(t, data) {
					n++
					if _, err := daemon.Parse([]byte(text)); err != nil {
						t.Errorf("ConfigMap: %v", err)
					}
				}
				if n == 0 {
					t.Error("no daemon config in the ConfigMap")
				}
			case strings.HasPrefix(rel, "deploy/kubernetes/") && rel != "deploy/kubernetes/gclock-daemonset.yaml":
				// Other manifests (the consumer pod) carry no daemon config:
				// deploy's TestKubernetesManifests decodes them into k8s types.
				var v map[string]any
				if err := yaml.Unmarshal(data, &v); err != nil || v["kind"] == nil {
					t.Errorf("not a Kubernetes manifest: %v", err)
				}
			case strings.HasPrefix(rel, "deploy/prometheus/"):
				// Prometheus rules and their unit tests, not configs: deploy's
				// TestAlertRules checks them with promtool. Here: YAML at all.
				var v map[string]any
				if err := yaml.Unmarshal(data, &v); err != nil || len(v) == 0 {
					t.Errorf("not a YAML mapping: %v", err)
				}
			case strings.HasPrefix(rel, "deploy/profiles/"):
				// Sync profiles: a fragment of the sync: section, read by
				// name (TestProfiles holds them).
				name := strings.TrimSuffix(filepath.Base(rel), ".yaml")
				if _, err := engineconf.Profile(name); err != nil {
					t.Error(err)
				}
			case strings.HasPrefix(rel, "deploy/"), strings.HasSuffix(filepath.Dir(rel), "/testdata"):
				if _, err := daemon.Load(p); err != nil {
					t.Error(err)
				}
			default:
				t.Errorf("%s: which loader reads it? Classify it in this test", rel)
			}
		})
	}
	if scenarios != len(sim.Names()) {
		t.Errorf("%d scenario files, sim.Names lists %d", scenarios, len(sim.Names()))
	}
	for _, n := range sim.Names() {
		if _, err := sim.Shipped(n); err != nil {
			t.Errorf("embedded scenario %s: %v", n, err)
		}
	}
}

// configMapFiles yields the *.yaml values of the ConfigMaps of a
// multi-document Kubernetes file.
func configMapFiles(t *testing.T, data []byte) func(func(string) bool) {
	return func(yield func(string) bool) {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var obj struct {
				Kind string            `yaml:"kind"`
				Data map[string]string `yaml:"data"`
			}
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if obj.Kind != "ConfigMap" {
				continue
			}
			for k, v := range obj.Data {
				if strings.HasSuffix(k, ".yaml") && !yield(v) {
					return
				}
			}
		}
	}
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// TestDocsYAMLExamples: every ```yaml block of the docs is accepted: in
// docs/sim.md a scenario fragment (sim.Parse), elsewhere a daemon config
// fragment (daemon.Parse).
func TestDocsYAMLExamples(t *testing.T) {
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	n := 0
	for _, p := range docs {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range yamlBlock.FindAllSubmatch(data, -1) {
			n++
			var err error
			if filepath.Base(p) == "sim.md" {
				_, err = sim.Parse(m[1], p)
			} else {
				_, err = daemon.Parse(m[1])
			}
			if err != nil {
				t.Errorf("%s: example\n%s: %v", p, m[1], err)
			}
		}
	}
	if n == 0 {
		t.Error("no ```yaml example found in the docs")
	}
}

// TestEmbeddedDefaultsRoundTrip: the daemon's default config, written out
// (gclock daemon -print-config) and read back, is the same config.
func TestEmbeddedDefaultsRoundTrip(t *testing.T) {
	want := daemon.DefaultConfig()
	out, err := yaml.Marshal(&want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := daemon.Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default config changed through YAML:\n%+v\nwant\n%+v", got, want)
	}
	if def := sim.DefaultScenario(); def.Engine.Estimator == "" {
		t.Error("the embedded default scenario has no estimator")
	}
}

// TestSimAndDaemonAcceptTheSameKeys: both embed engineconf.Config, and
// every key of it decodes, with the same value, through the simulator's
// decoder (engine:) and the daemon's (sync:).
func TestSimAndDaemonAcceptTheSameKeys(t *testing.T) {
	if tt := reflect.TypeFor[sim.Scenario](); mustField(t, tt, "Engine").Type != reflect.TypeFor[engineconf.Config]() {
		t.Errorf("sim.Scenario.Engine is not an engineconf.Config")
	}
	if tt := reflect.TypeFor[daemon.Config](); mustField(t, tt, "Sync").Type != reflect.TypeFor[engineconf.Config]() {
		t.Errorf("daemon.Config.Sync is not an engineconf.Config")
	}
	// A value for each key, different from the default where the type
	// allows, and valid in both (the sim bounds hull_min_delay by its
	// links' min_delay, 5us by default).
	values := map[string]string{
		"estimator": "hull", "adaptive": "false", "pings_per_round": "5", "ramp_pings_per_round": "4",
		"network_latency_error_thresh": "30us", "difference_thresh": "3us", "error_thresh": "5",
		"success_thresh": "3", "min_global_period": "500ms", "max_global_period": "8s",
		"initial_global_period": "1s", "min_self_period": "20ms", "max_self_period": "2s",
		"large_drift_ppm": "25", "probe_timeout": "40ms", "stale_after": "90s", "max_slew_ppm": "400",
		"max_drift_ppm": "150", "max_wander_ppm_per_s": "0.02", "max_freq_step_ppm": "3",
		"acquire_rounds": "4", "hull_min_delay": "1us", "hull_max_span": "-1ns", "granularity": "2ns",
		"window": "512", "continuous_drift": "true", "max_concurrent_rounds": "2", "retry_rtts": "3",
		"max_probe_retries": "6", "discount_delay": "true", "center_memory": "2.5", "center_floor_only": "true", "center_no_breaks": "true", "checks_per_period": "8",
		"round_budget": "300ms", "profile": "frugal",
	}
	ct := reflect.TypeFor[engineconf.Config]()
	for i := range ct.NumField() {
		key, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ",")
		v, ok := values[key]
		if !ok {
			t.Errorf("key %s: give it a test value", key)
			continue
		}
		t.Run(key, func(t *testing.T) {
			sc, err := sim.Parse(fmt.Appendf(nil, "engine:\n  %s: %s\n", key, v), "keys.yaml")
			if err != nil {
				t.Fatalf("sim: %v", err)
			}
			dc, err := daemon.Parse(fmt.Appendf(nil, "sync:\n  %s: %s\n", key, v))
			if err != nil {
				t.Fatalf("daemon: %v", err)
			}
			s, d := reflect.ValueOf(sc.Engine).Field(i), reflect.ValueOf(dc.Sync).Field(i)
			if !reflect.DeepEqual(s.Interface(), d.Interface()) {
				t.Errorf("sim read %v, daemon %v", s, d)
			}
			if reflect.DeepEqual(d.Interface(), reflect.ValueOf(engineconf.Default()).Field(i).Interface()) {
				t.Errorf("test value %s is the default: the test cannot see the key being read", v)
			}
		})
	}
	// And both refuse a key that is not one.
	if _, err := sim.Parse([]byte("engine:\n  no_such_key: 1\n"), "keys.yaml"); err == nil {
		t.Error("sim accepts an unknown engine key")
	}
	if _, err := daemon.Parse([]byte("sync:\n  no_such_key: 1\n")); err == nil {
		t.Error("daemon accepts an unknown sync key")
	}
}

func mustField(t *testing.T, tt reflect.Type, name string) reflect.StructField {
	f, ok := tt.FieldByName(name)
	if !ok {
		t.Fatalf("%s has no field %s", tt, name)
	}
	return f
}
