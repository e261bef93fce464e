//go:build linux

package workload

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gclock/gclock/transport"
)

// LoopbackPageConfig is one run of the paper's experiment on loopback: a
// page server and a client on 127.0.0.1, different ports, through a lossy
// Relay.
type LoopbackPageConfig struct {
	Client   PageClientConfig
	AckEvery bool    // Mocha base (an ACK per message) instead of ACK omission
	Loss     float64 // relay loss per datagram and direction
	Dup      float64 // relay duplication per datagram and direction
	Seed     uint64
	// Warmup requests run before the measured ones and are not counted, so
	// that the timeout has been measured (otherwise one loss before the
	// first round trip costs the whole InitialRTO, 50 ms, and dominates a
	// short run).
	Warmup int
	// Endpoint holds the timeout settings for both endpoints (ID, Conn,
	// Handler and AckEvery are set by the run); zero fields take the
	// defaults.
	Endpoint transport.Config
}

// LoopbackPageResult adds the message counts of both endpoints.
type LoopbackPageResult struct {
	PageResult
	Messages       uint64 // datagrams sent by both endpoints, ACKs and retransmissions included
	MessagesPerReq float64
	Acks           uint64
	Retransmits    uint64 // both endpoints
	Relay          RelayStats
}

// RunLoopbackPages runs one configuration of the experiment.
func RunLoopbackPages(ctx context.Context, cfg LoopbackPageConfig) (LoopbackPageResult, error) {
	var res LoopbackPageResult
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opt := transport.UDPOptions{ReadBuffer: 4 << 20, WriteBuffer: 4 << 20}
	// Until the goroutines below run (and close them as ctx ends), an
	// error closes what was opened.
	var opened []io.Closer
	fail := func(err error) (LoopbackPageResult, error) {
		for _, c := range opened {
			c.Close()
		}
		return res, err
	}
	sconn, err := transport.ListenUDP("127.0.0.1:0", opt)
	if err != nil {
		return fail(err)
	}
	opened = append(opened, sconn)
	cconn, err := transport.ListenUDP("127.0.0.1:0", opt)
	if err != nil {
		return fail(err)
	}
	opened = append(opened, cconn)
	relay, err := NewRelay(RelayConfig{Listen: "127.0.0.1:0", Target: sconn.LocalAddr(), Loss: cfg.Loss, Dup: cfg.Dup, Seed: cfg.Seed})
	if err != nil {
		return fail(err)
	}
	opened = append(opened, relay.front, relay.back)
	srv := &transport.PageServer{PageSize: cfg.Client.PageSize}
	mk := func(id uint32, c transport.PacketConn, h transport.Handler) (*transport.Endpoint, error) {
		ec := cfg.Endpoint
		ec.ID, ec.Conn, ec.Handler, ec.AckEvery = id, c, h, cfg.AckEvery
		return transport.New(ec)
	}
	server, err := mk(2, sconn, srv)
	if err != nil {
		return fail(err)
	}
	client, err := mk(1, cconn, nil)
	if err != nil {
		return fail(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = server.Run(ctx) })
	wg.Go(func() { _ = client.Run(ctx) })
	wg.Go(func() { _ = relay.Run(ctx) })
	var c0, s0 transport.Stats
	var r0 RelayStats
	if cfg.Warmup > 0 {
		warm := cfg.Client
		warm.Requests = cfg.Warmup
		if _, err := RunPageClient(ctx, client, relay.Addr(), warm); err != nil {
			cancel()
			wg.Wait()
			return res, fmt.Errorf("workload: loopback pages: warm-up: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
		c0, s0, r0 = client.Stats(), server.Stats(), relay.Stats()
	}
	pr, err := RunPageClient(ctx, client, relay.Addr(), cfg.Client)
	// Let the last ACKs land before counting.
	time.Sleep(20 * time.Millisecond)
	cs, ss, rs := client.Stats(), server.Stats(), relay.Stats()
	cancel()
	wg.Wait()
	res.PageResult = pr
	res.Messages = cs.Sent + ss.Sent - c0.Sent - s0.Sent
	res.Acks = cs.SentAcks + ss.SentAcks - c0.SentAcks - s0.SentAcks
	res.Retransmits = cs.Retransmits + ss.Retransmits - c0.Retransmits - s0.Retransmits
	res.Relay = RelayStats{Forwarded: rs.Forwarded - r0.Forwarded, Dropped: rs.Dropped - r0.Dropped, Duplicated: rs.Duplicated - r0.Duplicated}
	if n := cfg.Client.Requests; n > 0 {
		res.MessagesPerReq = float64(res.Messages) / float64(n)
	}
	return res, err
}
