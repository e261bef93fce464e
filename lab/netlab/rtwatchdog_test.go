package netlab

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRTWatchdogDemotesSpinners: under processRT, goroutines that spin on
// every CPU (a loop that waits for another process, say) would keep the
// machine from every ordinary task; the watchdog puts the process's
// real-time threads back to SCHED_OTHER within its window and a few wakes,
// and a thread that held its own priority (the switch's) keeps it. It
// needs root (SCHED_FIFO) and takes the lab lock exclusively: for about 2 s
// nothing else on the machine runs.
func TestRTWatchdogDemotesSpinners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SCHED_FIFO needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	release, _, err := lockLab(ctx, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	before := rtDemotions.Load()
	rel, err := processRT()
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	// A thread at the switch's priority (set after processRT, as the
	// switch's is), sleeping: it must keep it.
	hiTid := make(chan int)
	hiDone := make(chan struct{})
	var hiPolicy atomic.Uint32
	go func() {
		runtime.LockOSThread()
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: switchPriority, Flags: schedFlagResetOnFork}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			t.Error(err)
		}
		hiTid <- unix.Gettid()
		<-hiDone
		if a, err := unix.SchedGetAttr(0, 0); err == nil {
			hiPolicy.Store(a.Policy<<8 | a.Priority)
		}
		other := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedOther}
		_ = unix.SchedSetAttr(0, &other, 0)
		runtime.UnlockOSThread()
		hiDone <- struct{}{}
	}()
	<-hiTid

	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for range runtime.NumCPU() + 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for x := 0; !stop.Load(); x++ {
				if time.Since(start) > 30*time.Second {
					return // the watchdog did not act: the test fails below
				}
			}
		}()
	}
	// This goroutine's own wake-up needs a CPU: it comes after the demotion.
	for rtDemotions.Load() == before && time.Since(start) < 30*time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	stop.Store(true)
	wg.Wait()
	hiDone <- struct{}{}
	<-hiDone
	if rtDemotions.Load() == before {
		t.Fatalf("the watchdog did not demote the spinning threads in %v", took)
	}
	t.Logf("demoted after %v", took)
	if took > 10*time.Second {
		t.Errorf("demoted after %v, want within a few seconds (window %v)", took, time.Duration(watchdogWindow)*watchdogEvery)
	}
	if p := hiPolicy.Load(); p != schedFIFO<<8|switchPriority {
		t.Errorf("the thread at the switch's priority has policy %d priority %d after the demotion, want SCHED_FIFO %d", p>>8, p&0xff, switchPriority)
	}
	n := 0
	forRTThreads(-1, func(int, float64) { n++ })
	if n != 0 {
		t.Errorf("%d threads still SCHED_FIFO at priority %d after the demotion", n, processPriority)
	}
}

// TestRTWatchdogIgnoresPast: a thread that worked as SCHED_OTHER (as
// startOrdinary's does while it starts a program) and then runs real-time
// again brings no past CPU time into the watchdog's window: in the lab
// test binary the watchdog once counted a thread's whole life at its
// return and demoted an idle process (TestRestarts then failed).
func TestRTWatchdogIgnoresPast(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SCHED_FIFO needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	release, _, err := lockLab(ctx, slog.New(slog.DiscardHandler), false)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	before := rtDemotions.Load()
	rel, err := processRT()
	if err != nil {
		t.Fatal(err)
	}
	defer rel()
	// A quarter more CPU time than the watchdog's threshold (watchdogShare
	// of every CPU over its window).
	window := time.Duration(watchdogWindow) * watchdogEvery
	burn := time.Duration(1.25 * watchdogShare * float64(runtime.NumCPU()) * float64(window))
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		other := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedOther}
		if err := unix.SchedSetAttr(0, &other, 0); err != nil {
			t.Error(err)
			return
		}
		var r unix.Rusage
		for {
			_ = unix.Getrusage(unix.RUSAGE_THREAD, &r)
			if time.Duration(r.Utime.Nano()+r.Stime.Nano()) >= burn {
				break
			}
		}
		back := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: processPriority}
		if err := unix.SchedSetAttr(0, &back, 0); err != nil {
			t.Error(err)
		}
		time.Sleep(3 * window)
	}()
	<-done
	if rtDemotions.Load() != before {
		t.Errorf("the watchdog demoted an idle process: it counted a thread's past CPU time")
	}
}
