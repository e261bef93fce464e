// Package memnet is an in-memory datagram network for tests: connections
// that satisfy transport.PacketConn, links with seeded loss, duplication,
// delay and jitter, and no kernel (so no kernel timestamps).
//
// Delivery runs on the time package's timers, so under testing/synctest the
// whole network runs on the bubble's fake clock and a test of goroutine
// code (an Endpoint, a daemon) is deterministic and takes no real time:
//
//	synctest.Test(t, func(t *testing.T) {
//		n := memnet.New(1)
//		n.SetLink(memnet.Link{Delay: 50 * time.Microsecond})
//		a, _ := n.Listen(netip.MustParseAddrPort("10.0.0.1:1"))
//		b, _ := n.Listen(netip.MustParseAddrPort("10.0.0.1:2"))
//		a.WriteTo([]byte("hi"), b.Addr()) // b.ReadFrom returns it 50 us later
//	})
//
// Create the network inside the bubble: its channels and timers belong to
// the goroutine that makes them.
package memnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"
)

// queueLen is how many datagrams a connection holds unread before it drops
// more, as a socket buffer does (4096 covers every test's bursts).
const queueLen = 4096

// Link is how the network treats each datagram: lost with probability
// Loss, duplicated with probability Dup, and delayed by Delay plus a
// uniform jitter in [0, Jitter) (jitter larger than the send spacing
// reorders).
type Link struct {
	Loss, Dup     float64
	Delay, Jitter time.Duration
	// Drop, when set, decides the fate of a datagram before the random
	// loss: true drops it.
	Drop func(b []byte) bool
}

// Stats counts datagrams: written, lost (dropped by Link.Drop or Loss)
// and duplicated.
type Stats struct {
	Sent, Lost, Duplicated int
}

// Network is a set of connections that reach each other by address.
type Network struct {
	mu    sync.Mutex
	rng   *rand.Rand
	conns map[netip.AddrPort]*Conn
	link  Link
	stats Stats
}

// New returns an empty, lossless network without delay whose random
// choices follow seed.
func New(seed uint64) *Network {
	return &Network{rng: rand.New(rand.NewPCG(seed, 1)), conns: map[netip.AddrPort]*Conn{}}
}

// SetLink sets how datagrams written from now on are treated.
func (n *Network) SetLink(l Link) {
	n.mu.Lock()
	n.link = l
	n.mu.Unlock()
}

// Stats returns the counts so far.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Listen binds a connection to the address. It fails while another open
// connection holds it; a closed one frees it (a restarted daemon binds its
// address again).
func (n *Network) Listen(a netip.AddrPort) (*Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conns[a] != nil {
		return nil, fmt.Errorf("memnet: listen %v: address in use", a)
	}
	c := &Conn{net: n, addr: a, in: make(chan datagram, queueLen), closed: make(chan struct{})}
	n.conns[a] = c
	return c, nil
}

// Deliver puts b, at once and unaltered, in the queue of the connection
// bound to `to` as if sent from `from`: a spoofed source address. Nothing
// happens when nobody listens there or its queue is full.
func (n *Network) Deliver(b []byte, from, to netip.AddrPort) {
	n.mu.Lock()
	dst := n.conns[to]
	n.mu.Unlock()
	if dst != nil {
		dst.put(datagram{b: append([]byte(nil), b...), from: from})
	}
}

type datagram struct {
	b    []byte
	from netip.AddrPort
}

// Conn is one bound address on a Network. It allows one reader concurrent
// with several writers, as transport.PacketConn requires.
type Conn struct {
	net    *Network
	addr   netip.AddrPort
	in     chan datagram
	closed chan struct{}
	once   sync.Once
}

// Addr returns the address the connection is bound to.
func (c *Conn) Addr() netip.AddrPort { return c.addr }

// ReadFrom waits for the next datagram and copies it into b (truncated to
// len(b)). After Close it returns an error wrapping net.ErrClosed.
func (c *Conn) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	select {
	case d := <-c.in:
		return copy(b, d.b), d.from, nil
	case <-c.closed:
		return 0, netip.AddrPort{}, fmt.Errorf("memnet: read %v: %w", c.addr, net.ErrClosed)
	}
}

// WriteTo sends a copy of b to the address through the network's link.
// Like UDP it succeeds when nobody listens there: the datagram is gone.
// After Close it returns an error wrapping net.ErrClosed.
func (c *Conn) WriteTo(b []byte, to netip.AddrPort) error {
	select {
	case <-c.closed:
		return fmt.Errorf("memnet: write %v: %w", c.addr, net.ErrClosed)
	default:
	}
	n := c.net
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats.Sent++
	dst := n.conns[to]
	if dst == nil {
		return nil
	}
	if n.link.Drop != nil && n.link.Drop(b) {
		n.stats.Lost++
		return nil
	}
	if n.rng.Float64() < n.link.Loss {
		n.stats.Lost++
		return nil
	}
	copies := 1
	if n.rng.Float64() < n.link.Dup {
		copies = 2
		n.stats.Duplicated++
	}
	for range copies {
		d := n.link.Delay
		if n.link.Jitter > 0 {
			d += time.Duration(n.rng.Int64N(int64(n.link.Jitter)))
		}
		dg := datagram{b: append([]byte(nil), b...), from: c.addr}
		if d <= 0 {
			dst.put(dg)
			continue
		}
		time.AfterFunc(d, func() { dst.put(dg) })
	}
	return nil
}

// put queues a datagram unless the connection is closed or its queue full
// (dropped, as a socket buffer would).
func (c *Conn) put(d datagram) {
	select {
	case <-c.closed:
	case c.in <- d:
	default:
	}
}

// Close unblocks ReadFrom and frees the address. It is idempotent.
func (c *Conn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		n := c.net
		n.mu.Lock()
		if n.conns[c.addr] == c {
			delete(n.conns, c.addr)
		}
		n.mu.Unlock()
	})
	return nil
}
