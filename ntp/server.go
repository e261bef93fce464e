package ntp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
)

// Source is what a server serves: its readings of UTC and what it says
// about itself. The daemon implements it from its engine (daemon/ntp.go).
type Source interface {
	// At is the server's reading of UTC at the CLOCK_MONOTONIC_RAW instant
	// raw (ns).
	At(raw int64) Reading
	// Self is what the server says about itself in a reply sent now.
	Self() Server
}

// Conn is the server's UDP socket: transport.UDPConn, whose receive stamps
// are kernel software stamps converted to CLOCK_MONOTONIC_RAW (0: none).
type Conn interface {
	ReadFromStamped(b []byte) (n int, from netip.AddrPort, kernelRx int64, err error)
	WriteTo(b []byte, to netip.AddrPort) error
	Close() error
}

// maxRate bounds |d served / d CLOCK_MONOTONIC_RAW - 1|: the engine's
// drift bound (sync.max_drift_ppm, 500 ppm at most) plus the real-time
// scale's slew (real_time.max_slew_ppm) stay far below 1%.
const maxRate = 0.01

// Stats counts what a server did.
type Stats struct {
	Received     uint64 // datagrams read
	Answered     uint64 // replies written
	Refused      uint64 // not a client request (short, wrong mode or version): dropped
	Unsynced     uint64 // replies that said "unsynchronised" (leap 3, stratum 16)
	KernelStamps uint64 // requests whose receive time was the kernel's stamp
	WriteErrors  uint64
	Denied       uint64 // from a source outside the allow list: dropped
	Limited      uint64 // over the source's rate limit: dropped
	KoD          uint64 // over the source's rate limit: answered with a kiss-o'-death RATE
}

// Policy is who a Responder answers and how often (SetPolicy).
type Policy struct {
	// Allow lists the client networks answered; nil: every address, an
	// empty list: none. The daemon's default is DefaultAllow.
	Allow []netip.Prefix
	// Limit is the per-source rate limit (zero: none).
	Limit RateLimit
}

// Responder answers NTP client requests on a socket.
type Responder struct {
	conn   Conn
	src    Source
	rawNow func() int64
	log    *slog.Logger

	allow   []netip.Prefix
	lim     *limiter // nil: no limit
	kodPoll int8

	received, answered, refused, unsynced, kernel, writeErrs, denied, limited, kods atomic.Uint64
}

// SetPolicy sets the allow list and the rate limit; call it before Serve.
func (s *Responder) SetPolicy(p Policy) error {
	if err := p.Limit.Check(); err != nil {
		return err
	}
	s.allow = p.Allow
	s.lim = nil
	if p.Limit.Interval > 0 {
		s.lim = newLimiter(p.Limit)
		s.kodPoll = pollFor(p.Limit.Interval)
	}
	return nil
}

// NewResponder makes a responder; Serve runs it. rawNow reads
// CLOCK_MONOTONIC_RAW (gtime.RawNow); a nil logger discards.
func NewResponder(conn Conn, src Source, rawNow func() int64, log *slog.Logger) *Responder {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Responder{conn: conn, src: src, rawNow: rawNow, log: log}
}

// Stats returns the counters so far.
func (s *Responder) Stats() Stats {
	return Stats{Received: s.received.Load(), Answered: s.answered.Load(), Refused: s.refused.Load(),
		Unsynced: s.unsynced.Load(), KernelStamps: s.kernel.Load(), WriteErrors: s.writeErrs.Load(),
		Denied: s.denied.Load(), Limited: s.limited.Load(), KoD: s.kods.Load()}
}

// Serve answers requests until ctx is done (it then closes the socket and
// returns nil) or the socket fails. A request from outside the policy's
// allow list is dropped, one over its source's rate limit dropped or
// answered with a KoD RATE (SetPolicy). The request's arrival is its kernel
// receive stamp when the socket has one, else the time the read returned;
// the reply's transmit time is read just before the write (the write's
// latency, a few microseconds, is what clients see as path asymmetry).
func (s *Responder) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	buf := make([]byte, 1024)
	out := make([]byte, HeaderLen)
	for {
		n, from, kernel, err := s.conn.ReadFromStamped(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		user := s.rawNow()
		s.received.Add(1)
		if !allowed(s.allow, from.Addr()) {
			s.denied.Add(1)
			continue
		}
		if s.lim != nil {
			switch s.lim.take(from.Addr(), user) {
			case drop:
				s.limited.Add(1)
				continue
			case kod:
				m, err := KissOfDeath(out, buf[:n], "RATE", s.kodPoll)
				if err != nil {
					s.refused.Add(1)
					continue
				}
				if err := s.conn.WriteTo(out[:m], from); err != nil {
					s.writeErrs.Add(1)
					continue
				}
				s.kods.Add(1)
				continue
			}
		}
		rxRaw := user
		if kernel != 0 && kernel <= user {
			rxRaw = kernel
			s.kernel.Add(1)
		}
		rx := s.src.At(rxRaw)
		self := s.src.Self()
		// T3: At may wait for the engine's lock, so its reading at r0 is
		// carried to r1, just before the write, at rate 1: served time runs
		// at 1 within maxRate, and the bound widens by that over the carry
		// (microseconds: a fraction of a ns).
		r0 := s.rawNow()
		tx := s.src.At(r0)
		if r1 := s.rawNow(); tx.OK && r1 > r0 {
			tx.Time += r1 - r0
			tx.MaxErr += int64(float64(r1-r0)*maxRate) + 1
		}
		m, err := Respond(out, buf[:n], rx, tx, self)
		if err != nil {
			s.refused.Add(1)
			s.log.Debug("ntp: request refused", "from", from, "err", err)
			continue
		}
		if out[0]>>6 == LeapUnsync {
			s.unsynced.Add(1)
		}
		if err := s.conn.WriteTo(out[:m], from); err != nil {
			s.writeErrs.Add(1)
			s.log.Debug("ntp: reply not sent", "to", from, "err", err)
			continue
		}
		s.answered.Add(1)
	}
}
