package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoPlotting checks that gclockd links none of the plotting code: the
// daemon binary stays small and does not pull gonum/plot's fonts and image
// encoders onto every host.
func TestNoPlotting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/gclockd: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages, want the daemon's dependencies:\n%s", len(deps), out)
	}
	found := false
	for _, p := range deps {
		if p == "github.com/gclock/gclock/daemon" {
			found = true
		}
		for _, banned := range []string{"gonum.org/v1/plot", "github.com/gclock/gclock/sim", "github.com/gclock/gclock/lab"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("gclockd depends on %s", p)
			}
		}
	}
	if !found {
		t.Errorf("gclockd does not depend on github.com/gclock/gclock/daemon: is this the daemon?")
	}
}
