package daemon

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gclock/gclock/wire"
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

// Keyring reads the key file and returns the keyring to seal and open
// datagrams with, or nil without a key file. Errors name the file and the
// line.
func (a *AuthConfig) Keyring() (*wire.Keyring, error) {
	if a.KeyFile == "" {
		return nil, nil
	}
	keys, err := ReadKeyFile(a.KeyFile)
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

// ErrKeyFilePerm is returned for a key file that others could read or
// replace.
var ErrKeyFilePerm = errors.New("key file readable or writable by others")

// ReadKeyFile reads a key file (see AuthConfig.KeyFile), refusing one
// whose mode lets the group or others read or write it, or that is owned
// by another user than the daemon's (root excepted).
func ReadKeyFile(path string) ([]wire.Key, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("auth: %w (make the cluster's key once with gclock keygen -o cluster.key and install the same file, mode 0600, on every host)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("auth: %s: not a regular file (%v)", path, fi.Mode().Type())
	}
	if p := fi.Mode().Perm(); p&0o077 != 0 {
		return nil, fmt.Errorf("auth: %s: mode %04o: %w (chmod 600 %s)", path, p, ErrKeyFilePerm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
			return nil, fmt.Errorf("auth: %s: owned by uid %d, not by the daemon's uid %d or root: %w", path, st.Uid, uid, ErrKeyFilePerm)
		}
	}
	keys, err := ParseKeys(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys parses the lines of a key file. Errors name the line.
func ParseKeys(r io.Reader) ([]wire.Key, error) {
	var keys []wire.Key
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		fields := strings.Fields(s)
		if len(fields) != 2 && len(fields) != 3 {
			return nil, fmt.Errorf("line %d: want \"ID SECRET\" or \"ID SECRET peer=N\", have %d fields", line, len(fields))
		}
		id, err := strconv.ParseUint(fields[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("line %d: key id %q is not a number in 0..%d", line, fields[0], uint32(1<<32-1))
		}
		var secret []byte
		if b64, ok := strings.CutPrefix(fields[1], "base64:"); ok {
			secret, err = base64.StdEncoding.DecodeString(b64)
		} else {
			secret, err = hex.DecodeString(fields[1])
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: key id %d: secret is neither hex nor base64:... (%v)", line, id, err)
		}
		if len(secret) < wire.MinKeyLen {
			return nil, fmt.Errorf("line %d: key id %d: %d bytes, need at least %d (gclock keygen makes one)", line, id, len(secret), wire.MinKeyLen)
		}
		k := wire.Key{ID: uint32(id), Secret: secret}
		if len(fields) == 3 {
			ps, ok := strings.CutPrefix(fields[2], "peer=")
			peer, err := strconv.ParseUint(ps, 10, 32)
			if !ok || err != nil {
				return nil, fmt.Errorf("line %d: key id %d: third field %q: want peer=N, N a node id", line, id, fields[2])
			}
			k.Link, k.Peer = true, uint32(peer)
		}
		if slices.ContainsFunc(keys, func(o wire.Key) bool { return o.ID == k.ID && o.Link == k.Link && o.Peer == k.Peer }) {
			if k.Link {
				return nil, fmt.Errorf("line %d: key id %d for peer %d given twice", line, id, k.Peer)
			}
			return nil, fmt.Errorf("line %d: key id %d given twice", line, id)
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in the file")
	}
	return keys, nil
}

// LinkKeyLines returns node self's key file lines "ID SECRET peer=N", one
// per peer other than self, derived from the cluster key master
// (wire.LinkKey).
func LinkKeyLines(master wire.Key, self uint32, peers []uint32) string {
	var b strings.Builder
	for _, p := range peers {
		if p == self {
			continue
		}
		k := wire.LinkKey(master, self, p)
		fmt.Fprintf(&b, "%d %s peer=%d\n", k.ID, hex.EncodeToString(k.Secret), p)
	}
	return b.String()
}

// NewKeyLine returns a key file line "ID SECRET" with a fresh random
// secret of wire.MinKeyLen bytes in hex.
func NewKeyLine(id uint32) (string, error) {
	b := make([]byte, wire.MinKeyLen)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %s\n", id, hex.EncodeToString(b)), nil
}
