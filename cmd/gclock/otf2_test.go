package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gclock/gclock/trace/otf2"
)

// TestTraceDemoAndMergeOTF2: with libotf2 (-tags otf2) the demo and merge
// write an archive and say so; without it both fail before any work and
// name the build tag.
func TestTraceDemoAndMergeOTF2(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	err := traceDemo([]string{"-dir", dir, "-n", "3", "-duration", "200ms", "-sessions", "3", "-chrome=false", "-otf2"}, &out)
	if !otf2.Available {
		if !errors.Is(err, otf2.ErrNotBuilt) || !strings.Contains(err.Error(), "-tags otf2") {
			t.Fatalf("demo -otf2 without libotf2: %v", err)
		}
		if _, serr := os.Stat(filepath.Join(dir, "proc-00.gct")); serr == nil {
			t.Error("demo -otf2 without libotf2 wrote traces before failing")
		}
		err = mergeCmd([]string{"-otf2", filepath.Join(dir, "o"), "x.gct"}, &out)
		if !errors.Is(err, otf2.ErrNotBuilt) {
			t.Fatalf("merge -otf2 without libotf2: %v", err)
		}
		return
	}
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
}
