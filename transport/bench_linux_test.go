//go:build linux

package transport

import (
	"context"
	"sync"
	"testing"

	"github.com/gclock/gclock/wire"
)

// BenchmarkPageRequest times one 8 KB page request/reply between two
// endpoints on loopback (no relay, no loss), with ACK omission and with an
// ACK per message (Mocha base), and reports the datagrams per request.
func BenchmarkPageRequest(b *testing.B) {
	for _, mode := range []struct {
		name     string
		ackEvery bool
	}{{"ack-omission", false}, {"ack-per-message", true}} {
		b.Run(mode.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			sc, err := ListenUDP("127.0.0.1:0", UDPOptions{})
			if err != nil {
				b.Fatal(err)
			}
			cc, err := ListenUDP("127.0.0.1:0", UDPOptions{})
			if err != nil {
				b.Fatal(err)
			}
			server, _ := New(Config{ID: 2, Conn: sc, Handler: &PageServer{PageSize: PageSize}, AckEvery: mode.ackEvery})
			client, _ := New(Config{ID: 1, Conn: cc, AckEvery: mode.ackEvery})
			var wg sync.WaitGroup
			wg.Go(func() { server.Run(ctx) })
			wg.Go(func() { client.Run(ctx) })
			b.ReportAllocs()
			b.SetBytes(PageSize)
			i := uint64(0)
			for b.Loop() {
				i++
				if _, _, err := client.Request(ctx, sc.LocalAddr(), &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: i}}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cs, ss := client.Stats(), server.Stats()
			b.ReportMetric(float64(cs.Sent+ss.Sent)/float64(i), "datagrams/op")
			cancel()
			wg.Wait()
		})
	}
}

// BenchmarkProbeRTT reports the loopback probe round trip (minus the
// responder's hold time) with user-space and with kernel stamps.
func BenchmarkProbeRTT(b *testing.B) {
	var r RTTResult
	for b.Loop() {
		var err error
		r, err = MeasureRTT(context.Background(), RTTConfig{Probes: 500})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(r.User.Min)/1e3, "user-min-us")
	b.ReportMetric(float64(r.User.P50)/1e3, "user-p50-us")
	b.ReportMetric(float64(r.User.P99)/1e3, "user-p99-us")
	b.ReportMetric(float64(r.Kernel.Min)/1e3, "kernel-min-us")
	b.ReportMetric(float64(r.Kernel.P50)/1e3, "kernel-p50-us")
	b.ReportMetric(float64(r.Kernel.P99)/1e3, "kernel-p99-us")
}
