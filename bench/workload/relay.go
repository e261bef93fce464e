package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Listen is the client-facing address ("127.0.0.1:0").
	Listen string
	// Target is the server the relay forwards to.
	Target netip.AddrPort
	// Loss is the probability that a datagram is dropped, in each
	// direction, in [0, 1).
	Loss float64
	// Dup is the probability that a datagram is forwarded twice, in [0, 1).
	Dup float64
	// Seed makes the drops reproducible.
	Seed uint64
}

// Relay is a lossy UDP forwarder for one client: datagrams to its front
// address go to Target from its back socket, and the server's answers to
// the back socket go to the client that last wrote to the front. It injects
// loss and duplication at the given rates. Meant for loopback experiments
// (the lab's switch does the same between network namespaces).
type Relay struct {
	cfg         RelayConfig
	front, back *net.UDPConn

	mu     sync.Mutex
	rng    *rand.Rand
	client netip.AddrPort

	forwarded, dropped, duplicated atomic.Uint64
}

// NewRelay opens the relay's two sockets.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Loss < 0 || cfg.Loss >= 1 {
		return nil, fmt.Errorf("workload: relay: Loss %v outside [0, 1)", cfg.Loss)
	}
	if cfg.Dup < 0 || cfg.Dup >= 1 {
		return nil, fmt.Errorf("workload: relay: Dup %v outside [0, 1)", cfg.Dup)
	}
	if !cfg.Target.IsValid() {
		return nil, errors.New("workload: relay: Target is not set")
	}
	la, err := net.ResolveUDPAddr("udp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("workload: relay: Listen %q: %w", cfg.Listen, err)
	}
	front, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, fmt.Errorf("workload: relay: listen %s: %w", cfg.Listen, err)
	}
	back, err := net.ListenUDP("udp", &net.UDPAddr{IP: la.IP})
	if err != nil {
		front.Close()
		return nil, fmt.Errorf("workload: relay: back socket: %w", err)
	}
	for _, c := range []*net.UDPConn{front, back} {
		// Room for bursts of 8 KB pages from concurrent clients.
		_ = c.SetReadBuffer(4 << 20)
		_ = c.SetWriteBuffer(4 << 20)
	}
	return &Relay{cfg: cfg, front: front, back: back, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed))}, nil
}

// Addr is the address clients send to.
func (r *Relay) Addr() netip.AddrPort {
	a := r.front.LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// RelayStats counts the relay's decisions, both directions together.
type RelayStats struct {
	Forwarded, Dropped, Duplicated uint64
}

// Stats returns the counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{r.forwarded.Load(), r.dropped.Load(), r.duplicated.Load()}
}

// copies decides how many copies of one datagram to forward (0, 1 or 2).
func (r *Relay) copies() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rng.Float64() < r.cfg.Loss {
		return 0
	}
	if r.rng.Float64() < r.cfg.Dup {
		return 2
	}
	return 1
}

// Run forwards until ctx is done, then closes the sockets.
func (r *Relay) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { r.front.Close(); r.back.Close() })
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Go(func() { errc <- r.pump(ctx, r.front, r.back, true) })
	wg.Go(func() { errc <- r.pump(ctx, r.back, r.front, false) })
	wg.Wait()
	r.front.Close()
	r.back.Close()
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Relay) pump(ctx context.Context, in, out *net.UDPConn, fromClient bool) error {
	buf := make([]byte, 65536)
	for {
		n, from, err := in.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("workload: relay: read: %w", err)
		}
		var to netip.AddrPort
		if fromClient {
			r.mu.Lock()
			r.client = from
			r.mu.Unlock()
			to = r.cfg.Target
		} else {
			r.mu.Lock()
			to = r.client
			r.mu.Unlock()
			if !to.IsValid() {
				continue
			}
		}
		c := r.copies()
		if c == 0 {
			r.dropped.Add(1)
			continue
		}
		if c == 2 {
			r.duplicated.Add(1)
		}
		for range c {
			if _, err := out.WriteToUDPAddrPort(buf[:n], to); err == nil {
				r.forwarded.Add(1)
			}
		}
	}
}
