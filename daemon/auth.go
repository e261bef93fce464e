package daemon

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gclock/gclock/wire"
	"github.com/gclock/gclock/wire/keyfile"
)

// AuthConfig is the cluster key (docs/daemon.md, "Security"). With a key
// file, every datagram carries a truncated HMAC-SHA256 tag under the key
// KeyID, and a datagram is accepted only with a valid tag under one of
// the keys Accept names (KeyID always included).
type AuthConfig struct {
	// KeyFile is an absolute path to the key file: one key a line, "ID
	// SECRET" (a cluster key) or "ID SECRET peer=N" (this node's link key
	// with node N, from gclock keygen -links), SECRET 64 or more hex
	// digits (32+ bytes) or "base64:" and the standard base64 of 32+
	// bytes; blank lines and lines starting with # are skipped. With link
	// keys, a datagram to or from a peer is sealed with that link's key
	// only, so a host holding its own links cannot pose as another node. The file must be a regular file readable by its
	// owner only (mode 0600 or 0400), owned by the daemon's user or root.
	// Empty: no authentication (see docs/daemon.md for what an attacker
	// on the network can then do), refused when a peer is off loopback
	// unless Insecure is set.
	KeyFile string `yaml:"key_file,omitempty"`
	// KeyID is the key datagrams are sealed with.
	KeyID uint32 `yaml:"key_id,omitempty"`
	// Accept lists other key ids accepted on receive, for a rotation: add
	// the new key to every host's file and to Accept, then switch KeyID
	// host by host, then drop the old key.
	Accept []uint32 `yaml:"accept,omitempty"`
	// Insecure runs without a key although a peer is off loopback, which
	// the daemon otherwise refuses (keyless.go): anyone who can send UDP
	// with a peer's address can then move the cluster's time. For private
	// networks and tests only.
	Insecure bool `yaml:"insecure,omitempty"`
}

func (a *AuthConfig) validate(e *errs) {
	if a.KeyFile == "" {
		if a.KeyID != 0 || len(a.Accept) > 0 {
			e.add("auth.key_file", "empty, but auth.key_id or auth.accept is set: name the key file")
		}
		return
	}
	if !filepath.IsAbs(a.KeyFile) {
		e.add("auth.key_file", "%q: want an absolute path", a.KeyFile)
	}
	for i, id := range a.Accept {
		if slices.Index(a.Accept, id) != i {
			e.add(fmt.Sprintf("auth.accept[%d]", i), "key id %d listed twice", id)
		}
	}
}

// keyring reads the key file and returns the keyring to seal and open
// datagrams with, or nil without a key file. Errors name the file and the
// line.
func (a *AuthConfig) keyring() (*wire.Keyring, error) {
	if a.KeyFile == "" {
		return nil, nil
	}
	keys, err := keyfile.Read(a.KeyFile)
	if err != nil {
		return nil, err
	}
	want := append([]uint32{a.KeyID}, a.Accept...)
	var use []wire.Key
	for i, id := range want {
		if !slices.ContainsFunc(keys, func(k wire.Key) bool { return k.ID == id }) {
			return nil, fmt.Errorf("auth: key id %d is not in %s", id, a.KeyFile)
		}
		if slices.Index(want, id) != i {
			continue
		}
		for _, k := range keys {
			if k.ID == id {
				use = append(use, k) // the cluster key and the link keys of that id
			}
		}
	}
	kr, err := wire.NewKeyring(a.KeyID, use)
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", a.KeyFile, err)
	}
	return kr, nil
}
