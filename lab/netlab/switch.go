package netlab

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/netmodel"
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

// close stops forwarding, waits for the switch thread and closes its
// sockets. Frames still queued are dropped.
func (s *Switch) close() {
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
