package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// Server answers probes with its clock's stamps until Close.
type Server struct {
	ep       *transport.Endpoint
	clk      clock.Clock
	addr     netip.AddrPort
	cancel   context.CancelFunc
	done     chan error
	answered atomic.Int64
	refused  atomic.Int64
}

// ServerStats counts what the server saw.
type ServerStats struct {
	Answered int64 // replies sent
	Bad      int64 // datagrams that were not probes (undecodable, or another request)
}

// Listen opens a UDP socket on addr ("host:port"; port 0 picks one) and
// serves probes on it with clk (the reference process's trace clock).
func Listen(addr string, clk clock.Clock, log *slog.Logger) (*Server, error) {
	conn, err := transport.ListenUDP(addr, transport.UDPOptions{})
	if err != nil {
		return nil, fmt.Errorf("probe: listen %s: %w", addr, err)
	}
	s, err := Serve(conn, clk, log)
	if err != nil {
		conn.Close()
		return nil, err
	}
	s.addr = conn.LocalAddr()
	return s, nil
}

// Serve starts answering probes on conn with clk. It owns conn: Close
// closes it.
func Serve(conn transport.PacketConn, clk clock.Clock, log *slog.Logger) (*Server, error) {
	s := &Server{clk: clk, done: make(chan error, 1)}
	cfg := transport.DefaultConfig()
	cfg.Conn, cfg.Clock, cfg.Logger, cfg.Handler = conn, clk, log, (*serverHandler)(s)
	ep, err := transport.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("probe: serve: %w", err)
	}
	s.ep = ep
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- ep.Run(ctx) }()
	return s, nil
}

// Addr is the address Listen bound (the zero AddrPort after Serve).
func (s *Server) Addr() netip.AddrPort { return s.addr }

// Stats returns the counters so far.
func (s *Server) Stats() ServerStats {
	return ServerStats{Answered: s.answered.Load(), Bad: s.refused.Load() + int64(s.ep.Stats().DecodeErrors)}
}

// Close stops the server and closes its connection.
func (s *Server) Close() error {
	s.cancel()
	if err := <-s.done; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("probe: server: %w", err)
	}
	return nil
}

// serverHandler is the Server's transport.Handler.
type serverHandler Server

// HandleRequest answers a probe with the reference's receive time (T2)
// and the time just before the reply is written (T3).
func (h *serverHandler) HandleRequest(in *transport.Incoming, reply *wire.Packet) error {
	if in.Packet.Op.Kind() != wire.OpProbe {
		h.refused.Add(1)
		return fmt.Errorf("probe: op %v is not a probe", in.Packet.Op)
	}
	p := in.Packet
	reply.Msg = engine.Message{Type: engine.MsgProbeReply, From: engine.NodeID(reply.Sender), To: engine.NodeID(p.Sender),
		Round: p.Msg.Round, Seq: p.Msg.Seq, T2: in.RecvUser, T3: max(h.clk.Now(), in.RecvUser)}
	h.answered.Add(1)
	return nil
}

// HandleMessage drops one-way messages: a trace reference expects none.
func (h *serverHandler) HandleMessage(*transport.Incoming) { h.refused.Add(1) }

// Client makes exchanges with one Server; it implements trace.Prober. It is
// not safe for concurrent Probe calls (a Recorder makes one at a time).
type Client struct {
	ep      *transport.Endpoint
	server  netip.AddrPort
	retries int
	timeout time.Duration
	seq     uint32
	cancel  context.CancelFunc
	done    chan error
	Stats   ClientStats
}

// ClientStats counts the client's exchanges.
type ClientStats struct {
	Exchanges int64 // probes answered
	Timeouts  int64 // attempts without a reply
	Stale     int64 // replies to an earlier attempt, ignored
	Bad       int64 // datagrams that were not replies
}

// ClientConfig configures Dial. Zero values take the defaults.
type ClientConfig struct {
	Timeout time.Duration // per attempt (default 50 ms)
	Retries int           // attempts after the first (default 4)
	ID      uint32        // the sender id in the client's packets (the process number, say)
}

// Dial makes a client for the server at addr ("host:port", UDP) with the
// process's trace clock clk.
func Dial(addr string, clk clock.Clock, cfg ClientConfig) (*Client, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	if cfg.Retries < 0 {
		return nil, fmt.Errorf("probe: Retries %d < 0", cfg.Retries)
	}
	if cfg.Retries == 0 {
		cfg.Retries = 4
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("probe: dial %s: %w", addr, err)
	}
	server := ua.AddrPort()
	server = netip.AddrPortFrom(server.Addr().Unmap(), server.Port())
	local := "0.0.0.0:0"
	if server.Addr().Is6() {
		local = "[::]:0"
	}
	conn, err := transport.ListenUDP(local, transport.UDPOptions{})
	if err != nil {
		return nil, fmt.Errorf("probe: dial %s: %w", addr, err)
	}
	// One transmission per request: a retry is a new request, so that a
	// reply answers the one copy whose send time the sample carries.
	tc := transport.DefaultConfig()
	tc.ID, tc.Conn, tc.Clock = cfg.ID, conn, clk
	tc.MaxAttempts, tc.InitialRTO, tc.MinRTO, tc.MaxRTO = 1, cfg.Timeout, cfg.Timeout, cfg.Timeout
	tc.RecentTTL = max(tc.RecentTTL, cfg.Timeout)
	ep, err := transport.New(tc)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("probe: dial %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{ep: ep, server: server, retries: cfg.Retries, timeout: cfg.Timeout, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- ep.Run(ctx) }()
	return c, nil
}

// Close closes the client's socket.
func (c *Client) Close() error {
	c.cancel()
	if err := <-c.done; err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("probe: client: %w", err)
	}
	return nil
}

// Probe makes one exchange: a probe and its reply, retried with a new
// sequence number after each timeout.
func (c *Client) Probe() (estimate.Sample, error) {
	defer c.noteTransport()
	for attempt := 0; attempt <= c.retries; attempt++ {
		c.seq++
		req := wire.Packet{Op: wire.OpProbe, Msg: engine.Message{Type: engine.MsgProbe, Seq: c.seq}}
		reply, tm, err := c.ep.Request(context.Background(), c.server, &req)
		if errors.Is(err, transport.ErrTimeout) {
			c.Stats.Timeouts++
			continue
		}
		if err != nil {
			return estimate.Sample{}, fmt.Errorf("probe: %w", err)
		}
		c.Stats.Exchanges++
		return estimate.Sample{LocSend: tm.SendUser, SrcRecv: reply.Msg.T2, SrcSend: reply.Msg.T3, LocRecv: tm.RecvUser}, nil
	}
	return estimate.Sample{}, fmt.Errorf("probe: no reply from %v after %d attempts of %v", c.server, c.retries+1, c.timeout)
}

// noteTransport copies the transport's drop counts into Stats.
func (c *Client) noteTransport() {
	st := c.ep.Stats()
	c.Stats.Stale, c.Stats.Bad = int64(st.Stale), int64(st.DecodeErrors+st.UnknownSender)
}
