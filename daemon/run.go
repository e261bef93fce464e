package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/satmath"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// localClock is the daemon's local clock and the conversion of kernel
// stamps (CLOCK_MONOTONIC_RAW) onto it.
type localClock struct {
	now     func() int64
	fromRaw func(raw int64) int64
	// ahead is the local clock at raw r+dt extrapolated at its rate at r,
	// as publish samples the engine ahead: the raw clock's own reading; an
	// emulated clock's along its tangent at r (clock.Emulated.Tangent),
	// not its reading then, which would show a frequency step to come (the
	// page's line, through the readings at r and two minutes on, bent
	// toward a step of the lab's --step before it came: a sawtooth of 10
	// us between publishes).
	ahead func(r, dt int64) int64
	// curve is how far the local clock strays, over raw [r, r+2d], from
	// that line: 0 for the raw clock; an emulated clock that wanders is not
	// linear in raw, and the page's raw->global mapping is a line, so
	// publish widens it by this.
	curve func(r, d int64) int64
}

func newLocalClock(c ClockConfig, raw func() int64) (localClock, error) {
	if c.Source == ClockRaw {
		return localClock{now: raw, fromRaw: func(r int64) int64 { return r },
			ahead: func(r, dt int64) int64 { return satmath.Add(r, dt) }, curve: func(int64, int64) int64 { return 0 }}, nil
	}
	m := c.Emulated
	if m.OriginRaw == 0 {
		m.OriginRaw = raw()
	}
	emu, err := m.New()
	if err != nil {
		return localClock{}, fmt.Errorf("clock.emulated: %w", err)
	}
	var mu sync.Mutex
	return localClock{
		now: func() int64 {
			r := raw()
			mu.Lock()
			defer mu.Unlock()
			return emu.Read(r)
		},
		// Peek: publish looks StaleAfter and twice that ahead, which
		// must not push the present out of the clock's look-back.
		fromRaw: func(r int64) int64 {
			mu.Lock()
			defer mu.Unlock()
			return emu.Peek(r)
		},
		ahead: func(r, dt int64) int64 {
			mu.Lock()
			defer mu.Unlock()
			y0, rate := emu.Tangent(r)
			return satmath.Add(y0, int64(math.Round(float64(dt)*rate))) // dt: minutes at most
		},
		curve: func(r, d int64) int64 {
			mu.Lock()
			defer mu.Unlock()
			return emu.MaxDeviationTangent(r, r+2*d)
		},
	}, nil
}

// node is one running daemon: the engine behind a mutex, the endpoint, the
// page writer and counters. engCfg is cfg.Sync converted once
// (Config.EngineConfig): the clock model in engine units.
type node struct {
	cfg    Config
	engCfg engine.Config
	sys    sys // the raw clock and the socket (sys.go)
	log    *slog.Logger
	meas   *measurementsLog // nil: no log.measurements
	clk    localClock
	ep     *transport.Endpoint
	peers  map[engine.NodeID]netip.AddrPort
	writer *gtime.Writer // nil: no page
	rt     *realTime     // nil: real_time.mode none (realtime.go)
	state  *stateKeeper  // nil: no state.file (state.go)
	sd     *notifier     // systemd's notify protocol; inert without $NOTIFY_SOCKET (sdnotify.go)

	mu      sync.Mutex     // guards eng, next and last
	eng     *engine.Member // the engine, through reference changes (engine/member.go)
	ref     atomic.Uint32  // eng.Reference(), readable without mu
	changes atomic.Uint64  // eng.Changes()
	term    atomic.Uint32  // eng.Term()
	stale   atomic.Uint64  // eng.StaleTerm()
	// unproven is eng.TermRefused(): status messages of a newer term not
	// adopted (engine messages of one are counted by admitMsg).
	unproven atomic.Uint64
	next     int64
	last     int64         // latest local time given to the engine
	clamped  atomic.Uint64 // stamps raised to last (see lockedLocal)
	wake     chan struct{} // re-arm the tick timer
	pub      chan struct{} // publish now (a round finished)

	ctx      context.Context
	sendMu   sync.Mutex // orders goSend's wg.Add before Run's wg.Wait
	stopping bool
	wg       sync.WaitGroup

	msgs [6][4]atomic.Uint64 // [engine.MsgType][direction]

	rounds roundTracker // round differences and smoothed RTTs for the metrics (metrics.go)
	sec    security     // drops by reason, status changes (security.go)

	publishFailing atomic.Bool // the last Publish failed: log again only when that changes
}

// Directions of the message counters.
const (
	dirSent = iota
	dirReceived
	dirFailed
	nDirs
)

var dirNames = [nDirs]string{"sent", "received", "failed"}

var msgNames = [6]string{"", "probe", "probe_reply", "time_diff", "err_report", "period_change"}

func (n *node) count(t engine.MsgType, dir int) {
	if int(t) < len(n.msgs) {
		n.msgs[t][dir].Add(1)
	}
}

// Run runs the daemon until ctx is done: it binds the UDP socket, drives an
// engine.Node with kernel-stamped messages through a transport.Endpoint,
// publishes global time to the gtime page and serves metrics. It returns
// nil after a clean shutdown (the page is marked closed).
// Reference failover is in failover.go, the real-time modes in realtime.go.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	return run(ctx, cfg, logger, realSys)
}

// run is Run on the given clock and socket (sys.go).
func run(ctx context.Context, cfg Config, logger *slog.Logger, sys sys) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	ref := cfg.ReferenceID()
	src, children, err := cfg.Roles(ref)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	mem, err := cfg.newMember(logger)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	clk, err := newLocalClock(cfg.Clock, sys.raw)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	sd, err := newNotifier(os.Getenv)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	defer sd.stopping()
	n := &node{cfg: cfg, engCfg: cfg.EngineConfig(nil, nil), sys: sys, log: logger, clk: clk, eng: mem, sd: sd, wake: make(chan struct{}, 1),
		pub:   make(chan struct{}, 1),
		peers: map[engine.NodeID]netip.AddrPort{}}
	for _, p := range cfg.Peers {
		ap, err := resolve(p.Address)
		if err != nil {
			return fmt.Errorf("daemon: peers: id %d: %w", p.ID, err)
		}
		n.peers[engine.NodeID(p.ID)] = ap
	}
	n.noteMember()
	if cfg.RealTime.Mode != RealTimeNone {
		if n.rt, err = newRealTime(n, engine.NodeID(ref)); err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
	}
	listen, err := resolve(cfg.ListenAddr())
	if err != nil {
		return fmt.Errorf("daemon: node.listen: %w", err)
	}
	conn, err := sys.listen(listen, transport.UDPOptions{Timestamps: cfg.Transport.KernelTimestamps})
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	// From here every resource is released by a defer, in reverse order of
	// acquisition, on every return. The endpoint closes the socket when its
	// Run ends; closing it again here is harmless, and closes it when a
	// step below fails before the endpoint runs.
	defer conn.Close()
	tcfg := transport.DefaultConfig()
	tcfg.ID, tcfg.Conn, tcfg.Handler, tcfg.Logger = cfg.Node.ID, conn, n, logger
	// Only peers, from their addresses, and with the cluster key if there
	// is one (security.go).
	if tcfg.Keyring, err = cfg.Auth.keyring(); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	tcfg.Peers, tcfg.Anonymous = map[uint32]netip.AddrPort{}, anonymousOps
	for id, a := range n.peers {
		tcfg.Peers[uint32(id)] = a
	}
	// The endpoint stamps on CLOCK_MONOTONIC_RAW, like the kernel stamps
	// it converts; recvLocal maps both onto an emulated clock if there is one.
	tcfg.Clock = clock.Func(sys.raw)
	n.ep, err = transport.New(tcfg)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if p := cfg.Log.Measurements; p != "" {
		if n.meas, err = newMeasurementsLog(p); err != nil {
			return fmt.Errorf("daemon: log.measurements: %w", err)
		}
		defer n.meas.Close()
	}
	if p := cfg.GlobalTime.ShmPath; p != "" {
		gid, _ := cfg.GlobalTime.PageGroup()         // checked by Validate
		if made, err := makePageDir(p); err != nil { // pagedir.go
			return fmt.Errorf("daemon: %w", err)
		} else if made {
			logger.Info("created the page's directory", "dir", filepath.Dir(p), "mode", "0755")
		}
		if n.writer, err = gtime.NewWriterWith(p, gtime.WriterOptions{Group: gid}); err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		defer n.writer.Close()
		for _, l := range n.writer.Leftovers() {
			logger.Warn("removed a file beside the page that was not the daemon's", "file", l)
		}
	}
	ext, err := n.openExtras() // ntp.go: the NTP socket, the refclock feed
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	// The NTP socket is closed on every return: by its server once started
	// (closing it again is harmless), here when the start fails before.
	defer ext.close()
	restored, err := n.restoreState(clk.now()) // state.go
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if restored != nil {
		n.applyState(restored, engine.NodeID(ref), mem.Node())
		n.publish() // bounded time at once, before the reference is looked up
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.ctx = ctx

	// Metrics before any goroutine starts: a failure here has nothing to
	// wait for (only the defers to run).
	if addr := cfg.Metrics.Listen; addr != "" {
		h, err := metricsHandler(n, newSecurityCollector(n.SecuritySnapshot), nodeLabelled{ext, cfg.Node.ID},
			// What every Prometheus target exports: CPU, memory, file
			// descriptors and start time of the process; the Go runtime.
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
		if err != nil {
			return fmt.Errorf("daemon: metrics: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", h)
		// gclock tracking, sources and sourcestats read ControlPath (control.go).
		mux.Handle(ControlPath, ViewHandler(n, n.SecuritySnapshot))
		sample := mountStatus(mux, n, cfg)             // the live status page (status.go)
		stop, err := sys.serve(metricsBind(addr), mux) // status.go: ":port" is 127.0.0.1:port
		if err != nil {
			return fmt.Errorf("daemon: metrics.listen: %w", err)
		}
		defer stop()
		n.wg.Add(1) // waited for with the sends, after cancel
		go func() {
			defer n.wg.Done()
			sample(ctx)
		}()
	}
	epDone := make(chan error, 1)
	go func() { epDone <- n.ep.Run(ctx) }()
	cbWait, err := n.startClockBound(ctx) // clockbound.go
	if err != nil {
		cancel()
		<-epDone
		return fmt.Errorf("daemon: %w", err)
	}
	rtWait := n.startRealTime(ctx)
	extWait := ext.start(ctx, n)
	logger.Info("daemon started", "node", cfg.Node.ID, "listen", listen, "reference", ref,
		"sources", src, "children", children, "clock", cfg.Clock.Source, "kernel_timestamps", cfg.Transport.KernelTimestamps,
		"real_time", cfg.RealTime.Mode, "authenticated", tcfg.Keyring != nil)
	err = n.loop(ctx)
	n.saveState()
	st := n.stampCounts()
	logger.Info("daemon stopping", "transport", n.ep.Stats(), "dropped", countsAttr(n.SecuritySnapshot().Drops), "stamps_raised", n.clamped.Load(),
		"t1_kernel", st.ProbeStamped, "t1_engine", st.ProbeOwn, "resent", st.Resent, "t3_kernel", st.ReplyStamped, "t3_user", st.ReplyOwn,
		"stamps_rejected", st.Rejected, "stamps_unknown", st.Unknown, "stamps_expired", st.Expired)
	cancel()
	rtWait()
	extWait()
	cbWait()
	eerr := <-epDone // no handler runs after this
	n.sendMu.Lock()
	n.stopping = true
	n.sendMu.Unlock()
	n.wg.Wait()
	if eerr != nil && !errors.Is(eerr, context.Canceled) && err == nil {
		err = fmt.Errorf("daemon: transport: %w", eerr)
	}
	return err
}

func resolve(addr string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if host == "" {
		host = "0.0.0.0"
	}
	ua, err := net.ResolveUDPAddr("udp", net.JoinHostPort(host, port))
	if err != nil {
		return netip.AddrPort{}, err
	}
	ap := ua.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// loop ticks the engine at its NextTick and republishes the page.
func (n *node) loop(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	every := n.cfg.GlobalTime.PublishEvery.D()
	if len(n.cfg.Reference.Order) > 1 {
		// The page's promise ends with the lease (publish), renewed
		// every failover_after/12: republish often enough that it does
		// not lapse between two publications.
		every = min(every, max(n.cfg.Reference.FailoverAfter.D()/8, time.Millisecond))
	}
	pub := time.NewTicker(every)
	defer pub.Stop()
	var save <-chan time.Time // state.go
	if n.state != nil {
		t := time.NewTicker(n.cfg.State.saveEvery())
		defer t.Stop()
		save = t.C
	}
	n.publish()
	var watchdog <-chan time.Time // systemd's WatchdogSec (sdnotify.go)
	if every := n.sd.pingEvery(); every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		watchdog = t.C
		n.pingWatchdog()
	}
	var lastTick time.Time // zero: the engine has not been ticked yet
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-watchdog:
			n.pingWatchdog()
			continue
		case <-timer.C:
			lastTick = time.Now()
			now := n.clk.now()
			n.mu.Lock()
			n.eng.Tick(n.lockedLocal(now))
			r := n.eng.Ready()
			n.next = r.NextTick
			n.noteMember()
			n.mu.Unlock()
			n.dispatch(r)
		case <-n.wake:
		case <-n.pub:
			n.publish()
			continue
		case <-pub.C:
			n.publish()
			continue
		case <-save:
			n.saveState()
			continue
		}
		n.mu.Lock()
		next := n.next
		n.mu.Unlock()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		// No timer wanted: still tick a second after the last tick (not
		// after the last message: a node that hears often must still be
		// ticked, and its first tick must not wait for a quiet second).
		wait := max(0, time.Second-time.Since(lastTick))
		if next != 0 {
			wait = time.Duration(max(0, next-n.clk.now()))
			wait = min(wait, time.Second)
		}
		timer.Reset(wait)
	}
}

// dispatch sends the engine's messages and notes its events. It never
// blocks: every send runs in its own goroutine.
func (n *node) dispatch(r engine.Ready) {
	for _, ev := range r.Events {
		switch ev.Kind {
		case engine.EvGlobalResync, engine.EvContradiction, engine.EvTrustChange, engine.EvReferenceChange:
			// Publish at once: a contradiction must reach readers before
			// they are promised time the data no longer support, and a
			// new term (and a new reference's scale) must reach the page.
			select {
			case n.pub <- struct{}{}:
			default:
			}
		}
		if ev.Kind == engine.EvReferenceChange && n.rt != nil {
			n.rt.retarget(n, ev.Peer)
		}
		n.log.Debug("engine event", "kind", ev.Kind, "peer", ev.Peer, "value", ev.Value)
	}
	for _, m := range r.Messages {
		addr, ok := n.peers[m.To]
		if !ok {
			level := slog.LevelWarn
			if m.Type == engine.MsgStatusQuery {
				level = slog.LevelDebug // an order naming a node without an address: it never answers
			}
			n.log.Log(context.Background(), level, "engine addressed an unknown node", "to", m.To, "type", m.Type)
			continue
		}
		switch m.Type {
		case engine.MsgProbe:
			n.goSend(func(ctx context.Context) { n.probe(ctx, addr, m) })
		case engine.MsgTimeDiff:
			n.goSend(func(ctx context.Context) { n.oneWay(ctx, addr, wire.OpTimeDiff, m) })
		case engine.MsgErrReport:
			// The error report and the period change travel with the
			// reliable flag: one-way messages whose loss the engine would
			// not notice (Mocha section 4: only flagged messages are
			// acknowledged). A lost TimeDiff only loses one round.
			n.goSend(func(ctx context.Context) { n.oneWay(ctx, addr, wire.OpErrReport|wire.ReliableFlag, m) })
		case engine.MsgPeriodChange:
			n.goSend(func(ctx context.Context) { n.oneWay(ctx, addr, wire.OpPeriodChange|wire.ReliableFlag, m) })
		case engine.MsgStatusQuery:
			n.goSend(func(ctx context.Context) { n.statusQuery(ctx, addr, m) })
		default:
			// Probe replies travel as transport replies (HandleRequest).
			n.log.Debug("engine message not sent outside a request", "type", m.Type, "to", m.To)
		}
	}
}

func (n *node) goSend(f func(context.Context)) {
	n.sendMu.Lock()
	defer n.sendMu.Unlock()
	if n.stopping || n.ctx.Err() != nil {
		return
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f(n.ctx)
	}()
}

// probe sends a probe as a transport request; the reply goes to the engine
// stamped with its kernel receive time when there is one.
func (n *node) probe(ctx context.Context, addr netip.AddrPort, m engine.Message) {
	ctx, cancel := context.WithTimeout(ctx, max(n.cfg.Sync.ProbeTimeout.D()*4, time.Second))
	defer cancel()
	n.count(m.Type, dirSent)
	reply, timing, err := n.ep.Request(ctx, addr, &wire.Packet{Op: wire.OpProbe, Sender: n.cfg.Node.ID, Msg: m})
	if err != nil {
		n.count(m.Type, dirFailed)
		n.log.Debug("probe failed", "to", m.To, "seq", m.Seq, "err", err)
		return
	}
	rm := reply.Msg
	rm.Type, rm.From = engine.MsgProbeReply, engine.NodeID(reply.Sender)
	// The exchange's source-side times: the reply's kernel receive stamp
	// (T4) and, when the first transmission was answered, the probe's
	// kernel transmit stamp (T1). A retransmitted probe's reply may be the
	// copy the child's transport resent for the later probe copy, whose
	// arrival does not pair with the times it carries: the engine takes it
	// as the acknowledgement and keeps no sample (engine.Message.Resent).
	rm.T4 = n.recvLocal(timing.RecvUser, timing.RecvKernel)
	rm.Resent = timing.Attempts > 1
	if n.cfg.Transport.KernelTimestamps && timing.Attempts == 1 && timing.SendKernel != 0 {
		n.txStamp(engine.MsgProbe, m.To, m.Seq, n.clk.fromRaw(timing.SendKernel))
	}
	n.dispatch(n.step(rm, n.clk.now()))
}

func (n *node) oneWay(ctx context.Context, addr netip.AddrPort, op wire.Op, m engine.Message) {
	n.count(m.Type, dirSent)
	if _, err := n.ep.Send(ctx, addr, &wire.Packet{Op: op, Sender: n.cfg.Node.ID, Msg: m}); err != nil {
		n.count(m.Type, dirFailed)
		n.log.Debug("send failed", "type", m.Type, "to", m.To, "err", err)
		return
	}
	n.log.Debug("sent", "type", m.Type, "to", m.To, "op", op)
}

// recvLocal picks the kernel receive stamp when enabled and present, on the
// local clock (localClock.fromRaw: the identity for the raw clock).
func (n *node) recvLocal(user, kernel int64) int64 {
	if kernel != 0 && n.cfg.Transport.KernelTimestamps {
		return n.clk.fromRaw(kernel)
	}
	return n.clk.fromRaw(user)
}

// lockedLocal raises a time to the latest one the engine has seen, which
// the engine requires: a kernel receive stamp is older than the moment the
// message is handled, and another call may have come in between. Later is
// safe for every sample (bounds only widen) but loses the stamp's
// precision; the count is in the debug log at shutdown. Called with mu held.
func (n *node) lockedLocal(local int64) int64 {
	if local < n.last {
		n.clamped.Add(1)
		return n.last
	}
	n.last = local
	return local
}

// step feeds a message to the engine and sends what it produced.
func (n *node) step(m engine.Message, local int64) engine.Ready {
	n.mu.Lock()
	if !n.admitMsg(m, n.lockedLocal(local)) { // security.go: a refused message is no sign of life
		n.mu.Unlock()
		return engine.Ready{}
	}
	n.count(m.Type, dirReceived) // admitted: a rejected message is counted as dropped only
	n.eng.Step(m, n.lockedLocal(local))
	r := n.eng.Ready()
	n.rounds.note(n.eng.Node(), r.Events)
	n.next = r.NextTick
	n.noteMember()
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}: // re-arm the timer at the new NextTick
	default:
	}
	return r
}

// HandleRequest steps a probe, stamped with its (kernel) receive time
// (engine.Message.T2), and answers with the engine's reply.
func (n *node) HandleRequest(in *transport.Incoming, reply *wire.Packet) error {
	if in.Packet.Op.Kind() == wire.OpRealTimeQuery {
		return n.handleRealTimeQuery(in, reply)
	}
	if in.Packet.Op.Kind() == wire.OpStatusQuery {
		return n.statusReply(in, reply)
	}
	if in.Packet.Op.Kind() != wire.OpProbe {
		return fmt.Errorf("op %v is not a probe", in.Packet.Op)
	}
	m := in.Packet.Msg
	m.Type, m.From = engine.MsgProbe, engine.NodeID(in.Packet.Sender)
	m.Samples = nil
	m.T2 = n.recvLocal(in.RecvUser, in.RecvKernel)
	r := n.step(m, n.clk.now())
	o, found := takeReply(&r, engine.MsgProbeReply, m.From, m.Seq)
	if found {
		reply.Msg = o
	}
	n.dispatch(r)
	if !found {
		return fmt.Errorf("engine did not answer probe %d from %d", m.Seq, m.From)
	}
	n.count(engine.MsgProbeReply, dirSent)
	return nil
}

// ReplySent implements transport.ReplyObserver: a probe reply's kernel
// transmit stamp goes to the engine (engine.Node.TxStamp), which puts it
// in the sample when the time diff brings it back.
func (n *node) ReplySent(_ netip.AddrPort, reply *wire.Packet, _, sendKernel int64) {
	if reply.Op.Kind() != wire.OpProbeReply || sendKernel == 0 || !n.cfg.Transport.KernelTimestamps {
		return
	}
	n.txStamp(engine.MsgProbeReply, reply.Msg.To, reply.Msg.Seq, n.clk.fromRaw(sendKernel))
}

// txStamp gives the engine a message's transmit stamp (local clock).
func (n *node) txStamp(t engine.MsgType, to engine.NodeID, seq uint32, local int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.eng.TxStamp(t, to, seq, local)
}

// stampCounts is the engine's count of where the exchanges' transmit
// stamps came from (engine.StampSnapshot).
func (n *node) stampCounts() engine.StampSnapshot {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.eng.Node().Snapshot().Stamps
}

// HandleMessage feeds a time diff or an error report to the engine.
func (n *node) HandleMessage(in *transport.Incoming) {
	m := in.Packet.Msg
	m.From = engine.NodeID(in.Packet.Sender)
	m.Samples = slices.Clone(m.Samples) // the packet is reused by the receive loop
	r := n.step(m, n.clk.now())
	if n.meas != nil {
		for _, rs := range r.Rounds { // as the engine used them: kernel T3s in
			n.meas.write(rs.Source, rs.Samples)
		}
	}
	n.log.Debug("message", "type", m.Type, "from", m.From, "to", m.To, "samples", len(m.Samples), "events", len(r.Events))
	n.dispatch(r)
}

// publishSpan is how far ahead publish samples the engine's bounds to fit
// the page's quadratic width model: the page is trusted for StaleAfter
// after an update, so the fit spans 0, StaleAfter and 2*StaleAfter.
func (n *node) publishSpan() int64 { return max(int64(n.cfg.Sync.StaleAfter), int64(time.Second)) }

// pingWatchdog tells systemd the main loop runs (WATCHDOG=1).
func (n *node) pingWatchdog() {
	if err := n.sd.ping(time.Now()); err != nil {
		n.log.Warn("systemd watchdog", "err", err)
	}
}

// publish writes the engine's current local->global mapping, re-expressed
// on CLOCK_MONOTONIC_RAW, to the page.
func (n *node) publish() {
	n.noteStatus()
	if n.writer == nil {
		return
	}
	raw := n.sys.raw()
	d := n.publishSpan()
	var ts [3]engine.Time
	n.mu.Lock()
	for i := range ts {
		ts[i] = n.eng.Estimate(n.clk.ahead(raw, int64(i)*d))
	}
	// The reading's term, and the term's definition of global time when
	// this node is its reference (gtime.Scale): the same instant.
	term, fm, defined := n.eng.Scale()
	n.mu.Unlock()
	// Under reference failover a synced page must say stale once the
	// Member's lease ends (a paused daemon's page would otherwise promise
	// the old scale after another node took over): its StaleAfter ends
	// there at the latest.
	staleAfter := n.cfg.Sync.StaleAfter.D()
	n.mu.Lock()
	leaseLeft := satmath.Sub(n.eng.LeaseEnd(), n.clk.fromRaw(raw))
	n.mu.Unlock()
	if ts[0].Status == engine.StatusSynced && leaseLeft < int64(staleAfter) {
		staleAfter = time.Duration(max(leaseLeft, 1))
	}
	u := gtime.Update{
		Local: raw, Status: gtime.Status(ts[0].Status), StaleAfter: staleAfter,
		MaxDrift: n.engCfg.MaxDrift, MaxSlewRate: n.engCfg.MaxSlewRate,
		Node: n.cfg.Node.ID, Reference: n.ref.Load(), Term: term,
	}
	if defined && n.rt == nil {
		// On the reference timescale only: a UTC scale is the reference's
		// CLOCK_REALTIME, not this line.
		u.Scale = gtime.Scale{Term: term, Defined: true, X0: fm.X0, Y0: fm.Y0, Skew: fm.Skew}
	}
	ok := true
	if n.rt != nil {
		u.Timescale, u.Continuous = n.rt.timescale(), true
		ok = n.rt.apply(ts[:])
		if up, has := n.rt.upstreamState(); !ok && has && up.Problem() != "" {
			u.UpstreamUnsynced = true // the page's reason (gclock now)
		}
	}
	if m, fitOK := fitMapping(raw, d, ts); ok && fitOK {
		if c := n.clk.curve(raw, d); c > 0 {
			m.W0 = min(m.W0+c, math.MaxInt64/4)
		}
		u.Mapping = m
	} else {
		u.Status = gtime.StatusUnsynced
	}
	if err := n.writer.Publish(u); err != nil {
		if !n.publishFailing.Swap(true) {
			n.log.Warn("cannot publish global time (logged again when it can)", "err", err)
		} else {
			n.log.Debug("cannot publish global time", "err", err)
		}
	} else if n.publishFailing.Swap(false) {
		n.log.Info("publishing global time again")
	}
}

// fitMapping turns three readings of the engine, at x0, x0+d and x0+2d,
// into a page mapping: the line through the first two estimates and a
// width model W0 + SkewErr*dx + Wander*dx^2/2 that is at least the engine's
// half-width around that line at all three points.
func fitMapping(x0, d int64, ts [3]engine.Time) (estimate.Mapping, bool) {
	for _, t := range ts {
		if t.Status == engine.StatusUnsynced || t.Earliest == math.MinInt64 || t.Latest == math.MaxInt64 {
			return estimate.Mapping{}, false
		}
	}
	fd := float64(d)
	skew := float64(ts[1].Est-ts[0].Est-d) / fd
	var w [3]float64
	for i, t := range ts {
		dx := int64(i) * d
		line := ts[0].Est + dx + int64(math.Round(skew*float64(dx)))
		w[i] = math.Max(0, math.Max(float64(line-t.Earliest), float64(t.Latest-line)))
	}
	b := math.Max(0, (w[2]-2*w[1]+w[0])/(fd*fd))
	a := math.Max(0, math.Max((w[1]-w[0])/fd-b*fd/2, (w[2]-w[0])/(2*fd)-b*fd))
	// Two ns of margin cover the rounding of the line and of the widths.
	return estimate.Mapping{X0: x0, Y0: ts[0].Est, Skew: skew, W0: int64(math.Ceil(w[0])) + 2,
		SkewErr: a, Wander: b, Valid: true}, true
}

// Snapshot implements Snapshotter for the metrics.
func (n *node) Snapshot() Snapshot {
	now := n.clk.now()
	n.mu.Lock()
	es := n.eng.Node().Snapshot()
	x := n.eng.In(now)
	tr := n.eng.Node().Tracking(x)
	t := n.eng.Estimate(now)
	t1 := n.eng.Estimate(now + int64(time.Second))
	n.mu.Unlock()
	s := Snapshot{Node: n.cfg.Node.ID, Reference: n.ref.Load(), ReferenceChanges: n.changes.Load(),
		Term: n.term.Load(), StaleTerm: n.stale.Load(),
		Status: t.Status.String(), TakenAt: time.Now()}
	s.Served, s.ServedStatus, s.ServedReason, s.ServedMaxError = n.served(t)
	if n.rt != nil {
		s.Upstream, s.HaveUpstream = n.rt.upstreamState()
	}
	if t.Status != engine.StatusUnsynced {
		s.Offset = time.Duration(t.Est - now)
		s.EstimatedError = time.Duration(max(t.Est-t.Earliest, t.Latest-t.Est))
		s.Width = time.Duration(t.Latest - t.Earliest)
		s.FrequencyAdjustment = float64(t1.Est-t.Est-int64(time.Second)) / float64(time.Second)
	}
	for _, src := range es.Sources {
		s.Sources = append(s.Sources, SourceStats{ID: uint32(src.Source), Rounds: src.Rounds, EstimatorRestarts: src.Restarts, FrequencyBreaks: src.Breaks, Checks: src.Checks, CheckBreaks: src.CheckBreaks, CheckTrends: src.CheckTrends, Silent: src.Silent,
			RejectedCorrupt: src.Corrupt, RejectedBelowFloor: src.BelowFloor, RejectedOneWayBelowFloor: src.OneWayBelowFloor})
	}
	for _, c := range es.Children {
		s.Children = append(s.Children, ChildStats{ID: uint32(c.Child), GlobalPeriod: time.Duration(c.Period),
			Rounds: c.Rounds, RoundsRepeated: c.Repeats, RoundsEarly: c.Early, RoundsChecked: c.CheckRounds, Checks: c.Checks, RoundsCut: c.Cut, ProbeRetries: c.Retries, ProbesResent: c.Resent, ShortestRTT: time.Duration(c.ShortestRTT),
			RoundPings: c.Pings, ExchangePace: time.Duration(c.Pace)})
	}
	trackingStats(&s, es, tr, x, &n.rounds)
	for t := 1; t < len(n.msgs); t++ {
		for dir := range nDirs {
			if v := n.msgs[t][dir].Load(); v > 0 {
				s.Messages = append(s.Messages, MessageCount{Type: msgNames[t], Direction: dirNames[dir], Count: v})
			}
		}
	}
	return s
}

// served is the timescale this node serves and the status of t (global
// time now) as served: on UTC, what publish would write to the page
// (unsynced while UTC has no model or an unsynchronised upstream), and
// why UTC is not served.
func (n *node) served(t engine.Time) (timescale, status, reason string, maxErr time.Duration) {
	half := func(t engine.Time) time.Duration {
		if t.Status == engine.StatusUnsynced || t.Earliest == math.MinInt64 || t.Latest == math.MaxInt64 {
			return 0
		}
		return time.Duration(max(t.Est-t.Earliest, t.Latest-t.Est))
	}
	if n.rt == nil {
		return gtime.TimescaleReference.String(), t.Status.String(), "", half(t)
	}
	timescale = n.rt.timescale().String()
	ts := []engine.Time{t}
	if t.Status == engine.StatusUnsynced {
		return timescale, t.Status.String(), "global time unsynced", 0
	}
	if n.rt.apply(ts) {
		return timescale, ts[0].Status.String(), "", half(ts[0])
	}
	return timescale, engine.StatusUnsynced.String(), cmp.Or(n.rt.unserved(t.Est), realtime.ReasonNoModel), 0
}

// takeReply removes from r the engine's answer of type t to (to, seq): it
// goes back in the transport's reply datagram, the rest is dispatched.
func takeReply(r *engine.Ready, t engine.MsgType, to engine.NodeID, seq uint32) (engine.Message, bool) {
	for i, o := range r.Messages {
		if o.Type == t && o.To == to && o.Seq == seq {
			r.Messages = append(r.Messages[:i:i], r.Messages[i+1:]...)
			return o, true
		}
	}
	return engine.Message{}, false
}
