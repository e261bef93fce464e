package netlab

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// namePrefix starts the name of every namespace a lab makes. Each lab adds a
// run name of its own (Lab.prefix: the pid of its process and a count,
// gclab-4711-2-h0), so that two labs never share a namespace, a lab's
// Down removes exactly its own, and cleanup knows which lab a namespace
// belongs to and whether that lab's process still runs.
const namePrefix = "gclab-"

// runs counts this process's labs, for their prefixes.
var runs atomic.Int64

// runPrefix is a new lab's namespace prefix: namePrefix, this process's pid and
// its count of labs, e.g. "gclab-4711-2-".
func runPrefix() string { return fmt.Sprintf("%s%d-%d-", namePrefix, os.Getpid(), runs.Add(1)) }

// HostNS is the namespace name of host i (the lab's prefix + "h<i>").
func (l *Lab) HostNS(i int) string { return l.prefix + "h" + strconv.Itoa(i) }

// switchNS is the switch namespace's name (the lab's prefix + "sw"; none on a
// direct link).
func (l *Lab) switchNS() string { return l.prefix + "sw" }

// floodNS is the namespace of the softirq load (StartFlood, namePrefix +
// "flood").
func (l *Lab) floodNS() string { return l.prefix + "flood" }

// nsOwner is the pid in a namespace name under namePrefix (gclab-4711-2-h0),
// 0 when it has none (an older gclock's fixed names, gclab-h0).
func nsOwner(ns string) int {
	rest, ok := strings.CutPrefix(ns, namePrefix)
	if !ok {
		return 0
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// running reports whether process pid exists.
func running(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || err == unix.EPERM
}

// cleanup removes every namespace under namePrefix, whichever lab made it,
// and kills the processes still inside them: `gclock lab down` when no
// lab runs (or with -force). It touches nothing else.
func cleanup(log *slog.Logger) error {
	return removeNamespaces(log, func(string) bool { return true })
}

// cleanupOthers removes the namespaces under namePrefix that no lab of this
// process made: what Up runs when it takes LockPath. No other process's
// lab runs then, but a concurrent lab of this one may already be making
// its namespaces (it took the process's hold after this Up did, before
// this cleanup ran: two parallel tests lost theirs so in a CI run).
func cleanupOthers(log *slog.Logger) error {
	return removeNamespaces(log, othersOf(os.Getpid()))
}

// othersOf selects the namespaces no lab of process me made (cleanupOthers).
func othersOf(me int) func(ns string) bool {
	return func(ns string) bool { return nsOwner(ns) != me }
}

// cleanupEnded removes the namespaces under namePrefix of labs whose process
// has ended (a crash, a SIGKILL), safe while other labs run.
func cleanupEnded(log *slog.Logger) error {
	return removeNamespaces(log, endedOf(os.Getpid(), running))
}

// endedOf selects the namespaces of another process than me that has
// ended (cleanupEnded); names without a pid (an older gclock's) are kept,
// since nothing says whose they are.
func endedOf(me int, running func(pid int) bool) func(ns string) bool {
	return func(ns string) bool {
		pid := nsOwner(ns)
		return pid > 0 && pid != me && !running(pid)
	}
}

// removeNamespaces deletes every namespace under namePrefix that match
// selects, with the processes inside.
func removeNamespaces(log *slog.Logger, match func(ns string) bool) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return fmt.Errorf("lab: cleanup: ip netns list: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], namePrefix) || !match(f[0]) {
			continue
		}
		ns := f[0]
		killNetnsPids(ns, log)
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			if gone(ns) {
				// Removed between the list and the del by whoever made
				// it (a test's own namespace) or by a concurrent
				// cleanup: what this one wanted.
				log.Debug("namespace already gone", "ns", ns)
				continue
			}
			errs = append(errs, fmt.Errorf("lab: cleanup: ip netns del %s: %s: %w", ns, strings.TrimSpace(string(out)), err))
			continue
		}
		log.Debug("removed namespace", "ns", ns)
	}
	return errors.Join(errs...)
}

// gone reports that namespace ns no longer exists (no /run/netns/<ns>).
func gone(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return errors.Is(err, fs.ErrNotExist)
}

// InHost runs fn on an OS thread inside host's namespace (inNetns): the
// sockets fn opens belong to the host.
func (l *Lab) InHost(host int, fn func() error) error {
	if host < 0 || host >= l.cfg.Hosts {
		return fmt.Errorf("lab: host %d: want 0..%d", host, l.cfg.Hosts-1)
	}
	return inNetns(l.HostNS(host), fn)
}
