package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"time"

	"github.com/gclock/gclock/netmodel"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// Transport endpoints of the lab run in this process: their sockets are
// opened inside a host namespace (InNetns) and then used from ordinary
// goroutines, so that a datagram from host 0 to host 1 crosses the veth
// pairs and the lab's switch, which applies the link model (loss,
// duplication, reordering, delay) to every Ethernet frame.

// EndpointPair is a client endpoint in host 0 and a server endpoint in host
// 1, both running until Close.
type EndpointPair struct {
	Client, Server *transport.Endpoint
	ServerAddr     netip.AddrPort
	cancel         context.CancelFunc
	done           chan error
}

// listenIn opens a UDP socket on host's address (an ephemeral port) inside
// host's namespace.
func listenIn(host int) (*transport.UDPConn, error) {
	var c *transport.UDPConn
	err := InNetns(HostNS(host), func() error {
		var err error
		c, err = transport.ListenUDP(netip.AddrPortFrom(HostAddr(host), 0).String(), transport.UDPOptions{})
		return err
	})
	return c, err
}

// StartEndpoints starts a server endpoint with handler srv in host 1 and a
// client endpoint in host 0, both with the timeouts of base (Conn, ID and
// Handler are set here).
func (l *Lab) StartEndpoints(ctx context.Context, base transport.Config, srv transport.Handler) (*EndpointPair, error) {
	cc, err := listenIn(0)
	if err != nil {
		return nil, fmt.Errorf("lab: client socket in %s: %w", HostNS(0), err)
	}
	sc, err := listenIn(1)
	if err != nil {
		cc.Close()
		return nil, fmt.Errorf("lab: server socket in %s: %w", HostNS(1), err)
	}
	ccfg, scfg := base, base
	ccfg.ID, ccfg.Conn, ccfg.Handler = 1, cc, nil
	scfg.ID, scfg.Conn, scfg.Handler = 2, sc, srv
	client, err := transport.New(ccfg)
	if err != nil {
		cc.Close()
		sc.Close()
		return nil, fmt.Errorf("lab: client endpoint: %w", err)
	}
	server, err := transport.New(scfg)
	if err != nil {
		cc.Close()
		sc.Close()
		return nil, fmt.Errorf("lab: server endpoint: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &EndpointPair{Client: client, Server: server, ServerAddr: sc.LocalAddr(), cancel: cancel, done: make(chan error, 2)}
	go func() { p.done <- client.Run(ctx) }()
	go func() { p.done <- server.Run(ctx) }()
	return p, nil
}

// Close stops both endpoints (closing their sockets) and waits for them.
func (p *EndpointPair) Close() error {
	p.cancel()
	var errs []error
	for range 2 {
		if err := <-p.done; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// TransportBenchConfig configures BenchTransport: Mocha's page-transfer
// experiment (seed 004) between two lab hosts.
type TransportBenchConfig struct {
	Losses   []float64     // per-frame loss probabilities, each direction; one lab per value
	Delay    time.Duration // one-way link delay (no jitter)
	Client   transport.PageClientConfig
	Warmup   int // unmeasured requests first, so the timeout is learned
	Endpoint transport.Config
	Seed     uint64
	Logger   *slog.Logger
	// FragTime, when > 0, sets net.ipv4.ipfrag_time (whole seconds, at
	// least 1) in both hosts: how long the kernel keeps an incomplete IP
	// datagram. An 8 KB page is 6 fragments; with the kernel's 30 s every
	// reply that lost a fragment holds reassembly memory for 30 s, and at
	// a few percent loss ipfrag_high_thresh (4 MB) fills within a second
	// or two, after which the kernel drops every fragment: both modes then
	// crawl at tens of requests per second, whatever the protocol does.
	FragTime time.Duration
}

// TransportBenchRow is one mode at one loss rate.
type TransportBenchRow struct {
	Mode           string  `json:"mode"` // "ack-per-message" or "ack-omission"
	LossPct        float64 `json:"loss_pct"`
	Requests       int     `json:"requests"`
	Failed         int     `json:"failed"`
	Messages       uint64  `json:"messages"` // datagrams both endpoints wrote (measured part)
	MessagesPerReq float64 `json:"messages_per_request"`
	Acks           uint64  `json:"acks"`
	Retransmits    uint64  `json:"retransmits"`
	Frames         int64   `json:"switch_frames"`  // Ethernet frames the switch saw (an 8 KB datagram is 6 IP fragments)
	Dropped        int64   `json:"switch_dropped"` // frames the switch's link model dropped
	ElapsedS       float64 `json:"elapsed_seconds"`
	ReqPerSec      float64 `json:"requests_per_second"`
	P50us          float64 `json:"latency_p50_us"`
	P99us          float64 `json:"latency_p99_us"`
	MaxUs          float64 `json:"latency_max_us"`
	// SpeedupPct, on the ack-omission row: elapsed time with an ACK per
	// message / elapsed with ACK omission - 1, same work, same lab.
	SpeedupPct float64 `json:"speedup_pct,omitempty"`
}

// BenchTransport runs the page workload between host 0 (client) and host 1
// (server) of a 2-host lab per loss rate, first with an ACK per message,
// then with ACK omission, and returns two rows per loss rate. It brings
// labs up and down itself (Up removes any running lab).
func BenchTransport(ctx context.Context, cfg TransportBenchConfig) ([]TransportBenchRow, error) {
	if len(cfg.Losses) == 0 {
		return nil, errors.New("lab: bench transport: no loss rates")
	}
	if cfg.Warmup < 0 {
		return nil, fmt.Errorf("lab: bench transport: warmup %d must be >= 0", cfg.Warmup)
	}
	var rows []TransportBenchRow
	for i, loss := range cfg.Losses {
		m := netmodel.Model{Delay: cfg.Delay, Loss: loss}
		lcfg := Config{Hosts: 2, Link: netmodel.Link{Forward: m, Reverse: m}, Seed: cfg.Seed + uint64(i), BusyPoll: DefaultBusyPoll, Logger: cfg.Logger}
		l, err := Up(ctx, lcfg)
		if err != nil {
			return rows, fmt.Errorf("lab: bench transport at loss %g: %w", loss, err)
		}
		if cfg.FragTime > 0 {
			if err := l.setFragTime(ctx, cfg.FragTime); err != nil {
				l.Down()
				return rows, err
			}
		}
		var pair [2]TransportBenchRow
		for j, every := range []bool{true, false} {
			r, err := l.benchPages(ctx, cfg, every)
			if err != nil {
				l.Down()
				return rows, fmt.Errorf("lab: bench transport at loss %g (ack per message %v): %w", loss, every, err)
			}
			r.LossPct = 100 * loss
			pair[j] = r
		}
		if err := l.Down(); err != nil {
			return rows, err
		}
		if pair[1].ElapsedS > 0 {
			pair[1].SpeedupPct = 100 * (pair[0].ElapsedS/pair[1].ElapsedS - 1)
		}
		rows = append(rows, pair[0], pair[1])
	}
	return rows, nil
}

func (l *Lab) benchPages(ctx context.Context, cfg TransportBenchConfig, ackEvery bool) (TransportBenchRow, error) {
	var row TransportBenchRow
	ecfg := cfg.Endpoint
	ecfg.AckEvery = ackEvery
	ecfg.Logger = cfg.Logger
	p, err := l.StartEndpoints(ctx, ecfg, &transport.PageServer{PageSize: cfg.Client.PageSize})
	if err != nil {
		return row, err
	}
	defer p.Close()
	for i := range cfg.Warmup {
		// Warm-up requests may fail under loss; only the timing matters.
		p.Client.Request(ctx, p.ServerAddr, &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: uint64(1<<40 + i)}})
	}
	c0, s0 := p.Client.Stats(), p.Server.Stats()
	l.sw.ResetStats()
	res, err := transport.RunPageClient(ctx, p.Client, p.ServerAddr, cfg.Client)
	if err != nil {
		return row, err
	}
	c1, s1 := p.Client.Stats(), p.Server.Stats()
	for _, d := range l.sw.Stats() {
		row.Frames += d.Frames
		row.Dropped += d.Dropped
	}
	row.Mode = "ack-omission"
	if ackEvery {
		row.Mode = "ack-per-message"
	}
	row.Requests, row.Failed = res.Requests, res.Failed
	row.Messages = c1.Sent - c0.Sent + s1.Sent - s0.Sent
	row.Acks = c1.SentAcks - c0.SentAcks + s1.SentAcks - s0.SentAcks
	row.Retransmits = c1.Retransmits - c0.Retransmits + s1.Retransmits - s0.Retransmits
	if n := res.Requests + res.Failed; n > 0 {
		row.MessagesPerReq = float64(row.Messages) / float64(n)
	}
	row.ElapsedS, row.ReqPerSec = res.Elapsed.Seconds(), res.ReqPerSec
	row.P50us, row.P99us, row.MaxUs = float64(res.P50)/1e3, float64(res.P99)/1e3, float64(res.Max)/1e3
	return row, nil
}

// setFragTime sets net.ipv4.ipfrag_time in both hosts of the lab.
func (l *Lab) setFragTime(ctx context.Context, d time.Duration) error {
	secs := max(int64(d/time.Second), 1)
	for h := range 2 {
		if err := ipCmd(ctx, "netns", "exec", HostNS(h), "sysctl", "-qw", "net.ipv4.ipfrag_time="+strconv.FormatInt(secs, 10)); err != nil {
			return fmt.Errorf("lab: ipfrag_time in %s: %w", HostNS(h), err)
		}
	}
	return nil
}
