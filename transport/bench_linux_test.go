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
