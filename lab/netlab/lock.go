package netlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// LockPath is the file whose flock a process holds while any of its labs
// is up (Up to Down), shared or exclusive. A lab without Config.Concurrent
// (a measurement: `gclock lab`, the accuracy tests) holds it exclusively,
// so it has the machine to itself: a second process's lab waits for its
// Down. Concurrent labs (tests that check what holds under any load) hold
// it shared: they run beside the Concurrent labs of this process and of
// other processes (two test packages under `go test ./...`), each in
// namespaces of its own, and never beside a measurement.
const LockPath = "/run/gclab.lock"

// lockPath is the file the lock is taken on: LockPath, or a test's own
// file for the tests of the lock's rules (which then never wait for, or
// make wait, the labs of other processes).
var lockPath = LockPath

// lockLevel is what a process's flock on LockPath is.
type lockLevel int

const (
	levelNone lockLevel = iota
	levelShared
	levelExclusive
)

func (v lockLevel) flock() int {
	if v == levelExclusive {
		return syscall.LOCK_EX
	}
	return syscall.LOCK_SH
}

// procLock is this process's hold on LockPath: one open file and flock
// however many of its labs are up, at the level the most demanding needs.
var procLock = procLockState{changed: make(chan struct{})}

type procLockState struct {
	sync.Mutex
	f          *os.File  // LockPath, flocked at level; nil: not held
	level      lockLevel // f's flock
	concurrent int       // labs up with Config.Concurrent
	alone      bool      // a lab up without it
	waiting    int       // exclusive labs waiting: a Down keeps the lock for them
	held       int       // HoldLock calls not yet released
	changing   bool      // a goroutine is changing f's level in the kernel
	changed    chan struct{}
}

// claim is what a caller of acquire asks for: the level it needs, whether
// this process's own labs let it in now, and the claim itself.
type claim struct {
	level lockLevel
	ready func() bool // procLock locked
	take  func()      // procLock locked
}

// broadcast wakes every goroutine waiting for procLock to change; procLock
// is locked.
func (pl *procLockState) broadcast() {
	close(pl.changed)
	pl.changed = make(chan struct{})
}

// acquire waits until c.ready and the process holds LockPath at c.level or
// above, then takes c, until ctx ends. One goroutine at a time changes the
// flock (taking it, or raising shared to exclusive); the others wait for
// it. say is called with whom it waits for on every wait.
func acquire(ctx context.Context, c claim, say func(holder string)) error {
	for {
		procLock.Lock()
		if !procLock.changing && c.ready() {
			if procLock.f != nil && procLock.level >= c.level {
				c.take()
				procLock.Unlock()
				return nil
			}
			procLock.changing = true
			f := procLock.f
			procLock.Unlock()
			nf, err := raise(ctx, f, c.level, say)
			procLock.Lock()
			procLock.changing = false
			if err != nil {
				// A failed raise lost the shared flock too (flock(2)
				// converts by releasing first): nothing is held now.
				if f != nil {
					f.Close()
				}
				procLock.f, procLock.level = nil, levelNone
				procLock.broadcast()
				procLock.Unlock()
				return err
			}
			procLock.f, procLock.level = nf, c.level
			procLock.broadcast()
			procLock.Unlock()
			continue // c.ready again: a concurrent lab may have come meanwhile
		}
		holder := fmt.Sprintf("pid %d: a lab of this process", os.Getpid())
		if procLock.changing {
			holder = "another lab of this process waiting for the lock"
		}
		wake := procLock.changed
		procLock.Unlock()
		say(holder)
		select {
		case <-ctx.Done():
			return waitErr(holder, ctx.Err())
		case <-wake: // every change of what c.ready reads broadcasts
		}
	}
}

// waitErr is the error of a wait for the lock that err (the context's)
// ended, naming whom it waited for.
func waitErr(holder string, err error) error {
	return fmt.Errorf("lab: waiting for another lab to finish (lock %s, %s): %w", lockPath, holder, err)
}

// raise takes LockPath at level on f (opening it if f is nil), waiting in
// the kernel for other processes' labs; say names the holder once if it
// waits.
func raise(ctx context.Context, f *os.File, level lockLevel, say func(holder string)) (*os.File, error) {
	opened := f == nil
	if opened {
		var err error
		if f, err = openLock(); err != nil {
			return nil, err
		}
	}
	if err := waitFlock(ctx, f, level.flock(), func() { say(lockHolder(f)) }); err != nil {
		holder := lockHolder(f)
		if opened {
			f.Close() // the caller closes a file it passed
		}
		if ctx.Err() != nil {
			return nil, waitErr(holder, ctx.Err())
		}
		return nil, fmt.Errorf("lab: lock %s: %w", lockPath, err)
	}
	if level == levelExclusive {
		f.Truncate(0)
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// lockLab waits until this process may bring up a lab, until ctx ends: a
// Concurrent lab when no exclusive lab of this process is up, holding
// LockPath at least shared; an exclusive one when no other lab of this
// process is up, holding it exclusively. It says once (log, Warn: the CLI
// shows warnings) that it waits and for whom. first reports that the
// process holds LockPath exclusively and no other lab of it is up: no lab
// runs on the machine, so every namespace under namePrefix is a leftover.
// release gives the place back (and LockPath with the process's last lab
// and hold).
func lockLab(ctx context.Context, log *slog.Logger, concurrent bool) (release func(), first bool, err error) {
	say := sayOnce(log)
	c := claim{level: levelShared, ready: func() bool { return !procLock.alone }}
	take := func() {
		first = procLock.level == levelExclusive && !procLock.alone && procLock.concurrent == 0
		procLock.concurrent++
	}
	if !concurrent {
		c = claim{level: levelExclusive, ready: func() bool { return !procLock.alone && procLock.concurrent == 0 }}
		take = func() {
			first = true
			procLock.alone = true
		}
		procLock.Lock()
		procLock.waiting++
		procLock.Unlock()
		defer func() {
			procLock.Lock()
			procLock.waiting--
			procLock.drop()
			procLock.Unlock()
		}()
	}
	c.take = take
	if err := acquire(ctx, c, say); err != nil {
		return nil, false, err
	}
	if concurrent {
		return releaser(func() { procLock.concurrent-- }), first, nil
	}
	return releaser(func() { procLock.alone = false }), first, nil
}

// HoldLock takes LockPath shared for this process until release, waiting
// (as Up does) until ctx ends: the Concurrent labs the process brings up
// meanwhile never queue behind a measurement another process starts
// between them, and its exclusive labs raise the hold for their time. A
// test binary holds it for all its labs. waited is how long it waited.
func HoldLock(ctx context.Context, log *slog.Logger) (release func(), waited time.Duration, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	c := claim{level: levelShared, ready: func() bool { return true }, take: func() { procLock.held++ }}
	if err := acquire(ctx, c, sayOnce(log)); err != nil {
		return nil, time.Since(start), err
	}
	return releaser(func() { procLock.held-- }), time.Since(start), nil
}

// sayOnce returns the say of acquire: a warning (the CLI shows warnings)
// the first time it waits, naming whom for.
func sayOnce(log *slog.Logger) func(holder string) {
	said := false
	return func(holder string) {
		if !said {
			said = true
			log.Warn("waiting for another lab to finish (one measurement at a time on a machine)", "lock", lockPath, "holder", holder)
		}
	}
}

// waitFlock takes f's flock (how: LOCK_EX or LOCK_SH), calling waiting
// once if another holds it, and waits in the kernel until it is released
// or ctx ends. A waiter blocked in flock(2) wakes when the holder lets go,
// so it takes the lock before a process that releases it and asks again a
// moment later (a series of runs, `gclock lab bench`); the 200-ms poll
// this replaces lost to such a series for 10 minutes and more
// (2026-11-27). A wait that ctx ends leaves its flock(2) on a duplicate
// descriptor, closed as soon as the call returns, so a lock taken after
// the give-up is released at once.
func waitFlock(ctx context.Context, f *os.File, how int, waiting func()) error {
	fd := int(f.Fd())
	err := syscall.Flock(fd, how|syscall.LOCK_NB)
	if err != syscall.EWOULDBLOCK {
		return err
	}
	waiting()
	dup, err := syscall.Dup(fd)
	if err != nil {
		return err
	}
	var abandoned atomic.Bool
	done := make(chan error, 1)
	go func() {
		var err error
		for {
			if err = syscall.Flock(dup, how); err != syscall.EINTR {
				break
			}
		}
		if abandoned.Load() {
			syscall.Flock(dup, syscall.LOCK_UN)
		}
		syscall.Close(dup)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		abandoned.Store(true)
		select {
		case err := <-done: // taken meanwhile: keep it only if ctx allows
			if err == nil && ctx.Err() != nil {
				syscall.Flock(fd, syscall.LOCK_UN)
			}
		default:
		}
		return ctx.Err()
	}
}

// drop gives LockPath up when no lab of this process is up, waits for an
// exclusive place or holds it (HoldLock), and lowers an exclusive flock to
// shared when only Concurrent labs and holds remain; procLock is locked.
func (pl *procLockState) drop() {
	if pl.f == nil || pl.changing || pl.alone {
		return
	}
	switch {
	case pl.concurrent == 0 && pl.waiting == 0 && pl.held == 0:
		pl.f.Close() // releases the flock
		pl.f, pl.level = nil, levelNone
		pl.broadcast()
	case pl.level == levelExclusive && pl.waiting == 0:
		// Lowering never waits: no other process holds the lock while
		// this one holds it exclusively, and Linux converts under one
		// spinlock, so a waiter cannot come in between. Should a kernel
		// convert by releasing first (flock(2) allows it) and the lock go
		// to a waiter, nothing is held: the next lab takes it again.
		if err := syscall.Flock(int(pl.f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
			pl.f.Close()
			pl.f, pl.level = nil, levelNone
		} else {
			pl.level = levelShared
		}
		pl.broadcast()
	}
}

// releaser returns a claim's release, usable once or more: undo (with
// procLock locked) gives the claim back, then the lock follows what is left
// (drop) and the waiters look again.
func releaser(undo func()) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			procLock.Lock()
			defer procLock.Unlock()
			undo()
			procLock.drop()
			procLock.broadcast()
		})
	}
}

// tryFlock tries LockPath's exclusive flock once: the locked file (with
// this process's pid written into it), or "" and who holds it.
func tryFlock() (f *os.File, holder string, err error) {
	f, err = openLock()
	if err != nil {
		return nil, "", err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		f.Truncate(0)
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		return f, "", nil
	case err == syscall.EWOULDBLOCK || err == syscall.EINTR:
		holder = lockHolder(f)
		f.Close()
		return nil, holder, nil
	default:
		f.Close()
		return nil, "", fmt.Errorf("lab: lock %s: %w", lockPath, err)
	}
}

// openLock opens LockPath (created owner-only, never through a symlink).
func openLock() (*os.File, error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lab: lock %s: %w", lockPath, err)
	}
	return f, nil
}

// lockHolder names the processes that hold the lock file: those
// /proc/locks lists for its inode (a shared lock has several), or the pid
// the last exclusive holder wrote into it.
func lockHolder(f *os.File) string {
	var pids []int
	if fi, err := f.Stat(); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			locks, _ := os.ReadFile("/proc/locks")
			pids = flockHolders(string(locks), st.Ino)
		}
	}
	if len(pids) == 0 {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
		if err != nil || pid <= 0 {
			return "held by a process that did not say its pid"
		}
		pids = []int{pid}
	}
	var names []string
	for _, pid := range pids {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		name := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		if name == "" {
			names = append(names, fmt.Sprintf("pid %d", pid))
		} else {
			names = append(names, fmt.Sprintf("pid %d: %s", pid, name))
		}
	}
	return strings.Join(names, "; ")
}

// flockHolders returns the pids /proc/locks (its text) lists as holding a
// flock on inode ino, in order, without repeats; waiters ("->") are not
// holders. A line: "1: FLOCK  ADVISORY  WRITE 29879 fe:00:9773247 0 EOF".
func flockHolders(locks string, ino uint64) []int {
	var pids []int
	for _, line := range strings.Split(locks, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" {
			continue // a waiter's line has "->" in f[1]
		}
		dev := strings.Split(f[5], ":")
		if len(dev) != 3 {
			continue
		}
		if n, err := strconv.ParseUint(dev[2], 10, 64); err != nil || n != ino {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ErrLabBusy: another process holds the lab's lock (a lab is running).
var ErrLabBusy = errors.New("another lab is running")

// Down is `gclock lab down`: it removes what ended labs left (their
// namespaces and the processes inside them). When no lab runs (LockPath is
// free) that is every namespace under namePrefix. While one runs it removes
// only those of labs whose process has ended, and returns ErrLabBusy
// naming the running one (it removes its own namespaces when it ends);
// force removes the running labs' namespaces too.
func Down(log *slog.Logger, force bool) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, holder, err := tryFlock()
	if err != nil {
		return err
	}
	if f != nil {
		defer f.Close()
		return cleanup(log)
	}
	if force {
		log.Warn("removing the namespaces of a running lab (-force)", "holder", holder)
		return cleanup(log)
	}
	if err := cleanupEnded(log); err != nil {
		return err
	}
	return fmt.Errorf("lab: down: %w (%s, lock %s): removed what ended labs left; it removes its own namespaces when it ends; stop it, or pass -force", ErrLabBusy, holder, LockPath)
}
