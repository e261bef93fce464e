package daemon

import (
	"errors"
	"strings"
	"testing"
)

// TestKeylessOffLoopbackRefused (issue 17, safe defaults): a daemon whose
// peers are off loopback refuses to start without a key unless the config
// says auth: {insecure: true}; the error names auth.key_file, its line and
// the way out. Loopback clusters (the built-in default) need no key.
func TestKeylessOffLoopbackRefused(t *testing.T) {
	const offLoopback = "node: {id: 1}\npeers:\n  - {id: 1, address: 10.0.0.1:3190}\n  - {id: 2, address: 10.0.0.2:3190}\nreference: {order: [1]}\n"
	for _, tt := range []struct {
		name, yaml string
		field      string // "" accepted
		line       int
	}{
		{"defaults", "", "", 0},
		{"loopback peers", "node: {id: 1}\npeers:\n  - {id: 1, address: 127.0.0.1:3190}\n  - {id: 2, address: 127.0.0.2:3190}\n  - {id: 3, address: '[::1]:3191'}\n  - {id: 4, address: 'localhost:3192'}\nreference: {order: [1]}\n", "", 0},
		{"off loopback, no key", offLoopback, "auth.key_file", 0}, // not in the file: no line
		{"one peer off loopback", "node: {id: 1}\npeers:\n  - {id: 1, address: 127.0.0.1:3190}\n  - {id: 2, address: '[fd00::2]:3190'}\nreference: {order: [1]}\n", "auth.key_file", 0},
		{"a host name", "node: {id: 1}\npeers:\n  - {id: 1, address: 127.0.0.1:3190}\n  - {id: 2, address: node2.example:3190}\nreference: {order: [1]}\n", "auth.key_file", 0},
		{"off loopback, insecure", offLoopback + "auth: {insecure: true}\n", "", 0},
		{"off loopback, key", offLoopback + "auth: {key_file: /etc/gclock/cluster.key, key_id: 1}\n", "", 0},
		{"key and insecure", offLoopback + "auth: {key_file: /etc/gclock/cluster.key, key_id: 1, insecure: true}\n", "auth.insecure", 6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field || fe.Line != tt.line {
				t.Fatalf("%v; want a FieldError on %s line %d", err, tt.field, tt.line)
			}
			if tt.field == "auth.key_file" && (!strings.Contains(err.Error(), "insecure: true") || !strings.Contains(err.Error(), "gclock keygen")) {
				t.Errorf("%v: want the way out (gclock keygen, or insecure: true)", err)
			}
		})
	}
	// Run refuses it too, before it binds anything.
	c := DefaultConfig()
	c.Peers = []Peer{{ID: 1, Address: "127.0.0.1:0"}, {ID: 2, Address: "192.0.2.2:3190"}}
	c.Reference.Order = []uint32{1}
	if err := Run(t.Context(), c, nil); err == nil || !strings.Contains(err.Error(), "auth.key_file") {
		t.Errorf("Run: %v, want the auth.key_file refusal", err)
	}
}

// TestMissingKeyFileHint: a key file that is not there says how to make
// one (once, then the same file on every host).
func TestMissingKeyFileHint(t *testing.T) {
	a := AuthConfig{KeyFile: t.TempDir() + "/cluster.key", KeyID: 1}
	_, err := a.keyring()
	if err == nil || !strings.Contains(err.Error(), "gclock keygen -o") || !strings.Contains(err.Error(), a.KeyFile) {
		t.Errorf("missing key file: %v, want the file and the hint", err)
	}
}
