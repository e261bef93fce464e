package rawclock

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestNow(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		t.Fatal(err)
	}
	a := Now()
	if a < ts.Nano() {
		t.Fatalf("Now = %d, before a clock_gettime read just before it (%d)", a, ts.Nano())
	}
	prev := a
	for range 1000 {
		n := Now()
		if n < prev {
			t.Fatalf("Now went back: %d after %d", n, prev)
		}
		prev = n
	}
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts); err != nil {
		t.Fatal(err)
	}
	if prev > ts.Nano() {
		t.Fatalf("Now = %d, after a clock_gettime read just after it (%d)", prev, ts.Nano())
	}
}

func TestStep(t *testing.T) {
	s := Step(16)
	if s <= 0 || s > 1e6 {
		t.Fatalf("Step = %d ns, want in (0, 1 ms]", s)
	}
}

var sink int64

// BenchmarkNow is one CLOCK_MONOTONIC_RAW read as gclock makes it.
func BenchmarkNow(b *testing.B) {
	for b.Loop() {
		sink += Now()
	}
}

// BenchmarkClockGettime is the same read through unix.ClockGettime (the
// scheduler's blocking-syscall path), for comparison.
func BenchmarkClockGettime(b *testing.B) {
	var ts unix.Timespec
	for b.Loop() {
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts)
		sink += ts.Nano()
	}
}
