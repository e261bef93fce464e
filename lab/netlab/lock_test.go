package netlab

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// privateLock points the lock at a file of t's own for the test's
// length: the lock's rules are tested without waiting for (or making wait)
// the labs of other processes, such as another test package's under `go
// test ./...`. No lab of this process may be up (netlab's tests run one
// after another).
func privateLock(t *testing.T) {
	t.Helper()
	procLock.Lock()
	busy := procLock.f != nil || procLock.changing
	procLock.Unlock()
	if busy {
		t.Fatal("a lab of this process holds the lock")
	}
	lockPath = t.TempDir() + "/gclab.lock"
	t.Cleanup(func() { lockPath = LockPath })
}

// otherProcess opens the lock file as another process would (an open file
// description of its own) and takes how (LOCK_SH or LOCK_EX) on it.
func otherProcess(t *testing.T, how int) *os.File {
	t.Helper()
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if how != 0 {
		if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
			t.Fatalf("flock %d: %v", how, err)
		}
	}
	return f
}

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// TestLockSaysWhoHoldsIt: a lab that waits for another says so, naming the
// holder's pid, and `gclock lab down` refuses to remove a running lab's
// namespaces (issue 19: the wait was silent, and down ignored the lock).
func TestLockSaysWhoHoldsIt(t *testing.T) {
	privateLock(t)
	release, _, err := lockLab(context.Background(), slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	pid := "pid " + strconv.Itoa(os.Getpid())

	var buf bytes.Buffer
	ctx2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	_, _, err = lockLab(ctx2, slog.New(slog.NewTextHandler(&buf, nil)), false)
	if err == nil || !strings.Contains(err.Error(), pid) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second lab: err %v, want a time-out naming %s", err, pid)
	}
	if !strings.Contains(buf.String(), "waiting for another lab") || !strings.Contains(buf.String(), pid) || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("a second lab said %q, want one line that it waits for %s", buf.String(), pid)
	}
	if os.Geteuid() == 0 {
		if err := Down(slog.New(slog.DiscardHandler), false); !errors.Is(err, ErrLabBusy) || !strings.Contains(err.Error(), pid) {
			t.Errorf("down while a lab runs: %v, want ErrLabBusy naming %s", err, pid)
		}
	}
	// Another process's wait names this one too (from /proc/locks).
	f := otherProcess(t, 0)
	if h := lockHolder(f); !strings.Contains(h, pid) {
		t.Errorf("lockHolder = %q, want it to name %s", h, pid)
	}
}

// TestExclusiveLabWaits: a second exclusive lab waits for the first's
// release instead of coming up beside it, gives up with its context, and
// comes up once the first is released.
func TestExclusiveLabWaits(t *testing.T) {
	privateLock(t)
	log := slog.New(slog.DiscardHandler)
	release, first, err := lockLab(context.Background(), log, false)
	if err != nil || !first {
		t.Fatalf("first lab: first %v, err %v; want true, nil", first, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if rel, _, err := lockLab(ctx, log, false); err == nil {
		rel()
		t.Fatal("a second exclusive lab came up beside the first")
	}
	if rel, _, err := lockLab(ctx, log, true); err == nil {
		rel()
		t.Fatal("a concurrent lab came up beside an exclusive one")
	}
	came := make(chan error, 1)
	go func() {
		rel, _, err := lockLab(context.Background(), log, false)
		if err == nil {
			rel()
		}
		came <- err
	}()
	time.Sleep(100 * time.Millisecond)
	release()
	select {
	case err := <-came:
		if err != nil {
			t.Fatalf("the waiting lab: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting lab still waits 30 s after the first's release")
	}
}

// TestLockLevels: what another process's hold on the lock lets this
// process's labs do, and what this process's labs let another process
// take: shared beside shared, exclusive alone.
func TestLockLevels(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	try := func(concurrent bool) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		rel, _, err := lockLab(ctx, log, concurrent)
		if err != nil {
			return false
		}
		rel()
		return true
	}
	for _, tc := range []struct {
		name                  string
		other                 int // the other process's flock: 0, LOCK_SH, LOCK_EX
		exclusive, concurrent bool
	}{
		{"other holds nothing", 0, true, true},
		{"other holds it shared", syscall.LOCK_SH, false, true},
		{"other holds it exclusively", syscall.LOCK_EX, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			privateLock(t)
			fds := openFiles(t)
			other := otherProcess(t, tc.other)
			if got := try(false); got != tc.exclusive {
				t.Errorf("exclusive lab came up: %v, want %v", got, tc.exclusive)
			}
			if got := try(true); got != tc.concurrent {
				t.Errorf("concurrent lab came up: %v, want %v", got, tc.concurrent)
			}
			// Given up or released, the lock file is closed again (a wait
			// that timed out once left its newly opened file open); an
			// abandoned wait's duplicate closes when the other lets go.
			other.Close()
			got := openFiles(t)
			for deadline := time.Now().Add(10 * time.Second); got != fds && time.Now().Before(deadline); got = openFiles(t) {
				time.Sleep(10 * time.Millisecond)
			}
			if got != fds {
				t.Errorf("%d open files after the labs and the other's release, %d before", got, fds)
			}
		})
	}
	t.Run("this process's labs", func(t *testing.T) {
		privateLock(t)
		other := otherProcess(t, 0)
		can := func(how int) bool {
			if err := syscall.Flock(int(other.Fd()), how|syscall.LOCK_NB); err != nil {
				return false
			}
			syscall.Flock(int(other.Fd()), syscall.LOCK_UN)
			return true
		}
		hold, _, err := HoldLock(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer hold()
		if !can(syscall.LOCK_SH) || can(syscall.LOCK_EX) {
			t.Error("under HoldLock: another process should take it shared only")
		}
		rel, first, err := lockLab(context.Background(), log, false)
		if err != nil || !first {
			t.Fatalf("exclusive lab under the hold: first %v, err %v", first, err)
		}
		if can(syscall.LOCK_SH) {
			t.Error("an exclusive lab up: another process took the lock shared")
		}
		rel()
		// Lowered to shared again for the hold.
		if !can(syscall.LOCK_SH) || can(syscall.LOCK_EX) {
			t.Error("after the exclusive lab: another process should take it shared only")
		}
		rel2, first2, err := lockLab(context.Background(), log, true)
		if err != nil || first2 {
			t.Fatalf("concurrent lab under a shared hold: first %v, err %v; want false, nil (other processes' labs may run)", first2, err)
		}
		rel2()
		hold()
		procLock.Lock()
		kept := procLock.f != nil
		procLock.Unlock()
		if kept || !can(syscall.LOCK_EX) {
			t.Error("the lock still held after the last lab and the hold went")
		}
	})
}

func TestFlockHolders(t *testing.T) {
	locks := "1: FLOCK  ADVISORY  READ 4711 fe:00:9773247 0 EOF\n" +
		"1: -> FLOCK  ADVISORY  WRITE 99 fe:00:9773247 0 EOF\n" +
		"2: FLOCK  ADVISORY  READ 4712 fe:00:9773247 0 EOF\n" +
		"3: FLOCK  ADVISORY  WRITE 5 fe:00:1 0 EOF\n" +
		"4: POSIX  ADVISORY  WRITE 6 fe:00:9773247 0 EOF\n" +
		"5: FLOCK  ADVISORY  READ 4711 fe:00:9773247 0 EOF\n" +
		"garbage\n6: FLOCK ADVISORY WRITE x fe:00:9773247 0 EOF\n"
	tests := []struct {
		ino  uint64
		want []int
	}{
		{9773247, []int{4711, 4712}},
		{1, []int{5}},
		{2, nil},
	}
	for _, tt := range tests {
		if got := flockHolders(locks, tt.ino); !slices.Equal(got, tt.want) {
			t.Errorf("flockHolders(ino %d) = %v, want %v", tt.ino, got, tt.want)
		}
	}
}

// TestWaitFlock: the lab's lock is taken at once when free; a waiter says
// once that it waits, and takes the lock when the holder lets go (waiting
// in the kernel, not polling); a waiter whose context ends gives up and
// leaves the lock free for the next one.
func TestWaitFlock(t *testing.T) {
	tests := []struct {
		name     string
		held     int  // another open file's flock first: 0, LOCK_SH, LOCK_EX
		how      int  // what the waiter asks for
		cancel   bool // the waiter's context ends while it waits
		wantWait int
		wantErr  error
	}{
		{"free", 0, syscall.LOCK_EX, false, 0, nil},
		{"held, then released", syscall.LOCK_EX, syscall.LOCK_EX, false, 1, nil},
		{"held, waiter gives up", syscall.LOCK_EX, syscall.LOCK_EX, true, 1, context.Canceled},
		{"shared beside shared", syscall.LOCK_SH, syscall.LOCK_SH, false, 0, nil},
		{"exclusive waits for shared", syscall.LOCK_SH, syscall.LOCK_EX, false, 1, nil},
		{"shared waits for exclusive", syscall.LOCK_EX, syscall.LOCK_SH, false, 1, nil},
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
			if tc.held != 0 {
				if err := syscall.Flock(int(holder.Fd()), tc.held); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			waiter := open()
			defer waiter.Close()
			waits := 0
			err := waitFlock(ctx, waiter, tc.how, func() {
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
			if err := waitFlock(ctx3, third, syscall.LOCK_EX, func() {}); err != nil {
				t.Errorf("after a waiter gave up, the next could not take the lock: %v", err)
			}
		})
	}
}
