package gtime

import (
	"runtime"

	"github.com/gclock/gclock/internal/rawclock"
)

// RawNow reads CLOCK_MONOTONIC_RAW in ns: the local clock of every page.
// It is rawclock.Now: one clock_gettime system call made without the
// scheduler hand-off of a blocking call (the call cannot block). Go has no
// vDSO entry for CLOCK_MONOTONIC_RAW, so this is a real system call; C
// readers get the vDSO.
func RawNow() int64 { return rawclock.Now() }

func yield() { runtime.Gosched() }
