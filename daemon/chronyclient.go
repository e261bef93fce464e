package daemon

// Where the daemon's client socket for chronyd's command socket goes, and
// who may write to it. chronyd answers a request by sending to the path
// the request came from, so that path must be one chronyd can reach and
// write to: chronyc binds it in chronyd's own directory (/run/chrony,
// mode 0750, chronyd's user and group), which a daemon running as its own
// user, under systemd's ProtectSystem=strict, can neither write to nor
// (read-only /run) create files in. gclockd binds it in its own runtime
// directory instead (/run/gclock, RuntimeDirectory=gclock: writable under
// the unit's sandbox, and the same path for chronyd) and gives the socket
// to chronyd's group, mode 0660: chronyd (its group) may answer, no other
// user can send it forged replies. The daemon's user must be in chronyd's
// group (SupplementaryGroups=_chrony in deploy/gclockd.service) both to
// reach chronyd's socket through /run/chrony and to give its own socket
// to that group.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// chronyClientDir is the directory of the daemon's chronyd client socket:
// systemd's $RUNTIME_DIRECTORY (RuntimeDirectory=gclock), else the
// directory of the page (global_time.shm_path, the daemon's own), else
// chronyd's socket's own directory, as chronyc does (root only).
func chronyClientDir(c Config) string {
	if d := os.Getenv("RUNTIME_DIRECTORY"); d != "" {
		d, _, _ = strings.Cut(d, ":") // RuntimeDirectory= with several: the first
		return d
	}
	if c.GlobalTime.ShmPath != "" {
		return filepath.Dir(c.GlobalTime.ShmPath)
	}
	return filepath.Dir(c.RealTime.ChronySocket)
}

// shareWithChronyd gives the client socket at path to the group of
// chronyd's directory (where its command socket is), mode 0660, so that
// chronyd can send its reply and nobody else can.
func shareWithChronyd(path, chronySock string) error {
	fi, err := os.Stat(filepath.Dir(chronySock))
	if err != nil {
		return fmt.Errorf("chronyd's directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := os.Chmod(path, 0o660); err != nil {
		return fmt.Errorf("client socket %s: %w", path, err)
	}
	if err := os.Lchown(path, -1, int(st.Gid)); err != nil {
		return fmt.Errorf("client socket %s: giving it chronyd's group %d: %w (the daemon's user must be in that group: SupplementaryGroups=_chrony in gclockd.service)", path, st.Gid, err)
	}
	return nil
}
