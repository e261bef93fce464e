package daemon

import (
	"net/netip"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/transport"
)

// sys is what Run takes from the machine for sync itself: the raw clock
// (the local clock of the page and of every kernel stamp) and the daemon's
// datagram socket. Run uses realSys; the daemon's tests run daemons on
// internal/memnet with a clock that testing/synctest's fake time drives
// (fakesys_test.go), deterministic and with no real waits.
//
// The NTP server, the refclock feed, the metrics listener and real-time
// scales still use the machine's sockets and clock directly.
type sys struct {
	raw    func() int64
	listen func(addr netip.AddrPort, opt transport.UDPOptions) (transport.PacketConn, error)
}

// realSys is CLOCK_MONOTONIC_RAW and UDP.
var realSys = sys{
	raw: gtime.RawNow,
	listen: func(addr netip.AddrPort, opt transport.UDPOptions) (transport.PacketConn, error) {
		return transport.ListenUDP(addr.String(), opt)
	},
}
