package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLabDaemonBase: --sync-profile alone gives the profile over the
// daemon's defaults (nothing of the lab's default profile left); over
// --daemon-config, the profile's keys over the file's; a bad name is
// refused naming the flag.
func TestLabDaemonBase(t *testing.T) {
	file := filepath.Join(t.TempDir(), "d.yaml")
	if err := os.WriteFile(file, []byte("sync:\n  estimator: hull\n  max_slew_ppm: 400\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, file, profile string
		estimator           string
		pings, window       int
		slew                float64
		err                 string
	}{
		{"frugal", "", "frugal", "center", 3, 256, 500, ""},
		{"precise", "", "precise", "center", 960, 16384, 500, ""},
		{"file, no profile", file, "", "hull", 3, 256, 400, ""},
		{"profile over the file", file, "precise", "center", 960, 16384, 400, ""},
		{"unknown", "", "finest", "", 0, 0, 0, `--sync-profile: unknown profile "finest" (frugal, precise)`},
		{"unknown over a file", file, "finest", "", 0, 0, 0, `--sync-profile: unknown profile "finest"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := labDaemonBase(tt.file, tt.profile)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := c.Sync
			if s.Estimator != tt.estimator || s.PingsPerRound != tt.pings || s.Window != tt.window || s.MaxSlewPPM != tt.slew {
				t.Errorf("estimator %s, pings %d, window %d, max_slew_ppm %g; want %s, %d, %d, %g",
					s.Estimator, s.PingsPerRound, s.Window, s.MaxSlewPPM, tt.estimator, tt.pings, tt.window, tt.slew)
			}
			if tt.file == "" && !c.Auth.Insecure {
				t.Error("the lab's config without auth.insecure")
			}
		})
	}
}
