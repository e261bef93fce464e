package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gclock/gclock/trace/format"
)

// TestMergeHints: an explicit method the traces' sync data cannot support
// (daemon on traces without mappings) fails naming the process and hints
// at -method auto, not at -keep-going (issue 20: the C/MPI tracer's traces
// without a daemon got the -keep-going hint).
func TestMergeHints(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for p := range 2 {
		var b bytes.Buffer
		w := format.NewWriter(&b)
		if err := w.WriteMeta(format.Meta{Proc: uint32(p), Host: 1, Name: "rank", Clock: "CLOCK_MONOTONIC_RAW"}); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteEvents([]format.Event{{Time: 1000, Kind: format.Instant, ID: 1}}); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, "rank"+string(rune('0'+p))+".gct")
		if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	var out bytes.Buffer
	err := mergeCmd(append([]string{"-method", "daemon"}, files...), &out)
	if err == nil {
		t.Fatal("-method daemon without mappings succeeded")
	}
	for _, want := range []string{"process 0", "no valid daemon mapping", "hint: -method auto"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "-keep-going") {
		t.Errorf("error %q hints at -keep-going for a lack of sync data", err)
	}
}
