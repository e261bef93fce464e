package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// pageDirMode is the mode of a page directory the daemon creates: only
// the daemon writes there (no other user can plant or remove files beside
// the page, as anyone can in /dev/shm), everyone can read the page
// (global_time.group narrows the page itself to a group).
const pageDirMode = 0o755

// makePageDir creates the page's directory (its last component only: the
// parent, /run, must exist) when it is missing, mode 0755, owned by the
// daemon's user; systemd's RuntimeDirectory=gclock makes /run/gclock the
// same way before the daemon starts. An existing directory is left alone:
// gtime.NewWriterWith checks that it is the daemon's or root's and that
// nobody else can replace files in it. created says whether it was made.
func makePageDir(page string) (created bool, err error) {
	dir := filepath.Dir(page)
	err = os.Mkdir(dir, pageDirMode)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("global_time.shm_path: cannot create the page's directory: %w (hint: under systemd, RuntimeDirectory=gclock makes /run/gclock; or create %s owned by the daemon's user, mode 0755)", err, dir)
	}
	if err := os.Chmod(dir, pageDirMode); err != nil { // the umask may have cleared bits
		return true, fmt.Errorf("global_time.shm_path: %w", err)
	}
	return true, nil
}
