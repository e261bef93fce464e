// Package lab runs a cluster on one Linux machine, with the truth known:
// every host is a network namespace, every host's link goes through a
// userspace Ethernet switch that delays, jitters, drops, duplicates and
// reorders frames, and since all namespaces share one kernel clock the
// true offset between any two hosts is exactly 0. Whatever a clock
// synchronization program reports as an offset is therefore its error.
//
// Most callers want the CLI (`gclock lab`, see docs/lab.md). From Go:
//
//	cfg := lab.DefaultConfig()               // 4 hosts, 100us +- 50us pareto each way
//	cfg.Link, _ = netmodel.ParseLink("normal:100us:10us,loss=1%")
//	l, err := lab.Up(ctx, cfg)               // root; removes a crashed run's leftovers first
//	if err != nil { ... }                    // lab.ErrNotRoot, lab.ErrNoNetns, ...
//	defer l.Down()                           // namespaces, veths, switch, processes
//	res, _ := l.Validate(ctx, lab.DefaultValidateConfig())  // what the switch delivers
//	p, _ := l.Exec(2, []string{"gclock", "daemon"}, lab.ExecOptions{})  // runs in gclab-h2
//	peers, _ := l.RunPeers(ctx, []string{lab.PeerChrony, lab.PeerPTP4L}, lab.DefaultPeerConfig())
//
// # Layout
//
// Host i is namespace gclab-h<i> with interface eth0, address
// 10.77.0.(i+1)/24, a fixed MAC 02:77:00:00:00:(i+1), loopback up, IPv6
// off, and a multicast route. Its veth peer p<i> sits in namespace
// gclab-sw, without an address. A direct link (netmodel.ParseLink("direct")) joins
// gclab-h0 and gclab-h1 with one veth pair and no switch. Everything the
// lab makes is named gclab-*, so Cleanup (`gclock lab down`) removes
// exactly that: it kills the processes inside those namespaces (`ip netns
// pids`) and deletes the namespaces, which takes their veths along. Only
// one lab runs on a machine at a time: Up clears any gclab-* namespace.
//
// # The switch
//
// Switch runs as a goroutine of the calling process: InNetns enters
// gclab-sw on a locked OS thread just long enough to open one AF_PACKET
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
// through warm caches. With Realtime that thread runs SCHED_FIFO 50 and the
// process's other threads SCHED_FIFO 1 (processes started with Exec run
// SCHED_OTHER): a CPU-bound load then delays neither the thread nor the Go
// runtime's hand-offs to it. StartSwitch raises GOMAXPROCS to at least 4,
// because the switch thread keeps its P while it sleeps.
//
// Its own lateness is part of the link, the same for every direction
// since one thread serves them all; Switch.Stats reports it per direction
// and Validate measures what a host actually receives: UDP probes both ways
// with software transmit stamps (SO_TIMESTAMPING, error queue) and receive
// stamps (SO_TIMESTAMPNS), compared with the model's own quantiles.
//
// # Peers
//
// RunPeers runs chronyd (-x: never touches the clock; client with xleave,
// minpoll/maxpoll -4; kernel timestamps, which chronyc ntpdata confirms) and
// ptp4l (-S software timestamps, UDP IPv4, free_running 1) between two
// hosts, each instance with its own directory under Config.RunDir for its
// config, sockets and log. chrony's estimate is `chronyc tracking`'s
// "System time"; ptp4l's is its "master offset". Their readings after the
// warm-up are condensed by eval.SummarizeErrors into the fields `gclock
// sim --json` uses.
//
// # The gclock daemons
//
// Lab.Exec starts any command in a host namespace and tracks it until
// Down. RunGclock starts one `gclock daemon` per host, each with an
// emulated clock only the evaluator knows, and evaluates every host's
// shared-memory page against the truth on the shared kernel clock, with
// package eval as the simulator does; GclockConfig.Measurements has the daemons log every exchange
// (log.measurements) for analysis after the run.
package lab
