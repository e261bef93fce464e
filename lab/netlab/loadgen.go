package netlab

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The load generators the lab starts in its namespaces (`gclock lab
// loadgen bulk|flood`, LoadGenMain): bulk TCP flows between hosts through
// the switch (cross traffic) and a flood of small frames through a veth
// pair of their own (softirq load). Each paces itself against the clock
// and stops after its --for, on SIGTERM or when its context ends.

// bulkPort is the TCP port of the bulk flows' receivers in every host.
const bulkPort = 7790

// bulkChunk is one write of a bulk flow (the kernel's pacing, not the
// writes, shapes the flow).
const bulkChunk = 64 << 10

// bulkIPShare is the share of a full TCP segment's wire time its IP packet
// takes (1500 of 1538 byte times): TCP pacing counts IP bytes.
const bulkIPShare = 1500.0 / 1538.0

// paceTick is how often the generators catch up with their rate.
const paceTick = time.Millisecond

// maxDebt is how far behind its rate the flood may fall before it stops
// trying to catch up (after a stall, it does not send a burst longer than
// this much of its rate).
const maxDebt = 20 * time.Millisecond

// bulkConfig is one host's bulk flow: a receiver that discards what it
// gets, and a sender to the next host at a payload rate.
type bulkConfig struct {
	Listen  string        // receiver address, e.g. ":7790"; "" none
	To      string        // sender's destination, e.g. "10.77.0.2:7790"; "" none
	RateBps float64       // sender's rate on the wire (netmodel.WireBytes), bits/s
	For     time.Duration // how long the sender sends (the receiver runs as long)
}

// bulkResult is what a bulk flow did.
type bulkResult struct {
	Sent, Received int64 // payload bytes
	SentFor        time.Duration
}

// runBulk runs one host's bulk flow until cfg.For is over or ctx ends.
func runBulk(ctx context.Context, cfg bulkConfig) (bulkResult, error) {
	var res bulkResult
	if cfg.For <= 0 {
		return res, fmt.Errorf("bulk: --for %v: want a positive duration", cfg.For)
	}
	if cfg.To != "" && !(cfg.RateBps > 0) {
		return res, fmt.Errorf("bulk: rate %v bit/s: want a positive rate", cfg.RateBps)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.For)
	defer cancel()
	var received atomic.Int64
	var wg sync.WaitGroup
	if cfg.Listen != "" {
		ln, err := net.Listen("tcp4", cfg.Listen)
		if err != nil {
			return res, fmt.Errorf("bulk: listen %s: %w", cfg.Listen, err)
		}
		go func() { <-ctx.Done(); ln.Close() }()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					go func() { <-ctx.Done(); c.Close() }()
					buf := make([]byte, 256<<10)
					for {
						n, err := c.Read(buf)
						received.Add(int64(n))
						if err != nil {
							return
						}
					}
				}()
			}
		}()
	}
	var serr error
	if cfg.To != "" {
		res.Sent, res.SentFor, serr = sendBulk(ctx, cfg)
	}
	<-ctx.Done()
	wg.Wait()
	res.Received = received.Load()
	return res, serr
}

// sendBulk connects to cfg.To (retrying while its receiver starts) and
// writes as fast as the socket takes it until ctx ends; the kernel paces
// the flow (SO_MAX_PACING_RATE, TCP's internal pacing from a timer) at
// cfg.RateBps on the wire, so the flow keeps its rate while this process
// waits for a CPU, as long as its send buffer holds data.
func sendBulk(ctx context.Context, cfg bulkConfig) (int64, time.Duration, error) {
	var c net.Conn
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			pace := uint64(cfg.RateBps / 8 * bulkIPShare)
			if serr = unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, pace); serr != nil {
				serr = fmt.Errorf("SO_MAX_PACING_RATE %d B/s: %w", pace, serr)
				return
			}
			// About 100 ms of the flow (at least the default), so that a
			// sender kept from its CPU for that long does not starve it.
			if buf := int(cfg.RateBps / 8 / 10); buf > 1<<20 {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, buf)
			}
		})
		return errors.Join(err, serr)
	}}
	for {
		var err error
		c, err = d.DialContext(ctx, "tcp4", cfg.To)
		if err == nil {
			break
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOPROTOOPT) {
			return 0, 0, fmt.Errorf("bulk: %w", err)
		}
		select {
		case <-ctx.Done():
			return 0, 0, nil // never connected: the run ended first
		case <-time.After(100 * time.Millisecond):
		}
	}
	go func() { <-ctx.Done(); c.Close() }()
	buf := make([]byte, bulkChunk)
	start := time.Now()
	var written atomic.Int64
	go trimPacing(ctx, c, cfg.RateBps, &written)
	for ctx.Err() == nil {
		n, err := c.Write(buf)
		written.Add(int64(n))
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
				// The run ended, or its receiver did first.
				break
			}
			return written.Load(), time.Since(start), fmt.Errorf("bulk: send to %s: %w", cfg.To, err)
		}
	}
	return written.Load(), time.Since(start), nil
}

// maxTrim bounds the pacing rate trimPacing sets, as a multiple of the
// flow's rate: paced above the port's line rate, a flow would build an
// ever longer queue in the switch (its FIFO never drops), and at 1.25 a
// flow at 70% stays below 90% of the line.
const maxTrim = 1.25

// trimInterval is how often trimPacing compares a bulk flow's rate with its
// target.
const trimInterval = 250 * time.Millisecond

// trimPacing keeps a bulk flow at its rate: the kernel's pacing falls short
// of the rate it is given (by 10-15% at 600 Mbit/s on a loaded 2-core VM:
// timer and softirq latency), so every trimInterval it scales the pacing
// rate by the target over the rate reached in the last second, between the
// target and maxTrim times it.
func trimPacing(ctx context.Context, c net.Conn, rateBps float64, written *atomic.Int64) {
	sc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return
	}
	base := rateBps / 8 * bulkIPShare // B/s of IP packets
	pace := base
	type mark struct {
		at time.Time
		n  int64
	}
	var hist []mark
	t := time.NewTicker(trimInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			hist = append(hist, mark{now, written.Load()})
			if len(hist) > 5 {
				hist = hist[1:]
			}
			if len(hist) < 5 {
				continue
			}
			el := hist[4].at.Sub(hist[0].at).Seconds()
			got := float64(hist[4].n-hist[0].n) / el * 1500 / 1448 // B/s of IP packets (full segments)
			if !(got > 0) {
				continue
			}
			pace = min(maxTrim*base, max(base, pace*base/got))
			_ = sc.Control(func(fd uintptr) {
				_ = unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, uint64(pace))
			})
		}
	}
}

// floodConfig is a flood of small frames written to one end of a veth pair
// (an AF_PACKET socket), addressed to the other end, whose kernel receives
// each in softirq and drops it (a UDP datagram for a port nobody holds).
type floodConfig struct {
	Iface string        // the sending end
	Dst   string        // the receiving end (its MAC is the frames' destination)
	PPS   int           // frames per second
	For   time.Duration // how long
}

// floodFrame is the frame runFlood writes: Ethernet to dst, IPv4 from
// 10.78.0.1 to 10.78.0.2, UDP to the discard port, 18 bytes of payload (a
// 64-byte frame with its FCS).
func floodFrame(dst, src net.HardwareAddr) []byte {
	f := make([]byte, 60)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:14], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_UDP
	binary.BigEndian.PutUint16(ip[2:4], uint16(len(f)-14))
	copy(ip[12:16], []byte{10, 78, 0, 1})
	copy(ip[16:20], []byte{10, 78, 0, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i : i+2]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:12], ^uint16(sum))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:2], 9)
	binary.BigEndian.PutUint16(udp[2:4], 9)
	binary.BigEndian.PutUint16(udp[4:6], uint16(len(f)-34))
	return f
}

// runFlood writes cfg.PPS frames a second until cfg.For is over or ctx
// ends, and returns how many it wrote and for how long. A flood that falls
// behind (not scheduled) owes at most maxDebt of its rate.
func runFlood(ctx context.Context, cfg floodConfig) (int64, time.Duration, error) {
	if cfg.PPS <= 0 || cfg.PPS > 1e6 {
		return 0, 0, fmt.Errorf("flood: %d frames/s: want 1..1000000", cfg.PPS)
	}
	if cfg.For <= 0 {
		return 0, 0, fmt.Errorf("flood: --for %v: want a positive duration", cfg.For)
	}
	src, err := net.InterfaceByName(cfg.Iface)
	if err != nil {
		return 0, 0, fmt.Errorf("flood: %w", err)
	}
	dst, err := net.InterfaceByName(cfg.Dst)
	if err != nil {
		return 0, 0, fmt.Errorf("flood: %w", err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("flood: AF_PACKET socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: src.Index}); err != nil {
		return 0, 0, fmt.Errorf("flood: bind %s: %w", cfg.Iface, err)
	}
	frame := floodFrame(dst.HardwareAddr, src.HardwareAddr)
	ctx, cancel := context.WithTimeout(ctx, cfg.For)
	defer cancel()
	start := time.Now()
	var paced, written int64
	perNs := float64(cfg.PPS) / 1e9
	for ctx.Err() == nil {
		due := int64(float64(time.Since(start).Nanoseconds())*perNs) - paced
		if lim := int64(float64(maxDebt.Nanoseconds()) * perNs); due > lim {
			paced += due - lim
			due = lim
		}
		for ; due > 0; due-- {
			paced++
			if _, err := unix.Write(fd, frame); err != nil {
				if errors.Is(err, unix.ENOBUFS) {
					continue
				}
				return written, time.Since(start), fmt.Errorf("flood: write on %s: %w", cfg.Iface, err)
			}
			written++
		}
		time.Sleep(paceTick)
	}
	return written, time.Since(start), nil
}

// LoadGenMain is `gclock lab loadgen bulk|flood FLAGS`, the command the lab
// runs in its namespaces: it runs one generator and prints what it did on
// w.
func LoadGenMain(ctx context.Context, args []string, w io.Writer) error {
	if len(args) == 0 {
		return errors.New("loadgen: want bulk or flood")
	}
	fs := flag.NewFlagSet("gclock lab loadgen "+args[0], flag.ContinueOnError)
	fs.SetOutput(w)
	dur := fs.Duration("for", 0, "how long")
	switch args[0] {
	case "bulk":
		var c bulkConfig
		fs.StringVar(&c.Listen, "listen", "", "receive on this address (e.g. :7790)")
		fs.StringVar(&c.To, "to", "", "send to this address (e.g. 10.77.0.2:7790)")
		fs.Float64Var(&c.RateBps, "rate", 0, "rate on the wire, bits/s")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		c.For = *dur
		r, err := runBulk(ctx, c)
		fmt.Fprintf(w, "bulk: sent %d bytes in %v (%.1f Mbit/s) to %s; received %d bytes on %s\n", r.Sent, r.SentFor.Round(time.Millisecond),
			float64(r.Sent)*8/max(r.SentFor.Seconds(), 1e-9)/1e6, c.To, r.Received, c.Listen)
		return err
	case "flood":
		var c floodConfig
		fs.StringVar(&c.Iface, "iface", "", "send on this interface")
		fs.StringVar(&c.Dst, "dst", "", "to this interface's MAC")
		fs.IntVar(&c.PPS, "pps", 0, "frames per second")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		c.For = *dur
		n, el, err := runFlood(ctx, c)
		fmt.Fprintf(w, "flood: %d frames on %s in %v (%.0f/s)\n", n, c.Iface, el.Round(time.Millisecond), float64(n)/max(el.Seconds(), 1e-9))
		return err
	}
	return fmt.Errorf("loadgen %q: want bulk or flood", args[0])
}
