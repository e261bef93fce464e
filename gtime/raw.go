package gtime

import (
	"runtime"
	"time"

	"github.com/gclock/gclock/internal/rawclock"
)

// RawNow reads CLOCK_MONOTONIC_RAW in ns: the local clock of every page.
// It is rawclock.Now: one clock_gettime system call made without the
// scheduler hand-off of a blocking call (the call cannot block). Go has no
// vDSO entry for CLOCK_MONOTONIC_RAW, so this is a real system call; C
// readers get the vDSO.
func RawNow() int64 { return rawclock.Now() }

// yield gives the processor up while a page stays busy, n counting the
// tries past the spinning ones: to other goroutines first
// (runtime.Gosched), then from the yieldSleepAfter-th on to other
// threads too, sleeping 10 us, doubling up to 1 ms. Gosched alone keeps
// the OS thread running: a reader at a real-time priority (the lab runs its
// evaluator's threads SCHED_FIFO) kept a descheduled SCHED_OTHER writer off
// both cores, so the update it waited for could not finish, until the
// kernel's real-time throttling let the writer in for 5% of every second: a
// `gclock lab measure` run at load 20 spun like that for 27 minutes.
func yield(n int) {
	if n < yieldSleepAfter {
		runtime.Gosched()
		return
	}
	d := 10 * time.Microsecond << min(n-yieldSleepAfter, 7)
	time.Sleep(min(d, time.Millisecond))
}

// yieldSleepAfter is how many Gosched tries come before the sleeps: an
// update takes well under a microsecond, so a page still busy after 64
// spins and 64 hand-offs waits for a writer that is not running.
const yieldSleepAfter = 64
