package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	osexec "os/exec"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
	"golang.org/x/sys/unix"
)

// Operations a node can run.
const (
	OpBarrier   = "barrier"   // a dissemination barrier
	OpReduce    = "reduce"    // a binomial-tree sum of Count int64s into rank 0
	OpAllreduce = "allreduce" // recursive doubling (reduce + broadcast when the nodes are not a power of two)
	OpPage      = "page"      // every rank fetches Count 8-KB pages from rank 0 (request/reply)
	OpCmd       = "cmd"       // Command on every node
	OpLatency   = "latency"   // one-way messages between ranks 0 and 1, both ways, per size
)

// Start modes of Config.Start.
const (
	StartBoth      = "both"      // every iteration: a scheduled, then a barrier-started execution
	StartScheduled = "scheduled" // scheduled executions only
	StartBarrier   = "barrier"   // barrier-started executions only
)

// Config is one node's part of a measurement. Every node gets the same
// Config but for Rank.
type Config struct {
	Rank  int
	Peers []netip.AddrPort // every node's address by rank; Peers[Rank] is this node's
	Op    string
	// Runs is the number of iterations; each has a scheduled and a
	// barrier-started execution (Start both).
	Runs  int
	Start string
	// Period separates the scheduled starts of two iterations; both
	// executions of an iteration must fit in it.
	Period time.Duration
	// Lead is how far after the setup the first scheduled start lies.
	Lead time.Duration
	// Count: reduce/allreduce, int64 elements per node; page, pages per
	// client; latency, messages per size and direction.
	Count int
	// Repeat runs the operation this many times inside one timed
	// execution (to make a short operation about as long as wanted).
	Repeat  int
	Command []string // OpCmd
	// Sizes are the latency test's message sizes (bytes).
	Sizes []int
	// Interleave sends the latency test's sizes in turn (64 B, 128 B, ...,
	// 64 B, ...: every size spread over the whole run) instead of all the
	// messages of one size, then the next: a clock error that changes
	// during the run (a drift step) then reaches every size alike.
	Interleave bool
	// SetupTimeout bounds the wait for a synced page and for the peers.
	SetupTimeout time.Duration
	// SpinWindow: 0 (the default) busy-waits for every scheduled start,
	// polling the page all the way, as ReproMPI does; > 0 sleeps until this
	// long before the start and polls from then on (fewer cycles taken
	// from the daemons, later starts on a loaded machine).
	SpinWindow time.Duration
	// SchedFIFO runs the thread that waits for the scheduled starts and
	// runs the operation under SCHED_FIFO at this priority (1..99; 0:
	// SCHED_OTHER, as any program). On a machine with fewer cores than
	// the processes that wait for one instant (the lab: four nodes, four
	// daemons and busy loops on two cores), a node under SCHED_OTHER is
	// often off its core when its instant comes and starts late by the
	// scheduler's time slice; woken from nanosleep under SCHED_FIFO it
	// preempts the ordinary tasks at once, as if it had a core to itself.
	// It needs a SpinWindow: a SCHED_FIFO thread that polled all the way
	// would starve the ordinary tasks of its core.
	SchedFIFO int
	Logger    *slog.Logger
	// Keyring is the cluster key (the daemons' auth.key_file): every
	// datagram is sealed with it and every datagram received must carry
	// its tag (transport, wire's auth trailer). Whatever the key, a node
	// hears only Peers, each from its own address. Nil: no key, which
	// needs Insecure when a peer is off loopback, and which OpPage refuses
	// (its server answers 8-KB pages to 22-byte requests).
	Keyring *wire.Keyring
	// Insecure runs without a Keyring although a peer is off loopback:
	// anyone who can send UDP with a peer's address can then disturb the
	// measurement. For private networks (the lab) only.
	Insecure bool
}

// DefaultConfig: allreduce of one int64, 100 iterations of both kinds 10 ms
// apart, the operation repeated 4 times per execution.
func DefaultConfig() Config {
	return Config{Op: OpAllreduce, Runs: 100, Start: StartBoth, Period: 10 * time.Millisecond, Lead: 200 * time.Millisecond,
		Count: 1, Repeat: 4, Sizes: DefaultSizes(), SetupTimeout: 60 * time.Second}
}

// DefaultSizes are the latency test's sizes: 64 B to 64 KB, powers of two.
func DefaultSizes() []int {
	var s []int
	for b := 64; b <= 64<<10; b *= 2 {
		s = append(s, b)
	}
	return s
}

// sched_setattr(2)'s SCHED_FIFO and SCHED_FLAG_RESET_ON_FORK.
const (
	schedFIFO        = 1
	schedResetOnFork = 0x01
)

// maxChunk is the largest datagram payload of a latency message; a 64-KB
// message (more than one UDP datagram holds) goes as two.
const maxChunk = 32 << 10

// Validate reports the first invalid field.
func (c Config) Validate() error {
	n := len(c.Peers)
	switch {
	case n < 2:
		return fmt.Errorf("peers: %d, want at least 2 nodes", n)
	case n > 1024:
		return fmt.Errorf("peers: %d, at most 1024", n)
	case c.Rank < 0 || c.Rank >= n:
		return fmt.Errorf("rank %d: want 0..%d", c.Rank, n-1)
	case c.Runs < 1 || c.Runs > 1_000_000:
		return fmt.Errorf("runs %d: want 1..1000000", c.Runs)
	case c.Start != StartBoth && c.Start != StartScheduled && c.Start != StartBarrier:
		return fmt.Errorf("start %q: want both, scheduled or barrier", c.Start)
	case c.Period < 100*time.Microsecond || c.Period > time.Minute:
		return fmt.Errorf("period %v: want 100us..1m", c.Period)
	case c.Lead < 10*time.Millisecond || c.Lead > time.Minute:
		return fmt.Errorf("lead %v: want 10ms..1m", c.Lead)
	case c.Repeat < 1 || c.Repeat > 1<<16-1:
		return fmt.Errorf("repeat %d: want 1..65535", c.Repeat)
	case c.SetupTimeout <= 0:
		return fmt.Errorf("setup timeout %v: must be positive", c.SetupTimeout)
	case c.SchedFIFO < 0 || c.SchedFIFO > 99:
		return fmt.Errorf("sched-fifo priority %d: want 1..99 (0: none)", c.SchedFIFO)
	case c.SchedFIFO > 0 && (c.SpinWindow <= 0 || c.SpinWindow > time.Millisecond):
		return fmt.Errorf("sched-fifo priority %d with spin window %v: a SCHED_FIFO node must sleep until a spin window of at most 1ms before each start "+
			"(polling all the way would starve its core's other tasks)", c.SchedFIFO, c.SpinWindow)
	}
	for i, p := range c.Peers {
		if !p.IsValid() {
			return fmt.Errorf("peers[%d]: invalid address", i)
		}
		if slices.Index(c.Peers, p) != i {
			return fmt.Errorf("peers[%d]: %v listed twice", i, p)
		}
	}
	if c.Keyring == nil && !c.Insecure {
		for i, p := range c.Peers {
			if !p.Addr().Unmap().IsLoopback() {
				return fmt.Errorf("key: none, and peers[%d] %v is off loopback: anyone who can send UDP with a peer's address could "+
					"disturb the measurement; give the cluster key (-key FILE, the daemons' auth.key_file) or, on a private network, -insecure", i, p)
			}
		}
	}
	switch c.Op {
	case OpBarrier:
	case OpReduce, OpAllreduce:
		if c.Count < 1 || 8*c.Count > wire.MaxPageData {
			return fmt.Errorf("count %d: want 1..%d int64s (one datagram)", c.Count, wire.MaxPageData/8)
		}
	case OpPage:
		if c.Count < 1 || c.Count > 255 {
			return fmt.Errorf("count %d: want 1..255 pages", c.Count)
		}
		if c.Keyring == nil {
			return errors.New("op page: needs the cluster key (-key FILE): its server answers 8-KB pages to 22-byte requests, " +
				"which a sender with a forged address could turn on a peer")
		}
	case OpCmd:
		if len(c.Command) == 0 {
			return errors.New("command: empty (op cmd runs a command on every node)")
		}
	case OpLatency:
		if n != 2 {
			return fmt.Errorf("peers: %d, the latency test runs between 2 nodes", n)
		}
		if c.Count < 1 || c.Count > 100_000 {
			return fmt.Errorf("count %d: want 1..100000 messages per size and direction", c.Count)
		}
		if len(c.Sizes) == 0 {
			return errors.New("sizes: empty")
		}
		for _, s := range c.Sizes {
			if s < 1 || s > 2*maxChunk {
				return fmt.Errorf("size %d: want 1..%d bytes", s, 2*maxChunk)
			}
		}
	default:
		return fmt.Errorf("op %q: want barrier, reduce, allreduce, page, cmd or latency", c.Op)
	}
	return nil
}

// Clocks are what a node reads. Every stamp is one Raw reading seen
// through Local and Global.
type Clocks struct {
	Raw    func() int64                        // nil: gtime.RawNow (CLOCK_MONOTONIC_RAW)
	Local  func(raw int64) int64               // the node's own clock; nil: Raw itself
	Global func(raw int64) (gtime.Time, error) // the daemon's global time, e.g. (*gtime.Reader).At
}

// BusyRetries is how many more times a node reads its page for one raw
// instant when the read fails with gtime.ErrBusy (gtime.BusyRetries).
const BusyRetries = gtime.BusyRetries

// patientGlobal is global with reads that found the page busy repeated,
// up to retries more times (gtime.ReadPatiently); each busy stretch is
// logged with how many reads it took.
func patientGlobal(global func(int64) (gtime.Time, error), retries int, log *slog.Logger) func(int64) (gtime.Time, error) {
	return func(raw int64) (gtime.Time, error) {
		t, busy, err := gtime.ReadPatiently(global, raw, retries)
		if busy > 0 {
			reads := busy
			if !errors.Is(err, gtime.ErrBusy) {
				reads++
			}
			log.Warn("page busy: the daemon was in the middle of an update", "reads", reads, "ok", err == nil)
		}
		return t, err
	}
}

// Run runs one node of a measurement over conn (a UDP socket bound to
// Peers[Rank]; with kernel timestamps for the latency test) and returns
// its stamps. Every node must run it at about the same time.
func Run(ctx context.Context, cfg Config, conn transport.PacketConn, clk Clocks) ([]Stamp, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("measure: config: %w", err)
	}
	if clk.Global == nil {
		return nil, errors.New("measure: no global time (Clocks.Global)")
	}
	if clk.Raw == nil {
		clk.Raw = gtime.RawNow
	}
	if clk.Local == nil {
		clk.Local = func(r int64) int64 { return r }
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clk.Global = patientGlobal(clk.Global, BusyRetries, log)
	c := newComm(cfg.Rank, cfg.Peers)
	c.serve = cfg.Op == OpPage && cfg.Rank == 0 && cfg.Keyring != nil
	tc := transport.DefaultConfig()
	tc.ID, tc.Conn, tc.Handler, tc.Logger = uint32(cfg.Rank+1), conn, c, log
	// Only the peers, each from its address (rank r is sender r+1), and
	// with the cluster key if there is one.
	tc.Keyring, tc.Peers = cfg.Keyring, make(map[uint32]netip.AddrPort, len(cfg.Peers))
	for r, a := range cfg.Peers {
		tc.Peers[uint32(r+1)] = a
	}
	ep, err := transport.New(tc)
	if err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	c.ep = ep
	n := &node{cfg: cfg, c: c, clk: clk, log: log}
	if cfg.Op == OpLatency {
		n.rx = map[int]*rxState{}
		n.rxDone = map[int]bool{}
		c.onPut = n.latencyRx
	}
	epCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = ep.Run(epCtx) }()
	defer func() { stop(); wg.Wait() }()

	// The schedule's waits sleep in nanosleep on this thread with 1-ns
	// timer slack (the default 50 us would make every start late).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	if cfg.SchedFIFO > 0 {
		// This thread only (the transport's run on others); not
		// inherited by a command (-op cmd) run from it.
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: uint32(cfg.SchedFIFO), Flags: schedResetOnFork}
		if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
			return nil, fmt.Errorf("measure: rank %d: SCHED_FIFO %d for the waiting thread: %w (needs root or CAP_SYS_NICE)", cfg.Rank, cfg.SchedFIFO, err)
		}
		defer func() {
			other := unix.SchedAttr{Size: unix.SizeofSchedAttr}
			_ = unix.SchedSetAttr(0, &other, 0)
		}()
	}
	s0, err := n.setup(ctx)
	if err != nil {
		return nil, fmt.Errorf("measure: rank %d: setup: %w", cfg.Rank, err)
	}
	log.Info("measure: started", "rank", cfg.Rank, "op", cfg.Op, "first_start_in", time.Duration(s0-n.globalNow()))
	if cfg.Op == OpLatency {
		err = n.latency(ctx, s0)
	} else {
		err = n.loop(ctx, s0)
	}
	if err == nil {
		err = n.finish(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("measure: rank %d: %w", cfg.Rank, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// Every stamp read again through the page as it is now: the daemon's
	// mapping of the end of the run, fitted over exchanges on both sides
	// of most stamps (Stamp.Retro).
	for i := range n.stamps {
		g, err := n.clk.Global(n.stamps[i].Raw)
		if err != nil {
			return nil, fmt.Errorf("measure: rank %d: reading the stamps again: %w", cfg.Rank, err)
		}
		n.stamps[i].Retro = g
	}
	slices.SortFunc(n.stamps, func(a, b Stamp) int { return int(a.Raw - b.Raw) })
	return n.stamps, nil
}

type node struct {
	cfg Config
	c   *comm
	clk Clocks
	log *slog.Logger

	mu     sync.Mutex
	stamps []Stamp
	rx     map[int]*rxState // latency: messages being received (at most maxRx)
	rxDone map[int]bool     // latency: messages received whole (stamped once)
	lastRx error
}

// stamp reads every clock at one raw instant.
func (n *node) stampAt(raw int64, exec int, mode Mode, ev Event, peer, size int, target int64) error {
	g, err := n.clk.Global(raw)
	if err != nil {
		return err
	}
	s := Stamp{Exec: exec, Mode: mode, Rank: n.cfg.Rank, Event: ev, Peer: peer, Size: size,
		Raw: raw, Local: n.clk.Local(raw), Global: g, Target: target}
	n.mu.Lock()
	n.stamps = append(n.stamps, s)
	n.mu.Unlock()
	return nil
}

func (n *node) stamp(exec int, mode Mode, ev Event, target int64) error {
	return n.stampAt(n.clk.Raw(), exec, mode, ev, -1, n.opSize(), target)
}

func (n *node) opSize() int {
	switch n.cfg.Op {
	case OpReduce, OpAllreduce:
		return 8 * n.cfg.Count
	case OpPage:
		if n.cfg.Rank == 0 {
			return 0
		}
		return transport.PageSize * n.cfg.Count
	}
	return 0
}

func (n *node) globalNow() int64 {
	g, err := n.clk.Global(n.clk.Raw())
	if err != nil {
		return 0
	}
	return g.Est
}

// setup waits for synced global time, then for every node (hello to rank
// 0), and learns the first scheduled start from rank 0.
func (n *node) setup(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.SetupTimeout)
	defer cancel()
	for {
		g, err := n.clk.Global(n.clk.Raw())
		if err != nil {
			return 0, err
		}
		if g.Status == gtime.StatusSynced {
			break
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("global time not synced (status %v): %w", g.Status, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	hello, goTag := tag(0, 0, phaseSetup, 0), tag(0, 0, phaseSetup, 1)
	if n.cfg.Rank == 0 {
		for r := 1; r < n.c.n(); r++ {
			if _, err := n.c.recv(ctx, hello, r); err != nil {
				return 0, fmt.Errorf("rank %d never said hello: %w", r, err)
			}
		}
		s0 := n.globalNow() + n.cfg.Lead.Nanoseconds()
		b := encodeVec([]int64{s0})
		for r := 1; r < n.c.n(); r++ {
			n.c.send(ctx, r, goTag, b)
		}
		return s0, n.c.flush()
	}
	// Rank 0 may not listen yet: repeat the hello until it is acknowledged.
	p := &wire.Packet{Op: wire.OpPut | wire.ReliableFlag, Page: wire.Page{Addr: hello}}
	for {
		_, err := n.c.ep.Send(ctx, n.cfg.Peers[0], p)
		if err == nil {
			break
		}
		if !errors.Is(err, transport.ErrTimeout) {
			return 0, fmt.Errorf("hello to rank 0: %w", err)
		}
	}
	m, err := n.c.recv(ctx, goTag, 0)
	if err != nil {
		return 0, err
	}
	v := make([]int64, 1)
	if err := addVec(v, m.data); err != nil {
		return 0, fmt.Errorf("go from rank 0: %w", err)
	}
	return v[0], nil
}

// waitUntil returns when global time reaches target. With SpinWindow 0
// it polls the page until then (a busy wait, as ReproMPI's processes wait
// for the window's start: no timer wake-up to be late by); otherwise it
// sleeps in nanosleep (the Go runtime's timers wake up to a millisecond
// late) until SpinWindow before and polls from then on. The caller's
// goroutine is locked to its thread, whose timer slack is 1 ns (see Run).
func (n *node) waitUntil(ctx context.Context, target int64) error {
	for i := 0; ; i++ {
		g, err := n.clk.Global(n.clk.Raw())
		if err != nil {
			return err
		}
		d := time.Duration(target - g.Est)
		if d <= 0 {
			return nil
		}
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if w := n.cfg.SpinWindow; w > 0 && d > w {
			ts := unix.NsecToTimespec(int64(min(d-w, 50*time.Millisecond)))
			_ = unix.Nanosleep(&ts, nil) // EINTR: the loop sleeps again
		}
	}
}

// loop runs the iterations of an operation.
func (n *node) loop(ctx context.Context, s0 int64) error {
	for k := range n.cfg.Runs {
		if n.cfg.Start != StartBarrier {
			target := n.nextSlot(s0, k)
			if err := n.waitUntil(ctx, target); err != nil {
				return err
			}
			if err := n.execute(ctx, k, 2*k, ModeScheduled, target); err != nil {
				return err
			}
		} else if k > 0 {
			// Pace the barrier-only runs like the others.
			if err := n.waitUntil(ctx, n.nextSlot(s0, k)); err != nil {
				return err
			}
		}
		if n.cfg.Start != StartScheduled {
			if err := n.c.barrier(ctx, 2*k+1, 0, phaseBarrierStart); err != nil {
				return fmt.Errorf("iteration %d: %w", k, err)
			}
			if err := n.execute(ctx, k, 2*k+1, ModeBarrier, 0); err != nil {
				return err
			}
		}
		if err := n.c.flush(); err != nil {
			return fmt.Errorf("iteration %d: %w", k, err)
		}
	}
	return nil
}

// nextSlot is iteration k's scheduled start: s0 + k*Period, or, when the
// node is already past it (the previous iteration overran its period),
// the next instant of the grid s0 + m*Period at least a quarter period
// ahead, so that one slow iteration does not make every later start late.
// Nodes that fall behind alike pick the same slot; a node that picks
// another is late for that iteration: its stamps carry its own target,
// and Analyze judges every node against the execution's earliest one.
func (n *node) nextSlot(s0 int64, k int) int64 {
	p := n.cfg.Period.Nanoseconds()
	t := s0 + int64(k)*p
	now := n.globalNow()
	if now <= t-p/4 {
		return t
	}
	m := (now + p/4 - s0 + p - 1) / p
	return s0 + m*p
}

// execute stamps the start, runs the operation Repeat times and stamps the
// end. A barrier-started execution ends, as seed 003's MPI_Barrier method
// does, with a second barrier: its end stamp is the node's exit from it.
func (n *node) execute(ctx context.Context, k, exec int, mode Mode, target int64) error {
	if err := n.stamp(k, mode, EventStart, target); err != nil {
		return err
	}
	for rep := range n.cfg.Repeat {
		if err := n.op(ctx, exec, rep); err != nil {
			return fmt.Errorf("iteration %d (%s): %s: %w", k, mode, n.cfg.Op, err)
		}
	}
	if mode == ModeBarrier {
		if err := n.c.barrier(ctx, exec, 0, phaseBarrierEnd); err != nil {
			return fmt.Errorf("iteration %d (%s): end barrier: %w", k, mode, err)
		}
	}
	return n.stamp(k, mode, EventEnd, 0)
}

func (n *node) op(ctx context.Context, exec, rep int) error {
	switch n.cfg.Op {
	case OpBarrier:
		return n.c.barrier(ctx, exec, rep, phaseBarrierOp)
	case OpReduce:
		v := contribution(n.cfg.Rank, exec, n.cfg.Count)
		if err := n.c.reduce(ctx, exec, rep, v); err != nil {
			return err
		}
		if n.cfg.Rank == 0 {
			return checkSum(v, n.c.n(), exec)
		}
		return nil
	case OpAllreduce:
		v := contribution(n.cfg.Rank, exec, n.cfg.Count)
		if err := n.c.allreduce(ctx, exec, rep, v); err != nil {
			return err
		}
		return checkSum(v, n.c.n(), exec)
	case OpPage:
		return n.c.pageTransfer(ctx, exec, rep, n.cfg.Count)
	case OpCmd:
		cmd := osexec.CommandContext(ctx, n.cfg.Command[0], n.cfg.Command[1:]...)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("command %q: %w", n.cfg.Command, err)
		}
		return nil
	}
	return fmt.Errorf("op %q: unknown", n.cfg.Op)
}

// finish holds every node in a last barrier, so that nobody stops
// acknowledging while another still waits for an ACK, and lingers a little
// for retransmissions.
func (n *node) finish(ctx context.Context) error {
	if err := n.c.barrier(ctx, 0, 0, phaseFinal); err != nil {
		return err
	}
	if err := n.c.flush(); err != nil {
		return err
	}
	time.Sleep(50 * time.Millisecond)
	return nil
}
