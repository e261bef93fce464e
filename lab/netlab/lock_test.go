package netlab

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLockSaysWhoHoldsIt: a lab that waits for another says so, naming the
// holder's pid, and `gclock lab down` refuses to remove a running lab's
// namespaces (issue 19: the wait was silent, and down ignored the lock).
func TestLockSaysWhoHoldsIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the lab's lock is in /run: root only")
	}
	// Take the lock as a running lab would (waiting if a real one runs).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	release, _, err := lockLab(ctx, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	pid := "pid " + strconv.Itoa(os.Getpid())

	var buf bytes.Buffer
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	_, _, err = lockLab(ctx2, slog.New(slog.NewTextHandler(&buf, nil)), false)
	if err == nil || !strings.Contains(err.Error(), pid) {
		t.Errorf("a second lab: err %v, want a time-out naming %s", err, pid)
	}
	if !strings.Contains(buf.String(), "waiting for another lab") || !strings.Contains(buf.String(), pid) || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("a second lab said %q, want one line that it waits for %s", buf.String(), pid)
	}
	if err := Down(slog.New(slog.DiscardHandler), false); !errors.Is(err, ErrLabBusy) || !strings.Contains(err.Error(), pid) {
		t.Errorf("down while a lab runs: %v, want ErrLabBusy naming %s", err, pid)
	}
	// Released: down takes the lock itself (nothing of ours to remove).
	release()
	if err := Check(); err == nil {
		// Another process's lab may take the lock in between (its
		// ErrLabBusy names it, not us).
		if err := Down(slog.New(slog.DiscardHandler), false); err != nil && (!errors.Is(err, ErrLabBusy) || strings.Contains(err.Error(), pid)) {
			t.Errorf("down with no lab of ours running: %v", err)
		}
	}
}

// TestHoldLock: while this process holds the lab lock (HoldLock), its labs
// come and go without giving it up (a second open of the lock file cannot
// take it between them), and release gives it up.
func TestHoldLock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the lab's lock is in /run: root only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	release, _, err := HoldLock(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	free := func() bool {
		f, holder, err := tryFlock()
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			f.Close()
		}
		return holder == ""
	}
	for i := range 2 {
		rel, first, err := lockLab(context.Background(), slog.New(slog.DiscardHandler), i == 1)
		if err != nil {
			t.Fatalf("lab %d under the hold: %v", i, err)
		}
		if !first {
			t.Errorf("lab %d under the hold: first false, want true (no lab of this process was up)", i)
		}
		rel()
		if free() {
			t.Fatalf("the lock was free after lab %d went down under the hold", i)
		}
	}
	release()
	procLock.Lock()
	kept := procLock.f != nil
	procLock.Unlock()
	if kept {
		t.Error("the lock file still open (the flock held) after release")
	}
}

// TestWaitFlock: the lab's lock is taken at once when free; a waiter says
// once that it waits, and takes the lock when the holder lets go (waiting
// in the kernel, not polling); a waiter whose context ends gives up and
// leaves the lock free for the next one.
func TestWaitFlock(t *testing.T) {
	tests := []struct {
		name     string
		held     bool // another open file holds the lock first
		cancel   bool // the waiter's context ends while it waits
		wantWait int
		wantErr  error
	}{
		{"free", false, false, 0, nil},
		{"held, then released", true, false, 1, nil},
		{"held, waiter gives up", true, true, 1, context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := t.TempDir() + "/lock"
			open := func() *os.File {
				f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
			holder := open()
			defer holder.Close()
			if tc.held {
				if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waiter := open()
			defer waiter.Close()
			waits := 0
			err := waitFlock(ctx, waiter, func() {
				waits++
				if tc.cancel {
					cancel()
					return
				}
				syscall.Flock(int(holder.Fd()), syscall.LOCK_UN) // the waiter is about to block
			})
			if waits != tc.wantWait || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Fatalf("waited %d times, err %v; want %d, %v", waits, err, tc.wantWait, tc.wantErr)
			}
			third := open()
			defer third.Close()
			busy := syscall.Flock(int(third.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				if busy != syscall.EWOULDBLOCK {
					t.Errorf("the waiter says it holds the lock, but another took it: %v", busy)
				}
				return
			}
			// Given up: once the holder lets go, the lock is free for the
			// next waiter (the abandoned wait releases what it takes).
			waiter.Close()
			syscall.Flock(int(holder.Fd()), syscall.LOCK_UN)
			ctx3, cancel3 := context.WithTimeout(context.Background(), time.Minute)
			defer cancel3()
			if err := waitFlock(ctx3, third, func() {}); err != nil {
				t.Errorf("after a waiter gave up, the next could not take the lock: %v", err)
			}
		})
	}
}
