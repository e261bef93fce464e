package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gclock/gclock/internal/perfettocheck"
)

// TestMPIRunOneStep: `gclock mpirun` runs a 4-rank job of an unmodified MPI
// program (mpi/testdata/ring.c) traced by libgclockmpi and leaves one
// corrected Perfetto trace with every rank in it, saying one line for the
// job on stderr (before, a traced job printed two notices per rank and
// needed mpirun and gclock merge by hand; issue 30 item 5).
func TestMPIRunOneStep(t *testing.T) {
	for _, tool := range []string{"mpicc", "mpirun", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s on PATH: gclock mpirun is not tested; run ci/deps.sh (installs openmpi-bin libopenmpi-dev)", tool)
		}
	}
	bin := t.TempDir()
	mk := exec.Command("make", "-s", "O="+bin, bin+"/libgclockmpi.so", bin+"/ring")
	mk.Dir = filepath.Join("..", "..", "mpi")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "job")
	args := []string{"-out", dir, "-lib", filepath.Join(bin, "libgclockmpi.so")}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	args = append(args, "--oversubscribe", "-np", "4",
		// Containers often forbid the shared-memory transport's cross-memory attach.
		"--mca", "btl_vader_single_copy_mechanism", "none",
		"--", filepath.Join(bin, "ring"), "10", "10")
	var stdout, stderr bytes.Buffer
	// No page: the ranks sync themselves (the library's sync sessions).
	t.Setenv("GCLOCK_PAGE", filepath.Join(t.TempDir(), "no-page"))
	if err := mpirunCmd(args, &stdout, &stderr); err != nil {
		t.Fatalf("gclock mpirun: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "gclock: 4 ranks, ") {
		t.Errorf("stderr: want one line for the job, got %d:\n%s", len(lines), stderr.String())
	}
	t.Log(lines[0])
	if !strings.Contains(stdout.String(), "wtime 3 ") {
		t.Errorf("the program's output did not pass through:\n%s", stdout.String())
	}
	if anchor := filepath.Join(dir, "otf2", "traces.otf2"); !strings.Contains(lines[0], anchor) {
		t.Errorf("the line does not name the OTF2 archive %s: %s", anchor, lines[0])
	} else if _, err := os.Stat(anchor); err != nil {
		t.Error(err)
	}
	if !strings.Contains(lines[0], "received before sent: ") || !strings.Contains(lines[0], " 0 corrected)") {
		t.Errorf("want 0 messages received before sent after correction: %s", lines[0])
	}
	pb, err := os.ReadFile(filepath.Join(dir, "trace.pftrace"))
	if err != nil {
		t.Fatal(err)
	}
	pt, err := perfettocheck.Decode(pb)
	if err != nil {
		t.Fatal(err)
	}
	procs := map[string]bool{}
	for _, tr := range pt.Tracks {
		if tr.Process {
			procs[tr.ProcessName] = true
		}
	}
	var flows int
	for _, e := range pt.Events {
		flows += len(e.Terminating)
	}
	if len(procs) != 4 || flows == 0 {
		t.Errorf("Perfetto trace: processes %v and %d message arrows, want 4 ranks and their messages", procs, flows)
	}
	rep, err := os.ReadFile(filepath.Join(dir, "merge.txt"))
	if err != nil || !strings.Contains(string(rep), "causality: ") {
		t.Errorf("merge report: %v\n%s", err, rep)
	}

	// A second job into the same directory replaces the first one's ranks.
	stderr.Reset()
	args[len(args)-2] = "2"
	if err := mpirunCmd(args, &stdout, &stderr); err != nil {
		t.Fatalf("gclock mpirun again: %v\n%s", err, stderr.String())
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "ranks", "rank-*.gct")); len(files) != 4 {
		t.Errorf("ranks after the second job: %v", files)
	}
}

// TestMPIRunUsage: the failures name what is missing.
func TestMPIRunUsage(t *testing.T) {
	var o, e bytes.Buffer
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-out", t.TempDir()}, "no program given"},
		{[]string{"-lib", filepath.Join(t.TempDir(), "none.so"), "-np", "2", "./app"}, "none.so"},
		{[]string{"-method", "nope", "./app"}, "nope"},
	} {
		err := mpirunCmd(tc.args, &o, &e)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
