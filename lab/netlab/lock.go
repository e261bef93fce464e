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
			f, held, err := tryFlock()
			if err != nil {
				return "", err
			}
			if held != "" {
				return held, errBusy
			}
			procLock.f = f
			procLock.take(concurrent)
			release, first = releaseLab(concurrent), true
			return "", nil
		}()
		if err == nil {
			return release, first, nil
		}
		if !errors.Is(err, errBusy) {
			return nil, false, err
		}
		if !said {
			said = true
			log.Warn("waiting for another lab to finish (one lab at a time on a machine)", "lock", LockPath, "holder", holder)
		}
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
		if procLock.f == nil {
			f, holder, err := tryFlock()
			if err != nil {
				procLock.Unlock()
				return nil, 0, err
			}
			if holder != "" {
				procLock.Unlock()
				if !said {
					said = true
					log.Warn("waiting for another lab to finish (one lab at a time on a machine)", "lock", LockPath, "holder", holder)
				}
				select {
				case <-ctx.Done():
					return nil, time.Since(start), fmt.Errorf("lab: waiting for another lab to finish (lock %s, %s): %w", LockPath, holder, ctx.Err())
				case <-time.After(200 * time.Millisecond):
				}
				continue
			}
			procLock.f = f
		}
		procLock.held++
		procLock.Unlock()
		var once sync.Once
		return func() {
			once.Do(func() {
				procLock.Lock()
				defer procLock.Unlock()
				procLock.held--
				procLock.drop()
			})
		}, time.Since(start), nil
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
