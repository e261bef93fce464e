package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gclock/gclock/daemon"
)

func TestDaemonPrintConfig(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runDaemon([]string{"-print-config", "-id", "2", "-estimator", "hull"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	// The printed config loads back to the same config.
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, out.Bytes(), 0o644)
	got, err := daemon.Load(path)
	if err != nil {
		t.Fatalf("printed config does not load: %v\n%s", err, out.String())
	}
	want := daemon.DefaultConfig()
	want.Node.ID, want.Sync.Estimator = 2, "hull"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

func TestDaemonConfigErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("sync:\n  estimator: kalman\n"), 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-config", bad}, "line 2: sync.estimator"},
		{[]string{"-config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"-topology", "torus", "-print-config"}, "topology.kind"},
		{[]string{"stray"}, "unexpected argument"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		err := runDaemon(tt.args, &out, &out)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("gclock daemon %v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
}
