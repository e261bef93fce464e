package netlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// LockPath is the file whose exclusive flock a process holds while any of
// its labs is up (Up to Down). Two processes' labs never run at once: a
// second Up (another test package under `go test ./...`, a second `gclock
// lab` run) waits here for the first Down, so that a measurement has the
// machine to itself. Within one process, labs with Config.Concurrent share
// the hold and run side by side, each in namespaces of its own.
const LockPath = "/run/gclab.lock"

// procLock is this process's hold on LockPath: one flock however many of
// its labs are up.
var procLock procLockState

type procLockState struct {
	sync.Mutex
	f          *os.File // LockPath, flocked; nil: not held
	concurrent int      // labs up with Config.Concurrent
	alone      bool     // a lab up without it
	waiting    int      // lockLab calls waiting: the last Down keeps f for them
	held       int      // HoldLock calls not yet released: f stays
	acquiring  bool     // a goroutine waits in the kernel for LockPath (acquireFlock)
}

// lockLab waits until this process may bring up a lab, until ctx ends:
// it holds LockPath (taking it if no lab of this process does) and no
// other lab of the process is up unless both are concurrent. It says once
// (log, Warn: the CLI shows warnings) that it waits and for whom. first
// reports that it took LockPath just now: no other lab ran on the machine,
// so every namespace under Prefix is a leftover. release gives the place
// back (and LockPath with the process's last lab).
func lockLab(ctx context.Context, log *slog.Logger, concurrent bool) (release func(), first bool, err error) {
	said := false
	say := func(holder string) {
		if !said {
			said = true
			log.Warn("waiting for another lab to finish (one lab at a time on a machine)", "lock", LockPath, "holder", holder)
		}
	}
	waiting := false
	defer func() {
		if waiting {
			procLock.Lock()
			procLock.waiting--
			procLock.drop()
			procLock.Unlock()
		}
	}()
	for {
		holder, err := func() (string, error) {
			procLock.Lock()
			defer procLock.Unlock()
			switch {
			case procLock.f != nil && !procLock.alone && procLock.concurrent == 0:
				// Kept by the last Down for a waiting lab of this
				// process: no lab runs, on the machine either.
				procLock.take(concurrent)
				release, first = releaseLab(concurrent), true
				return "", nil
			case procLock.f != nil && concurrent && !procLock.alone:
				procLock.concurrent++
				release, first = releaseLab(concurrent), false
				return "", nil
			case procLock.f != nil:
				if !waiting {
					waiting = true
					procLock.waiting++
				}
				return fmt.Sprintf("pid %d: a lab of this process", os.Getpid()), errBusy
			}
			if procLock.acquiring {
				return "another lab of this process waiting for it", errBusy
			}
			procLock.acquiring = true
			return "", errAcquire
		}()
		if errors.Is(err, errAcquire) {
			err = acquireFlock(ctx, say, func() { procLock.take(concurrent) })
			if err == nil {
				return releaseLab(concurrent), true, nil
			}
			return nil, false, err
		}
		if err == nil {
			return release, first, nil
		}
		if !errors.Is(err, errBusy) {
			return nil, false, err
		}
		say(holder)
		select {
		case <-ctx.Done():
			return nil, false, fmt.Errorf("lab: waiting for another lab to finish (lock %s, %s): %w", LockPath, holder, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// HoldLock takes LockPath for this process until release, waiting (as Up
// does) until ctx ends: the labs the process brings up meanwhile wait for
// one another only, never for another process's. A test binary holds it
// for all its labs, so that its tests do not queue one by one behind
// other processes' labs. waited is how long it waited.
func HoldLock(ctx context.Context, log *slog.Logger) (release func(), waited time.Duration, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	said := false
	for {
		procLock.Lock()
		switch {
		case procLock.f != nil:
			procLock.held++
			procLock.Unlock()
			return releaseHold(), time.Since(start), nil
		case !procLock.acquiring:
			procLock.acquiring = true
			procLock.Unlock()
			err := acquireFlock(ctx, func(holder string) {
				log.Warn("waiting for another lab to finish (one lab at a time on a machine)", "lock", LockPath, "holder", holder)
			}, func() { procLock.held++ })
			if err != nil {
				return nil, time.Since(start), err
			}
			return releaseHold(), time.Since(start), nil
		}
		procLock.Unlock()
		if !said {
			said = true
			log.Warn("waiting for another lab of this process to take the lab lock", "lock", LockPath)
		}
		select {
		case <-ctx.Done():
			return nil, time.Since(start), fmt.Errorf("lab: waiting for the lab lock %s: %w", LockPath, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// releaseHold is the release of one HoldLock.
func releaseHold() func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			procLock.Lock()
			defer procLock.Unlock()
			procLock.held--
			procLock.drop()
		})
	}
}

// errAcquire: LockPath is not held by this process, and this goroutine is
// the one to wait for it (acquireFlock).
var errAcquire = errors.New("lab lock to acquire")

// acquireFlock waits in the kernel (waitFlock) for LockPath and makes it
// this process's (procLock.f), calling waiting once with the holder if it
// waits, and then take with procLock locked (the caller's claim on it, in
// the same step). The caller set procLock.acquiring; acquireFlock clears it.
func acquireFlock(ctx context.Context, waiting func(holder string), take func()) error {
	defer func() {
		procLock.Lock()
		procLock.acquiring = false
		procLock.Unlock()
	}()
	f, err := openLock()
	if err != nil {
		return err
	}
	if err := waitFlock(ctx, f, func() { waiting(lockHolder(f)) }); err != nil {
		holder := lockHolder(f)
		f.Close()
		if ctx.Err() != nil {
			return fmt.Errorf("lab: waiting for another lab to finish (lock %s, %s): %w", LockPath, holder, ctx.Err())
		}
		return fmt.Errorf("lab: lock %s: %w", LockPath, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	procLock.Lock()
	procLock.f = f
	take()
	procLock.Unlock()
	return nil
}

// waitFlock takes f's exclusive flock, calling waiting once if another
// holds it, and waits in the kernel until it is released or ctx ends. A
// waiter blocked in flock(2) wakes when the holder lets go, so it takes
// the lock before a process that releases it and asks again a moment later
// (a series of runs, `gclock lab bench`); the 200-ms poll this replaces
// lost to such a series for 10 minutes and more (2026-11-27). A wait that
// ctx ends leaves its flock(2) on a duplicate descriptor, closed as soon as
// the call returns, so a lock taken after the give-up is released at once.
func waitFlock(ctx context.Context, f *os.File, waiting func()) error {
	fd := int(f.Fd())
	err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
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
			if err = syscall.Flock(dup, syscall.LOCK_EX); err != syscall.EINTR {
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

// errBusy: LockPath or this process's labs are taken.
var errBusy = errors.New("lab lock busy")

// take counts a lab up under the held lock; procLock is locked.
func (pl *procLockState) take(concurrent bool) {
	if concurrent {
		pl.concurrent++
	} else {
		pl.alone = true
	}
}

// drop releases LockPath when no lab of this process is up or waits for
// it; procLock is locked.
func (pl *procLockState) drop() {
	if pl.concurrent == 0 && !pl.alone && pl.waiting == 0 && pl.held == 0 && pl.f != nil {
		pl.f.Close() // releases the flock
		pl.f = nil
	}
}

// releaseLab returns the release of a lab taken by lockLab.
func releaseLab(concurrent bool) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			procLock.Lock()
			defer procLock.Unlock()
			if concurrent {
				procLock.concurrent--
			} else {
				procLock.alone = false
			}
			procLock.drop()
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
		return nil, "", fmt.Errorf("lab: lock %s: %w", LockPath, err)
	}
}

// openLock opens LockPath (created owner-only, never through a symlink).
func openLock() (*os.File, error) {
	f, err := os.OpenFile(LockPath, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lab: lock %s: %w", LockPath, err)
	}
	return f, nil
}

// lockHolder names the process that holds the lock file, as it wrote it.
func lockHolder(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	if err != nil || pid <= 0 {
		return "held by a process that did not say its pid"
	}
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	name := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
	if name == "" {
		return fmt.Sprintf("pid %d", pid)
	}
	return fmt.Sprintf("pid %d: %s", pid, name)
}

// ErrLabBusy: another process holds the lab's lock (a lab is running).
var ErrLabBusy = errors.New("another lab is running")

// Down is `gclock lab down`: it removes what ended labs left (their
// namespaces and the processes inside them). When no lab runs (LockPath is
// free) that is every namespace under Prefix. While one runs it removes
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
