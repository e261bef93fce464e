package netlab

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// The faults the switch and the host processes can be given; package lab
// schedules them into a run (lab.Fault).

// Partition drops every frame from or to port host whose receive stamp
// falls within the next d (a cable pulled for d).
func (s *Switch) Partition(host int, d time.Duration) error {
	if host < 0 || host >= len(s.cutUntil) {
		return fmt.Errorf("lab: switch: partition: port %d: want 0..%d", host, len(s.cutUntil)-1)
	}
	s.cutUntil[host].Store(nowWall() + d.Nanoseconds())
	return nil
}

// PartitionOneWay drops every frame from port host (out true) or to it
// (out false) whose receive stamp falls within the next d.
func (s *Switch) PartitionOneWay(host int, out bool, d time.Duration) error {
	if host < 0 || host >= len(s.cutUntil) {
		return fmt.Errorf("lab: switch: partition: port %d: want 0..%d", host, len(s.cutUntil)-1)
	}
	c := s.cutTo
	if out {
		c = s.cutFrom
	}
	c[host].Store(nowWall() + d.Nanoseconds())
	return nil
}

// cut reports whether a frame from in to out received at rx (CLOCK_REALTIME)
// falls in a partition of either port, or in a one-way partition of in's
// sending or out's receiving.
func (s *Switch) cut(in, out int, rx int64) bool {
	return rx < s.cutUntil[in].Load() || rx < s.cutUntil[out].Load() ||
		rx < s.cutFrom[in].Load() || rx < s.cutTo[out].Load()
}

// Signal sends sig to the process's group.
func (p *Proc) Signal(sig unix.Signal) error {
	return unix.Kill(-p.cmd.Process.Pid, sig)
}
