package gtime

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// nobody is the uid (and gid) that plays another local user.
const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test makes files owned by another uid (65534)")
	}
}

// publicDir is a directory that uid nobody can traverse (t.TempDir is 0700).
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gtime-secure-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// validPage writes a page with a synced update at path (through a writer
// in a scratch directory, then copied) and returns its bytes.
func validPage(t *testing.T) []byte {
	t.Helper()
	w, _, path := newPair(t)
	if err := w.Publish(baseUpdate(RawNow())); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriterRefusesUnsafe: the writer refuses a directory that another
// user controls and a lock that a live writer holds, and names what it
// refused (foreign files it can remove safely: TestWriterRemovesLeftovers).
func TestWriterRefusesUnsafe(t *testing.T) {
	needRoot(t)
	page := validPage(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) // dir/page is the page path
		want  string                         // in the error
	}{
		{"page is a directory", func(t *testing.T, dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "page"), 0o755))
		}, "is a directory"},
		{"directory of another user", func(t *testing.T, dir string) {
			must(t, os.Chown(dir, nobody, nobody))
		}, "owned by uid 65534"},
		{"directory 0777 not sticky", func(t *testing.T, dir string) {
			must(t, os.Chmod(dir, 0o777))
		}, "without the sticky bit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			path := filepath.Join(dir, "page")
			var before []byte
			if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
				before, _ = os.ReadFile(path)
			}
			w, err := NewWriter(path)
			if err == nil {
				w.Close()
				t.Fatalf("NewWriter accepted it")
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewWriter: %v; want ErrUnsafe naming %q", err, tt.want)
			}
			if before == nil {
				return
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Errorf("the refused page was modified")
			}
		})
	}
	// What it accepts: its own page of mode 0644 (replaced by a new file,
	// keeping the mapping), and a sticky world-writable directory (/dev/shm).
	t.Run("own page and sticky directory", func(t *testing.T) {
		dir := t.TempDir()
		must(t, unix.Chmod(dir, 0o1777))
		path := filepath.Join(dir, "page")
		write(t, path, page, 0o644, 0)
		var before unix.Stat_t
		must(t, unix.Stat(path, &before))
		w, err := NewWriter(path)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var after unix.Stat_t
		must(t, unix.Stat(path, &after))
		if after.Ino == before.Ino {
			t.Errorf("the page was reused in place (inode %d): a writable descriptor opened on it earlier would survive", after.Ino)
		}
		if !w.isSet {
			t.Errorf("the old page's mapping was not kept")
		}
	})
}

func write(t *testing.T, path string, b []byte, mode os.FileMode, uid int) {
	t.Helper()
	must(t, os.WriteFile(path, b, mode))
	must(t, os.Chmod(path, mode))
	must(t, os.Chown(path, uid, uid))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPageMode: the page gets mode 0644 whatever the umask, or 0640 and the
// configured group; the lock file 0600.
func TestPageMode(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	for _, group := range []int{0, nobody} {
		if group != 0 && os.Geteuid() != 0 {
			continue // chgrp to a group we are not in needs root
		}
		path := filepath.Join(t.TempDir(), "page")
		w, err := NewWriterWith(path, WriterOptions{Group: group})
		if err != nil {
			t.Fatal(err)
		}
		var st, lst unix.Stat_t
		must(t, unix.Stat(path, &st))
		must(t, unix.Stat(path+".lock", &lst))
		wantMode, wantGid := uint32(0o644), uint32(os.Getegid())
		if group != 0 {
			wantMode, wantGid = 0o640, uint32(group)
		}
		if st.Mode&0o7777 != wantMode || st.Gid != wantGid || st.Uid != uint32(os.Geteuid()) {
			t.Errorf("group %d: page mode %#o gid %d uid %d; want %#o, %d, %d", group, st.Mode&0o7777, st.Gid, st.Uid, wantMode, wantGid, os.Geteuid())
		}
		if lst.Mode&0o7777 != 0o600 {
			t.Errorf("lock file mode %#o, want 0600", lst.Mode&0o7777)
		}
		w.Close()
	}
	if _, err := NewWriterWith(filepath.Join(t.TempDir(), "page"), WriterOptions{Group: -1}); err == nil {
		t.Error("group -1 accepted")
	}
}

// TestReaderRefusesUnsafe: Go and C readers map only a page that nobody but
// a trusted owner can have written, and agree on every case.
func TestReaderRefusesUnsafe(t *testing.T) {
	needRoot(t)
	page := validPage(t)
	bin := buildCTest(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) string // returns the path to open
		owner int
		want  string // "" accepted, else in the Go error
		cErr  int    // C's gclock_open_opts result
	}{
		{"own 0644", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o644, 0)
			return filepath.Join(dir, "page")
		}, 0, "", 0},
		{"another user's", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o644, nobody)
			return filepath.Join(dir, "page")
		}, 0, "owned by uid 65534", -int(unix.EPERM)},
		{"another user's, trusted", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o644, nobody)
			return filepath.Join(dir, "page")
		}, nobody, "", 0},
		{"in its owner's private directory", func(t *testing.T, dir string) string {
			sub := filepath.Join(dir, "run")
			must(t, os.Mkdir(sub, 0o755))
			must(t, os.Chown(sub, nobody, nobody))
			write(t, filepath.Join(sub, "page"), page, 0o644, nobody)
			return filepath.Join(sub, "page")
		}, 0, "", 0},
		{"in its owner's directory in a world-writable one", func(t *testing.T, dir string) string {
			must(t, unix.Chmod(dir, 0o1777)) // as /tmp: anyone can make that directory
			sub := filepath.Join(dir, "run")
			must(t, os.Mkdir(sub, 0o755))
			must(t, os.Chown(sub, nobody, nobody))
			write(t, filepath.Join(sub, "page"), page, 0o644, nobody)
			return filepath.Join(sub, "page")
		}, 0, "owned by uid 65534", -int(unix.EPERM)},
		{"in its owner's group-writable directory", func(t *testing.T, dir string) string {
			sub := filepath.Join(dir, "run")
			must(t, os.Mkdir(sub, 0o775))
			must(t, os.Chmod(sub, 0o775))
			must(t, os.Chown(sub, nobody, nobody))
			write(t, filepath.Join(sub, "page"), page, 0o644, nobody)
			return filepath.Join(sub, "page")
		}, 0, "owned by uid 65534", -int(unix.EPERM)},
		{"0666", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o666, 0)
			return filepath.Join(dir, "page")
		}, 0, "mode 0666", -int(unix.EPERM)},
		{"0664", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o664, 0)
			return filepath.Join(dir, "page")
		}, 0, "mode 0664", -int(unix.EPERM)},
		{"symlink", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "real"), page, 0o644, 0)
			must(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "page")))
			return filepath.Join(dir, "page")
		}, 0, "symbolic link", -int(unix.ELOOP)},
		{"hard link", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o644, 0)
			must(t, os.Link(filepath.Join(dir, "page"), filepath.Join(dir, "other")))
			return filepath.Join(dir, "page")
		}, 0, "2 hard links", -int(unix.EPERM)},
		{"fifo", func(t *testing.T, dir string) string {
			must(t, unix.Mkfifo(filepath.Join(dir, "page"), 0o644))
			return filepath.Join(dir, "page")
		}, 0, "not a regular file", -int(unix.EPROTO)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t, t.TempDir())
			r, err := OpenWith(path, OpenOptions{Owner: tt.owner})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tm, err := r.Now(); err != nil || tm.Status != StatusSynced {
					t.Errorf("read %+v, %v", tm, err)
				}
				r.Close()
			} else if err == nil {
				r.Close()
				t.Errorf("accepted")
			} else if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming %q", err, tt.want)
			}
			if bin == "" {
				return
			}
			out, err := exec.Command(bin, path, "-open", fmt.Sprint(tt.owner)).CombinedOutput()
			if err != nil {
				t.Fatalf("C: %v\n%s", err, out)
			}
			if got, want := strings.TrimSpace(string(out)), fmt.Sprintf("open %d", tt.cErr); got != want {
				t.Errorf("C: %q, want %q", got, want)
			}
		})
	}
}

// buildCTest compiles tests/c/gclock_test.c, or returns "" (logged) when
// there is no C compiler.
func buildCTest(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Log("no C compiler (cc): include/gclock.h not tested here; run ci/deps.sh")
		return ""
	}
	bin := filepath.Join(t.TempDir(), "gclock_test")
	build := exec.Command(cc, "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror",
		"-I", filepath.Join("..", "include"), filepath.Join("..", "tests", "c", "gclock_test.c"), "-o", bin)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
	}
	return bin
}

// crash drops the writer's lock and mapping without marking the page, as
// a killed daemon does.
func (w *Writer) crash() {
	unix.Munmap(w.mem)
	w.mem = nil
	w.lock.Close()
	w.dirf.Close()
}

// TestRestartWhileReading: readers keep reading, never backwards, across a
// clean restart and a crash of the writer, and follow the new page.
func TestRestartWhileReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	publish := func(w *Writer, y0 int64) {
		t.Helper()
		u := baseUpdate(RawNow())
		u.Mapping.Y0 = u.Local + y0
		if err := w.Publish(u); err != nil {
			t.Fatal(err)
		}
	}
	publish(w, 5*sec)
	var ahead atomic.Int64 // lets the test age the page for the reader
	r.now = func() int64 { return RawNow() + ahead.Load() }
	var stop sync.WaitGroup
	done := make(chan struct{})
	var readErr error
	stop.Go(func() {
		prev := int64(0)
		for {
			select {
			case <-done:
				return
			default:
			}
			tm, err := r.Now()
			if err != nil || tm.Est < prev {
				readErr = fmt.Errorf("read %+v, %v after %d", tm, err, prev)
				return
			}
			prev = tm.Est
		}
	})
	expect := func(what string, st Status, y0 int64) {
		t.Helper()
		tm, err := r.Now()
		if err != nil || tm.Status != st {
			t.Fatalf("%s: %+v, %v; want %v", what, tm, err, st)
		}
		if d := tm.Est - RawNow() - y0; st == StatusSynced && (d < -sec/10 || d > sec/10) {
			t.Fatalf("%s: Est is local %+d ns, want about %+d (the new writer's page)", what, tm.Est-RawNow(), y0)
		}
	}
	must(t, w.Close())
	expect("closed", StatusNoDaemon, 0)
	w, err = NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	expect("restarted, before its first publish", StatusSynced, 5*sec) // the old mapping, still fresh
	publish(w, 5*sec+200)
	expect("restarted", StatusSynced, 5*sec+200)
	w.crash()
	w, err = NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	publish(w, 5*sec+400)
	expect("after a crash", StatusSynced, 5*sec+400)
	// A page removed and created again (no replaced mark on the old one):
	// followed within checkEvery once the old page reads as not synced.
	w.crash()
	must(t, os.Remove(path))
	w, err = NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	publish(w, 5*sec+600)
	deadline := time.Now().Add(5 * time.Second)
	ahead.Store(11 * sec) // the old page reads stale
	for {
		tm, err := r.Now()
		if err == nil && tm.Status == StatusStale && r.cur.Load().ino != 0 {
			var st unix.Stat_t
			must(t, unix.Stat(path, &st))
			if r.cur.Load().ino == st.Ino {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reader did not follow a page created again: %+v, %v", tm, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(done)
	stop.Wait()
	if readErr != nil {
		t.Fatal(readErr)
	}
}

// TestTruncated: a page file that shrinks under a reader gives an error
// (ErrTruncated), never a SIGBUS; under the writer too, and the writer then
// puts a new page at the path, which readers follow.
func TestTruncated(t *testing.T) {
	w, r, path := newPair(t)
	if err := w.Publish(baseUpdate(RawNow())); err != nil {
		t.Fatal(err)
	}
	must(t, os.Truncate(path, 0))
	for _, read := range []func() error{
		func() error { _, err := r.Now(); return err },
		func() error { _, err := r.At(0); return err },
		func() error { _, err := r.Info(); return err },
		func() error { _, _, err := r.Mapping(); return err },
	} {
		if err := read(); !errors.Is(err, ErrTruncated) {
			t.Fatalf("read of a truncated page: %v, want ErrTruncated", err)
		}
	}
	u := baseUpdate(RawNow())
	u.Mapping.Y0 += 777
	err := w.Publish(u)
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "new page") {
		t.Fatalf("publish to a truncated page: %v, want ErrTruncated and a new page", err)
	}
	time.Sleep(2 * checkEvery * time.Nanosecond) // the reader checks the path at most every checkEvery
	tm, err := r.Now()
	if err != nil || tm.Status != StatusSynced {
		t.Fatalf("after the writer replaced the truncated page: %+v, %v", tm, err)
	}
	if at, _ := r.At(u.Local); at.Earliest != u.Mapping.Y0-u.Mapping.W0 {
		t.Errorf("reader is not on the new page: earliest %d at the update, want %d", at.Earliest, u.Mapping.Y0-u.Mapping.W0)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Shrunk after Close: Close of the writer already happened, the next
	// writer replaces the file.
	must(t, os.Truncate(path, 100))
	w2, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	w2.Close()
}

// TestFlockCannotBlockRestart: any user can flock the page (or its
// directory) it can open; the writer never locks those, so a restart goes
// through. The writer's lock file cannot be opened by another user.
func TestFlockCannotBlockRestart(t *testing.T) {
	if os.Getenv("GTIME_HELPER_PAGE") != "" {
		return // TestHelperOtherUser's child
	}
	dir := publicDir(t)
	path := filepath.Join(dir, "page")
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	locked := []string{dir}
	if os.Geteuid() != 0 {
		locked = append(locked, path) // else the child locks it
	}
	for _, p := range locked {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatalf("flock %s: %v", p, err)
		}
	}
	// Another user (uid 65534), when we can be one: its flock on the page
	// holds while the daemon restarts; the lock file is closed to it.
	var child *exec.Cmd
	if os.Geteuid() == 0 {
		// The test binary's own directory is private: run a copy.
		self, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "gtime.test")
		must(t, os.WriteFile(bin, self, 0o755))
		child = exec.Command(bin, "-test.run=^TestHelperOtherUser$")
		child.Env = append(os.Environ(), "GTIME_HELPER_PAGE="+path)
		child.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		stdin, _ := child.StdinPipe()
		stdout, _ := child.StdoutPipe()
		child.Stderr = os.Stderr
		must(t, child.Start())
		defer func() { stdin.Close(); child.Wait() }()
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if strings.TrimSpace(line) != "locked" {
			t.Fatalf("helper as uid %d: %q", nobody, line)
		}
		go io.Copy(io.Discard, stdout)
	} else {
		t.Log("not root: the other-user half is skipped")
	}
	must(t, w.Close())
	w, err = NewWriter(path)
	if err != nil {
		t.Fatalf("restart while readers hold flocks: %v", err)
	}
	w.Close()
}

// TestHelperOtherUser runs as uid 65534 in TestFlockCannotBlockRestart's
// child: it must not be able to open the lock file; it flocks the page,
// prints "locked" and holds the lock until stdin closes.
func TestHelperOtherUser(t *testing.T) {
	path := os.Getenv("GTIME_HELPER_PAGE")
	if path == "" {
		t.Skip("helper of TestFlockCannotBlockRestart")
	}
	if f, err := os.OpenFile(path+".lock", os.O_RDONLY, 0); err == nil {
		f.Close()
		fmt.Println("opened the lock file")
		os.Exit(1)
	}
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
		fmt.Println("opened the page for writing")
		os.Exit(1)
	}
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		fmt.Println("flock:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// cLoop starts the C reader's -loop mode (mode 0: gclock_now; 1: with
// check_size; 2: gclock_mapping) and waits for it to be ready. The returned
// wait closes its stdin (it then reads once more and ends) and returns its
// exit error and output.
func cLoop(t *testing.T, bin, path string, mode int) (wait func() (string, error)) {
	t.Helper()
	cmd := exec.Command(bin, path, "-loop", "60000", fmt.Sprint(mode))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	must(t, cmd.Start())
	br := bufio.NewReader(stdout)
	if line, _ := br.ReadString('\n'); line != "ready\n" {
		stdin.Close()
		cmd.Wait()
		t.Fatalf("C reader: %q %s", line, errb.String())
	}
	out := &strings.Builder{}
	copied := make(chan struct{})
	go func() { io.Copy(out, br); close(copied) }()
	return func() (string, error) {
		stdin.Close()
		<-copied
		err := cmd.Wait()
		return out.String() + errb.String(), err
	}
}

// TestCFollowsAndTruncate: the C reader follows a restarted writer; with
// check_size it reports a truncated page as -EIO and follows the new page;
// without it, it dies of SIGBUS, as gclock.h documents.
func TestCFollowsAndTruncate(t *testing.T) {
	bin := buildCTest(t)
	if bin == "" {
		t.Skip("no C compiler")
	}
	w, _, path := newPair(t)
	if err := w.Publish(baseUpdate(RawNow())); err != nil {
		t.Fatal(err)
	}
	// Long enough for the C reader to see each state, and for its path
	// checks (at most every 100 ms) to follow a new page.
	pause := func() { time.Sleep(300 * time.Millisecond) }
	expect := func(what string, wait func() (string, error), want string) {
		t.Helper()
		out, err := wait()
		if err != nil {
			t.Fatalf("%s: %v\n%s", what, err, out)
		}
		if out != want {
			t.Errorf("%s:\n%s\nwant\n%s", what, out, want)
		}
	}

	// gclock_mapping (what gct_poll_page reads) follows a restart too, and
	// the counter it returns never goes back.
	wait := cLoop(t, bin, path, 2)
	pause()
	must(t, w.Close())
	pause()
	w, err := NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Close() }()
	pause()
	if err := w.Publish(baseUpdate(RawNow())); err != nil {
		t.Fatal(err)
	}
	pause()
	expect("C mapping reader across a restart", wait, "mapping valid\nmapping invalid\nmapping valid\nend mapping valid\n")

	wait = cLoop(t, bin, path, 0)
	pause()
	must(t, w.Close())
	pause()
	w, err = NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	pause()
	expect("C reader across a restart", wait, "status synced\nstatus no-daemon\nstatus synced\nend status synced\n")

	wait = cLoop(t, bin, path, 1)
	pause()
	must(t, os.Truncate(path, 0))
	pause()
	if err := w.Publish(baseUpdate(RawNow())); !errors.Is(err, ErrTruncated) {
		t.Fatalf("publish: %v, want ErrTruncated", err)
	}
	pause()
	expect("C reader (check_size) across a truncation", wait,
		fmt.Sprintf("status synced\nerr %d\nstatus synced\nend status synced\n", -int(unix.EIO)))

	wait = cLoop(t, bin, path, 0)
	pause()
	must(t, os.Truncate(path, 0))
	pause()
	out, err := wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGBUS {
		t.Errorf("C reader without check_size on a truncated page: %v (want death by SIGBUS, as documented)\n%s", err, out)
	}
}

// TestSeqContinues: the page's counter at the path never goes back across
// a restart or a crash, so "same counter, same page" holds for anyone
// comparing counters (gclock_seq, gclock_mapping's seq).
func TestSeqContinues(t *testing.T) {
	w, _, path := newPair(t)
	seqAt := func() uint64 {
		t.Helper()
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		s, err := r.cur.Load().seq()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for i := range 5 {
		if err := w.Publish(baseUpdate(RawNow() + int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	prev := seqAt()
	must(t, w.Close())
	for _, crash := range []bool{false, true, false} {
		w2, err := NewWriter(path)
		if err != nil {
			t.Fatal(err)
		}
		s := seqAt()
		if s <= prev || s&1 != 0 {
			t.Fatalf("after a restart the counter is %d, before %d: want even and larger", s, prev)
		}
		if err := w2.Publish(baseUpdate(RawNow())); err != nil {
			t.Fatal(err)
		}
		prev = seqAt()
		if crash {
			w2.crash()
		} else {
			w2.Close()
		}
	}
}

// TestWriterKeepsLiveLock: a foreign lock file that a live writer holds
// is not a leftover: the writer refuses to start and leaves it.
func TestWriterKeepsLiveLock(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "page.lock")
	write(t, p, nil, 0o600, nobody)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	must(t, err)
	defer unix.Close(fd)
	must(t, unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB))
	var before unix.Stat_t
	must(t, unix.Stat(p, &before))
	w, err := NewWriter(filepath.Join(dir, "page"))
	if err == nil {
		w.Close()
		t.Fatal("NewWriter took a lock a live writer holds")
	}
	if !strings.Contains(err.Error(), "another writer (daemon) holds the lock") {
		t.Errorf("NewWriter: %v, want it to name the live lock", err)
	}
	var after unix.Stat_t
	must(t, unix.Stat(p, &after))
	if after.Ino != before.Ino {
		t.Errorf("the live lock file was removed")
	}
}

// TestWriterRemovesLeftovers: a foreign file at the page's, the
// temporary's or the lock's name (what any local user could leave in
// /dev/shm, issue 17) no longer stops the writer: it is removed or
// replaced without being read, written or followed, and reported; the
// writer then owns a page of mode 0644 and a lock of mode 0600.
func TestWriterRemovesLeftovers(t *testing.T) {
	needRoot(t)
	page := validPage(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) (keep string) // keep: a file that must stay as it was
		want  string                                       // in Leftovers
	}{
		{"page of another user", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o644, nobody)
			return ""
		}, "uid 65534"},
		{"page 0666", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o666, 0)
			return ""
		}, "mode 0100666"},
		{"page symlink", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "real"), page, 0o644, 0)
			must(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "page")))
			return filepath.Join(dir, "real")
		}, "page's path"},
		{"page hard link", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o644, 0)
			must(t, os.Link(filepath.Join(dir, "page"), filepath.Join(dir, "other")))
			return filepath.Join(dir, "other")
		}, "2 links"},
		{"page fifo", func(t *testing.T, dir string) string {
			must(t, unix.Mkfifo(filepath.Join(dir, "page"), 0o644))
			return ""
		}, "page's path"},
		{"lock of another user", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page.lock"), nil, 0o600, nobody)
			return ""
		}, "foreign lock file"},
		{"lock 0666 of ours", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page.lock"), nil, 0o666, 0)
			return ""
		}, "foreign lock file"},
		{"lock symlink", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "target"), []byte("x"), 0o644, 0)
			must(t, os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "page.lock")))
			return filepath.Join(dir, "target")
		}, "symbolic link (not followed)"},
		{"lock symlink to nowhere", func(t *testing.T, dir string) string {
			must(t, os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "page.lock")))
			return ""
		}, "symbolic link (not followed)"},
		{"temporary of another user", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page.new"), nil, 0o644, nobody)
			return ""
		}, "foreign temporary file"},
		{"temporary symlink", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "target"), []byte("x"), 0o644, 0)
			must(t, os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "page.new")))
			return filepath.Join(dir, "target")
		}, "foreign temporary file"},
		{"all three planted", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "page"), page, 0o666, nobody)
			write(t, filepath.Join(dir, "page.new"), nil, 0o666, nobody)
			write(t, filepath.Join(dir, "page.lock"), nil, 0o666, nobody)
			return ""
		}, "foreign lock file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, unix.Chmod(dir, 0o1777)) // as /dev/shm
			keep := tt.setup(t, dir)
			var before []byte
			var beforeSt unix.Stat_t
			if keep != "" {
				before, _ = os.ReadFile(keep)
				must(t, unix.Lstat(keep, &beforeSt))
			}
			path := filepath.Join(dir, "page")
			w, err := NewWriter(path)
			if err != nil {
				t.Fatalf("NewWriter: %v", err)
			}
			defer w.Close()
			left := strings.Join(w.Leftovers(), "\n")
			if !strings.Contains(left, tt.want) || !strings.Contains(left, dir) {
				t.Errorf("Leftovers %q: want one naming %q in %s", left, tt.want, dir)
			}
			if w.isSet {
				t.Errorf("the writer resumed from a foreign page")
			}
			for name, mode := range map[string]uint32{"page": 0o644, "page.lock": 0o600} {
				var st unix.Stat_t
				must(t, unix.Lstat(filepath.Join(dir, name), &st))
				if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o7777 != mode || st.Uid != uint32(os.Geteuid()) || st.Nlink != 1 {
					t.Errorf("%s: mode %#o uid %d links %d, want a regular file %#o of uid %d, one link", name, st.Mode, st.Uid, st.Nlink, mode, os.Geteuid())
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, "page.new")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("page.new still there: %v", err)
			}
			if keep != "" {
				var afterSt unix.Stat_t
				after, _ := os.ReadFile(keep)
				must(t, unix.Lstat(keep, &afterSt))
				if string(after) != string(before) || afterSt.Ino != beforeSt.Ino || afterSt.Mode != beforeSt.Mode {
					t.Errorf("%s was changed (a link was followed)", keep)
				}
			}
			if _, err := os.Lstat(filepath.Join(dir, "nowhere")); err == nil {
				t.Errorf("a dangling lock symlink was followed: its target was created")
			}
			r, err := Open(path)
			if err != nil {
				t.Fatalf("reading the new page: %v", err)
			}
			r.Close()
		})
	}
}

// TestDefaultPath (issue 17): the page defaults to the daemon's own
// directory /run/gclock, not world-writable /dev/shm, and the C header's
// readers default to the same path as Go's.
func TestDefaultPath(t *testing.T) {
	if filepath.Dir(DefaultPath) != "/run/gclock" {
		t.Errorf("DefaultPath %q: want a file in /run/gclock, the daemon's own directory", DefaultPath)
	}
	h, err := os.ReadFile("../include/gclock.h")
	if err != nil {
		t.Fatal(err)
	}
	if want := `#define GCLOCK_DEFAULT_PATH "` + DefaultPath + `"`; !strings.Contains(string(h), want) {
		t.Errorf("include/gclock.h lacks %s", want)
	}
}
