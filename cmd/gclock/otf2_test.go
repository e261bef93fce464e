package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTraceDemoAndMergeOTF2: the demo and merge write an archive (in pure
// Go in the default build, with libotf2 in a build with -tags otf2) and say
// so; otf2-print reads every event record the merge reports.
func TestTraceDemoAndMergeOTF2(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := traceDemo([]string{"-dir", dir, "-n", "3", "-duration", "200ms", "-sessions", "3", "-chrome=false", "-otf2"}, &out)
	if err != nil {
		t.Fatal(err)
	}
	anchor := filepath.Join(dir, "otf2", "traces.otf2")
	if _, err := os.Stat(anchor); err != nil || !strings.Contains(out.String(), anchor) {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	files, _ := filepath.Glob(filepath.Join(dir, "proc-*.gct"))
	out.Reset()
	// Twice into the same directory: the second replaces the first.
	for range 2 {
		if err := mergeCmd(append([]string{"-method", "spline", "-otf2", filepath.Join(dir, "m")}, files...), &out); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(out.String(), "OTF2: ") || strings.Contains(out.String(), "OTF2: 0 event") {
		t.Errorf("merge report:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "m", "traces.def")); err != nil {
		t.Error(err)
	}
	bin, err := exec.LookPath("otf2-print")
	if err != nil {
		t.Skip("otf2-print not installed (ci/deps.sh installs otf2-tools): the archive is not read back")
	}
	m := regexp.MustCompile(`OTF2: (\d+) event records`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("merge report without its OTF2 line:\n%s", out.String())
	}
	want, _ := strconv.Atoi(m[1])
	txt, err := exec.Command(bin, filepath.Join(dir, "m", "traces.otf2")).CombinedOutput()
	if err != nil {
		t.Fatalf("otf2-print: %v\n%s", err, txt)
	}
	n := len(regexp.MustCompile(`(?m)^[A-Z_]+ +\d+ +\d+ `).FindAll(txt, -1))
	if n != want || n == 0 {
		t.Errorf("otf2-print read %d events, the merge wrote %d", n, want)
	}
}
