package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/trace/foreign"
	"github.com/gclock/gclock/trace/format"
)

// scorepLike writes a Score-P-like archive with the python3-otf2 generator
// of trace/foreign (skips without python3-otf2) and returns its directory.
func scorepLike(t *testing.T, args ...string) string {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import otf2").Run(); err != nil {
		t.Skipf("skipped: /usr/bin/python3 cannot import otf2 (install python3-otf2): %v", err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	gen := filepath.Join("..", "..", "trace", "foreign", "testdata", "scorep_like.py")
	if out, err := exec.Command("/usr/bin/python3", append([]string{gen, "-out", dir}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	return dir
}

var errLine = regexp.MustCompile(`(?m)^\s+(producer's clock offsets \(linear\)|gclock trace correct|bound the messages allow): +p50 (\d+) ns, p99 (\d+) ns`)

// TestTraceCorrect: the command corrects a foreign archive from its own
// offsets and messages, reports the causality and the error against the
// truth, and writes an archive this package reads back.
func TestTraceCorrect(t *testing.T) {
	dir := scorepLike(t, "-procs", "4", "-seconds", "6", "-interval-ms", "3", "-seed", "5")
	outDir := filepath.Join(t.TempDir(), "out")
	var out bytes.Buffer
	err := traceCorrect([]string{"-o", outDir, "-clc", "-truth", filepath.Join(dir, "truth.json"), filepath.Join(dir, "traces.otf2")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	for _, want := range []string{"0 after correction", "0 after CLC", "0 message ends unmatched", "reference (linear)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	p99 := map[string]int64{}
	for _, m := range errLine.FindAllStringSubmatch(out.String(), -1) {
		p99[m[1]], _ = strconv.ParseInt(m[3], 10, 64)
	}
	if len(p99) != 3 || p99["gclock trace correct"] > p99["bound the messages allow"] || 2*p99["gclock trace correct"] > p99["producer's clock offsets (linear)"] {
		t.Errorf("p99 errors %v: want corrected within the bound and half the linear's", p99)
	}
	back, err := foreign.ReadArchive(filepath.Join(outDir, "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Trace.Locs) != 4 || back.Unmatched != 0 {
		t.Errorf("read back %d locations, %d unmatched", len(back.Trace.Locs), back.Unmatched)
	}
}

// TestTraceCorrectDaemon: with the daemon's mappings (gclock trace files
// named as the OTF2 location groups), the timestamps are mapped with them.
// The mappings here are what a daemon would have published: a line per
// second through the true clock.
func TestTraceCorrectDaemon(t *testing.T) {
	dir := scorepLike(t, "-procs", "3", "-seconds", "4", "-interval-ms", "5", "-seed", "6")
	tr, err := foreign.ReadTruth(filepath.Join(dir, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for i, l := range tr.Locations {
		var ms []format.DaemonMapping
		next := 0
		for e := range l.Local {
			if e < next && e != len(l.Local)-1 {
				continue
			}
			// from this event, the line to the event one second later
			f := e
			for f < len(l.Local)-1 && l.Global[f]-l.Global[e] < 1e9 {
				f++
			}
			if f == e {
				break
			}
			skew := float64(l.Global[f]-l.Global[e])/float64(l.Local[f]-l.Local[e]) - 1
			ms = append(ms, format.DaemonMapping{From: l.Local[e], Mapping: estimate.Mapping{X0: l.Local[e], Y0: l.Global[e], Skew: skew, W0: 200, Valid: true}})
			next = f
		}
		var b bytes.Buffer
		w := format.NewWriter(&b)
		if err := w.WriteMeta(format.Meta{Proc: uint32(i), Host: uint32(i), Name: fmt.Sprintf("MPI Rank %d", i), Clock: "CLOCK_MONOTONIC_RAW"}); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteMappings(ms); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), fmt.Sprintf("rank%d.gct", i))
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	var out bytes.Buffer
	err = traceCorrect([]string{"-o", filepath.Join(t.TempDir(), "o"), "-mappings", strings.Join(files, ","), "-truth", filepath.Join(dir, "truth.json"), filepath.Join(dir, "traces.otf2")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "daemon") || !strings.Contains(out.String(), "0 after correction") {
		t.Errorf("report lacks the daemon method or 0 violations")
	}
	for _, m := range errLine.FindAllStringSubmatch(out.String(), -1) {
		if p99, _ := strconv.ParseInt(m[3], 10, 64); m[1] == "gclock trace correct" && p99 > 1000 {
			t.Errorf("daemon-mapped p99 error %d ns: the mappings are within 1 us of the truth", p99)
		}
	}
	// a location without its file is named
	err = traceCorrect([]string{"-o", filepath.Join(t.TempDir(), "o"), "-mappings", files[0], filepath.Join(dir, "traces.otf2")}, &out)
	if err == nil || !strings.Contains(err.Error(), "MPI Rank 1") {
		t.Errorf("a location without mappings: %v", err)
	}
}

// TestTraceCorrectErrors: usage and input errors say what is wrong.
func TestTraceCorrectErrors(t *testing.T) {
	var out bytes.Buffer
	if err := traceCorrect([]string{"x.otf2"}, &out); err == nil || !strings.Contains(err.Error(), "-o DIR") {
		t.Errorf("no -o: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.otf2")
	if err := traceCorrect([]string{"-o", t.TempDir(), missing}, &out); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing archive: %v", err)
	}
	if err := mergeCmd([]string{"traces.otf2"}, &out); err == nil || !strings.Contains(err.Error(), "gclock trace correct") {
		t.Errorf("merge of an OTF2 archive: %v", err)
	}
}
