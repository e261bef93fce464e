//go:build linux

package ntp_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/ntp"
	"github.com/gclock/gclock/transport"
)

// realtimeSource serves this machine's CLOCK_REALTIME plus a fixed offset,
// read at the raw instants the responder asks for.
type realtimeSource struct {
	offset int64 // added to CLOCK_REALTIME
	maxErr int64
	synced atomic.Bool
	asked  atomic.Int64 // the last raw instant asked for
}

func (s *realtimeSource) At(raw int64) ntp.Reading {
	s.asked.Store(raw)
	off, _ := rawclock.WallOffset()
	return ntp.Reading{Time: raw + off + s.offset, MaxErr: s.maxErr, OK: true}
}

func (s *realtimeSource) Self() ntp.Server {
	return ntp.Server{Synced: s.synced.Load(), Stratum: 1, RefID: ntp.RefIDString("GCLK"), Precision: -20}
}

// TestResponderLoopback runs a responder on a kernel-stamped loopback
// socket and queries it: the offset the client computes is the source's
// offset within the exchange's own uncertainty (half the round trip), the
// root dispersion carries the source's error, a request that is not a
// client's is dropped, and an unsynchronised source says so.
func TestResponderLoopback(t *testing.T) {
	for _, stamps := range []bool{true, false} {
		conn, err := transport.ListenUDP("127.0.0.1:0", transport.UDPOptions{Timestamps: stamps})
		if err != nil {
			t.Fatal(err)
		}
		src := &realtimeSource{offset: 3_000_000, maxErr: 250_000}
		src.synced.Store(true)
		r := ntp.NewResponder(conn, src, gtime.RawNow, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Serve(ctx) }()
		addr := conn.LocalAddr().String()

		var best ntp.Result
		for i := range 20 {
			res, err := ntp.Query(context.Background(), addr)
			if err != nil {
				t.Fatalf("stamps %v: query %d: %v", stamps, i, err)
			}
			if i == 0 || res.Delay < best.Delay {
				best = res
			}
			// The true offset is exactly 3 ms; the client's error is at
			// most half the round trip (plus the clock reads' ns).
			if e := res.Offset - 3*time.Millisecond; e.Abs() > res.Delay/2+time.Microsecond {
				t.Errorf("stamps %v: offset %v, want 3ms within half the delay %v", stamps, res.Offset, res.Delay)
			}
			if res.Delay < 0 {
				t.Errorf("stamps %v: negative delay %v", stamps, res.Delay)
			}
			p := res.Reply
			if d := ntp.ShortNs(p.RootDispersion); d < 250_000 || d > 250_000+40_000 {
				t.Errorf("root dispersion %d ns, want the source's 250 us (rounded up)", d)
			}
			if p.Stratum != 1 || p.RefID != ntp.RefIDString("GCLK") || p.Leap != ntp.LeapNone || p.Precision != -20 {
				t.Errorf("reply header %+v", p)
			}
		}
		t.Logf("kernel stamps %v: best of 20: offset %v (true 3ms), delay %v", stamps, best.Offset, best.Delay)

		// A server-mode packet is not answered.
		c, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		bad := ntp.Packet{Version: 4, Mode: ntp.ModeServer}
		b, _ := bad.MarshalBinary()
		c.Write(b)
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := c.Read(make([]byte, 100)); err == nil {
			t.Errorf("a mode-4 packet was answered (%d bytes)", n)
		}
		c.Close()

		src.synced.Store(false)
		if _, err := ntp.Query(context.Background(), addr); err == nil {
			t.Error("query of an unsynchronised server: no error")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		st := r.Stats()
		if st.Received != 22 || st.Answered != 21 || st.Refused != 1 || st.Unsynced != 1 {
			t.Errorf("stats %+v, want 22 received, 21 answered, 1 refused, 1 unsynced", st)
		}
		if stamps && st.KernelStamps != st.Received {
			t.Errorf("kernel stamps on %d of %d requests", st.KernelStamps, st.Received)
		}
		if !stamps && st.KernelStamps != 0 {
			t.Errorf("kernel stamps %d with stamps off", st.KernelStamps)
		}
	}
}
