package netlab

import (
	"runtime/debug"
	"testing"
)

// TestProcessRTPausesGC: while a real-time lab holds the process (the
// switch under SCHED_FIFO), the garbage collector is off up to
// rtMemoryLimit; the last release gives back the settings it found, and
// two holders share one pause.
func TestProcessRTPausesGC(t *testing.T) {
	needLab(t) // SCHED_FIFO needs root
	before := debug.SetGCPercent(73)
	defer debug.SetGCPercent(before)
	beforeLimit := debug.SetMemoryLimit(-1)
	r1, err := processRT()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := processRT()
	if err != nil {
		r1()
		t.Fatal(err)
	}
	check := func(when string, wantPercent int, wantLimit int64) {
		t.Helper()
		p := debug.SetGCPercent(wantPercent)
		debug.SetGCPercent(p)
		if l := debug.SetMemoryLimit(-1); p != wantPercent || l != wantLimit {
			t.Errorf("%s: GC percent %d, memory limit %d; want %d, %d", when, p, l, wantPercent, wantLimit)
		}
	}
	check("held twice", -1, rtMemoryLimit)
	r1()
	r1() // a release is done once
	check("held once", -1, rtMemoryLimit)
	r2()
	check("released", 73, beforeLimit)
}
