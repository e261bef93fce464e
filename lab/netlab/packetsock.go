package netlab

import (
	"fmt"
	"net"
	"time"
	"unsafe"

	"github.com/gclock/gclock/internal/sockts"
	"golang.org/x/sys/unix"
)

// The switch's AF_PACKET sockets and the raw system calls its thread
// makes on them, which keep the thread's P.

// vnetHdrLen is the size of struct virtio_net_hdr, which PACKET_VNET_HDR
// puts before every frame. Passing it through unchanged keeps the checksum
// offload state of a frame (veths leave UDP checksums to be filled in
// later), so the receiving host accepts frames the switch forwarded.
const vnetHdrLen = 10

// maxFrame is the receive buffer: a 64 KiB GSO frame plus the vnet header.
const maxFrame = 65536 + vnetHdrLen

type swPort struct {
	name    string
	fd      int
	ifindex int
}

// openPorts opens the switch's port sockets (and the warm-up port's) in
// its namespace.
func (s *Switch) openPorts() error {
	open := func() error {
		for _, name := range s.cfg.Ports {
			p, err := openPort(name)
			if err != nil {
				return err
			}
			s.ports = append(s.ports, p)
		}
		if s.cfg.WarmPort != "" {
			fd, err := openSendOnly(s.cfg.WarmPort)
			if err != nil {
				return err
			}
			s.warmFD = fd
		}
		return nil
	}
	if s.cfg.Namespace == "" {
		return open()
	}
	return inNetns(s.cfg.Namespace, open)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openPort(name string) (swPort, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return swPort{}, fmt.Errorf("port %s: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return swPort{}, fmt.Errorf("port %s: AF_PACKET socket: %w", name, err)
	}
	fail := func(what string, err error) (swPort, error) {
		unix.Close(fd)
		return swPort{}, fmt.Errorf("port %s: %s: %w", name, what, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return fail("PACKET_VNET_HDR", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return fail("PACKET_IGNORE_OUTGOING", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		return fail("SO_TIMESTAMPNS", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20); err != nil {
		return fail("SO_RCVBUF", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		return fail("bind", err)
	}
	// Promiscuous: frames for the hosts' MACs are not addressed to the port.
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		return fail("promiscuous", err)
	}
	return swPort{name: name, fd: fd, ifindex: ifi.Index}, nil
}

func (s *Switch) closePorts() {
	for _, p := range s.ports {
		unix.Close(p.fd)
	}
	if s.warmFD >= 0 {
		unix.Close(s.warmFD)
		s.warmFD = -1
	}
}

// openSendOnly opens an AF_PACKET socket that sends on an interface and
// receives nothing (protocol 0).
func openSendOnly(name string) (int, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return -1, fmt.Errorf("warm-up port %s: %w", name, err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("warm-up port %s: AF_PACKET socket: %w", name, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("warm-up port %s: PACKET_VNET_HDR: %w", name, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("warm-up port %s: bind: %w", name, err)
	}
	return fd, nil
}

// rxTimestamp returns the SCM_TIMESTAMPNS time in a control message, or 0
// (also for malformed control data). It does not allocate.
func rxTimestamp(oob []byte) int64 {
	st, err := sockts.Parse(oob)
	if err != nil {
		return 0
	}
	return st.NS
}

// nowWall reads the wall clock (CLOCK_REALTIME), the clock of kernel
// packet timestamps, through the vDSO (time.Now's wall clock):
// unix.ClockGettime is a real system call that goes through the Go
// scheduler's syscall path, and the switch thread must never wait there for
// a P.
func nowWall() int64 {
	return time.Now().UnixNano()
}

// recvmsg is a non-blocking recvmsg(2) that does not allocate.
func recvmsg(fd int, buf, oob []byte) (n, oobn int, flags int, err error) {
	var iov unix.Iovec
	iov.Base = &buf[0]
	iov.SetLen(len(buf))
	var msg unix.Msghdr
	msg.Iov = &iov
	msg.Iovlen = 1
	msg.Control = &oob[0]
	msg.SetControllen(len(oob))
	r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), unix.MSG_DONTWAIT)
	if e != 0 {
		return 0, 0, 0, e
	}
	return int(r), int(msg.Controllen), int(msg.Flags), nil
}

// rawWrite is write(2) as a raw system call (an AF_PACKET send does not
// block): the thread keeps its P.
func rawWrite(fd int, b []byte) error {
	_, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return e
	}
	return nil
}

// rawPpoll is ppoll(2) made as a raw system call: the thread keeps its P.
func rawPpoll(fds []unix.PollFd, timeoutNs int64) {
	ts := unix.NsecToTimespec(timeoutNs)
	unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
}
