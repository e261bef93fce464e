package transport

import (
	"net/netip"

	"github.com/gclock/gclock/internal/memnet"
)

// listenMem binds port on 10.0.0.1 of the in-memory network (internal/memnet).
func listenMem(n *memnet.Network, port uint16) *memnet.Conn {
	c, err := n.Listen(netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), port))
	if err != nil {
		panic(err) // every test binds distinct ports
	}
	return c
}
