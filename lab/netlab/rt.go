package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
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
}

// processRT puts every thread of this process under SCHED_FIFO at
// processPriority (threads made later inherit it) while at least one caller
// holds it; release undoes it.
func processRT() (release func(), err error) {
	rt.Lock()
	defer rt.Unlock()
	if rt.users == 0 {
		if err := setAllThreads(schedFIFO, processPriority); err != nil {
			_ = setAllThreads(schedOther, 0)
			return nil, fmt.Errorf("SCHED_FIFO for the process's threads: %w", err)
		}
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
			}
		})
	}, nil
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
