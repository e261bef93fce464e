package format

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCHeader compiles testdata/ctrace.c against include/gclock_trace.h,
// runs it, and reads its trace with this package.
func TestCHeader(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			t.Skip("no C compiler (cc or gcc) on PATH: the C header is not tested; run ci/deps.sh")
		}
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "ctrace")
	out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-pthread",
		"-I", filepath.Join("..", "..", "include"), "-o", bin, filepath.Join("testdata", "ctrace.c")).CombinedOutput()
	if err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	file := filepath.Join(dir, "c.gct")
	if out, err := exec.Command(bin, file).CombinedOutput(); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Summarize(bytes.NewReader(data), file, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Meta.Proc != 7 || s.Meta.Host != 3 || s.Meta.Name != `c rank "7"` || s.Meta.Flags != FlagSyncedHost || s.Meta.Clock != "CLOCK_MONOTONIC_RAW" {
		t.Errorf("meta %+v", s.Meta)
	}
	if s.Events != 10003 || s.First != 5000 || s.Chunks[KindEvents] != 3 {
		t.Errorf("%d events from %d in %d chunks", s.Events, s.First, s.Chunks[KindEvents])
	}
	if len(s.Names) != 1 || s.Names[0].Name != "compute" || s.Names[0].Proc != 7 {
		t.Errorf("names %+v", s.Names)
	}
	if len(s.Sessions) != 2 || s.Sessions[0].Kind != SessionStart || s.Sessions[1].Index != 1 || len(s.Sessions[1].Samples) != 2 ||
		s.Sessions[0].Samples[2].SrcRecv != 3300 || s.Sessions[0].Samples[1].LocRecv != 2600 {
		t.Errorf("sessions %+v", s.Sessions)
	}
	// Check the explicit events field by field.
	r := NewReader(bytes.NewReader(data), file)
	i := 0
	for i < 10000 {
		c, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind != KindEvents {
			continue
		}
		ev, err := DecodeEvents(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ev {
			if i >= 10000 {
				break
			}
			want := Event{Time: 5000 + int64(i)*10, Kind: Kind(1 + i%6), ID: uint64(i), Value: -int64(i), Peer: uint32(i % 5), Track: uint16(i % 3)}
			if e != want {
				t.Fatalf("event %d: %+v, want %+v", i, e, want)
			}
			i++
		}
	}
}
