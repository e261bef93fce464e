package clock

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Raw reads CLOCK_MONOTONIC_RAW: the oscillator itself, never slewed or
// stepped by NTP. Its zero value is ready to use and safe for concurrent use.
type Raw struct{}

// Now returns CLOCK_MONOTONIC_RAW in nanoseconds. The kernel keeps this clock
// monotonic, so successive calls never decrease. On the (never seen) failure
// of clock_gettime it returns 0.
func (Raw) Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// CheckRaw reports whether CLOCK_MONOTONIC_RAW can be read on this system;
// call it once at start-up before trusting Raw.
func CheckRaw() error {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		return fmt.Errorf("clock: clock_gettime(CLOCK_MONOTONIC_RAW): %w", err)
	}
	return nil
}
