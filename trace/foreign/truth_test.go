package foreign

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

const python = "/usr/bin/python3"

// needPythonOTF2 skips the test without /usr/bin/python3 and its otf2
// module (Debian python3-otf2; ci/deps.sh installs it).
func needPythonOTF2(t testing.TB) {
	t.Helper()
	if err := exec.Command(python, "-c", "import otf2").Run(); err != nil {
		t.Skipf("skipped: %s cannot import otf2 (install python3-otf2): %v", python, err)
	}
}

// generate writes a Score-P-like archive into a new directory and returns
// the directory and its truth.
func generate(t testing.TB, args ...string) (string, *Truth) {
	t.Helper()
	needPythonOTF2(t)
	dir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(python, append([]string{filepath.Join("testdata", "scorep_like.py"), "-out", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	tr, err := ReadTruth(filepath.Join(dir, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	return dir, tr
}

// modelOf builds the model from what the archive holds (local times,
// offset records, which events are a message's ends): no truth in it.
func modelOf(tr *Truth) *Trace {
	m := &Trace{}
	for i, l := range tr.Locations {
		loc := Location{Name: fmt.Sprintf("rank %d", i), Times: slices.Clone(l.Local)}
		for _, o := range l.Offsets {
			loc.Offsets = append(loc.Offsets, OffsetRecord{Local: o.Local, Offset: o.Offset, StdDev: 1000})
		}
		m.Locs = append(m.Locs, loc)
	}
	for _, x := range tr.Messages {
		m.Msgs = append(m.Msgs, Message{From: x.From, To: x.To, Send: x.SendIdx, Recv: x.RecvIdx})
	}
	return m
}
