package keyfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gclock/gclock/wire"
)

func TestParse(t *testing.T) {
	hex32 := strings.Repeat("ab", 32)
	tests := []struct {
		name, in string
		ids      []uint32
		err      string
	}{
		{"hex", "1 " + hex32 + "\n", []uint32{1}, ""},
		{"base64 and comments", "# rotation\n\n1 " + hex32 + "\n  2 base64:" + strings.Repeat("QUFB", 11) + "\n", []uint32{1, 2}, ""},
		{"short", "1 abcd\n", nil, "line 1: key id 1: 2 bytes, need at least 32"},
		{"not hex", "3 " + strings.Repeat("zz", 32), nil, "line 1: key id 3: secret is neither hex"},
		{"bad id", "x " + hex32, nil, "line 1: key id \"x\" is not a number"},
		{"three fields", "1 " + hex32 + " extra", nil, "line 1: key id 1: third field \"extra\": want peer=N"},
		{"four fields", "1 " + hex32 + " peer=2 x", nil, "line 1: want \"ID SECRET\" or \"ID SECRET peer=N\""},
		{"link keys", "1 " + hex32 + " peer=2\n1 " + hex32 + " peer=3\n1 " + hex32 + "\n", []uint32{1, 1, 1}, ""},
		{"link key twice", "1 " + hex32 + " peer=2\n1 " + hex32 + " peer=2\n", nil, "line 2: key id 1 for peer 2 given twice"},
		{"bad peer", "1 " + hex32 + " peer=-1\n", nil, "want peer=N"},
		{"duplicate", "1 " + hex32 + "\n1 " + hex32, nil, "line 2: key id 1 given twice"},
		{"empty", "# nothing\n", nil, "no key in the file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := Parse(strings.NewReader(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != len(tt.ids) {
				t.Fatalf("keys %v", keys)
			}
			for i, k := range keys {
				if k.ID != tt.ids[i] || len(k.Secret) < wire.MinKeyLen {
					t.Fatalf("key %d: %d (%d bytes)", i, k.ID, len(k.Secret))
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add("1 " + strings.Repeat("ab", 32))
	f.Add("# c\n2 base64:" + strings.Repeat("QUFB", 11))
	f.Add("3 " + strings.Repeat("cd", 32) + " peer=4")
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := Parse(strings.NewReader(s))
		if err == nil && len(keys) == 0 {
			t.Fatal("no error and no key")
		}
		for _, k := range keys {
			if len(k.Secret) < wire.MinKeyLen {
				t.Fatalf("short key %d accepted", k.ID)
			}
		}
	})
}

// TestReadRefused: Read refuses a key file others can read or write and
// a directory, naming the file and the reason, and reads a 0600 or 0400
// file.
func TestReadRefused(t *testing.T) {
	dir := t.TempDir()
	line, err := NewLine(1)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(line), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode passes through the umask
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o400, true}, {0o640, false}, {0o604, false}, {0o660, false}, {0o644, false}} {
		p := write(fmt.Sprintf("k%o.key", tt.mode), tt.mode)
		keys, err := Read(p)
		switch {
		case tt.ok && (err != nil || len(keys) != 1 || keys[0].ID != 1):
			t.Errorf("mode %o: %v, %v; want key 1", tt.mode, keys, err)
		case !tt.ok && (!errors.Is(err, ErrPerm) || !strings.Contains(err.Error(), p)):
			t.Errorf("mode %o: %v, want ErrPerm naming the file", tt.mode, err)
		}
	}
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory as key file: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "missing.key")); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "gclock keygen") {
		t.Errorf("missing key file: %v, want ErrNotExist with a hint", err)
	}
}

// TestLinkLines: a node's link lines parse back as one link key per peer,
// the same key its peer derives.
func TestLinkLines(t *testing.T) {
	line, err := NewLine(5)
	if err != nil {
		t.Fatal(err)
	}
	master, err := Parse(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := Parse(strings.NewReader(LinkLines(master[0], 2, []uint32{1, 2, 3})))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("%d link keys for 2 peers", len(keys))
	}
	for _, k := range keys {
		if !k.Link || k.ID != 5 || k.Peer == 2 || string(k.Secret) != string(wire.LinkKey(master[0], k.Peer, 2).Secret) {
			t.Errorf("link key %+v: not the one peer %d derives", k, k.Peer)
		}
	}
}
