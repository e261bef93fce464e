package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gclock/gclock/daemon"
)

func TestKeygen(t *testing.T) {
	var a, b bytes.Buffer
	if err := runKeygen([]string{"-id", "42"}, &a); err != nil {
		t.Fatal(err)
	}
	if err := runKeygen(nil, &b); err != nil {
		t.Fatal(err)
	}
	keys, err := daemon.ParseKeys(bytes.NewReader(append(a.Bytes(), b.Bytes()...)))
	if err != nil || len(keys) != 2 || keys[0].ID != 42 || keys[1].ID != 1 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	if bytes.Equal(keys[0].Secret, keys[1].Secret) {
		t.Fatal("two keys with the same secret")
	}
	if err := runKeygen([]string{"-id", "4294967296"}, &a); err == nil {
		t.Fatal("id beyond uint32 accepted")
	}
}

// TestKeygenFile: -o writes a new key file of mode 0600 whatever the
// umask, that the daemon reads, and never overwrites an existing one (a
// cluster has one key, copied to every host).
func TestKeygenFile(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "cluster.key")
	var out bytes.Buffer
	if err := runKeygen([]string{"-id", "3", "-o", path}, &out); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("with -o, stdout got %q", out.String())
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	keys, err := daemon.ReadKeyFile(path)
	if err != nil || len(keys) != 1 || keys[0].ID != 3 {
		t.Fatalf("the daemon reads %v, %v", keys, err)
	}
	before, _ := os.ReadFile(path)
	err = runKeygen([]string{"-o", path}, &out)
	if err == nil || !strings.Contains(err.Error(), "exists: not overwritten") {
		t.Errorf("second keygen -o: %v, want a refusal", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, before) {
		t.Errorf("the existing key was changed")
	}
}
