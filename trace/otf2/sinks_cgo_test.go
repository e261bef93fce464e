//go:build otf2 && cgo

package otf2

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSinksOTF2Identical writes the rich trace with the libotf2 sink and
// with the pure-Go sink: every file is the same bytes but for the anchor's
// trace id (libotf2 hashes the time, the host and the pid into it), and
// otf2-print -A prints the same.
func TestSinksOTF2Identical(t *testing.T) {
	write := func(create func(string, Options) (*Writer, error)) string {
		dir := t.TempDir()
		writeRichWith(t, dir, create)
		return dir
	}
	lib, pure := write(Create), write(CreateGo)
	var files []string
	err := filepath.Walk(lib, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			files = append(files, p[len(lib)+1:])
		}
		return err
	})
	if err != nil || len(files) < 4 {
		t.Fatalf("libotf2 wrote %v (%v)", files, err)
	}
	for _, f := range files {
		a, err := os.ReadFile(filepath.Join(lib, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(pure, f))
		if err != nil {
			t.Errorf("the pure-Go sink wrote no %s: %v", f, err)
			continue
		}
		if f == "traces.otf2" && len(a) == len(b) && len(a) > 24 {
			// The trace id: the 8 bytes before the snapshot and thumbnail counts and the 3 end markers.
			n := len(a) - 3 - 8 - 8
			copy(b[n:n+8], a[n:n+8])
		}
		if !bytes.Equal(a, b) {
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			t.Errorf("%s: libotf2 sink %d bytes, pure-Go sink %d; first difference at byte %d", f, len(a), len(b), i)
		}
	}
	if _, err := exec.LookPath("otf2-print"); err != nil {
		t.Skip("otf2-print not installed")
	}
	print := func(dir string) string {
		out, err := exec.Command("otf2-print", "-A", filepath.Join(dir, "traces.otf2")).CombinedOutput()
		if err != nil {
			t.Fatalf("otf2-print: %v\n%s", err, out)
		}
		var keep []string
		for _, l := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(l, "Trace identifier") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if a, b := print(lib), print(pure); a != b {
		t.Errorf("otf2-print differs:\nlibotf2 sink:\n%s\npure-Go sink:\n%s", a, b)
	}
}
