package transport

import (
	"net/netip"
)

// PacketConn is the datagram socket an Endpoint runs over: a UDP socket
// (ListenUDP) in real use, an in-memory network in tests. Implementations
// must allow one reader concurrent with several writers.
type PacketConn interface {
	// ReadFrom reads one datagram into b. After Close it returns an error
	// that wraps net.ErrClosed.
	ReadFrom(b []byte) (n int, from netip.AddrPort, err error)
	// WriteTo sends one datagram to the address.
	WriteTo(b []byte, to netip.AddrPort) error
	// Close unblocks ReadFrom and releases the socket.
	Close() error
}

// StampedConn is a PacketConn that also reports kernel timestamps, already
// converted to the local clock (CLOCK_MONOTONIC_RAW for UDPConn). A zero
// stamp means none was available for that datagram.
type StampedConn interface {
	PacketConn
	// ReadFromStamped is ReadFrom plus the kernel's receive stamp.
	ReadFromStamped(b []byte) (n int, from netip.AddrPort, kernelRx int64, err error)
	// WriteToStamped is WriteTo plus the kernel's transmit stamp.
	WriteToStamped(b []byte, to netip.AddrPort) (kernelTx int64, err error)
}
