package tracegen

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTruthDirRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := map[uint32][]int64{0: {1, 2, 3}, 7: {1 << 62, 1<<62 + 5}, 12: {}}
	if err := WriteTruthDir(dir, want); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "truth-07.bin")); err != nil {
		t.Errorf("process 7's file: %v", err)
	}
	got, err := ReadTruthDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d processes, want %d", len(got), len(want))
	}
	for p, tr := range want {
		if len(tr) == 0 && len(got[p]) == 0 {
			continue
		}
		if !reflect.DeepEqual(got[p], tr) {
			t.Errorf("process %d: %v, want %v", p, got[p], tr)
		}
	}
}

func TestReadTruthDirErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadTruthDir(dir); err == nil || !strings.Contains(err.Error(), "no truth-*.bin file in "+dir) {
		t.Errorf("empty dir: %v", err)
	}
	bad := filepath.Join(dir, "truth-03.bin")
	if err := os.WriteFile(bad, []byte("not a truth file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTruthDir(dir); !errors.Is(err, ErrBadTruth) || !strings.Contains(err.Error(), bad) {
		t.Errorf("corrupt file: %v, want ErrBadTruth naming %s", err, bad)
	}
	if err := WriteTruthDir(filepath.Join(dir, "no", "such"), map[uint32][]int64{1: {1}}); err == nil {
		t.Error("unwritable dir: no error")
	}
}
