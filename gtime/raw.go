package gtime

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RawNow reads CLOCK_MONOTONIC_RAW in ns: the local clock of every page.
// It is one clock_gettime system call made without the scheduler hand-off
// of a blocking call (the call cannot block). Go has no vDSO entry for
// CLOCK_MONOTONIC_RAW, so this is a real system call; C readers get the vDSO.
func RawNow() int64 {
	var ts unix.Timespec
	unix.RawSyscallNoError(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC_RAW, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

func yield() { runtime.Gosched() }
