package daemoncmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrintConfigPreflight: -print-config runs the checks the daemon makes
// at start, so it fails (after printing) on a key file the daemon would
// refuse (issue 19: it printed and exited 0, then the daemon refused it).
func TestPrintConfigPreflight(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "cluster.key")
	if err := os.WriteFile(key, []byte("1 "+strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "gclock.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("auth: {key_file: %s, key_id: 1}\n", key)), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := Run("gclock daemon", []string{"-config", cfg, "-print-config"}, &out, &errOut); err != nil {
		t.Fatalf("a good key file (0600): %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "key_file: "+key) {
		t.Errorf("the printed config lacks the key file:\n%s", out.String())
	}
	for _, tt := range []struct {
		name  string
		setup func()
		want  string
	}{
		{"readable by others", func() { os.Chmod(key, 0o644) }, "cluster.key"},
		{"missing", func() { os.Remove(key) }, "cluster.key"},
	} {
		tt.setup()
		out.Reset()
		err := Run("gclock daemon", []string{"-config", cfg, "-print-config"}, &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "would not start") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want the daemon's refusal naming %s", tt.name, err, tt.want)
		}
		if out.Len() == 0 {
			t.Errorf("%s: nothing printed; the effective config comes first", tt.name)
		}
	}
}
