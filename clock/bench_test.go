package clock

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var sink int64

func BenchmarkRawNow(b *testing.B) {
	var r Raw
	for b.Loop() {
		sink += r.Now()
	}
}

func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		sink += time.Now().UnixNano()
	}
}

func BenchmarkClockGettimeRaw(b *testing.B) {
	var ts unix.Timespec
	for b.Loop() {
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts)
		sink += ts.Nano()
	}
}

func BenchmarkEmulatedRead(b *testing.B) {
	e, err := NewEmulated(EmuParams{DriftPPM: 12, WanderPPM: 0.01, WanderStep: 1e8, Granularity: 100, JitterNs: 50, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	t := int64(0)
	for b.Loop() {
		t += 1000
		sink += e.Read(t)
	}
}

// BenchmarkEmulatedTruthAt is a Read and a timer deadline 50 ms ahead, as
// the simulator does.
func BenchmarkEmulatedTruthAt(b *testing.B) {
	e, err := NewEmulated(EmuParams{DriftPPM: 12, WanderPPM: 0.01, WanderStep: 1e8, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	t := int64(0)
	for b.Loop() {
		t += 1000
		sink += e.TruthAt(e.Read(t) + 50e6) // a timer 50 ms ahead
	}
}
