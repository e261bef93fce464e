package daemon

import (
	"math"
	"testing"
	"time"

	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/gtime"
)

// TestKernelRate: adjtimex's tick and frequency as CLOCK_REALTIME's rate
// against CLOCK_MONOTONIC_RAW.
func TestKernelRate(t *testing.T) {
	for _, tt := range []struct {
		name string
		k    kernelTimex
		rate float64
		ok   bool
	}{
		{"nominal", kernelTimex{Tick: 10000}, 0, true},
		{"+30 ppm", kernelTimex{Tick: 10000, Freq: 30 << 16}, 30e-6, true},
		{"-12.5 ppm", kernelTimex{Tick: 10000, Freq: -(25 << 15)}, -12.5e-6, true},
		{"chronyd's tick slew: tick 10001, -10 ppm", kernelTimex{Tick: 10001, Freq: -10 << 16}, 90e-6, true},
		{"the PLL slews an offset (ntpd)", kernelTimex{Tick: 10000, Status: staPLL, Offset: 300}, 0, false},
		{"PLL on, nothing to slew", kernelTimex{Tick: 10000, Status: staPLL, Freq: 1 << 16}, 1e-6, true},
		{"tick 0 (no reading)", kernelTimex{}, 0, false},
	} {
		r, ok := tt.k.rate()
		if ok != tt.ok || math.Abs(r-tt.rate) > 1e-15 {
			t.Errorf("%s: %g %v, want %g %v", tt.name, r, ok, tt.rate, tt.ok)
		}
	}
}

// TestRealTimeKernelSlew is item 5 of issue 29: the reference samples
// CLOCK_REALTIME every refSampleEvery with the kernel's state (a fake
// adjtimex), and the page's bound is the upstream's (maxerror, grown at
// the kernel's 500 us a second) plus at most 10 us, while the bound holds
// the truth as the NTP daemon changes CLOCK_REALTIME's rate between
// samples: +30 ppm, then a slew at -400 ppm, then 0, each change at a
// time no sample falls on. Before, with the rate measured over a 1-s poll
// and max_slew_ppm on top, the bound was ms wide.
func TestRealTimeKernelSlew(t *testing.T) {
	const (
		ms     = int64(time.Millisecond)
		maxErr = 20_000 // what chronyd last set maxerror to, ns
	)
	rt, err := realtime.New(realtime.Config{Mode: realtime.ModeReference, ID: 1, Reference: 1, Poll: int64(time.Second),
		SampleEvery: int64(refSampleEvery), MaxSlew: 500e-6, MaxDrift: 200e-6, Clocks: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	w, r := testPage(t)

	// The fake kernel: CLOCK_REALTIME = raw + off, off growing at the rate
	// its frequency (scaled ppm) gives; maxerror set at raw 0 and grown by
	// the kernel at 500 ppm.
	raw, off := int64(1000*time.Second), int64(1_700_000_000*time.Second)
	freq := int64(30 << 16)
	setAt := raw
	kernel := func() kernelTimex {
		return kernelTimex{Status: 0x2000, Tick: 10000, Freq: freq,
			MaxErrUs: (maxErr + int64(math.Ceil(realtime.UpstreamGrowth*float64(raw-setAt)))) / 1000}
	}
	// The frequency chronyd sets, from raw+at on.
	changes := []struct {
		at   int64
		freq int64
	}{{1234567 * 1000, -400 << 16}, {2345678 * 1000, 0}, {2700001 * 1000, 12 << 16}}
	const step = 250 * time.Microsecond // reads every 250 us
	sampleEvery, publishEvery := refSampleEvery.Nanoseconds(), int64(100*ms)
	start := raw
	reads, worstExtra := 0, int64(0)
	for x := start; x < start+4*int64(time.Second); x += int64(step) {
		for _, c := range changes {
			if x-start == c.at {
				freq = c.freq
			}
		}
		moved := false
		if (x-start)%sampleEvery == 0 {
			if err := rt.SetUpstream(upstreamFromKernel(kernel())); err != nil {
				t.Fatal(err)
			}
			rt.Sample(x, off, 20+wallReadMargin)
			moved = rt.Ready().Moved
		}
		if moved || (x-start)%publishEvery == 0 {
			publishRef(t, w, rt, x)
		}
		if x-start >= 2*sampleEvery {
			tm, err := r.At(x)
			if err != nil {
				t.Fatal(err)
			}
			if tm.Status != gtime.StatusSynced {
				t.Fatalf("%v: page %v", time.Duration(x-start), tm.Status)
			}
			truth := x + off
			if truth < tm.Earliest || truth > tm.Latest {
				t.Fatalf("%v: truth %d outside [%d, %d] (%+d ns from the estimate)", time.Duration(x-start), truth, tm.Earliest, tm.Latest, truth-tm.Est)
			}
			// The upstream's bound now: maxerror as the kernel grows it.
			up := maxErr + int64(realtime.UpstreamGrowth*float64(x-setAt))
			hw := max(tm.Est-tm.Earliest, tm.Latest-tm.Est)
			worstExtra = max(worstExtra, hw-up)
			reads++
		}
		off += int64(math.Round(float64(freq) / 65536e6 * float64(step)))
		raw = x + int64(step)
	}
	if worstExtra > 10_000 {
		t.Errorf("served half-width exceeds the upstream's by up to %d ns, want <= 10 us", worstExtra)
	}
	if j := rt.Stats().Jumps; j != 0 {
		t.Errorf("%d jumps: a slew at the kernel's rate is no jump", j)
	}
	t.Logf("%d reads: the truth inside; served half-width <= the upstream's + %d ns", reads, worstExtra)
}
