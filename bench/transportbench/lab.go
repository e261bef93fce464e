package transportbench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strconv"
	"time"

	"github.com/gclock/gclock/bench/workload"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/netmodel"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
)

// LabConfig configures Lab: the experiment between two lab hosts.
type LabConfig struct {
	Losses   []float64     // per-frame loss probabilities, each direction; one lab per value
	Delay    time.Duration // one-way link delay (no jitter)
	Client   workload.PageClientConfig
	Warmup   int // unmeasured requests first, so the timeout is learned
	Endpoint transport.Config
	Seed     uint64
	Logger   *slog.Logger
	// FragTime, when > 0, sets net.ipv4.ipfrag_time (whole seconds, at
	// least 1) in both hosts: how long the kernel keeps an incomplete IP
	// datagram. An 8 KB page is 6 fragments; with the kernel's 30 s every
	// reply that lost a fragment holds reassembly memory for 30 s, and at
	// a few percent loss ipfrag_high_thresh (4 MB) fills within a second
	// or two, after which the kernel drops every fragment: both modes then
	// crawl at tens of requests per second, whatever the protocol does.
	FragTime time.Duration
	// Concurrent runs the labs as netlab.Config.Concurrent: beside other
	// concurrent labs (tests), sharing the machine. A measurement leaves it
	// false and has the machine to itself.
	Concurrent bool
}

// Lab runs the page workload between host 0 (client) and host 1 (server)
// of a 2-host lab per loss rate, first with an ACK per message, then with
// ACK omission, and returns two rows per loss rate. It brings labs up and
// down itself (waiting for other labs as netlab.Up does); root.
func Lab(ctx context.Context, cfg LabConfig) ([]Row, error) {
	if len(cfg.Losses) == 0 {
		return nil, errors.New("transportbench: lab: no loss rates")
	}
	if cfg.Warmup < 0 {
		return nil, fmt.Errorf("transportbench: lab: warmup %d must be >= 0", cfg.Warmup)
	}
	var rows []Row
	for i, loss := range cfg.Losses {
		m := netmodel.Model{Delay: cfg.Delay, Loss: loss}
		lcfg := netlab.Config{Hosts: 2, Link: netmodel.Link{Forward: m, Reverse: m}, Seed: cfg.Seed + uint64(i), BusyPoll: netlab.DefaultBusyPoll, Logger: cfg.Logger, Concurrent: cfg.Concurrent}
		l, err := lab.Up(ctx, lcfg)
		if err != nil {
			return rows, fmt.Errorf("transportbench: lab at loss %g: %w", loss, err)
		}
		if cfg.FragTime > 0 {
			if err := setFragTime(ctx, l, cfg.FragTime); err != nil {
				l.Down()
				return rows, err
			}
		}
		var pair [2]Row
		for j, every := range []bool{true, false} {
			r, err := labPages(ctx, l, cfg, every)
			if err != nil {
				l.Down()
				return rows, fmt.Errorf("transportbench: lab at loss %g (ack per message %v): %w", loss, every, err)
			}
			r.LossPct = 100 * loss
			pair[j] = r
		}
		if err := l.Down(); err != nil {
			return rows, err
		}
		speedup(pair[0], &pair[1])
		rows = append(rows, pair[0], pair[1])
	}
	return rows, nil
}

func labPages(ctx context.Context, l *lab.Lab, cfg LabConfig, ackEvery bool) (Row, error) {
	var row Row
	ecfg := cfg.Endpoint
	ecfg.AckEvery = ackEvery
	ecfg.Logger = cfg.Logger
	p, err := l.StartEndpoints(ctx, ecfg, &transport.PageServer{PageSize: cfg.Client.PageSize})
	if err != nil {
		return row, err
	}
	defer p.Close()
	for i := range cfg.Warmup {
		// Warm-up requests may fail under loss; only the timing matters.
		p.Client.Request(ctx, p.ServerAddr, &wire.Packet{Op: wire.OpGetPage, Page: wire.Page{Addr: uint64(1<<40 + i)}})
	}
	c0, s0 := p.Client.Stats(), p.Server.Stats()
	sw := l.Switch()
	sw.ResetStats()
	res, err := workload.RunPageClient(ctx, p.Client, p.ServerAddr, cfg.Client)
	if err != nil {
		return row, err
	}
	c1, s1 := p.Client.Stats(), p.Server.Stats()
	for _, d := range sw.Stats() {
		row.Frames += d.Frames
		row.Dropped += d.Dropped
	}
	row.fill(ackEvery, res)
	row.Messages = c1.Sent - c0.Sent + s1.Sent - s0.Sent
	row.Acks = c1.SentAcks - c0.SentAcks + s1.SentAcks - s0.SentAcks
	row.Retransmits = c1.Retransmits - c0.Retransmits + s1.Retransmits - s0.Retransmits
	if n := res.Requests + res.Failed; n > 0 {
		row.MessagesPerReq = float64(row.Messages) / float64(n)
	}
	return row, nil
}

// setFragTime sets net.ipv4.ipfrag_time in both hosts of the lab.
func setFragTime(ctx context.Context, l *lab.Lab, d time.Duration) error {
	secs := max(int64(d/time.Second), 1)
	for h := range 2 {
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", l.HostNS(h), "sysctl", "-qw", "net.ipv4.ipfrag_time="+strconv.FormatInt(secs, 10)).CombinedOutput()
		if err != nil {
			return fmt.Errorf("transportbench: ipfrag_time in %s: %w (%s)", l.HostNS(h), err, out)
		}
	}
	return nil
}
