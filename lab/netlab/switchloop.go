package netlab

import (
	"container/heap"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The switch thread (see Switch): it sleeps, polls its ports, spins on the
// clock and writes each frame at its release time.

// busyBudgetMax is the most busy-polling time the switch thread saves up.
const busyBudgetMax = int64(20 * time.Millisecond)

// fineSpin is how close to a release the switch stops polling its ports
// and only reads the clock (a vDSO call, tens of ns).
const fineSpin = int64(10 * time.Microsecond)

// minWarmLead is the least time before a release a warm-up write starts:
// closer, it would delay the release itself.
const minWarmLead = int64(20 * time.Microsecond)

// maxSleep caps one blocking poll of the switch thread: a stop-the-world
// pause of the Go runtime waits at most this long for it.
const maxSleep = time.Millisecond

// loop is the switch thread: it receives, queues and releases frames until
// Close. It stays one function on purpose (150 lines): it is the timed hot
// path, read top to bottom as the timeline of one release (sleep, poll,
// spin, send), with its state in locals the compiler keeps in registers.
func (s *Switch) loop(started chan<- error) {
	defer close(s.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// 1 ns timer slack: the default 50 us would be added to every sleep.
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0); err != nil {
		s.log.Warn("switch: timer slack", "err", err)
	}
	if s.cfg.SchedFIFO {
		// Reset on fork: threads the runtime creates from this one must not
		// inherit its priority.
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: switchPriority, Flags: schedFlagResetOnFork}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			started <- fmt.Errorf("switch: SCHED_FIFO release thread: %w", err)
			return
		}
		// Back to SCHED_OTHER before the thread is unlocked: the runtime must
		// not run other goroutines on it at real-time priority.
		defer func() {
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedOther}
			if s.releaseRT != nil {
				attr = unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: processPriority}
			}
			_ = unix.SchedSetAttr(0, &attr, 0)
		}()
	}
	started <- nil
	spin := s.cfg.SpinWindow.Nanoseconds()
	pfds := make([]unix.PollFd, len(s.ports))
	for i, p := range s.ports {
		pfds[i] = unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN}
	}
	oob := make([]byte, 128)
	busy := s.cfg.BusyPoll.Nanoseconds()
	var active int64  // last frame received or sent
	var warmed uint64 // seq of the last frame written to the warm-up port
	warmAfter := s.cfg.WarmAfter.Nanoseconds()
	var budget, refilled int64
	// polled: pfds' revents say which ports have frames (a poll ran since
	// the last receiveAll), so that only those are read: under cross
	// traffic a recvmsg on every port per wake-up kept the thread busy.
	polled := false
	for !s.closed.Load() {
		if s.receiveAll(oob, pfds, polled) {
			active = nowWall()
		}
		polled = false
		now := nowWall()
		for len(s.pend) > 0 && s.pend[0].at-s.lookahead <= now {
			s.dispatch(heap.Pop(&s.pend).(release))
		}
		for r, ok := s.popDue(now); ok; r, ok = s.popDue(now) {
			s.dispatch(r)
			now = nowWall()
			active = now
		}
		wait := int64(maxSleep)
		if len(s.q) > 0 {
			wait = min(wait, s.q[0].at-now)
		}
		// The next frame to join a port's queue: a wake-up, never a spin.
		waitPend := int64(maxSleep)
		if len(s.pend) > 0 {
			waitPend = max(0, min(waitPend, s.pend[0].at-s.lookahead-now))
		}
		if len(s.bulk) > 0 {
			waitPend = max(0, min(waitPend, s.bulk[0].at-now))
		}
		// Warm-up: after an idle spell, write the next frame to the
		// warm-up port once, inside the spin window, so that its own
		// release runs through warm caches.
		warmDue := s.warmFD >= 0 && len(s.q) > 0 && s.q[0].seq != warmed && now-s.lastWrite > warmAfter
		if warmDue && wait <= spin && wait > minWarmLead {
			h := s.q[0]
			warmed = h.seq
			_ = rawWrite(s.warmFD, (*h.buf)[:h.n])
			s.lastWrite = nowWall()
			s.warmups.Add(1)
			continue
		}
		// The busy budget refills at half the elapsed time, up to
		// busyBudgetMax, and pays for busy-polling and spinning: the thread
		// never waits busily more than half the time, so that with the work
		// of a busy link (copies, the receivers' softirq inside its writes)
		// the kernel's real-time throttling (95% of each second) never stops
		// it, and a link busy for long falls back to sleeping. Cross traffic
		// at 70% of 1 Gbit/s kept it busy polling and spinning until the
		// throttling stopped it for up to 56 ms a second.
		budget = min(busyBudgetMax, budget+(now-refilled)/2)
		refilled = now
		// The last microseconds before a release: spin on the clock alone.
		// A port poll is a system call (about a microsecond here), which
		// would make every release late by up to that much.
		if len(s.q) > 0 && wait > 0 && wait <= fineSpin {
			for at := s.q[0].at; nowWall() < at; {
			}
			budget -= nowWall() - now
			// Release now: reading the ports first would cost a system
			// call per port.
			for r, ok := s.popDue(nowWall()); ok; r, ok = s.popDue(nowWall()) {
				s.dispatch(r)
			}
			active = nowWall()
			continue
		}
		if hot := now-active < busy; hot && budget > 0 {
			// Busy-poll: at most until the next release or the end of the
			// window, then look at the queue again.
			until := wait - fineSpin
			if warmDue && wait > spin {
				until = wait - spin // back for the warm-up at the spin window
			}
			deadline := now + min(until, busy-(now-active), budget, waitPend)
			t := now
			for t < deadline {
				polled = true
				if s.readable(pfds) {
					break
				}
				t = nowWall()
			}
			budget -= max(0, t-now)
			continue
		}
		if wait > spin {
			rawPpoll(pfds, min(wait-spin, waitPend))
			polled = true
			continue
		}
		// Spin until the head is nearly due or a frame arrives; sleep
		// instead when the budget is spent.
		deadline := now + min(wait-fineSpin, waitPend)
		if budget <= 0 {
			rawPpoll(pfds, deadline-now)
			polled = true
			continue
		}
		for nowWall() < deadline {
			polled = true
			if s.readable(pfds) {
				break
			}
		}
		budget -= nowWall() - now
	}
	for _, r := range s.q {
		s.pool.Put(r.buf)
	}
	for _, r := range append(s.pend, s.bulk...) {
		s.pool.Put(r.buf)
	}
	s.q, s.pend, s.bulk = nil, nil, nil
}

// readable polls the ports without blocking.
func (s *Switch) readable(pfds []unix.PollFd) bool {
	for i := range pfds {
		pfds[i].Revents = 0
	}
	var zero unix.Timespec
	n, _, _ := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfds[0])), uintptr(len(pfds)),
		uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	return int(n) > 0
}

// receiveAll reads every frame waiting on every port (with polled, on the
// ports whose pfds entry has revents).
func (s *Switch) receiveAll(oob []byte, pfds []unix.PollFd, polled bool) (got bool) {
	for in, p := range s.ports {
		if polled && pfds[in].Revents == 0 {
			continue
		}
		for {
			bp := s.pool.Get().(*[]byte)
			n, oobn, flags, err := recvmsg(p.fd, *bp, oob)
			if err != nil {
				s.pool.Put(bp)
				if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
					s.log.Warn("switch: receive", "port", p.name, "err", err)
				}
				break
			}
			if flags&unix.MSG_TRUNC != 0 || n < vnetHdrLen+14 {
				s.pool.Put(bp)
				continue
			}
			rx := rxTimestamp(oob[:oobn])
			if rx == 0 {
				rx = nowWall()
			}
			got = true
			if !s.handleFrame(in, bp, n, rx) {
				s.pool.Put(bp)
			}
		}
	}
	return got
}

func (s *Switch) send(r release) {
	p := s.ports[r.out]
	start := nowWall()
	err := rawWrite(p.fd, (*r.buf)[:r.n])
	end := nowWall()
	cost := end - start
	s.lastWrite = end
	late := start - r.at
	if s.cfg.FrameLog != "" {
		s.frames.add(r, (*r.buf)[:r.n], start, end)
	}
	s.pool.Put(r.buf)
	s.statMu.Lock()
	st := s.dirStats(r.dir)
	if err != nil {
		st.SendErrors++
	}
	if len(st.lateness) < latenessCap {
		if late > 1<<31-1 {
			late = 1<<31 - 1
		}
		st.lateness = append(st.lateness, int32(late))
		st.writeCost = append(st.writeCost, int32(min(cost, 1<<31-1)))
	}
	s.statMu.Unlock()
	if err != nil {
		s.log.Debug("switch: send", "port", p.name, "err", err)
	}
}
