package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gclock/gclock/internal/chromecheck"
	"github.com/gclock/gclock/internal/perfettocheck"
)

func TestTraceDemoInfoMerge(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := traceDemo([]string{"-dir", dir, "-n", "4", "-duration", "300ms", "-sessions", "3", "-perfetto"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"linear", "spline", "daemon"} {
		if !strings.Contains(out.String(), m) {
			t.Errorf("demo report lacks %s:\n%s", m, out.String())
		}
	}
	f, err := os.Open(filepath.Join(dir, "merged.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := chromecheck.Validate(f)
	f.Close()
	if err != nil || rep.Processes != 4 || rep.Flows == 0 {
		t.Fatalf("demo JSON: %v %+v", err, rep)
	}
	pb, err := os.ReadFile(filepath.Join(dir, "merged.pftrace"))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := perfettocheck.Decode(pb)
	if err != nil {
		t.Fatal(err)
	}
	var ends int
	for _, e := range pt.Events {
		ends += len(e.Terminating)
	}
	if ends != rep.Flows {
		t.Errorf("demo: %d flows in the Perfetto trace, %d in the JSON", ends, rep.Flows)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "proc-*.gct"))
	if len(files) != 4 {
		t.Fatalf("files %v", files)
	}
	out.Reset()
	if err := traceInfo(files[1:2], &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "process 1") || !strings.Contains(out.String(), "sync session 2 (end)") {
		t.Errorf("info:\n%s", out.String())
	}
	// Truncate one file: info and merge fail naming file and offset, and go
	// on with -keep-going.
	data, _ := os.ReadFile(files[2])
	cut := filepath.Join(dir, "cut.gct")
	if err := os.WriteFile(cut, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = traceInfo([]string{cut}, &out)
	if err == nil || !strings.Contains(err.Error(), "cut.gct: offset ") || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("info on a truncated file: %v", err)
	}
	if err := traceInfo([]string{"-keep-going", cut}, &out); err != nil || !strings.Contains(out.String(), "PROBLEM") {
		t.Fatalf("info -keep-going: %v\n%s", err, out.String())
	}
	in := []string{files[0], files[1], cut, files[3]}
	js := filepath.Join(dir, "m.json")
	if err := mergeCmd(append([]string{"-chrome", js}, in...), &out); err == nil || !strings.Contains(err.Error(), "cut.gct") ||
		!strings.Contains(err.Error(), "hint: -keep-going") {
		t.Fatalf("merge of a truncated file: %v (want the file named and the -keep-going hint)", err)
	}
	out.Reset()
	if err := mergeCmd(append([]string{"-keep-going", "-clc", "-chrome", js, "-o", filepath.Join(dir, "m.gcm")}, in...), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"PROBLEM", "LOST (-keep-going): " + cut + ": ", "after correction", "controlled logical clock", "daemon"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("merge report lacks %q:\n%s", want, out.String())
		}
	}
	// The proof through the CLI: merge with the demo's truth files.
	out.Reset()
	if err := mergeCmd(append([]string{"-method", "spline", "-truth", dir}, files...), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "error against the truth") || !strings.Contains(out.String(), "0 after correction") {
		t.Errorf("merge -truth report:\n%s", out.String())
	}
	if err := mergeCmd(append([]string{"-truth", t.TempDir()}, files...), &out); err == nil {
		t.Error("-truth on an empty directory accepted")
	}
	if err := mergeCmd([]string{"-method", "cubic", files[0]}, &out); err == nil {
		t.Error("bad method accepted")
	}
	if err := mergeCmd(nil, &out); err == nil {
		t.Error("no files accepted")
	}
}
