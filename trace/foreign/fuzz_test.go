package foreign

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadArchive: whatever a location's event and local definition files
// hold, reading, correcting and writing end in a result or an error, never
// a panic or a hang. Seeds: a tiny Score-P-like archive written by
// python3-otf2 (testdata/tiny, scorep_like.py -procs 2 -seconds 0.05).
func FuzzReadArchive(f *testing.F) {
	evt, err := os.ReadFile(filepath.Join("testdata", "tiny", "traces", "0.evt"))
	if err != nil {
		f.Fatal(err)
	}
	def, err := os.ReadFile(filepath.Join("testdata", "tiny", "traces", "0.def"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(evt, def)
	f.Add(evt[:len(evt)/2], def)
	f.Add(evt, def[:len(def)-3])
	f.Fuzz(func(t *testing.T, evt, def []byte) {
		dir := filepath.Join(t.TempDir(), "a")
		if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "tiny"))); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "traces", "0.evt"), evt, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "traces", "0.def"), def, 0o644); err != nil {
			t.Fatal(err)
		}
		ar, err := ReadArchive(filepath.Join(dir, "traces.otf2"))
		if err != nil {
			return
		}
		res, err := Correct(ar.Trace, Options{Reference: -1, CLC: true})
		if err != nil {
			return
		}
		_, _ = ar.Write(filepath.Join(t.TempDir(), "out"), "traces", res)
	})
}
