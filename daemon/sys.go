package daemon

import (
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/transport"
)

// sys is what Run takes from the machine for sync itself: the raw clock
// (the local clock of the page and of every kernel stamp), the daemon's
// datagram socket and the metrics listener. Run uses realSys; the daemon's
// tests run daemons on internal/memnet with a clock that testing/synctest's
// fake time drives and metrics they call as a handler (fakesys_test.go),
// deterministic and with no real waits.
//
// The NTP server's and the refclock feed's sockets, and the real-time
// scale's CLOCK_REALTIME, are still the machine's.
type sys struct {
	raw    func() int64
	listen func(addr netip.AddrPort, opt transport.UDPOptions) (transport.PacketConn, error)
	// serve serves h at metrics.listen (host:port or unix:path) until
	// stop is called.
	serve func(addr string, h http.Handler) (stop func(), err error)
	// upstream reads CLOCK_REALTIME's own state (nil: the kernel's,
	// readKernelUpstream; tests fake it).
	upstream func() (realtime.Upstream, error)
	// wall is CLOCK_REALTIME - CLOCK_MONOTONIC_RAW with its read's
	// half-width (nil: the machine's, rawclock.WallOffset; tests fake it).
	wall func() (off, halfWidth int64)
}

// realSys is CLOCK_MONOTONIC_RAW, UDP and HTTP on TCP or a Unix socket.
var realSys = sys{
	raw: gtime.RawNow,
	listen: func(addr netip.AddrPort, opt transport.UDPOptions) (transport.PacketConn, error) {
		return transport.ListenUDP(addr.String(), opt)
	},
	serve: serveHTTP,
}

// serveHTTP serves h on TCP, or on a Unix socket for "unix:path" (a
// previous run's socket is removed first).
func serveHTTP(addr string, h http.Handler) (func(), error) {
	network := "tcp"
	if strings.HasPrefix(addr, "unix:") {
		network, addr = "unix", strings.TrimPrefix(addr, "unix:")
		os.Remove(addr) // a previous run's socket
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}
