package daemon

import (
	"errors"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
)

func TestDefaultConfigValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("DefaultConfig invalid: %v", err)
	}
	// The sync section is the engine's defaults, converted back unchanged.
	want := engine.DefaultConfig()
	got := c.EngineConfig(nil, nil)
	want.ID = got.ID
	if !reflect.DeepEqual(got, want) {
		t.Errorf("EngineConfig(DefaultConfig) =\n%+v\nwant engine.DefaultConfig\n%+v", got, want)
	}
	src, ch, err := c.Roles(c.ReferenceID())
	if err != nil || len(src) != 0 || !reflect.DeepEqual(ch, []engine.NodeID{2, 3}) {
		t.Errorf("reference roles in the default star: sources %v children %v err %v", src, ch, err)
	}
	if c.ListenAddr() != "127.0.0.1:3190" {
		t.Errorf("ListenAddr = %q", c.ListenAddr())
	}
}

func TestLoadExample(t *testing.T) {
	c, err := Load("testdata/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.ID != 2 || len(c.Peers) != 4 || c.Sync.Estimator != "hull" || c.Clock.Emulated.DriftPPM != 25 ||
		c.Clock.Emulated.Offset.D() != 1500*time.Microsecond || c.Clock.Emulated.DriftSteps[0].After.D() != 30*time.Second {
		t.Errorf("loaded %+v", c)
	}
	// Fields the file omits keep their defaults.
	if c.Sync.SuccessThresh != DefaultConfig().Sync.SuccessThresh {
		t.Errorf("success_thresh = %d, want the default", c.Sync.SuccessThresh)
	}
	// Node 2 in the explicit graph 1-2, 1-3, 3-4, 2-4 with reference 1:
	// depth 1, source 1, child 4 (4 is at depth 2 below 2 and 3).
	src, ch, err := c.Roles(1)
	if err != nil || !reflect.DeepEqual(src, []engine.NodeID{1}) || !reflect.DeepEqual(ch, []engine.NodeID{4}) {
		t.Errorf("roles of node 2: sources %v children %v err %v", src, ch, err)
	}
	// Failover to 3: node 2 is then two hops away, via 1 or 4.
	src, _, err = c.Roles(3)
	if err != nil || len(src) == 0 {
		t.Errorf("roles of node 2 under reference 3: sources %v err %v", src, err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown field", "node:\n  id: 1\n  colour: red\n", []string{"line 3", "colour"}},
		{"unknown section", "nodes: {}\n", []string{"line 1", "nodes"}},
		{"duration without unit", "sync:\n  stale_after: 120\n", []string{"line 2", "unit"}},
		{"duration names its field", "sync:\n  stale_after: 120\n", []string{"line 2: sync.stale_after: duration \"120\"", "unit"}},
		{"duration in a list", "peers:\n  - {id: 1, address: 127.0.0.1:1}\nreference: {order: [1], failover_after: [2s]}\n", []string{"line 3: reference.failover_after: want a duration"}},
		{"wrong type", "node:\n  id: one\n", []string{"line 2"}},
		{"two documents", "node: {id: 1}\n---\nnode: {id: 2}\n", []string{"more than one"}},
		{"bad estimator", "sync:\n  estimator: kalman\n", []string{"line 2", "sync.estimator", "kalman"}},
		{"periods crossed", "sync:\n  min_global_period: 10s\n  max_global_period: 1s\n", []string{"line 2", "sync.min_global_period"}},
		{"node not a peer", "node:\n  id: 9\n", []string{"line 2", "node.id", "9"}},
		{"duplicate peer", "peers:\n  - {id: 1, address: 'a:1'}\n  - {id: 1, address: 'b:1'}\nreference: {order: [1]}\n",
			[]string{"line 3", "peers[1].id", "already used"}},
		{"bad address", "peers:\n  - {id: 1, address: nowhere}\nreference: {order: [1]}\n", []string{"line 2", "peers[0].address"}},
		{"bad port", "peers:\n  - {id: 1, address: 'h:99999'}\nreference: {order: [1]}\n", []string{"peers[0].address", "port"}},
		{"empty peers", "peers: []\n", []string{"line 1", "peers"}},
		{"reference not a peer", "reference:\n  order: [1, 7]\n", []string{"line 2", "reference.order[1]"}},
		{"topology", "topology:\n  kind: torus\n", []string{"line 2", "topology.kind", "torus"}},
		{"hypercube of 3", "topology:\n  kind: hypercube\n", []string{"power-of-two"}},
		{"edges without explicit", "topology:\n  edges: [[1, 2]]\n", []string{"topology.edges"}},
		{"disconnected", "topology:\n  kind: explicit\n  edges: [[1, 2]]\n", []string{"topology", "node 3 cannot be reached from the reference 1"}},
		{"self loop", "topology:\n  kind: explicit\n  edges: [[1, 1], [1, 2], [2, 3]]\n", []string{"topology.edges[0]", "self loop"}},
		{"clock", "clock:\n  source: atomic\n", []string{"line 2", "clock.source"}},
		{"emulated on raw", "clock:\n  emulated:\n    drift_ppm: 5\n", []string{"line 2", "clock.emulated"}},
		{"emulated drift", "clock:\n  source: emulated\n  emulated:\n    drift_ppm: 1e9\n", []string{"line 4", "clock.emulated.drift_ppm"}},
		{"steps order", "clock:\n  source: emulated\n  emulated:\n    drift_steps: [{after: 2s}, {after: 1s}]\n",
			[]string{"clock.emulated.drift_steps[1].after"}},
		{"shm relative", "global_time:\n  shm_path: gclock\n", []string{"line 2", "global_time.shm_path"}},
		{"publish too slow", "global_time:\n  publish_every: 5m\n", []string{"global_time.publish_every", "stale_after"}},
		{"page group unknown", "global_time:\n  group: no-such-group-gclock\n", []string{"line 2", "global_time.group", "no-such-group-gclock"}},
		{"page group root", "global_time:\n  group: 0\n", []string{"line 2", "global_time.group", "must be > 0"}},
		{"metrics", "metrics:\n  listen: 9090\n", []string{"line 2", "metrics.listen"}},
		{"real time", "real_time:\n  mode: gps\n", []string{"line 2", "real_time.mode"}},
		{"measurements relative", "log:\n  measurements: m.csv\n", []string{"line 2", "log.measurements"}},
		{"nan ppm", "sync:\n  max_drift_ppm: .nan\n", []string{"line 2", "sync.max_drift_ppm"}},
		{"several at once", "sync:\n  estimator: x\n  pings_per_round: 0\n", []string{"sync.estimator", "sync.pings_per_round"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tt.yaml)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("error does not wrap ErrConfig: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, in := range []string{"", "# nothing\n", "{}\n"} {
		c, err := Parse([]byte(in))
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if !reflect.DeepEqual(c, DefaultConfig()) {
			t.Errorf("Parse(%q) = %+v, want DefaultConfig", in, c)
		}
	}
}

func TestFlagsOverride(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(Config) bool
		wantErr string
	}{
		{"id", []string{"-id", "3"}, func(c Config) bool { return c.Node.ID == 3 }, ""},
		{"peers and reference", []string{"-peers", "5=127.0.0.5:1,6=127.0.0.6:1", "-reference", "6,5", "-id", "5"},
			func(c Config) bool { return len(c.Peers) == 2 && c.ReferenceID() == 6 }, ""},
		{"peers off loopback without a key", []string{"-peers", "5=h5:1,6=h6:1", "-reference", "6,5", "-id", "5"}, nil, "auth.key_file: empty, and peers[0]"},
		{"estimator", []string{"-estimator", "regression"}, func(c Config) bool { return c.Sync.Estimator == "regression" }, ""},
		{"no page", []string{"-shm", "none", "-metrics", ":9100"},
			func(c Config) bool { return c.GlobalTime.ShmPath == "" && c.Metrics.Listen == ":9100" }, ""},
		{"unset flags keep the file", nil, func(c Config) bool { return c.Transport.KernelTimestamps && c.Sync.Estimator == "hull" }, ""},
		{"kernel timestamps off", []string{"-kernel-timestamps=false"}, func(c Config) bool { return !c.Transport.KernelTimestamps }, ""},
		{"bad peers", []string{"-peers", "5:h5:1"}, nil, "flag -peers"},
		{"bad reference", []string{"-reference", "x"}, nil, "flag -reference"},
		{"invalid result", []string{"-topology", "torus"}, nil, "topology.kind"},
		{"profile over the file", []string{"-profile", "precise"},
			func(c Config) bool {
				return c.Sync.Profile == "precise" && c.Sync.Estimator == "center" && c.Sync.PingsPerRound == 960
			}, ""},
		{"estimator over the profile", []string{"-estimator", "hull", "-profile", "frugal"},
			func(c Config) bool { return c.Sync.Estimator == "hull" && c.Sync.PingsPerRound == 3 }, ""},
		{"unknown profile", []string{"-profile", "finest"}, nil, `flag -profile: unknown profile "finest" (frugal, precise)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Sync.Estimator = "hull" // as if from a file
			fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
			f := AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := f.Apply(&c)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Apply = %v, want error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(c) {
				t.Fatalf("Apply = %v, config %+v", err, c)
			}
		})
	}
}

// FuzzParse: any input gives a config or an error wrapping ErrConfig, never
// a panic; an accepted config validates and converts to a valid engine config.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/cluster.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(""))
	f.Add([]byte("sync:\n  stale_after: 1s\n"))
	f.Add([]byte("topology: {kind: explicit, edges: [[1, 2], [2, 3]]}\n"))
	f.Add([]byte("peers: [{id: 1, address: 'a:1'}]\nreference: {order: [1]}\nnode: {id: 1}\n"))
	f.Add([]byte("real_time: {mode: reference-realtime}\nntp: {listen: ':123', stratum: 2}\nrefclock: {sock: /run/x.sock, every: 1s}\n"))
	f.Add([]byte("peers: &p [{id: 1, address: 'a:1'}]\nreference: {order: &o [1, 1, 1]}\ntopology: {edges: [*o, *o]}\n"))
	f.Add([]byte("sync: &s {stale_after: 1s}\nclock: {<<: *s, source: raw}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error does not wrap ErrConfig: %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid config: %v", err)
		}
		src, ch, err := c.Roles(c.ReferenceID())
		if err != nil {
			t.Fatalf("accepted config has no roles: %v", err)
		}
		if err := c.EngineConfig(src, ch).Validate(); err != nil {
			t.Fatalf("accepted config gives an invalid engine config: %v", err)
		}
	})
}
