package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Scheduling policies and flags of sched_setattr(2).
const (
	schedOther           = 0
	schedFIFO            = 1
	schedFlagResetOnFork = 0x01
)

// Real-time priorities. The switch thread preempts everything else of the
// process; the process's other threads run just above every ordinary task
// of the machine, so the Go runtime's hand-offs to the switch thread (after
// a preemption or a garbage collection) are never queued behind a CPU-bound
// load.
const (
	switchPriority  = 50
	processPriority = 1
)

var rt struct {
	sync.Mutex
	users int
	// The garbage collector's settings before the first user (see
	// pauseGC).
	gcPercent int
	memLimit  int64
}

// rtMemoryLimit is the heap at which the garbage collector runs again while
// it is paused for a real-time lab (pauseGC): a 60-s `gclock lab bench`
// run with chrony and ptp4l took the process to about 220 MB resident (its
// evaluations, the peers' readings and processes, the metrics scrapes),
// so it is reached only by labs of ten minutes or more, where a
// collection runs as before; and it keeps a leak from taking the machine.
const rtMemoryLimit = 2 << 30

// processRT puts every thread of this process under SCHED_FIFO at
// processPriority (threads made later inherit it) and pauses the garbage
// collector (pauseGC) while at least one caller holds it; release undoes
// both.
func processRT() (release func(), err error) {
	rt.Lock()
	defer rt.Unlock()
	if rt.users == 0 {
		if err := setAllThreads(schedFIFO, processPriority); err != nil {
			_ = setAllThreads(schedOther, 0)
			return nil, fmt.Errorf("SCHED_FIFO for the process's threads: %w", err)
		}
		rt.gcPercent, rt.memLimit = pauseGC()
	}
	rt.users++
	var once sync.Once
	return func() {
		once.Do(func() {
			rt.Lock()
			defer rt.Unlock()
			rt.users--
			if rt.users == 0 {
				_ = setAllThreads(schedOther, 0)
				debug.SetGCPercent(rt.gcPercent)
				debug.SetMemoryLimit(rt.memLimit)
				runtime.GC()
			}
		})
	}, nil
}

// pauseGC turns the garbage collector off up to rtMemoryLimit of heap and
// returns its settings before. A collection's stop-the-world waits for
// every P to pass a safe point; in a lab process whose threads are all
// real-time and whose switch goroutine is locked to a SCHED_FIFO 50
// thread, that wait and the switch's hand-off after a preemption have
// waited on each other for good (docs/lab.md, "What runs where": a
// SIGQUIT dump showed gcMarkTermination's forEachP 11 minutes in, the
// switch's locked M parked in stoplockedm). With no collection during a
// lab there is no such wait; the heap a lab allocates is small
// (rtMemoryLimit).
func pauseGC() (gcPercent int, memLimit int64) {
	memLimit = debug.SetMemoryLimit(rtMemoryLimit)
	gcPercent = debug.SetGCPercent(-1)
	return gcPercent, memLimit
}

func setAllThreads(policy uint32, prio uint32) error {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var first error
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: policy, Priority: prio}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && first == nil && err != unix.ESRCH {
			first = fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return first
}

// startOrdinary starts cmd from a thread running SCHED_OTHER, so that the
// child (chronyd, ptp4l, a daemon) runs as an ordinary process even while
// the lab's own threads are real-time.
func startOrdinary(cmd *exec.Cmd) error {
	rt.Lock()
	active := rt.users > 0
	rt.Unlock()
	if !active {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	other := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedOther}
	if err := unix.SchedSetAttr(0, &other, 0); err != nil {
		return fmt.Errorf("SCHED_OTHER before starting %s: %w", cmd.Path, err)
	}
	err := cmd.Start()
	back := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: processPriority}
	_ = unix.SchedSetAttr(0, &back, 0)
	return err
}
