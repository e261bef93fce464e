package keyfile

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/gclock/gclock/wire"
)

// ErrPerm is returned for a key file that others could read or
// replace.
var ErrPerm = errors.New("key file readable or writable by others")

// Read reads a key file (the daemon's auth.key_file), refusing one
// whose mode lets the group or others read or write it, or that is owned
// by another user than the caller's (root excepted): the daemon, gclock
// keygen -links and measure all read a key file with it.
func Read(path string) ([]wire.Key, error) {
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
		return nil, fmt.Errorf("auth: %s: mode %04o: %w (chmod 600 %s)", path, p, ErrPerm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := uint32(os.Geteuid()); st.Uid != uid && st.Uid != 0 {
			return nil, fmt.Errorf("auth: %s: owned by uid %d, not by the daemon's uid %d or root: %w", path, st.Uid, uid, ErrPerm)
		}
	}
	keys, err := Parse(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", path, err)
	}
	return keys, nil
}

// Parse parses the lines of a key file. Errors name the line.
func Parse(r io.Reader) ([]wire.Key, error) {
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

// LinkLines returns node self's key file lines "ID SECRET peer=N", one
// per peer other than self, derived from the cluster key master
// (wire.LinkKey).
func LinkLines(master wire.Key, self uint32, peers []uint32) string {
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

// NewLine returns a key file line "ID SECRET" with a fresh random
// secret of wire.MinKeyLen bytes in hex.
func NewLine(id uint32) (string, error) {
	b := make([]byte, wire.MinKeyLen)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %s\n", id, hex.EncodeToString(b)), nil
}
