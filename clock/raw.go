package clock

import "github.com/gclock/gclock/internal/rawclock"

// Raw reads CLOCK_MONOTONIC_RAW: the oscillator itself, never slewed or
// stepped by NTP. Its zero value is ready to use and safe for concurrent use.
type Raw struct{}

// Now returns CLOCK_MONOTONIC_RAW in nanoseconds (rawclock.Now). The kernel
// keeps this clock monotonic, so successive calls never decrease. On the
// (never seen) failure of clock_gettime it returns 0.
func (Raw) Now() int64 { return rawclock.Now() }

// CheckRaw reports whether CLOCK_MONOTONIC_RAW can be read on this system;
// call it once at start-up before trusting Raw.
func CheckRaw() error { return rawclock.Check() }
