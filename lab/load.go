package lab

import (
	"fmt"
	"time"
)

// StartLoad runs n CPU-bound processes (shell busy loops, SCHED_OTHER like
// any program), spread over the host namespaces, until the returned stop
// function is called or the lab goes down. The switch's thread runs
// SCHED_FIFO (Config.Realtime) and is not slowed by them; the daemons,
// chronyd and ptp4l share the CPUs with them like programs on a busy node.
func (l *Lab) StartLoad(n int) (stop func(), err error) {
	var procs []*Proc
	stop = func() {
		for _, p := range procs {
			p.Stop(time.Second)
		}
	}
	for i := range n {
		p, err := l.Exec(i%l.cfg.Hosts, []string{"sh", "-c", "while :; do :; done"}, ExecOptions{})
		if err != nil {
			stop()
			return nil, fmt.Errorf("lab: load: %w", err)
		}
		procs = append(procs, p)
	}
	return stop, nil
}
