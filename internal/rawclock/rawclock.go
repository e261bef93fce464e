// Package rawclock reads CLOCK_MONOTONIC_RAW, gclock's local clock on every
// node: the oscillator itself, never slewed or stepped by NTP, so that the
// engine sees its true drift. Every page, packet stamp and evaluation in
// gclock is on this clock.
//
//	if err := rawclock.Check(); err != nil { ... } // once at start-up
//	t := rawclock.Now()                            // ns, never decreasing
//
// Go's runtime has no vDSO entry for CLOCK_MONOTONIC_RAW, so Now is one
// clock_gettime system call, made without the scheduler hand-off of a
// blocking call (it cannot block). C readers of the page get the vDSO.
// BenchmarkNow measures it.
package rawclock

import (
	"fmt"
	"math"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Now returns CLOCK_MONOTONIC_RAW in nanoseconds. The kernel keeps this
// clock monotonic, so successive calls never decrease. On the (never seen)
// failure of clock_gettime it returns 0; Check reports that failure.
func Now() int64 {
	var ts unix.Timespec
	unix.RawSyscallNoError(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC_RAW, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// Check reports whether CLOCK_MONOTONIC_RAW can be read on this system;
// call it once at start-up before trusting Now.
func Check() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		return fmt.Errorf("rawclock: clock_gettime(CLOCK_MONOTONIC_RAW): %w", err)
	}
	return nil
}

// Step returns the smallest difference between two different successive
// reads of Now seen in tries attempts (at least one): the clock's effective
// resolution, read cost included.
func Step(tries int) int64 {
	best := int64(math.MaxInt64)
	for range max(tries, 1) {
		a := Now()
		b := Now()
		for b == a {
			b = Now()
		}
		best = min(best, b-a)
	}
	return best
}
