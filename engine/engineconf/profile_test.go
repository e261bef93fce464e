package engineconf_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/engine/engineconf"
	"github.com/gclock/gclock/internal/conf"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/sim"
)

// profileKeys are the keys profile name's file sets, read from the file
// on disk (deploy/profiles/NAME.yaml).
func profileKeys(t *testing.T, name string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "deploy", "profiles", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return sectionKeys(t, data, "")
}

// sectionKeys are the keys of the mapping at key in the YAML document
// data ("": the top).
func sectionKeys(t *testing.T, data []byte, key string) []string {
	t.Helper()
	n, err := conf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		n = conf.Field(n, key)
	}
	if n == nil || n.Kind != yaml.MappingNode {
		t.Fatalf("no mapping at %q", key)
	}
	var keys []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		keys = append(keys, n.Content[i].Value)
	}
	slices.Sort(keys)
	return keys
}

// field is the value of the section's key in c.
func field(t *testing.T, c engineconf.Config, key string) any {
	t.Helper()
	ct := reflect.TypeFor[engineconf.Config]()
	for i := range ct.NumField() {
		if k, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ","); k == key {
			return reflect.ValueOf(c).Field(i).Interface()
		}
	}
	t.Fatalf("no key %s", key)
	return nil
}

// TestProfiles: every file of deploy/profiles is a shipped (embedded)
// profile, decodes over the engine's defaults into a valid section, and
// sets the same keys as every other, so that one applied over another
// (gclockd -profile over a file's profile) leaves nothing of the first.
func TestProfiles(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "profiles", "*.yaml"))
	var onDisk []string
	for _, f := range files {
		onDisk = append(onDisk, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	if names := engineconf.ProfileNames(); !slices.Equal(onDisk, names) || len(names) < 2 {
		t.Fatalf("profiles on disk %v, embedded %v", onDisk, names)
	}
	first := profileKeys(t, onDisk[0])
	for _, name := range onDisk {
		t.Run(name, func(t *testing.T) {
			c, err := engineconf.Profile(name)
			if err != nil {
				t.Fatal(err)
			}
			if c.Profile != name {
				t.Errorf("Profile = %q", c.Profile)
			}
			if _, err := c.ToEngine(); err != nil {
				t.Error(err)
			}
			keys := profileKeys(t, name)
			if !slices.Equal(keys, first) {
				t.Errorf("sets %v, %s sets %v: every profile sets the same keys", keys, onDisk[0], first)
			}
			if slices.Contains(keys, "profile") {
				t.Error("a profile names a profile")
			}
			// Applied over the other profiles: the same keys.
			for _, other := range onDisk {
				o, err := engineconf.Profile(other)
				if err != nil {
					t.Fatal(err)
				}
				if err := o.ApplyProfile(name); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(o, c) {
					t.Errorf("%s over %s:\n%+v\nwant\n%+v", name, other, o, c)
				}
			}
		})
	}
}

// TestProfileDecoding: `profile: NAME` in a daemon's sync: section and a
// scenario's engine: section gives the profile's keys, a key written
// beside it (before or after) overrides the profile's, and a bad profile
// is refused naming the key and the line.
func TestProfileDecoding(t *testing.T) {
	precise, err := engineconf.Profile("precise")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, section string
		pings         int    // want pings_per_round; 0: an error
		err           string // in the error
	}{
		{"profile alone", "profile: precise", precise.PingsPerRound, ""},
		{"key after", "profile: precise\n  pings_per_round: 60", 60, ""},
		{"key before", "pings_per_round: 60\n  profile: precise", 60, ""},
		{"frugal", "profile: frugal", 3, ""},
		{"unknown", "estimator: hull\n  profile: finest", 0, `line 3: SECTION.profile: unknown profile "finest" (frugal, precise)`},
		{"not a name", "profile: [precise]", 0, "line 2: SECTION.profile: want a profile's name"},
		{"twice", "profile: precise\n  profile: frugal", 0, "line 3: SECTION.profile: given twice"},
		{"bad key beside", "profile: precise\n  window: 1", 0, "line 3: SECTION.window: 1 outside [2, 65536]"},
	} {
		for _, sec := range []string{"sync", "engine"} {
			t.Run(tt.name+"/"+sec, func(t *testing.T) {
				doc := []byte(sec + ":\n  " + tt.section + "\n")
				var got engineconf.Config
				var err error
				if sec == "sync" {
					var c daemon.Config
					c, err = daemon.Parse(doc)
					got = c.Sync
				} else {
					var s sim.Scenario
					if s, err = sim.Parse(doc, "profile.yaml"); err == nil {
						got = s.Engine
					}
				}
				if tt.pings == 0 {
					want := strings.ReplaceAll(tt.err, "SECTION", sec)
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Fatalf("error %v, want %q", err, want)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got.PingsPerRound != tt.pings || got.Window != field(t, mustProfile(t, got.Profile), "window") {
					t.Errorf("pings_per_round %d (want %d), window %d, profile %q", got.PingsPerRound, tt.pings, got.Window, got.Profile)
				}
			})
		}
	}
}

func mustProfile(t *testing.T, name string) engineconf.Config {
	t.Helper()
	c, err := engineconf.Profile(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOneCopyOfEachProfile: the settings a profile holds live in its file
// only. The lab's default config is the precise profile's; the lab-like
// scenarios and the link matrix's base say `profile: precise` and nothing else in their engine:
// section, and run its keys; the production example says `profile:
// frugal`. A hand copy that drifts, or a key copied beside the profile,
// fails here.
func TestOneCopyOfEachProfile(t *testing.T) {
	if want := mustProfile(t, lab.LabProfile); !reflect.DeepEqual(lab.LabDaemonConfig().Sync, want) {
		t.Errorf("lab.LabDaemonConfig().Sync =\n%+v\nwant the %s profile\n%+v", lab.LabDaemonConfig().Sync, lab.LabProfile, want)
	}
	for _, tt := range []struct {
		file, section, profile string
	}{
		{"sim/testdata/lab-like.yaml", "engine", lab.LabProfile},
		{"sim/testdata/lab-like-bursty.yaml", "engine", lab.LabProfile},
		{"sim/testdata/lab-like-queued.yaml", "engine", lab.LabProfile},
		{"sim/scenarios/link-matrix.yaml", "engine", lab.LabProfile},
		{"deploy/gclock.yaml", "sync", "frugal"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(root, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			keys := sectionKeys(t, data, tt.section)
			for _, k := range keys {
				if k != "profile" && slices.Contains(profileKeys(t, tt.profile), k) {
					t.Errorf("%s.%s: a key of the %s profile copied beside it", tt.section, k, tt.profile)
				}
			}
			var got engineconf.Config
			if tt.section == "engine" {
				if !slices.Equal(keys, []string{"profile"}) {
					t.Errorf("%s: keys %v, want the profile alone", tt.section, keys)
				}
				s, err := sim.Parse(data, tt.file)
				if err != nil {
					t.Fatal(err)
				}
				got = s.Engine
			} else {
				c, err := daemon.Load(filepath.Join(root, tt.file))
				if err != nil {
					t.Fatal(err)
				}
				got = c.Sync
			}
			if got.Profile != tt.profile {
				t.Errorf("profile %q, want %s", got.Profile, tt.profile)
			}
			want := mustProfile(t, tt.profile)
			for _, k := range profileKeys(t, tt.profile) {
				if g, w := field(t, got, k), field(t, want, k); !reflect.DeepEqual(g, w) {
					t.Errorf("%s.%s = %v, the %s profile says %v", tt.section, k, g, tt.profile, w)
				}
			}
		})
	}
}
