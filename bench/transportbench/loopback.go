package transportbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"

	"github.com/gclock/gclock/bench/workload"
	"github.com/gclock/gclock/transport"
)

// LoopbackConfig is the experiment on loopback (gclock bench-transport).
type LoopbackConfig struct {
	Client   workload.PageClientConfig
	Losses   []float64 // relay loss rates per datagram and direction, in percent
	Dup      float64   // relay duplication per datagram and direction, in percent
	Seed     uint64    // the relay's drops; run r of a pair uses Seed + r
	Warmup   int       // unmeasured requests first, so the timeout is learned
	Repeat   int       // runs per mode and loss rate (>= 1)
	Endpoint transport.Config
}

// Loopback runs, per loss rate, Repeat pairs of runs (an ACK per message
// and ACK omission, alternating which goes first) and returns two rows per
// loss rate, ack per message then ack omission, each the run of median
// elapsed time: on a shared machine one scheduling stall can dominate a
// single run.
func Loopback(ctx context.Context, cfg LoopbackConfig) ([]Row, error) {
	if cfg.Repeat < 1 {
		return nil, fmt.Errorf("transportbench: repeat %d must be >= 1", cfg.Repeat)
	}
	var rows []Row
	for _, l := range cfg.Losses {
		var runs [2][]Row // [0] ack per message, [1] omission
		for r := range cfg.Repeat {
			order := []bool{true, false}
			if r%2 == 1 {
				order = []bool{false, true}
			}
			for _, every := range order {
				res, err := workload.RunLoopbackPages(ctx, workload.LoopbackPageConfig{
					Client: cfg.Client, AckEvery: every, Loss: l / 100, Dup: cfg.Dup / 100, Seed: cfg.Seed + uint64(r), Endpoint: cfg.Endpoint, Warmup: cfg.Warmup,
				})
				if err != nil {
					return rows, fmt.Errorf("pages at %.0f%% loss: %w", l, err)
				}
				row := Row{
					LossPct: l, Messages: res.Messages, MessagesPerReq: res.MessagesPerReq, Acks: res.Acks,
					Retransmits: res.Retransmits, RelayDropped: res.Relay.Dropped,
				}
				row.fill(every, res.PageResult)
				i := 1
				if every {
					i = 0
				}
				runs[i] = append(runs[i], row)
			}
		}
		base, omit := medianRow(runs[0]), medianRow(runs[1])
		speedup(base, &omit)
		rows = append(rows, base, omit)
	}
	return rows, nil
}

// Serve runs a page server of pageSize-byte pages on addr until ctx ends
// (cfg: the endpoint's timeouts and logger; its ID, Conn, Handler and
// AckEvery are set here). It says where it serves on info.
func Serve(ctx context.Context, addr string, pageSize int, ackEvery bool, cfg transport.Config, info io.Writer) error {
	conn, err := transport.ListenUDP(addr, transport.UDPOptions{})
	if err != nil {
		return err
	}
	cfg.ID, cfg.Conn, cfg.Handler, cfg.AckEvery = 2, conn, &transport.PageServer{PageSize: pageSize}, ackEvery
	ep, err := transport.New(cfg)
	if err != nil {
		conn.Close()
		return err
	}
	fmt.Fprintf(info, "gclock bench-transport: serving %d-byte pages on %v (ack-every %v); interrupt to stop\n", pageSize, conn.LocalAddr(), ackEvery)
	err = ep.Run(ctx)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log.Info("page server stopped", "stats", ep.Stats())
	return err
}

// Peer runs the client side from listen against the page server at
// server, and returns its result and its endpoint's counters.
func Peer(ctx context.Context, server netip.AddrPort, listen string, client workload.PageClientConfig, ackEvery bool, cfg transport.Config) (workload.PageResult, transport.Stats, error) {
	conn, err := transport.ListenUDP(listen, transport.UDPOptions{})
	if err != nil {
		return workload.PageResult{}, transport.Stats{}, err
	}
	cfg.ID, cfg.Conn, cfg.AckEvery = 1, conn, ackEvery
	ep, err := transport.New(cfg)
	if err != nil {
		conn.Close()
		return workload.PageResult{}, transport.Stats{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ep.Run(ctx) }()
	res, err := workload.RunPageClient(ctx, ep, server, client)
	st := ep.Stats()
	cancel()
	<-done
	return res, st, err
}
