package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/bench"
)

func TestKeepDir(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 40, 5, 0, time.UTC)
	tests := []struct {
		keep, out, want string
	}{
		{"", "bench.md", "bench.d"},
		{"", "docs/bench-2026-11-27.md", "docs/bench-2026-11-27.d"},
		{"", "report", "report.d"},
		{"", "", "lab-bench-20261127T104005Z.d"},
		{"runs", "bench.md", "runs"},
		{"none", "bench.md", ""},
		{"none", "", ""},
	}
	for _, tc := range tests {
		if got := keepDir(tc.keep, tc.out, now); got != tc.want {
			t.Errorf("keepDir(%q, %q) = %q, want %q", tc.keep, tc.out, got, tc.want)
		}
	}
}

func TestEvidenceLink(t *testing.T) {
	tmp := t.TempDir()
	tests := []struct {
		report, ev, want string
	}{
		{"bench.md", "bench.d/quiet-seed1", "bench.d/quiet-seed1/"},
		{"docs/bench.md", "docs/bench.d/busy-seed2", "bench.d/busy-seed2/"},
		{"docs/bench.md", "runs/x", "../runs/x/"},
		{"", "bench.d/quiet-seed1", "bench.d/quiet-seed1/"},
		{filepath.Join(tmp, "b.md"), filepath.Join(tmp, "b.d", "quiet-seed1"), "b.d/quiet-seed1/"},
		{"bench.md", "", ""},
	}
	for _, tc := range tests {
		if got := evidenceLink(tc.report, tc.ev); got != tc.want {
			t.Errorf("evidenceLink(%q, %q) = %q, want %q", tc.report, tc.ev, got, tc.want)
		}
	}
}

// fakeLabRun stands for lab.Run in the bench: it leaves in the run
// directory what a lab leaves (configs, logs, measurements, a page, a pid
// file, a socket, the frame log) and returns a report whose median is
// medianNs, with a series.
func fakeLabRun(t *testing.T, medianNs map[uint64]int64, fail uint64) func(context.Context, *labFlags, lab.RunSpec, bool) (lab.RunReport, error) {
	return func(_ context.Context, _ *labFlags, spec lab.RunSpec, _ bool) (lab.RunReport, error) {
		var m lab.RunReport
		seed := spec.Lab.Seed
		if spec.Gclock.Seed != seed || !spec.Gclock.Trace {
			return m, fmt.Errorf("fake lab: gclock seed %d (the lab's %d), trace %v", spec.Gclock.Seed, seed, spec.Gclock.Trace)
		}
		runDir := spec.Lab.RunDir
		if runDir == "" {
			return m, errors.New("fake lab: no run directory")
		}
		files := map[string]string{
			"gclock/h0.yaml":             fmt.Sprintf("# seed %d\n", seed),
			"gclock/h1.log":              fmt.Sprintf("level=INFO msg=started seed=%d\n", seed),
			"gclock/measurements-h1.csv": "source,src_send_ns,loc_recv_ns,loc_send_ns,src_recv_ns,rtt_ns\n1,2,3,4,5,6\n",
			"gclock/page-h1":             "not evidence",
			"chrony-h0/chrony.conf":      "local stratum 1\n",
			"chrony-h0/chronyd.pid":      "123\n",
			"chrony-h1/measurements.log": "chrony's measurements\n",
			"ptp4l-h1/ptp4l.log":         "ptp4l[1.0]: master offset -85 s2 freq +0 path delay 10234\n",
			"gclock/state/state-h1.json": "{}\n",
		}
		for name, body := range files {
			p := filepath.Join(runDir, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ln, err := net.Listen("unix", filepath.Join(runDir, "gclock", "metrics-h1.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if seed == fail {
			return m, errors.New("fake lab: the daemon of host 1 exited early")
		}
		if spec.Lab.FrameLog != "" {
			if err := os.WriteFile(spec.Lab.FrameLog, []byte("# wall_minus_raw_ns start 1 (+-1) end 1 (+-1)\n"), 0o644); err != nil {
				return m, err
			}
		}
		m = lab.RunReport{Hosts: 4, Link: "pareto:100us:50us", DurationNs: 60e9, WarmupNs: 10e9, Load: spec.Load,
			Summary: lab.GclockSummary{Summary: lab.Summary{Evaluations: 100, ErrorP50Ns: medianNs[seed], ErrorP99Ns: 900, ErrorMaxNs: 1000}, BoundCoverage: 1},
			Compare: map[string]lab.Summary{lab.PeerChrony: {Evaluations: 10, ErrorP50Ns: 5000, ErrorP99Ns: 9000}}}
		m.Gclock = lab.GclockResult{Series: []lab.SeriesPoint{{AtNs: 10e9, Host: 1, ErrNs: 42, LoNs: -100, HiNs: 100, Synced: true}}}
		m.Peers = []lab.PeerResult{{Peer: lab.PeerChrony, Readings: []lab.Reading{{AtNs: 1e9, OffsetNs: -1200}, {AtNs: 2e9, OffsetNs: 800, TrueNs: 300}}}}
		return m, nil
	}
}

// TestLabBenchKeepsEvidence runs the bench on a faked lab: every run gets
// its directory with run.json, the series, the peers' readings and the
// lab's files (not its pages, pid files or sockets), the report links each
// row to it, and the lab's run directory is emptied between runs.
func TestLabBenchKeepsEvidence(t *testing.T) {
	dir := t.TempDir()
	runRoot := t.TempDir()
	oldMeasure, oldRoot := labBenchMeasure, benchRunRoot
	t.Cleanup(func() { labBenchMeasure, benchRunRoot = oldMeasure, oldRoot })
	labBenchMeasure, benchRunRoot = fakeLabRun(t, map[uint64]int64{1: 150, 2: 400}, 0), runRoot
	out := filepath.Join(dir, "bench.md")
	var stdout, stderr bytes.Buffer
	if err := runLabBench([]string{"--seeds", "1-2", "--profile", "quiet,busy", "-o", out, "--frame-log", "x"}, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| quiet | [1](bench.d/quiet-seed1/) | 0.150 /", "| busy | [2](bench.d/busy-seed2/) | 0.400 /",
		"Every run's evidence is in [" + filepath.Join(dir, "bench.d") + "](bench.d/)"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	wantFiles := []string{"chrony-h0/chrony.conf", "chrony-h1/measurements.log", "frames.csv", "gclock/h0.yaml", "gclock/h1.log",
		"gclock/measurements-h1.csv", "gclock/state/state-h1.json", "peers.csv", "ptp4l-h1/ptp4l.log", "run.json", "series.csv"}
	for _, prof := range []string{"quiet", "busy"} {
		for seed := uint64(1); seed <= 2; seed++ {
			ev := filepath.Join(dir, "bench.d", fmt.Sprintf("%s-seed%d", prof, seed))
			if got := listFiles(t, ev); !slices.Equal(got, wantFiles) {
				t.Errorf("%s: files %q, want %q", ev, got, wantFiles)
			}
			r, err := readRunEvidence(filepath.Join(ev, "run.json"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Profile != prof || r.Seed != seed || len(r.Checks) == 0 || r.Report.Summary.ErrorP50Ns == 0 || r.Error != "" ||
				!strings.HasPrefix(r.Command, "gclock lab bench --seeds 1-2") || r.Evidence != ev {
				t.Errorf("%s: run.json %+v", ev, r)
			}
			b, _ := os.ReadFile(filepath.Join(ev, "gclock/h1.log"))
			if want := fmt.Sprintf("seed=%d\n", seed); !strings.HasSuffix(string(b), want) {
				t.Errorf("%s: h1.log %q, want its own run's (%q)", ev, b, want)
			}
			b, _ = os.ReadFile(filepath.Join(ev, "series.csv"))
			if want := "t_s,host,err_ns,lo_ns,hi_ns,synced\n10.000,1,42,-100,100,true\n"; string(b) != want {
				t.Errorf("%s: series %q, want %q", ev, b, want)
			}
			b, _ = os.ReadFile(filepath.Join(ev, "peers.csv"))
			if want := "t_s,peer,offset_ns,true_ns\n1.000,chrony,-1200,0\n2.000,chrony,800,300\n"; string(b) != want {
				t.Errorf("%s: peers %q, want %q", ev, b, want)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bench.d", "bench.json")); err != nil {
		t.Errorf("no bench.json: %v", err)
	}
	if ents, _ := os.ReadDir(runRoot); len(ents) != 0 {
		t.Errorf("the bench left its run directory: %v", ents)
	}
}

// TestLabBenchKeepsFailedRun: a run that fails keeps what the lab left,
// with the error in run.json, and the bench says where.
func TestLabBenchKeepsFailedRun(t *testing.T) {
	dir := t.TempDir()
	oldMeasure, oldRoot := labBenchMeasure, benchRunRoot
	t.Cleanup(func() { labBenchMeasure, benchRunRoot = oldMeasure, oldRoot })
	labBenchMeasure, benchRunRoot = fakeLabRun(t, map[uint64]int64{1: 150, 2: 400}, 2), t.TempDir()
	var stdout, stderr bytes.Buffer
	err := runLabBench([]string{"--seeds", "1-2", "--keep", filepath.Join(dir, "runs"), "--json"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "seed 2: fake lab: the daemon of host 1 exited early") {
		t.Fatalf("bench: %v", err)
	}
	ev := filepath.Join(dir, "runs", "quiet-seed2")
	if !strings.Contains(stderr.String(), "what the failed run left is in "+ev) {
		t.Errorf("stderr %q", stderr.String())
	}
	r, rerr := readRunEvidence(filepath.Join(ev, "run.json"))
	if rerr != nil || !strings.Contains(r.Error, "exited early") || r.Seed != 2 {
		t.Errorf("run.json %+v, %v", r, rerr)
	}
	if _, err := os.Stat(filepath.Join(ev, "gclock/h1.log")); err != nil {
		t.Errorf("the failed run's daemon log: %v", err)
	}
}

// TestLabBenchKeepNone: --keep none keeps nothing and the report has no
// links.
func TestLabBenchKeepNone(t *testing.T) {
	dir := t.TempDir()
	oldMeasure, oldRoot := labBenchMeasure, benchRunRoot
	t.Cleanup(func() { labBenchMeasure, benchRunRoot = oldMeasure, oldRoot })
	var sawRunDir []string
	fake := fakeLabRun(t, map[uint64]int64{1: 150}, 0)
	labBenchMeasure = func(ctx context.Context, f *labFlags, spec lab.RunSpec, keep bool) (lab.RunReport, error) {
		sawRunDir = append(sawRunDir, spec.Lab.RunDir)
		spec.Lab.RunDir = filepath.Join(dir, "lab")
		spec.Gclock.Trace = true
		return fake(ctx, f, spec, keep)
	}
	benchRunRoot = t.TempDir()
	out := filepath.Join(dir, "bench.md")
	var stdout, stderr bytes.Buffer
	if err := runLabBench([]string{"--seeds", "1", "--keep", "none", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sawRunDir, []string{""}) {
		t.Errorf("run directories %q, want the lab's default", sawRunDir)
	}
	if _, err := os.Stat(filepath.Join(dir, "bench.d")); err == nil {
		t.Error("--keep none made bench.d")
	}
	b, _ := os.ReadFile(out)
	if !strings.Contains(string(b), "| quiet | 1 | 0.150 /") || strings.Contains(string(b), "evidence") {
		t.Errorf("report:\n%s", b)
	}
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// runEvidence is a run.json.
type runEvidence struct {
	Command, Machine, Error string
	bench.Row
}

// readRunEvidence reads a run.json back.
func readRunEvidence(path string) (runEvidence, error) {
	var ev runEvidence
	b, err := os.ReadFile(path)
	if err != nil {
		return ev, err
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return ev, fmt.Errorf("%s: %w", path, err)
	}
	return ev, nil
}
