package probe

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/estimate"
)

// Server answers probes with its clock's stamps until Close.
type Server struct {
	conn  net.PacketConn
	clk   clock.Clock
	log   *slog.Logger
	done  chan struct{}
	mu    sync.Mutex
	stats ServerStats
}

// ServerStats counts what the server saw.
type ServerStats struct {
	Answered int64 // replies sent
	Bad      int64 // datagrams that were not requests
}

// Serve starts answering probes on conn with clk (the reference process's
// trace clock). It owns conn: Close closes it.
func Serve(conn net.PacketConn, clk clock.Clock, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{conn: conn, clk: clk, log: log, done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *Server) loop() {
	defer close(s.done)
	buf := make([]byte, 64)
	out := make([]byte, 0, ReplyLen)
	for {
		n, addr, err := s.conn.ReadFrom(buf)
		recv := s.clk.Now()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("probe server: read", "err", err)
			continue
		}
		req, err := DecodeRequest(buf[:n])
		if err != nil {
			s.mu.Lock()
			s.stats.Bad++
			s.mu.Unlock()
			s.log.Debug("probe server: ignored datagram", "from", addr, "err", err)
			continue
		}
		out = AppendReply(out[:0], Reply{Seq: req.Seq, SrcRecv: recv, SrcSend: max(s.clk.Now(), recv)})
		if _, err := s.conn.WriteTo(out, addr); err != nil {
			s.log.Warn("probe server: write", "to", addr, "err", err)
			continue
		}
		s.mu.Lock()
		s.stats.Answered++
		s.mu.Unlock()
	}
}

// Stats returns the counters so far.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Close stops the server and closes its connection.
func (s *Server) Close() error {
	err := s.conn.Close()
	<-s.done
	return err
}

// Client makes exchanges with one Server; it implements trace.Prober. It is
// not safe for concurrent Probe calls (a Recorder makes one at a time).
type Client struct {
	conn    net.Conn
	clk     clock.Clock
	timeout time.Duration
	retries int
	seq     uint64
	buf     []byte
	out     []byte
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
}

// Dial connects a client to the server at addr ("host:port", UDP) with the
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
	conn, err := net.Dial("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("probe: dial %s: %w", addr, err)
	}
	return &Client{conn: conn, clk: clk, timeout: cfg.Timeout, retries: cfg.Retries, buf: make([]byte, 64)}, nil
}

// Close closes the client's socket.
func (c *Client) Close() error { return c.conn.Close() }

// Probe makes one exchange: a request, the reply that carries its sequence
// number, retried with a new number after each timeout.
func (c *Client) Probe() (estimate.Sample, error) {
	for attempt := 0; attempt <= c.retries; attempt++ {
		c.seq++
		seq := c.seq
		c.out = AppendRequest(c.out[:0], Request{Seq: seq})
		send := c.clk.Now()
		if _, err := c.conn.Write(c.out); err != nil {
			return estimate.Sample{}, fmt.Errorf("probe: send to %s: %w", c.conn.RemoteAddr(), err)
		}
		if err := c.conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
			return estimate.Sample{}, fmt.Errorf("probe: deadline: %w", err)
		}
		for {
			n, err := c.conn.Read(c.buf)
			recv := c.clk.Now()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					c.Stats.Timeouts++
					break
				}
				return estimate.Sample{}, fmt.Errorf("probe: receive from %s: %w", c.conn.RemoteAddr(), err)
			}
			r, err := DecodeReply(c.buf[:n])
			if err != nil {
				c.Stats.Bad++
				continue
			}
			if r.Seq != seq {
				c.Stats.Stale++
				continue
			}
			c.Stats.Exchanges++
			return estimate.Sample{LocSend: send, SrcRecv: r.SrcRecv, SrcSend: r.SrcSend, LocRecv: recv}, nil
		}
	}
	return estimate.Sample{}, fmt.Errorf("probe: no reply from %s after %d attempts of %v", c.conn.RemoteAddr(), c.retries+1, c.timeout)
}
