package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gclock/gclock/wire"
	"github.com/gclock/gclock/wire/keyfile"
)

func TestKeygen(t *testing.T) {
	var a, b bytes.Buffer
	if err := runKeygen([]string{"-id", "42"}, &a); err != nil {
		t.Fatal(err)
	}
	if err := runKeygen(nil, &b); err != nil {
		t.Fatal(err)
	}
	keys, err := keyfile.Parse(bytes.NewReader(append(a.Bytes(), b.Bytes()...)))
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

// TestKeygenLinks: node files derived from one master open each other's
// datagrams, and refuse the wrong flags.
func TestKeygenLinks(t *testing.T) {
	master := filepath.Join(t.TempDir(), "master.key")
	var m bytes.Buffer
	if err := runKeygen([]string{"-id", "3"}, &m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(master, m.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	rings := map[uint32]*wire.Keyring{}
	for _, n := range []uint32{1, 2} {
		var out bytes.Buffer
		if err := runKeygen([]string{"-links", "-id", "3", "-master", master, "-node", fmt.Sprint(n), "-peers", "1,2,3"}, &out); err != nil {
			t.Fatal(err)
		}
		keys, err := keyfile.Parse(&out)
		if err != nil || len(keys) != 2 || !keys[0].Link {
			t.Fatalf("node %d: %v, %v", n, keys, err)
		}
		if rings[n], err = wire.NewKeyring(3, keys); err != nil {
			t.Fatal(err)
		}
	}
	p := wire.Packet{Op: wire.OpStatusQuery, Sender: 1, Seq: 1}
	b, _ := p.MarshalBinary()
	if _, _, err := rings[2].Open(rings[1].Seal(b, 2, 1)); err != nil {
		t.Fatalf("node 2 cannot open node 1's datagram: %v", err)
	}
	for _, args := range [][]string{
		{"-links", "-master", master, "-node", "4", "-peers", "1,2,3", "-id", "3"},
		{"-links", "-master", master, "-node", "1", "-peers", "1,2,3", "-id", "9"},
		{"-links", "-node", "1", "-peers", "1,2"},
		{"-links", "-master", master, "-node", "1", "-peers", "1,x", "-id", "3"},
	} {
		if err := runKeygen(args, io.Discard); err == nil {
			t.Errorf("keygen %v accepted", args)
		}
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
	keys, err := keyfile.Read(path)
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
