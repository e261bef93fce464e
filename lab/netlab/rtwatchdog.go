package netlab

import (
	"bytes"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The real-time watchdog. processRT runs every thread of the lab's process
// SCHED_FIFO at processPriority so that a CPU-bound load never queues the Go
// runtime's hand-offs to the switch thread; the price is that a goroutine of
// the process that spins (waits in a loop for something another process
// must do) keeps both cores from every ordinary task, the daemons it waits
// for among them, and from the runtime's own sysmon, which would have
// preempted it: twice a `gclock lab measure` run spun so on both cores for
// minutes (load 16-20, every test on the machine 10-30x slower; the first
// was gtime's reader, fixed; the second, at 13:29 on 2026-11-27, could not
// be taken apart: a SIGQUIT dump never ran, the signal's thread as starved
// as the rest). The watchdog runs on a thread of its own one priority
// above them, sleeping in a raw system call (no timer of the runtime's,
// which the spinning threads would never run), and wakes every
// watchdogEvery. When the process's processPriority threads used more than
// watchdogShare of every CPU over the last watchdogWindow, it puts them
// back to SCHED_OTHER for the rest of the hold (the switch thread keeps its
// own priority), logs it with every goroutine's stack, and stops: the run
// goes on, ordinary, and its log names the spinning code.
const (
	watchdogPriority = processPriority + 1
	watchdogEvery    = 250 * time.Millisecond
	watchdogWindow   = 8 // wakes: 2 s
	watchdogShare    = 0.9
)

type rtWatchdog struct {
	quit    atomic.Bool
	done    chan struct{}
	demoted atomic.Bool
}

// rtDemotions counts the watchdog's demotions in this process (tests).
var rtDemotions atomic.Int64

func startRTWatchdog() *rtWatchdog {
	w := &rtWatchdog{done: make(chan struct{})}
	// The watchdog's thread keeps its P while it sleeps (a raw system
	// call), as the switch's does: one more P for it.
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 1)
	started := make(chan struct{})
	go w.run(started)
	<-started
	return w
}

// stop ends the watchdog and waits for it (at most one wake).
func (w *rtWatchdog) stop() {
	if w == nil {
		return
	}
	w.quit.Store(true)
	<-w.done
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0)-1, 1))
}

func (w *rtWatchdog) run(started chan<- struct{}) {
	defer close(w.done)
	runtime.LockOSThread()
	// The thread is not unlocked: it ends with the goroutine, so that no
	// other goroutine ever runs at its priority.
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: watchdogPriority, Flags: schedFlagResetOnFork}
	err := unix.SchedSetAttr(0, &attr, 0)
	close(started)
	if err != nil {
		slog.Warn("lab: real-time watchdog: no priority of its own; not watching", "err", err)
		return
	}
	self := unix.Gettid()
	ncpu := float64(runtime.NumCPU())
	const tick = 100.0 // USER_HZ: /proc's CPU times are in 1/100 s
	// Per wake, the CPU time the priority-1 threads used since the last
	// one: each thread's own difference, so that a thread that becomes
	// real-time (startOrdinary hands one back) or appears does not bring
	// its whole past into the sum.
	last := map[int]float64{}
	var used [watchdogWindow]float64
	n := 0
	ts := unix.NsecToTimespec(watchdogEvery.Nanoseconds())
	for !w.quit.Load() {
		_, _, _ = unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), 0, 0)
		if w.quit.Load() {
			return
		}
		now := map[int]float64{}
		var d float64
		forRTThreads(self, func(tid int, cpu float64) {
			now[tid] = cpu
			if c, ok := last[tid]; ok && cpu > c {
				d += (cpu - c) / tick
			}
		})
		last = now
		used[n%watchdogWindow] = d
		if n++; n < watchdogWindow {
			continue
		}
		var sum float64
		for _, u := range used {
			sum += u
		}
		span := float64(watchdogWindow) * watchdogEvery.Seconds()
		if sum <= watchdogShare*ncpu*span {
			continue
		}
		demoteSpinners(self)
		w.demoted.Store(true)
		rtDemotions.Add(1)
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		slog.Warn("lab: real-time watchdog: the lab's real-time threads kept every CPU for 2 s; they run SCHED_OTHER from now on (the switch keeps its priority)",
			"cpu_s", sum, "window_s", span, "cpus", ncpu, "goroutines", string(buf))
		return
	}
}

// demoteSpinners puts this process's processPriority threads back to
// SCHED_OTHER.
func demoteSpinners(self int) {
	forRTThreads(self, func(tid int, _ float64) {
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedOther}
		_ = unix.SchedSetAttr(tid, &attr, 0)
	})
}

// forRTThreads calls f with every thread of this process but self that
// runs SCHED_FIFO at processPriority, and its CPU time in ticks.
func forRTThreads(self int, f func(tid int, cpu float64)) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == self {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: state is
		// field 3, utime 14, stime 15, rt_priority 40, policy 41.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fs := strings.Fields(string(b[i+1:]))
		if len(fs) < 39 {
			continue
		}
		ut, _ := strconv.ParseFloat(fs[11], 64)
		st, _ := strconv.ParseFloat(fs[12], 64)
		prio, _ := strconv.Atoi(fs[37])
		policy, _ := strconv.Atoi(fs[38])
		if policy == schedFIFO && prio == processPriority {
			f(tid, ut+st)
		}
	}
}
