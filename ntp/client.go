package ntp

import (
	"context"
	"fmt"
	"net"
	"time"
)

// Result is one SNTP exchange as a client sees it (RFC 5905, 8): the
// server's offset from the client's CLOCK_REALTIME, the round trip, and
// the reply's header.
type Result struct {
	Offset time.Duration // ((T2-T1) + (T3-T4)) / 2: server minus client
	Delay  time.Duration // (T4-T1) - (T3-T2)
	Reply  Packet
}

// Query sends one version-4 client request to addr (host:port) and reads
// the answer, with CLOCK_REALTIME (time.Now) as the client's clock. It is
// the tests' client; stock clients (ntpdig, chronyd) are what users run.
func Query(ctx context.Context, addr string) (Result, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return Result{}, fmt.Errorf("ntp: query %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	} else {
		c.SetDeadline(time.Now().Add(5 * time.Second))
	}
	t1 := time.Now().UnixNano()
	req := Packet{Version: 4, Mode: ModeClient, Transmit: Timestamp(t1)}
	b, _ := req.MarshalBinary()
	if _, err := c.Write(b); err != nil {
		return Result{}, fmt.Errorf("ntp: query %s: %w", addr, err)
	}
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		t4 := time.Now().UnixNano()
		if err != nil {
			return Result{}, fmt.Errorf("ntp: query %s: %w", addr, err)
		}
		var p Packet
		if err := p.UnmarshalBinary(buf[:n]); err != nil {
			continue
		}
		if p.Mode != ModeServer || p.Origin != req.Transmit {
			continue // not the answer to this request
		}
		if p.Leap == LeapUnsync || p.Stratum == 0 || p.Stratum >= MaxStratum {
			return Result{Reply: p}, fmt.Errorf("ntp: query %s: server unsynchronised (leap %d, stratum %d)", addr, p.Leap, p.Stratum)
		}
		t2, t3 := UnixNs(p.Receive, t4), UnixNs(p.Transmit, t4)
		return Result{Offset: time.Duration(((t2 - t1) + (t3 - t4)) / 2), Delay: time.Duration((t4 - t1) - (t3 - t2)), Reply: p}, nil
	}
}
