package netlab

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"strings"
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
