package main

import (
	"bytes"
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
