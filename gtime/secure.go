package gtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// The page's security model (docs/gtime.md has the long form):
//
//   - Only the daemon's user writes the page. The writer creates it under a
//     temporary name with O_EXCL|O_NOFOLLOW in a directory that only the
//     daemon's user or root can replace files in, sets its mode explicitly
//     (0644, or 0640 and a group), and renames it into place. An existing
//     page is read (to resume from it) only if it is the daemon's own
//     (owner, mode not group/world writable, one link, no symlink); a
//     foreign file at the page's, the temporary's or the lock's name is a
//     leftover, removed (never followed, never written) unless a live
//     writer holds the lock (Writer.Leftovers says what went).
//   - One writer per page: an exclusive flock on a separate lock file
//     (page path + ".lock", mode 0600, the daemon's own), never on the
//     page, so no reader can take a lock that blocks a restart.
//   - Readers open with O_NOFOLLOW and map only a regular file of the page
//     size owned by root, by themselves, by an owner they were told to
//     trust or by the owner of a directory nobody else can write, not
//     writable by group or others, with one link.
//   - A page that shrinks under a mapping raises SIGBUS on access; Go
//     readers and the writer turn it into ErrTruncated with
//     debug.SetPanicOnFault around every access to the mapping. The writer
//     then puts a new page at the path, and readers follow it.

// guard, deferred as `defer guard(&err, debug.SetPanicOnFault(true))`,
// turns a memory fault on a mapped page (SIGBUS after the file shrank)
// into ErrTruncated instead of killing the process, and restores the
// goroutine's previous fault mode. Any other panic goes on.
func guard(err *error, old bool) {
	debug.SetPanicOnFault(old)
	if p := recover(); p != nil {
		f, ok := p.(interface{ Addr() uintptr })
		if !ok {
			panic(p)
		}
		*err = fmt.Errorf("memory fault at %#x: %w", f.Addr(), ErrTruncated)
	}
}

// pageMode is the permission of a page the writer creates.
func (o WriterOptions) pageMode() uint32 {
	if o.Group > 0 {
		return 0o640
	}
	return 0o644
}

// checkDir refuses a page directory in which someone other than the
// daemon's user or root could replace or remove the page: it must be owned
// by one of them and, if writable by group or others, have the sticky bit
// (as /dev/shm and /tmp do: then only a file's owner can rename over it).
func checkDir(fd int, dir string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	euid := uint32(os.Geteuid())
	if st.Uid != 0 && st.Uid != euid {
		return fmt.Errorf("directory %s is owned by uid %d, not by root or the daemon's uid %d (hint: publish in a directory the daemon owns, e.g. /run/gclock): %w",
			dir, st.Uid, euid, ErrUnsafe)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Errorf("directory %s has mode %#o: writable by group or others without the sticky bit, anyone could replace the page: %w",
			dir, st.Mode&0o7777, ErrUnsafe)
	}
	return nil
}

// checkOwnFile says whether an existing file (lstat'ed) is the daemon's
// own: a regular file, not a symlink, owned by the daemon's uid, one link,
// not writable by group or others and without set-id bits. Only such a
// file is reused (the lock) or replaced (a stale page).
func checkOwnFile(st *unix.Stat_t, path string) error {
	euid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s is a symbolic link: refused (remove it): %w", path, ErrUnsafe)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file (mode %#o): refused (remove it): %w", path, st.Mode, ErrUnsafe)
	case st.Uid != euid:
		return fmt.Errorf("%s is owned by uid %d, not the daemon's uid %d: refused, another user may have planted it (remove it): %w",
			path, st.Uid, euid, ErrUnsafe)
	case st.Nlink != 1:
		return fmt.Errorf("%s has %d hard links: refused, it may be linked from elsewhere (remove it): %w", path, st.Nlink, ErrUnsafe)
	case st.Mode&0o7022 != 0:
		return fmt.Errorf("%s has mode %#o: writable by group or others (or set-id), anyone may have written it: refused (remove it): %w",
			path, st.Mode&0o7777, ErrUnsafe)
	}
	return nil
}

// checkReadable is what a reader requires of a page it maps: a regular
// file, owned by a trusted uid (trustedOwner), not writable by group or
// others, one link, the page size.
func checkReadable(st *unix.Stat_t, path string, owner int) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file (mode %#o): %w", path, st.Mode, ErrNotPage)
	case !trustedOwner(st.Uid, path, owner):
		return fmt.Errorf("%s is owned by uid %d, not by root, you (uid %d), the owner of a directory only its owner can write, or a uid you trust: refused, any user may have planted it (hint: trust the daemon's user with gtime.OpenOptions.Owner or gclock now -owner): %w",
			path, st.Uid, os.Geteuid(), ErrUnsafe)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s has mode %#o: writable by group or others, anyone may have written it: refused: %w", path, st.Mode&0o7777, ErrUnsafe)
	case st.Nlink != 1:
		return fmt.Errorf("%s has %d hard links: refused: %w", path, st.Nlink, ErrUnsafe)
	case st.Size != PageSize:
		return fmt.Errorf("%s: size %d, want %d: %w", path, st.Size, PageSize, ErrNotPage)
	}
	return nil
}

// trustedOwner says whether a reader trusts a page owned by uid: root, the
// reader's own uid, the given owner (> 0), or the owner of the page's
// directory when nobody else can create files there: the directory is not
// writable by group or others and sits in a root-owned directory that is
// not either (a daemon's /run/gclock, as systemd's RuntimeDirectory makes).
// include/gclock.h applies the same rule.
func trustedOwner(uid uint32, path string, owner int) bool {
	if uid == 0 || uid == uint32(os.Geteuid()) || (owner > 0 && uid == uint32(owner)) {
		return true
	}
	dir := filepath.Dir(path)
	var st, pst unix.Stat_t
	if unix.Stat(dir, &st) != nil || st.Uid != uid || st.Mode&0o022 != 0 {
		return false
	}
	return unix.Stat(filepath.Dir(dir), &pst) == nil && pst.Uid == 0 && pst.Mode&0o022 == 0
}

// openLock opens (creating it 0600 if needed) the writer's lock file in
// the page's directory and takes an exclusive, non-blocking flock on it.
// Readers never open it (they cannot: mode 0600, the daemon's own).
//
// A foreign file at the lock's name (a symbolic link, a FIFO, another
// user's file, a file with a loose mode or more links) is a leftover to
// remove, not a reason to refuse to start, when it is safe: a non-regular
// file is unlinked (a symbolic link itself, never its target); a regular
// one is opened without following links and flocked first, so a lock that
// a live writer holds is never taken away (refused: another daemon runs),
// and only a file nobody holds is unlinked. A file the daemon cannot open
// to check (another user's, for a daemon that is not root) is refused.
// What was removed is appended to notes.
func openLock(dirfd int, dir, name string, notes *[]string) (*os.File, error) {
	path := dir + "/" + name
	for attempt := 0; ; attempt++ {
		if err := removeIfNotRegular(dirfd, dir, name, "lock file", notes); err != nil {
			return nil, err
		}
		fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
		if err != nil {
			switch {
			case errors.Is(err, unix.ELOOP):
				return nil, fmt.Errorf("lock file %s became a symbolic link while being replaced: refused (remove it): %w", path, ErrUnsafe)
			case errors.Is(err, unix.EACCES):
				return nil, fmt.Errorf("lock file %s belongs to another user and cannot be opened to check whether a live daemon holds it: refused (remove it, or publish in a directory the daemon owns, e.g. /run/gclock): %w", path, ErrUnsafe)
			}
			return nil, fmt.Errorf("lock file %s: %w", path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			f.Close()
			return nil, fmt.Errorf("lock file %s: %w", path, err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("another writer (daemon) holds the lock %s: %w", path, err)
			}
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		ownErr := checkOwnFile(&st, "lock file "+path)
		if ownErr == nil {
			if st.Mode&0o077 != 0 {
				if err := unix.Fchmod(fd, 0o600); err != nil {
					f.Close()
					return nil, fmt.Errorf("lock file %s: chmod 0600: %w", path, err)
				}
			}
			return f, nil
		}
		// Not the daemon's own, and no live writer holds it (the flock
		// went through): a leftover. Remove it, if it is still the file
		// just checked, and create a fresh one; refuse if it comes back.
		if attempt > 0 {
			f.Close()
			return nil, ownErr
		}
		var now unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
			f.Close()
			return nil, fmt.Errorf("lock file %s changed while being checked: refused: %w", path, ErrUnsafe)
		}
		err = unix.Unlinkat(dirfd, name, 0)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%v; and it cannot be removed: %v (remove it, or publish in a directory the daemon owns, e.g. /run/gclock): %w", ownErr, err, ErrUnsafe)
		}
		*notes = append(*notes, fmt.Sprintf("removed a foreign lock file %s that no daemon held (uid %d, mode %#o, %d links)", path, st.Uid, st.Mode&0o7777, st.Nlink))
	}
}

// removeIfNotRegular unlinks dir/name if it exists and is neither a
// regular file nor a directory (a symbolic link, removed itself and never
// followed; a FIFO, socket or device node): no writer of gclock makes
// those. A directory is refused. what names the file in messages.
func removeIfNotRegular(dirfd int, dir, name, what string, notes *[]string) error {
	path := dir + "/" + name
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("%s %s: %w", what, path, err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return nil
	case unix.S_IFDIR:
		return fmt.Errorf("%s %s is a directory: refused (remove it): %w", what, path, ErrUnsafe)
	}
	kind := "a non-regular file"
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		kind = "a symbolic link (not followed)"
	}
	if err := unix.Unlinkat(dirfd, name, 0); err != nil {
		return fmt.Errorf("%s %s is %s (mode %#o) and cannot be removed: %v (remove it, or publish in a directory the daemon owns, e.g. /run/gclock): %w",
			what, path, kind, st.Mode, err, ErrUnsafe)
	}
	*notes = append(*notes, fmt.Sprintf("removed %s at the %s's path %s (uid %d)", kind, what, path, st.Uid))
	return nil
}

// oldPage is what the writer learns from the page it replaces.
type oldPage struct {
	d     pageData
	valid bool   // d is a consistent, checked page worth keeping
	mem   []byte // its mapping (read-write), to mark it replaced; nil if none
	seq   uint64 // its counter, rounded up to even: the new page continues from it
}

// openOld examines an existing page at dir/name: nil if there is none or
// if it is not the daemon's own (a foreign file is neither read nor
// written: it is a leftover the new page is renamed over, noted in notes;
// a directory is refused), else its content and a read-write mapping (when
// it has the page size) so that the writer can mark it replaced once the
// new page is in place.
func openOld(dirfd int, path, name string, notes *[]string) (*oldPage, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil, fmt.Errorf("%s is a directory: refused (remove it): %w", path, ErrUnsafe)
	}
	if err := checkOwnFile(&st, path); err != nil {
		*notes = append(*notes, fmt.Sprintf("replaced a foreign file at the page's path %s without reading it (uid %d, mode %#o, %d links)", path, st.Uid, st.Mode, st.Nlink))
		return nil, nil
	}
	old := &oldPage{}
	if st.Size != PageSize {
		return old, nil // the daemon's own, but no page: replaced without a look
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Close(fd)
	var st2 unix.Stat_t
	if err := unix.Fstat(fd, &st2); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st2.Dev != st.Dev || st2.Ino != st.Ino {
		return nil, fmt.Errorf("%s changed while being checked: refused: %w", path, ErrUnsafe)
	}
	if err := checkOwnFile(&st2, path); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	old.mem = mem
	w := newWords(mem)
	err = func() (err error) {
		defer guard(&err, debug.SetPanicOnFault(true))
		old.seq = (w.u(offSeq).Load() + 1) &^ 1
		if w.u(offSeq).Load()&1 != 0 {
			return nil // a writer died mid-update: the payload may be torn
		}
		d, err := w.load()
		if err == nil && d.valid {
			old.d, old.valid = d, true
		}
		return nil
	}()
	if err != nil { // it shrank since the fstat: only its owner could do that
		unix.Munmap(mem)
		old.mem = nil
	}
	return old, nil
}

// markReplaced closes an old page for the readers still mapping it: pid 0,
// closed and replaced set (readers reopen the path), and valid cleared if
// the payload may be torn. A fault (the file shrank) is ignored.
func (o *oldPage) markReplaced() {
	if o == nil || o.mem == nil {
		return
	}
	func() (err error) {
		defer guard(&err, debug.SetPanicOnFault(true))
		w := newWords(o.mem)
		if w.u(offMagic).Load() != Magic {
			return nil
		}
		seq := w.u(offSeq)
		torn := seq.Load()&1 != 0
		if !torn {
			seq.Add(1)
		}
		flags := w.u(offFlags).Load() | flagClosed | flagReplaced
		if torn {
			flags &^= flagValid
		}
		w.u(offPID).Store(0)
		w.u(offFlags).Store(flags)
		seq.Add(1)
		return nil
	}()
	unix.Munmap(o.mem)
	o.mem = nil
}

// createPage writes d to a new file dir/name+".new" (O_EXCL|O_NOFOLLOW,
// mode set explicitly) and renames it over dir/name. Its counter starts
// from seq (even), so that the counter at the path never goes back. It
// returns the new page's read-write mapping.
func createPage(dirfd int, dir, name string, opts WriterOptions, d *pageData, seq uint64, notes *[]string) ([]byte, error) {
	tmp := name + ".new"
	tmpPath := dir + "/" + tmp
	flags := unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	mode := opts.pageMode()
	fd, err := unix.Openat(dirfd, tmp, flags, mode)
	if errors.Is(err, unix.EEXIST) {
		// Left by a writer that died between create and rename, or planted:
		// nobody else writes here while we hold the lock, so remove it (a
		// symbolic link itself, never its target; a directory is refused)
		// and create ours with O_EXCL.
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, tmp, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, fmt.Errorf("%s: %w", tmpPath, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil, fmt.Errorf("%s is a directory: refused (remove it): %w", tmpPath, ErrUnsafe)
		}
		if err := unix.Unlinkat(dirfd, tmp, 0); err != nil {
			return nil, fmt.Errorf("%s exists (uid %d, mode %#o) and cannot be removed: %v (remove it, or publish in a directory the daemon owns, e.g. /run/gclock): %w",
				tmpPath, st.Uid, st.Mode, err, ErrUnsafe)
		}
		if st.Uid != uint32(os.Geteuid()) || st.Mode&unix.S_IFMT != unix.S_IFREG {
			*notes = append(*notes, fmt.Sprintf("removed a foreign temporary file %s (uid %d, mode %#o)", tmpPath, st.Uid, st.Mode))
		}
		fd, err = unix.Openat(dirfd, tmp, flags, mode)
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", tmpPath, err)
	}
	defer unix.Close(fd)
	fail := func(what string, err error) ([]byte, error) {
		unix.Unlinkat(dirfd, tmp, 0)
		return nil, fmt.Errorf("%s %s: %w", what, tmpPath, err)
	}
	if opts.Group > 0 {
		if err := unix.Fchown(fd, -1, opts.Group); err != nil {
			return fail(fmt.Sprintf("chgrp %d", opts.Group), err)
		}
	}
	if err := unix.Fchmod(fd, mode); err != nil { // the umask may have cleared bits
		return fail(fmt.Sprintf("chmod %#o", mode), err)
	}
	if err := unix.Ftruncate(fd, PageSize); err != nil {
		return fail("resize", err)
	}
	mem, err := unix.Mmap(fd, 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	nw := newWords(mem)
	nw.u(offSeq).Store(seq &^ 1)
	nw.store(d) // a file no one else has opened: it cannot shrink yet
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		unix.Munmap(mem)
		return fail("rename to "+dir+"/"+name+" from", err)
	}
	return mem, nil
}
