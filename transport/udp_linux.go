//go:build linux

package transport

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/internal/sockts"
)

// UDPOptions configures ListenUDP.
type UDPOptions struct {
	// Timestamps asks the kernel for software receive and transmit stamps
	// (SO_TIMESTAMPING with RX_SOFTWARE, TX_SOFTWARE, OPT_ID, OPT_TSONLY).
	Timestamps bool
	// TxStampWait bounds how long WriteToStamped waits for the transmit
	// stamp on the error queue. On loopback and veth the stamp is queued
	// before sendmsg returns; a real NIC's driver stamps a little later.
	// Zero means 1 ms.
	TxStampWait time.Duration
	// ReadBuffer is the socket's receive buffer in bytes; zero means 4 MB.
	// The kernel caps it at net.core.rmem_max. The default (208 KB) lost
	// datagrams on loopback under CPU load when 64-KB messages came 1 ms
	// apart (measure's latency test; RcvbufErrors in /proc/net/snmp).
	ReadBuffer int
	// WriteBuffer is the socket's send buffer in bytes; zero keeps the
	// kernel's default (net.core.wmem_default). The loopback page benchmark
	// sets 4 MB for bursts of 8-KB pages.
	WriteBuffer int
}

// UDPConn is a UDP socket implementing PacketConn and StampedConn. Kernel
// stamps are CLOCK_REALTIME; UDPConn converts them to CLOCK_MONOTONIC_RAW
// with an offset sampled by rawclock.WallOffset right after each receive and
// send, so the conversion error is the sandwich half-width (a few hundred
// ns with system-call clock reads) plus the wall clock's NTP slew
// between the stamp and the sample (at most 500 ppm of the few tens of us
// between them, so tens of ns). A wall-clock step in that window makes one
// stamp wrong by the step; stamps that land after the user-space time
// of the same event are dropped (0) for that reason.
type UDPConn struct {
	c    *net.UDPConn
	raw  syscall.RawConn
	ts   bool
	wait time.Duration

	wmu    sync.Mutex // serialises sends so OPT_ID keys match our counter
	nextID uint32
	errOOB []byte

	oob []byte // receive control buffer (one reader)

	// Counters for the documentation of the conversion error.
	mu                       sync.Mutex
	rxStamps, txStamps       uint64
	txMissing, rxMissing     uint64
	rxImplausible, txImplaus uint64
	maxHalfWidth             int64
}

// ListenUDP opens a UDP socket on addr ("127.0.0.1:0", "[::1]:9000").
func ListenUDP(addr string, opt UDPOptions) (*UDPConn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %q: %w", addr, err)
	}
	network := "udp4"
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		network = "udp6"
	}
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("transport: listen %s: %w", addr, err)
	}
	rb := opt.ReadBuffer
	if rb <= 0 {
		rb = 4 << 20
	}
	if err := c.SetReadBuffer(rb); err != nil {
		c.Close()
		return nil, fmt.Errorf("transport: listen %s: receive buffer of %d bytes: %w", addr, rb, err)
	}
	if opt.WriteBuffer > 0 {
		if err := c.SetWriteBuffer(opt.WriteBuffer); err != nil {
			c.Close()
			return nil, fmt.Errorf("transport: listen %s: send buffer of %d bytes: %w", addr, opt.WriteBuffer, err)
		}
	}
	u := &UDPConn{c: c, raw: rc, wait: opt.TxStampWait, oob: make([]byte, 256), errOOB: make([]byte, 256)}
	if u.wait <= 0 {
		u.wait = time.Millisecond
	}
	if opt.Timestamps {
		flags := unix.SOF_TIMESTAMPING_RX_SOFTWARE | unix.SOF_TIMESTAMPING_TX_SOFTWARE |
			unix.SOF_TIMESTAMPING_SOFTWARE | unix.SOF_TIMESTAMPING_OPT_ID | unix.SOF_TIMESTAMPING_OPT_TSONLY
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING, flags)
		}); err != nil {
			serr = err
		}
		if serr != nil {
			c.Close()
			return nil, fmt.Errorf("transport: listen %s: setsockopt SO_TIMESTAMPING: %w", addr, serr)
		}
		u.ts = true
		warmRxStamps(200 * time.Millisecond)
	}
	return u, nil
}

// warmRxStamps waits until the kernel stamps received datagrams. Linux
// turns receive stamping on for the whole system through a deferred work
// item when the first socket asks for it, so datagrams that arrive before
// that work runs (milliseconds on a busy machine) carry no stamp. A pair of
// throw-away loopback sockets pings until a stamp appears or the timeout
// passes; the caller's socket already holds its own reference, so closing
// the pair leaves stamping on.
func warmRxStamps(timeout time.Duration) bool {
	a, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return false
	}
	defer a.Close()
	b, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return false
	}
	defer b.Close()
	rc, err := b.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	_ = rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPING,
			unix.SOF_TIMESTAMPING_RX_SOFTWARE|unix.SOF_TIMESTAMPING_SOFTWARE)
	})
	if serr != nil {
		return false
	}
	buf, oob := make([]byte, 16), make([]byte, 128)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if _, err := a.WriteToUDP([]byte{1}, b.LocalAddr().(*net.UDPAddr)); err != nil {
			return false
		}
		_ = b.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		_, oobn, _, _, err := b.ReadMsgUDP(buf, oob)
		if err == nil {
			if _, ok := parseTimestamping(oob[:oobn]); ok {
				return true
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// LocalAddr returns the bound address.
func (u *UDPConn) LocalAddr() netip.AddrPort {
	return u.c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// Close closes the socket.
func (u *UDPConn) Close() error { return u.c.Close() }

// ReadFrom reads one datagram.
func (u *UDPConn) ReadFrom(b []byte) (int, netip.AddrPort, error) {
	n, from, _, err := u.ReadFromStamped(b)
	return n, from, err
}

// ReadFromStamped reads one datagram and returns its kernel receive stamp
// on the CLOCK_MONOTONIC_RAW time base (0 when timestamps are off or the
// stamp was missing or implausible).
func (u *UDPConn) ReadFromStamped(b []byte) (int, netip.AddrPort, int64, error) {
	if !u.ts {
		n, from, err := u.c.ReadFromUDPAddrPort(b)
		return n, unmap(from), 0, err
	}
	n, oobn, _, from, err := u.c.ReadMsgUDPAddrPort(b, u.oob)
	if err != nil {
		return n, from, 0, err
	}
	user := rawclock.Now()
	off, hw := rawclock.WallOffset()
	real, ok := parseTimestamping(u.oob[:oobn])
	var k int64
	if ok {
		k = real - off
		if k > user {
			k = 0 // a wall-clock step between stamp and sample: do not trust it
		}
	}
	u.mu.Lock()
	switch {
	case k != 0:
		u.rxStamps++
	case ok:
		u.rxImplausible++
	default:
		u.rxMissing++
	}
	u.maxHalfWidth = max(u.maxHalfWidth, hw)
	u.mu.Unlock()
	return n, unmap(from), k, nil
}

func unmap(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// WriteTo sends one datagram.
func (u *UDPConn) WriteTo(b []byte, to netip.AddrPort) error {
	_, err := u.WriteToStamped(b, to)
	return err
}

// WriteToStamped sends one datagram and returns the kernel's software
// transmit stamp on the CLOCK_MONOTONIC_RAW time base, read from the error
// queue (0 when timestamps are off or none came within TxStampWait).
func (u *UDPConn) WriteToStamped(b []byte, to netip.AddrPort) (int64, error) {
	if !u.ts {
		_, err := u.c.WriteToUDPAddrPort(b, to)
		return 0, err
	}
	u.wmu.Lock()
	defer u.wmu.Unlock()
	id := u.nextID
	if _, err := u.c.WriteToUDPAddrPort(b, to); err != nil {
		// A failed sendmsg takes no key from the kernel counter.
		return 0, err
	}
	u.nextID = id + 1
	deadline := time.Now().Add(u.wait)
	for {
		real, key, got, err := u.readErrQueue()
		if err != nil {
			return 0, nil // no stamp; the datagram itself was sent
		}
		// Sends are serialised and the queue drained after each, so a key
		// at or after ours is ours; adopting it resynchronises the counter
		// if a failed sendmsg consumed a key after all.
		if got && int32(key-id) >= 0 {
			u.nextID = key + 1
			user := rawclock.Now()
			off, hw := rawclock.WallOffset()
			k := real - off
			u.mu.Lock()
			if k > user {
				k = 0
				u.txImplaus++
			} else {
				u.txStamps++
			}
			u.maxHalfWidth = max(u.maxHalfWidth, hw)
			u.mu.Unlock()
			return k, nil
		}
		if got {
			continue // an older send's stamp that came late: drop it
		}
		left := time.Until(deadline)
		if left <= 0 {
			u.mu.Lock()
			u.txMissing++
			u.mu.Unlock()
			return 0, nil
		}
		u.pollErr(left)
	}
}

// pollErr waits up to d for the error queue to become readable (POLLERR).
func (u *UDPConn) pollErr(d time.Duration) {
	ms := int((d + time.Millisecond - 1) / time.Millisecond)
	_ = u.raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: 0}}
		_, _ = unix.Poll(fds, ms)
	})
}

// readErrQueue reads one message from the error queue without blocking:
// got is false when the queue is empty.
func (u *UDPConn) readErrQueue() (real int64, key uint32, got bool, err error) {
	var oobn int
	var rerr error
	cerr := u.raw.Control(func(fd uintptr) {
		_, oobn, _, _, rerr = unix.Recvmsg(int(fd), nil, u.errOOB, unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
	})
	if cerr != nil {
		return 0, 0, false, cerr
	}
	if rerr != nil {
		if errors.Is(rerr, unix.EAGAIN) {
			return 0, 0, false, nil
		}
		return 0, 0, false, rerr
	}
	real, key, got = parseErrQueue(u.errOOB[:oobn])
	return real, key, got, nil
}

// parseErrQueue finds a transmit stamp and its OPT_ID key in the control
// messages of an error-queue message: an SCM_TIMESTAMPING stamp and an
// IP_RECVERR (or IPV6_RECVERR) sock_extended_err of origin
// SO_EE_ORIGIN_TIMESTAMPING and type SCM_TSTAMP_SND.
func parseErrQueue(oob []byte) (real int64, key uint32, ok bool) {
	st, err := sockts.Parse(oob)
	if err != nil || st.Software == 0 || !st.HasTxKey {
		return 0, 0, false
	}
	return st.Software, st.TxKey, true
}

// parseTimestamping finds the software stamp in receive control messages
// (SCM_TIMESTAMPING: three timespecs, the first is software).
func parseTimestamping(oob []byte) (int64, bool) {
	st, err := sockts.Parse(oob)
	if err != nil || st.Software == 0 {
		return 0, false
	}
	return st.Software, true
}

// StampStats reports how many kernel stamps UDPConn converted or missed,
// and the widest wall/raw sandwich seen (the bound on the conversion
// error from the clock reads).
type StampStats struct {
	RxStamps, TxStamps uint64
	// RxMissing counts datagrams that came without a stamp. The kernel
	// turns receive stamping on for the whole system lazily (a deferred
	// static key), so the first datagrams after the first timestamping
	// socket opens may have none.
	RxMissing uint64
	TxMissing uint64 // sends whose stamp did not come within TxStampWait
	// Implausible stamps were later than the user-space stamp of the same
	// event after conversion (a wall-clock step in between) and were dropped.
	RxImplausible, TxImplausible uint64
	MaxHalfWidth                 int64 // ns
}

// StampStats returns the conversion counters.
func (u *UDPConn) StampStats() StampStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return StampStats{RxStamps: u.rxStamps, TxStamps: u.txStamps, RxMissing: u.rxMissing, TxMissing: u.txMissing,
		RxImplausible: u.rxImplausible, TxImplausible: u.txImplaus, MaxHalfWidth: u.maxHalfWidth}
}
