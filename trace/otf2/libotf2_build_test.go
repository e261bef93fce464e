//go:build !(otf2 && cgo)

package otf2

import (
	"os/exec"
	"testing"
)

// TestWithLibotf2 runs the OTF2 tests of the libotf2 build (cgo, -tags
// otf2) from the default build, so that `go test ./...` (the README's one
// test command, which CI runs) covers that build too wherever ci/deps.sh
// installed libotf2: otf2-print and python3-otf2 read back the libotf2
// sink's archives, and the pure-Go sink writes what the libotf2 sink
// writes (TestSinksOTF2Identical).
func TestWithLibotf2(t *testing.T) {
	if testing.Short() {
		t.Skip("builds gclock with cgo and libotf2")
	}
	if err := exec.Command("pkg-config", "--exists", "otf2").Run(); err != nil {
		t.Skip("libotf2 not installed (ci/deps.sh installs libotf2-trace-dev, otf2-tools, python3-otf2): the OTF2 read-back not run")
	}
	cmd := exec.Command("go", "test", "-count=1", "-tags", "otf2", "-run", "OTF2|ReadBack|Reads",
		"./trace/otf2/", "./cmd/gclock/", "./mpi/")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -tags otf2: %v\n%s", err, out)
	}
	t.Logf("go test -tags otf2:\n%s", out)
}
