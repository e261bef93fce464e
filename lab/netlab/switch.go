package netlab

import (
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gclock/gclock/internal/quantile"
	"github.com/gclock/gclock/netmodel"
	"golang.org/x/sys/unix"

	"github.com/gclock/gclock/internal/sockts"
)

// switchConfig says which ports a Switch joins and how it delays frames.
type switchConfig struct {
	Namespace  string   // the namespace holding the ports ("" = this thread's)
	Ports      []string // interface names; port i is host i's link
	Link       netmodel.Link
	Seed       uint64
	SpinWindow time.Duration // 0: DefaultSpinWindow
	// BusyPoll keeps the thread polling instead of sleeping for this long
	// after the last frame it received or sent (0: never). Waking from a
	// sleep on a frame's arrival takes tens of us in a VM; while traffic
	// flows the switch then sees every frame at once.
	BusyPoll time.Duration
	// WarmPort, if set, is an interface (one end of a veth pair whose other
	// end drops everything) the switch writes the next frame to shortly
	// before releasing it, when it has written nothing for WarmAfter: a
	// write after an idle spell is slow (cold caches in this VM: 8 us more
	// at the fastest frame) and the warm-up write takes that cost instead.
	WarmPort  string
	WarmAfter time.Duration
	SchedFIFO bool         // SCHED_FIFO release thread
	Logger    *slog.Logger // nil: discard
	// FrameLog, if set, is a file the switch writes at Close with one CSV
	// line per released frame (framelog.go): its kernel arrival stamp, its
	// release time, when the write started and ended, and the gclock
	// header of a UDP datagram in it. The truth of every one-way delay an
	// exchange logs, for the error breakdown in docs/lab.md.
	FrameLog string
	// PortRate models every egress port as a FIFO queue in front of a line
	// of this many bits per second (netmodel.Port): a frame whose link
	// delay is over waits for the frames ready before it on the same port,
	// then for its own serialisation. 0: no port model (frames leave at
	// their link delay).
	PortRate int64
}

// vnetHdrLen is the size of struct virtio_net_hdr, which PACKET_VNET_HDR
// puts before every frame. Passing it through unchanged keeps the checksum
// offload state of a frame (veths leave UDP checksums to be filled in
// later), so the receiving host accepts frames the switch forwarded.
const vnetHdrLen = 10

// maxFrame is the receive buffer: a 64 KiB GSO frame plus the vnet header.
const maxFrame = 65536 + vnetHdrLen

// busyBudgetMax is the most busy-polling time the switch thread saves up.
const busyBudgetMax = int64(20 * time.Millisecond)

// latenessCap bounds the lateness samples kept per direction.
const latenessCap = 1 << 20

// Switch is the lab's learning Ethernet switch: it reads every frame that
// arrives on a port with an AF_PACKET socket, looks the destination MAC up
// (flooding broadcast, multicast and unknown destinations), decides each
// frame's fate with the link Model of its direction, and releases it on the
// destination port at its kernel receive time plus the drawn delay.
//
// Everything runs on one dedicated, locked OS thread (SCHED_FIFO when
// SchedFIFO): it polls the ports, queues frames on a timer heap, sleeps in
// ppoll (timer slack 1 ns) until SpinWindow before the earliest release,
// then spins on CLOCK_REALTIME, polling the ports without blocking. The
// blocking ppoll is a raw system call, so the thread keeps its Go P and
// never waits for the Go scheduler after a wake-up; each sleep is capped at
// maxSleep so a garbage collection never waits long for it. One thread
// serves every direction, so its lateness is the same each way; Stats
// reports it.
type Switch struct {
	cfg   switchConfig
	log   *slog.Logger
	ports []swPort

	warmFD    int // -1: no warm-up port
	warmups   atomic.Int64
	closed    atomic.Bool
	done      chan struct{}
	releaseRT func() // undoes processRT; nil unless SchedFIFO

	// Owned by the switch thread.
	lastWrite int64 // CLOCK_REALTIME of the last release
	q         releaseHeap
	// pend holds the frames on their way to a port's queue (PortRate) by
	// ready time, when the link has a floor: a frame joins its queue up to
	// lookahead before it is ready, without the thread spinning for it.
	pend      releaseHeap
	lookahead int64
	// bulk holds the releases of frames larger than smallFrame (bulk
	// data): the thread wakes for them but never spins, so that cross
	// traffic does not keep it busy up to the kernel's real-time
	// throttling, which stopped it for up to 56 ms a second. Such a frame
	// leaves up to a wake-up late.
	bulk releaseHeap
	seq  uint64
	macs map[[6]byte]int
	rngs map[[2]int]*rand.Rand
	outs []int
	plan []int64
	pool sync.Pool

	statMu sync.Mutex
	stats  map[[2]int]*DirStats
	// egress[i] is port i's queue (PortRate); guarded by statMu.
	egress     []netmodel.Port
	statsSince int64 // CLOCK_REALTIME of the last ResetStats

	frames frameLog // FrameLog's records (switch thread until Close)

	// cutUntil[i]: frames from or to port i are dropped while their
	// receive stamp (CLOCK_REALTIME) is before it (Partition, faults.go).
	cutUntil []atomic.Int64
	// cutFrom[i], cutTo[i]: the same for frames from port i only, and
	// for frames to port i only (one-way partitions).
	cutFrom, cutTo []atomic.Int64
}

// minProcs is the GOMAXPROCS startSwitch raises the process to: one P for
// the switch thread, the rest for everything else; one more for each
// further switch running at once (concurrent labs).
const minProcs = 4

// switches counts the switches running in this process.
var switches atomic.Int64

// fineSpin is how close to a release the switch stops polling its ports
// and only reads the clock (a vDSO call, tens of ns).
const fineSpin = int64(10 * time.Microsecond)

// minWarmLead is the least time before a release a warm-up write starts:
// closer, it would delay the release itself.
const minWarmLead = int64(20 * time.Microsecond)

// readMargin is how much later than its kernel receive stamp the switch may
// read a frame without breaking its ports' FIFO order: a frame joins its
// port's queue up to the link's floor minus readMargin before it is ready,
// when every frame that could be ready before it has been read unless one
// waited longer than that in the socket.
const readMargin = int64(20 * time.Microsecond)

// maxSleep caps one blocking poll of the switch thread: a stop-the-world
// pause of the Go runtime waits at most this long for it.
const maxSleep = time.Millisecond

type swPort struct {
	name    string
	fd      int
	ifindex int
}

// DirStats counts what the switch did to frames from one port to another.
type DirStats struct {
	In         int   `json:"in"`         // ingress port (host index)
	Out        int   `json:"out"`        // egress port
	Frames     int64 `json:"frames"`     // frames that arrived for this direction
	Dropped    int64 `json:"dropped"`    // lost by the link model
	Duplicated int64 `json:"duplicated"` // delivered twice
	Reordered  int64 `json:"reordered"`  // released without delay (reorder)
	// Partitioned counts the frames dropped by Partition (also in Dropped).
	Partitioned int64 `json:"partitioned,omitempty"`
	SendErrors  int64 `json:"send_errors"`
	// Bytes is the frames' size as the switch read them (GSO frames whole).
	Bytes     int64   `json:"bytes"`
	lateness  []int32 // release lateness samples, ns
	writeCost []int32 // write(2) durations, ns
	queueWait []int32 // port queue waits of small frames, ns
	// Filled by Stats: how late write(2) was called after the frame's
	// release time, ns.
	LatenessP50Ns   int64 `json:"lateness_p50_ns"`
	LatenessP99Ns   int64 `json:"lateness_p99_ns"`
	LatenessMaxNs   int64 `json:"lateness_max_ns"`
	LatenessSamples int   `json:"lateness_samples"`
	// How long write(2) took: the receiving host's softirq work runs inside
	// it, after the host's receive stamp was taken.
	WriteP50Ns int64 `json:"write_p50_ns"`
	WriteP99Ns int64 `json:"write_p99_ns"`
	// With a port model (switchConfig.PortRate): how long the small frames
	// (at most smallFrame bytes: probes, replies, ACKs) of this direction
	// waited in the egress port's queue behind the frames before them.
	SmallQueueP50Ns   int64 `json:"small_queue_p50_ns,omitempty"`
	SmallQueueP99Ns   int64 `json:"small_queue_p99_ns,omitempty"`
	SmallQueueMaxNs   int64 `json:"small_queue_max_ns,omitempty"`
	SmallQueueSamples int   `json:"small_queue_samples,omitempty"`
}

// smallFrame is the largest frame whose queue wait DirStats reports: the
// daemons' probes and replies, PTP and NTP messages and TCP ACKs are
// smaller, bulk data is not.
const smallFrame = 256

// PortStats is what one egress port's queue (switchConfig.PortRate) sent
// since the switch started or its stats were reset.
type PortStats struct {
	Port      int     `json:"port"` // egress port (host index)
	RateBps   int64   `json:"rate_bps"`
	Frames    int64   `json:"frames"`
	WireBytes int64   `json:"wire_bytes"` // netmodel.WireBytes of every frame
	BusyNs    int64   `json:"busy_ns"`    // the frames' serialisation time
	ElapsedNs int64   `json:"elapsed_ns"`
	Util      float64 `json:"utilisation"` // BusyNs / ElapsedNs
}

type release struct {
	at  int64 // CLOCK_REALTIME ns
	rx  int64 // the frame's kernel arrival stamp, CLOCK_REALTIME ns
	seq uint64
	out int
	buf *[]byte
	n   int
	dir [2]int
	// queued: at is the delivery time; otherwise (with a port model) at is
	// when the frame joins its egress port's queue.
	queued bool
	wire   int // netmodel.WireBytes of the frame
}

type releaseHeap []release

func (h releaseHeap) Len() int { return len(h) }
func (h releaseHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h releaseHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *releaseHeap) Push(x any)   { *h = append(*h, x.(release)) }
func (h *releaseHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// startSwitch opens a socket on every port inside cfg.Namespace and starts
// forwarding. Close stops it.
func startSwitch(cfg switchConfig) (*Switch, error) {
	if len(cfg.Ports) < 2 {
		return nil, fmt.Errorf("switch: %d ports: want at least 2", len(cfg.Ports))
	}
	if err := cfg.Link.Validate(); err != nil {
		return nil, fmt.Errorf("switch: %w", err)
	}
	if cfg.SpinWindow == 0 {
		cfg.SpinWindow = DefaultSpinWindow
	}
	if cfg.PortRate < 0 || cfg.PortRate > netmodel.MaxRateBps {
		return nil, fmt.Errorf("switch: port rate %d bit/s: want 0 (none)..%g", cfg.PortRate, netmodel.MaxRateBps)
	}
	// Every switch thread keeps its P while it sleeps in a raw ppoll, so the
	// rest of the process needs more than one beside them all.
	if want := minProcs - 1 + int(switches.Add(1)); runtime.GOMAXPROCS(0) < want {
		runtime.GOMAXPROCS(want)
	}
	started := false
	defer func() {
		if !started {
			switches.Add(-1)
		}
	}()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := newSwitch(cfg, log)
	if err := s.openPorts(); err != nil {
		s.closePorts()
		return nil, fmt.Errorf("switch: %w", err)
	}
	var err error
	if cfg.SchedFIFO {
		if s.releaseRT, err = processRT(); err != nil {
			s.closePorts()
			return nil, fmt.Errorf("switch: %w", err)
		}
	}
	s.done = make(chan struct{})
	loopErr := make(chan error, 1)
	go s.loop(loopErr)
	if err := <-loopErr; err != nil {
		s.closePorts()
		if s.releaseRT != nil {
			s.releaseRT()
		}
		return nil, err
	}
	started = true
	log.Info("switch started", "ports", cfg.Ports, "link", cfg.Link.String(), "port_rate", netmodel.FormatRate(cfg.PortRate), "spin", cfg.SpinWindow, "sched_fifo", cfg.SchedFIFO)
	return s, nil
}

// newSwitch is the switch of cfg before its ports are open.
func newSwitch(cfg switchConfig, log *slog.Logger) *Switch {
	s := &Switch{
		cfg:   cfg,
		log:   log,
		macs:  map[[6]byte]int{},
		done:  make(chan struct{}),
		rngs:  map[[2]int]*rand.Rand{},
		stats: map[[2]int]*DirStats{},
	}
	s.cutUntil = make([]atomic.Int64, len(cfg.Ports))
	s.cutFrom = make([]atomic.Int64, len(cfg.Ports))
	s.cutTo = make([]atomic.Int64, len(cfg.Ports))
	s.egress = make([]netmodel.Port, len(cfg.Ports))
	for i := range s.egress {
		s.egress[i].RateBps = cfg.PortRate
	}
	s.statsSince = nowWall()
	if cfg.PortRate > 0 {
		s.lookahead = max(0, int64(cfg.Link.Floor())-readMargin)
	}
	s.pool.New = func() any { b := make([]byte, maxFrame); return &b }
	s.warmFD = -1
	if cfg.FrameLog != "" {
		s.frames.start()
	}
	return s
}

// openPorts opens the switch's port sockets (and the warm-up port's) in
// its namespace.
func (s *Switch) openPorts() error {
	open := func() error {
		for _, name := range s.cfg.Ports {
			p, err := openPort(name)
			if err != nil {
				return err
			}
			s.ports = append(s.ports, p)
		}
		if s.cfg.WarmPort != "" {
			fd, err := openSendOnly(s.cfg.WarmPort)
			if err != nil {
				return err
			}
			s.warmFD = fd
		}
		return nil
	}
	if s.cfg.Namespace == "" {
		return open()
	}
	return inNetns(s.cfg.Namespace, open)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openPort(name string) (swPort, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return swPort{}, fmt.Errorf("port %s: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return swPort{}, fmt.Errorf("port %s: AF_PACKET socket: %w", name, err)
	}
	fail := func(what string, err error) (swPort, error) {
		unix.Close(fd)
		return swPort{}, fmt.Errorf("port %s: %s: %w", name, what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return fail("PACKET_VNET_HDR", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fail("PACKET_IGNORE_OUTGOING", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20); err != nil {
		return fail("SO_RCVBUF", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return fail("bind", err)
	}
	// Promiscuous: frames for the hosts' MACs are not addressed to the port.
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return fail("promiscuous", err)
	}
	return swPort{name: name, fd: fd, ifindex: ifi.Index}, nil
}

func (s *Switch) closePorts() {
	for _, p := range s.ports {
		unix.Close(p.fd)
	}
	if s.warmFD >= 0 {
		unix.Close(s.warmFD)
		s.warmFD = -1
	}
}

// openSendOnly opens an AF_PACKET socket that sends on an interface and
// receives nothing (protocol 0).
func openSendOnly(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return -1, fmt.Errorf("warm-up port %s: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("warm-up port %s: AF_PACKET socket: %w", name, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("warm-up port %s: PACKET_VNET_HDR: %w", name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("warm-up port %s: bind: %w", name, err)
	}
	return fd, nil
}

// Close stops forwarding, waits for the switch thread and closes its
// sockets. Frames still queued are dropped.
func (s *Switch) Close() {
	if s.closed.Swap(true) {
		return
	}
	<-s.done
	s.closePorts()
	switches.Add(-1)
	if s.releaseRT != nil {
		s.releaseRT()
	}
	if s.cfg.FrameLog != "" {
		if err := s.frames.writeFile(s.cfg.FrameLog); err != nil {
			s.log.Warn("switch: frame log", "err", err)
		}
	}
}

func (s *Switch) dirStats(d [2]int) *DirStats {
	st := s.stats[d]
	if st == nil {
		st = &DirStats{In: d[0], Out: d[1]}
		s.stats[d] = st
	}
	return st
}

// Stats returns a snapshot of per-direction counters and release lateness
// quantiles, ordered by ingress then egress port.
func (s *Switch) Stats() []DirStats {
	s.statMu.Lock()
	defer s.statMu.Unlock()
	var out []DirStats
	for i := range s.ports {
		for j := range s.ports {
			st := s.stats[[2]int{i, j}]
			if st == nil {
				continue
			}
			c := *st
			c.lateness = nil
			v := make([]int64, len(st.lateness))
			for k, x := range st.lateness {
				v[k] = int64(x)
			}
			q := quantile.Of(v, 0.5, 0.99, 1)
			c.LatenessP50Ns, c.LatenessP99Ns, c.LatenessMaxNs = q[0], q[1], q[2]
			c.LatenessSamples = len(v)
			c.writeCost = nil
			w := make([]int64, len(st.writeCost))
			for k, x := range st.writeCost {
				w[k] = int64(x)
			}
			q = quantile.Of(w, 0.5, 0.99)
			c.WriteP50Ns, c.WriteP99Ns = q[0], q[1]
			c.queueWait = nil
			if len(st.queueWait) > 0 {
				v := make([]int64, len(st.queueWait))
				for k, x := range st.queueWait {
					v[k] = int64(x)
				}
				q = quantile.Of(v, 0.5, 0.99, 1)
				c.SmallQueueP50Ns, c.SmallQueueP99Ns, c.SmallQueueMaxNs = q[0], q[1], q[2]
				c.SmallQueueSamples = len(v)
			}
			out = append(out, c)
		}
	}
	return out
}

// WarmUps is how many warm-up writes the switch made (see WarmAfter).
func (s *Switch) WarmUps() int64 { return s.warmups.Load() }

// PortStats returns every egress port's counters (nil without a port
// model).
func (s *Switch) PortStats() []PortStats {
	if s.cfg.PortRate <= 0 {
		return nil
	}
	s.statMu.Lock()
	defer s.statMu.Unlock()
	el := nowWall() - s.statsSince
	out := make([]PortStats, len(s.egress))
	for i := range s.egress {
		p := &s.egress[i]
		out[i] = PortStats{Port: i, RateBps: p.RateBps, Frames: p.Frames(), WireBytes: p.Bytes(), BusyNs: p.BusyNs(), ElapsedNs: el}
		if el > 0 {
			out[i].Util = float64(p.BusyNs()) / float64(el)
		}
	}
	return out
}

// ResetStats forgets every counter and lateness sample (and the ports'
// counters, not their queues).
func (s *Switch) ResetStats() {
	s.statMu.Lock()
	s.stats = map[[2]int]*DirStats{}
	for i := range s.egress {
		s.egress[i].ResetCounters()
	}
	s.statsSince = nowWall()
	s.statMu.Unlock()
}

func (s *Switch) rng(d [2]int) *rand.Rand {
	r := s.rngs[d]
	if r == nil {
		r = rand.New(rand.NewPCG(s.cfg.Seed, uint64(d[0])<<32|uint64(d[1])))
		s.rngs[d] = r
	}
	return r
}

// handleFrame forwards one frame read from port in (buf[:n], vnet header
// first) that the kernel stamped at rx. It returns whether buf was queued
// (then owned by the release queue).
func (s *Switch) handleFrame(in int, bp *[]byte, n int, rx int64) bool {
	buf := *bp
	frame := buf[vnetHdrLen:n]
	var dst, src [6]byte
	copy(dst[:], frame[0:6])
	copy(src[:], frame[6:12])
	if src[0]&1 == 0 {
		s.macs[src] = in
	}
	s.outs = s.outs[:0]
	if o, ok := s.macs[dst]; ok && dst[0]&1 == 0 {
		if o != in {
			s.outs = append(s.outs, o)
		}
	} else {
		s.outs = s.appendFlood(s.outs, in)
	}
	used := false
	wire := 0
	if s.cfg.PortRate > 0 {
		wire = frameWireBytes(buf[:n])
	}
	for _, o := range s.outs {
		d := [2]int{in, o}
		m := s.cfg.Link.Model(in, o)
		s.plan = m.Plan(s.rng(d), s.plan[:0])
		cut := s.cut(in, o, rx)
		if cut {
			s.plan = s.plan[:0]
		}
		s.statMu.Lock()
		st := s.dirStats(d)
		st.Frames++
		st.Bytes += int64(len(frame))
		if cut {
			st.Partitioned++
		}
		switch len(s.plan) {
		case 0:
			st.Dropped++
		case 2:
			st.Duplicated++
		}
		if m.Reorder > 0 {
			for _, p := range s.plan {
				if p == 0 {
					st.Reordered++
				}
			}
		}
		s.statMu.Unlock()
		for _, delay := range s.plan {
			rb := bp
			if used {
				rb = s.pool.Get().(*[]byte)
				copy(*rb, buf[:n])
			}
			used = true
			s.seq++
			s.push(release{at: rx + delay, rx: rx, seq: s.seq, out: o, buf: rb, n: n, dir: d, queued: s.cfg.PortRate <= 0, wire: wire})
		}
	}
	return used
}

func (s *Switch) appendFlood(outs []int, in int) []int {
	for i := range s.ports {
		if i != in {
			outs = append(outs, i)
		}
	}
	return outs
}

// rxTimestamp returns the SCM_TIMESTAMPNS time in a control message, or 0
// (also for malformed control data). It does not allocate.
func rxTimestamp(oob []byte) int64 {
	st, err := sockts.Parse(oob)
	if err != nil {
		return 0
	}
	return st.NS
}

// nowWall reads the wall clock (CLOCK_REALTIME), the clock of kernel
// packet timestamps, through the vDSO (time.Now's wall clock):
// unix.ClockGettime is a real system call that goes through the Go
// scheduler's syscall path, and the switch thread must never wait there for
// a P.
func nowWall() int64 {
	return time.Now().UnixNano()
}

// recvmsg is a non-blocking recvmsg(2) that does not allocate.
func recvmsg(fd int, buf, oob []byte) (n, oobn int, flags int, err error) {
	var iov unix.Iovec
	iov.Base = &buf[0]
	iov.SetLen(len(buf))
	var msg unix.Msghdr
	msg.Iov = &iov
	msg.Iovlen = 1
	msg.Control = &oob[0]
	msg.SetControllen(len(oob))
	r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT)
	if e != 0 {
		return 0, 0, 0, e
	}
	return int(r), int(msg.Controllen), int(msg.Flags), nil
}

// rawWrite is write(2) as a raw system call (an AF_PACKET send does not
// block): the thread keeps its P.
func rawWrite(fd int, b []byte) error {
	_, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return e
	}
	return nil
}

// rawPpoll is ppoll(2) made as a raw system call: the thread keeps its P.
func rawPpoll(fds []unix.PollFd, timeoutNs int64) {
	ts := unix.NsecToTimespec(timeoutNs)
	unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
}

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

// dispatch handles a due entry of the release queue: a frame whose link
// delay is over joins its egress port's queue (and comes back at its
// delivery time); a frame that was queued is sent.
func (s *Switch) dispatch(r release) {
	if r.queued {
		s.send(r)
		return
	}
	s.statMu.Lock()
	depart, wait := s.egress[r.out].Enqueue(r.at, r.wire)
	if r.n-vnetHdrLen <= smallFrame {
		st := s.dirStats(r.dir)
		if len(st.queueWait) < latenessCap {
			st.queueWait = append(st.queueWait, int32(min(wait, 1<<31-1)))
		}
	}
	s.statMu.Unlock()
	r.at, r.queued = depart, true
	s.push(r)
}

// push queues an entry on the heap it belongs to: a frame that is to join
// its port's queue on pend (with a lookahead) or q, a release of bulk data
// on bulk, any other release on q.
func (s *Switch) push(r release) {
	switch {
	case !r.queued && s.lookahead > 0:
		heap.Push(&s.pend, r)
	case r.queued && r.n-vnetHdrLen > smallFrame:
		heap.Push(&s.bulk, r)
	default:
		heap.Push(&s.q, r)
	}
}

// popDue pops the earliest entry of q and bulk that is due at now.
func (s *Switch) popDue(now int64) (release, bool) {
	fromQ := len(s.q) > 0 && s.q[0].at <= now
	if len(s.bulk) > 0 && s.bulk[0].at <= now && (!fromQ || s.bulk[0].at < s.q[0].at) {
		return heap.Pop(&s.bulk).(release), true
	}
	if fromQ {
		return heap.Pop(&s.q).(release), true
	}
	return release{}, false
}

// frameWireBytes is the wire size (netmodel.WireBytes) of a frame read with
// its vnet header: a GSO frame (TCP or UDP over IPv4 or IPv6) counts as the
// segments a NIC would send, each with its own headers.
func frameWireBytes(b []byte) int {
	frame := b[vnetHdrLen:]
	gsoType := b[1] &^ 0x80 // without VIRTIO_NET_HDR_GSO_ECN
	gsoSize := int(binary.NativeEndian.Uint16(b[4:6]))
	if gsoType == 0 || gsoSize == 0 {
		return netmodel.WireBytes(len(frame))
	}
	hdr, ok := l4HeaderEnd(frame)
	if !ok {
		return netmodel.WireBytes(len(frame))
	}
	return netmodel.SegmentedWireBytes(len(frame), hdr, gsoSize)
}

// l4HeaderEnd is the offset of the first payload byte of an IPv4 or IPv6
// TCP or UDP frame (no VLAN tag, no IPv6 extension headers).
func l4HeaderEnd(f []byte) (int, bool) {
	if len(f) < 14 {
		return 0, false
	}
	var off int
	var proto byte
	switch binary.BigEndian.Uint16(f[12:14]) {
	case 0x0800:
		if len(f) < 14+20 {
			return 0, false
		}
		off, proto = 14+int(f[14]&0x0f)*4, f[14+9]
	case 0x86dd:
		if len(f) < 14+40 {
			return 0, false
		}
		off, proto = 14+40, f[14+6]
	default:
		return 0, false
	}
	switch proto {
	case unix.IPPROTO_TCP:
		if len(f) < off+20 {
			return 0, false
		}
		return off + int(f[off+12]>>4)*4, true
	case unix.IPPROTO_UDP:
		return off + 8, len(f) >= off+8
	}
	return 0, false
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
