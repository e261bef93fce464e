// Package netlab builds a cluster's network on one Linux machine, with the
// truth known: every host is a network namespace, every host's link goes
// through a userspace Ethernet switch that delays, jitters, drops,
// duplicates and reorders frames, and since all namespaces share one kernel
// clock the true offset between any two hosts is exactly 0. It is the
// plumbing under package lab, which runs the experiments (gclock daemons,
// chrony, ptp4l, a spoofer, NTP clients) on it.
//
//	cfg := netlab.DefaultConfig()            // 4 hosts, 100us +- 50us pareto each way
//	cfg.Link, _ = netmodel.ParseLink("normal:100us:10us,loss=1%")
//	l, err := netlab.Up(ctx, cfg)            // root; waits for LockPath
//	if err != nil { ... }                    // netlab.ErrNotRoot, netlab.ErrNoNetns, ...
//	defer l.Down()                           // its namespaces, veths, switch, processes
//	res, _ := l.Validate(ctx, netlab.DefaultValidateConfig())  // what the switch delivers
//	p, _ := l.Exec(2, []string{"sleep", "10"}, netlab.ExecOptions{})  // runs in l.HostNS(2)
//	l.Switch().Partition(1, 3*time.Second)   // a fault: host 1's cable pulled for 3 s
//
// # Layout
//
// Host i is namespace <prefix>h<i> with interface eth0, address
// 10.77.0.(i+1)/24, a fixed MAC 02:77:00:00:00:(i+1), loopback up, IPv6
// off, and a multicast route. Its veth peer p<i> sits in namespace
// <prefix>sw, without an address. A direct link (netmodel.ParseLink("direct")) joins
// <prefix>h0 and <prefix>h1 with one veth pair and no switch. The prefix
// is the lab's own (its prefix: gclab-<pid>-<n>-, the pid of its process
// and a count), so two labs never share a namespace, and a lab's Down
// removes exactly its own: it kills the processes inside them (`ip netns
// pids`) and deletes the namespaces, which takes their veths along.
//
// # The lock
//
// A process holds the flock LockPath while any of its labs is up:
// exclusively for a lab without Config.Concurrent (a measurement: `gclock
// lab`, a test of accuracy), which thus has the machine to itself, and
// shared for Concurrent labs (tests that check what holds under any load),
// which run side by side, this process's and other processes' (two test
// packages under `go test ./...`), but never beside a measurement. A
// process's exclusive lab also waits until it is the only lab of its
// process. An exclusive lab removes every gclab-* namespace of other
// processes (none runs, so all are leftovers of crashed runs), a shared one
// those of processes that have ended; `gclock lab down` (Down) removes every
// one when no lab runs, or while one runs only those of ended processes.
//
// # The switch
//
// Switch runs as a goroutine of the calling process: it enters
// the switch namespace on a locked OS thread just long enough to open one AF_PACKET
// socket per port (sockets keep their namespace), then the switch thread
// works from the caller's namespace. It learns source MACs and floods
// broadcast, multicast and unknown destinations, so ARP and PTP multicast
// work. PACKET_VNET_HDR passes each frame's checksum-offload state through,
// so the UDP checksums veths leave to be filled in never arrive broken.
//
// Each frame's release time is its kernel receive stamp (SO_TIMESTAMPNS on
// the packet socket) plus a delay drawn from the netmodel.Model of its direction
// (Link.Forward for a lower-numbered to a higher-numbered host, Reverse
// the other way), with one seeded generator per direction. One locked OS
// thread receives, queues on a timer heap, sleeps in a raw ppoll with 1 ns
// timer slack until SpinWindow before the next release, polls the ports
// until 10 us before it, then reads only the clock (vDSO) until the release
// and sends; all its system calls are raw, so the Go scheduler never takes
// its P. After an idle spell (WarmAfter) it first writes the frame to a
// warm-up veth pair whose peer drops it, so that the real release runs
// through warm caches. With SchedFIFO that thread runs SCHED_FIFO 50 and the
// process's other threads SCHED_FIFO 1 (processes started with Exec run
// SCHED_OTHER): a CPU-bound load then delays neither the thread nor the Go
// runtime's hand-offs to it. Starting a switch raises GOMAXPROCS to at least 4 (one more per further switch),
// because the switch thread keeps its P while it sleeps.
//
// Its own lateness is part of the link, the same for every direction
// since one thread serves them all; Switch.Stats reports it per direction
// and Validate measures what a host actually receives: UDP probes both ways
// with software transmit stamps (SO_TIMESTAMPING, error queue) and receive
// stamps (SO_TIMESTAMPNS), compared with the model's own quantiles.
package netlab
