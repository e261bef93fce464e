package transport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"
)

// memNet is an in-memory datagram network for tests: every datagram is
// lost with probability loss, duplicated with probability dup, and delayed
// by delay plus a uniform jitter (jitter larger than the send spacing
// reorders). Randomness is seeded. Timers are the time package's, so under
// testing/synctest the network runs on the bubble's fake clock.
type memNet struct {
	mu     sync.Mutex
	rng    *rand.Rand
	conns  map[netip.AddrPort]*memConn
	loss   float64
	dup    float64
	delay  time.Duration
	jitter time.Duration
	// drop, when set, decides the fate of a datagram before the random loss.
	drop func(b []byte) bool

	sent, lost, duplicated int
}

func newMemNet(seed uint64) *memNet {
	return &memNet{rng: rand.New(rand.NewPCG(seed, 1)), conns: map[netip.AddrPort]*memConn{}}
}

type datagram struct {
	b    []byte
	from netip.AddrPort
}

type memConn struct {
	net    *memNet
	addr   netip.AddrPort
	in     chan datagram
	closed chan struct{}
	once   sync.Once
}

func (n *memNet) listen(port uint16) *memConn {
	a := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port)
	c := &memConn{net: n, addr: a, in: make(chan datagram, 4096), closed: make(chan struct{})}
	n.mu.Lock()
	n.conns[a] = c
	n.mu.Unlock()
	return c
}

func (c *memConn) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	select {
	case d := <-c.in:
		return copy(b, d.b), d.from, nil
	case <-c.closed:
		return 0, netip.AddrPort{}, fmt.Errorf("memconn %v: %w", c.addr, net.ErrClosed)
	}
}

func (c *memConn) WriteTo(b []byte, to netip.AddrPort) error {
	n := c.net
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent++
	dst := n.conns[to]
	if dst == nil {
		return nil // like UDP: nobody listening, the datagram is gone
	}
	if n.drop != nil && n.drop(b) {
		n.lost++
		return nil
	}
	if n.rng.Float64() < n.loss {
		n.lost++
		return nil
	}
	copies := 1
	if n.rng.Float64() < n.dup {
		copies = 2
		n.duplicated++
	}
	for range copies {
		d := n.delay
		if n.jitter > 0 {
			d += time.Duration(n.rng.Int64N(int64(n.jitter)))
		}
		dg := datagram{b: append([]byte(nil), b...), from: c.addr}
		time.AfterFunc(d, func() {
			select {
			case dst.in <- dg:
			case <-dst.closed:
			default: // queue full: dropped, as a socket buffer would
			}
		})
	}
	return nil
}

func (c *memConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}
