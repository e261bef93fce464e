package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/bench/transportbench"
	"github.com/gclock/gclock/bench/workload"
	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/transport"
)

func init() {
	register("bench-transport", "measure the messaging layer: ACK omission vs an ACK per message, kernel timestamps", runBenchTransport)
}

const benchTransportUsage = `usage: gclock bench-transport [flags]

Runs the Mocha paper's page-transfer experiment on loopback: a page server
and a client on 127.0.0.1 (different ports) through a lossy relay, with ACK
omission (the reply is the ACK) and with an ACK per message, at each loss
rate; then compares round trips with user-space and kernel timestamps.

Between two hosts (the lab), run the server on one and the client on the
other; both sides must use the same -ack-every:

  gclock bench-transport -serve 10.0.0.2:7000
  gclock bench-transport -peer 10.0.0.2:7000 -listen 10.0.0.1:0

flags:
`

func runBenchTransport(args []string) error {
	return benchTransport(args, os.Stdout, os.Stderr)
}

// benchTransport runs the subcommand with its output on stdout and its
// usage and logs on stderr.
func benchTransport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-transport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchTransportUsage); fs.PrintDefaults() }
	var (
		requests    = fs.Int("requests", 2000, "page requests per configuration")
		concurrency = fs.Int("concurrency", 1, "requests in flight (1: one at a time, as in the paper)")
		pageSize    = fs.Int("page", transport.PageSize, "page size in bytes")
		losses      = fs.String("loss", "0,1,3,5", "comma-separated loss rates in percent, per datagram and direction")
		seed        = fs.Uint64("seed", 1, "seed of the relay's drops")
		warmup      = fs.Int("warmup", 50, "unmeasured requests first, so the timeout is learned before timing")
		dup         = fs.Float64("dup", 0, "duplication rate in percent, per datagram and direction")
		initialRTO  = fs.Duration("initial-rto", 50*time.Millisecond, "timeout before the round trip is measured")
		minRTO      = fs.Duration("min-rto", 2*time.Millisecond, "floor of the measured timeout")
		maxRTO      = fs.Duration("max-rto", time.Second, "ceiling of the timeout")
		probes      = fs.Int("rtt-probes", 2000, "probe exchanges for the user vs kernel timestamp comparison (0 skips it)")
		interval    = fs.Duration("rtt-interval", 200*time.Microsecond, "pause between probes")
		jsonOut     = fs.Bool("json", false, "print JSON instead of tables")
		serve       = fs.String("serve", "", "only run a page server on this address until interrupted")
		peer        = fs.String("peer", "", "only run the client against the page server at this address")
		listen      = fs.String("listen", "0.0.0.0:0", "client address with -peer")
		ackEvery    = fs.Bool("ack-every", false, "with -serve/-peer: an ACK per message instead of ACK omission")
		verbose     = fs.Bool("v", false, "debug logs on stderr")
		repeat      = fs.Int("repeat", 3, "runs per configuration; the run of median elapsed time is reported")
	)
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if *dup < 0 || *dup >= 100 {
		return fmt.Errorf("-dup %v is not a percentage in [0, 100)", *dup)
	}
	if *warmup < 0 {
		return fmt.Errorf("-warmup %d must be >= 0", *warmup)
	}
	if *repeat < 1 {
		return fmt.Errorf("-repeat %d must be >= 1", *repeat)
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	epCfg := transport.Config{InitialRTO: *initialRTO, MinRTO: *minRTO, MaxRTO: *maxRTO, Logger: log}
	client := workload.PageClientConfig{Requests: *requests, Concurrency: *concurrency, PageSize: *pageSize}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	switch {
	case *serve != "" && *peer != "":
		return errors.New("-serve and -peer exclude each other")
	case *serve != "":
		return transportbench.Serve(ctx, *serve, *pageSize, *ackEvery, epCfg, stderr)
	case *peer != "":
		return benchPeer(ctx, *peer, *listen, client, *ackEvery, epCfg, *jsonOut, stdout)
	}

	rates, err := transportbench.ParseLosses(*losses)
	if err != nil {
		return err
	}
	rep := transportbench.Report{
		Command: "gclock bench-transport " + strings.Join(args, " "),
		Config: map[string]any{"requests": *requests, "concurrency": *concurrency, "page_bytes": *pageSize,
			"repeat": *repeat, "warmup": *warmup, "dup_pct": *dup, "initial_rto": initialRTO.String(), "min_rto": minRTO.String(), "max_rto": maxRTO.String(), "seed": *seed},
	}
	rep.Rows, err = transportbench.Loopback(ctx, transportbench.LoopbackConfig{
		Client: client, Losses: rates, Dup: *dup, Seed: *seed, Warmup: *warmup, Repeat: *repeat, Endpoint: epCfg,
	})
	if err != nil {
		return err
	}
	if *probes > 0 {
		r, err := workload.MeasureRTT(ctx, workload.RTTConfig{Probes: *probes, Interval: *interval})
		if err != nil {
			return fmt.Errorf("round trips: %w", err)
		}
		rep.RTT = &r
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	transportbench.WriteLoopback(stdout, rep)
	return nil
}

// benchPeer runs the client side against a remote page server.
func benchPeer(ctx context.Context, peer, listen string, client workload.PageClientConfig, ackEvery bool, cfg transport.Config, jsonOut bool, w io.Writer) error {
	server, err := netip.ParseAddrPort(peer)
	if err != nil {
		return fmt.Errorf("-peer %q: %w", peer, err)
	}
	res, st, err := transportbench.Peer(ctx, server, listen, client, ackEvery, cfg)
	if err != nil {
		return err
	}
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(transportbench.Report{Command: "gclock bench-transport -peer " + peer, Remote: &res, Stats: &st})
	}
	fmt.Fprintf(w, "%d requests to %v (ack-every %v): %d failed, %.0f req/s, p50 %.1f us, p99 %.1f us, client sent %d datagrams (%d retransmissions, %d acks)\n",
		res.Requests, server, ackEvery, res.Failed, res.ReqPerSec, float64(res.P50)/1e3, float64(res.P99)/1e3, st.Sent, st.Retransmits, st.SentAcks)
	return nil
}

const labBenchTransportUsage = `usage: gclock lab bench-transport [flags]

The Mocha paper's page-transfer experiment between two lab hosts: the page
server in host 1's namespace, the client in host 0's, every datagram through
the lab's switch, which drops each Ethernet frame with the -loss probability
in each direction (an 8 KB page is 6 IP fragments: one lost fragment loses
the reply). One lab per loss rate; in each, first an ACK per message, then
ACK omission, the same requests. Needs root; removes any running lab.

flags:
`

// runLabBenchTransport is `gclock lab bench-transport`.
func runLabBenchTransport(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gclock lab bench-transport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labBenchTransportUsage); fs.PrintDefaults() }
	var (
		requests    = fs.Int("requests", 2000, "page requests per configuration")
		concurrency = fs.Int("concurrency", 1, "requests in flight (1: one at a time, as in the paper)")
		pageSize    = fs.Int("page", transport.PageSize, "page size in bytes")
		losses      = fs.String("loss", "0,1,3,5", "comma-separated loss rates in percent, per frame and direction")
		delay       = fs.Duration("delay", 50*time.Microsecond, "one-way link delay")
		seed        = fs.Uint64("seed", 1, "seed of the switch's drops")
		warmup      = fs.Int("warmup", 50, "unmeasured requests first, so the timeout is learned before timing")
		initialRTO  = fs.Duration("initial-rto", 50*time.Millisecond, "timeout before the round trip is measured")
		minRTO      = fs.Duration("min-rto", 2*time.Millisecond, "floor of the measured timeout")
		maxRTO      = fs.Duration("max-rto", time.Second, "ceiling of the timeout")
		fragTime    = fs.Duration("frag-time", time.Second, "net.ipv4.ipfrag_time in the hosts (whole seconds; 0 keeps the kernel's 30s, whose reassembly memory fills at a few percent loss)")
		jsonOut     = fs.Bool("json", false, "print JSON instead of a table")
		verbose     = fs.Bool("v", false, "debug logs on stderr")
	)
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	if *fragTime < 0 || *fragTime > time.Hour {
		return fmt.Errorf("-frag-time %v: want 0..1h", *fragTime)
	}
	rates, err := transportbench.ParseLosses(*losses)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ep := transport.DefaultConfig()
	ep.InitialRTO, ep.MinRTO, ep.MaxRTO = *initialRTO, *minRTO, *maxRTO
	if ep.RecentTTL < time.Duration(ep.MaxAttempts)*ep.MaxRTO {
		ep.RecentTTL = time.Duration(ep.MaxAttempts) * ep.MaxRTO
	}
	for i := range rates {
		rates[i] /= 100
	}
	cfg := transportbench.LabConfig{
		Losses: rates, Delay: *delay, Warmup: *warmup, Endpoint: ep, Seed: *seed, Logger: log, FragTime: *fragTime,
		Client: workload.PageClientConfig{Requests: *requests, Concurrency: *concurrency, PageSize: *pageSize},
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := transportbench.Lab(ctx, cfg)
	if err != nil {
		return err
	}
	rep := struct {
		Command string               `json:"command"`
		Config  map[string]any       `json:"config"`
		Rows    []transportbench.Row `json:"pages"`
	}{
		Command: "gclock lab bench-transport " + strings.Join(args, " "),
		Config: map[string]any{"requests": *requests, "concurrency": *concurrency, "page_bytes": *pageSize, "delay": delay.String(),
			"warmup": *warmup, "initial_rto": initialRTO.String(), "min_rto": minRTO.String(), "max_rto": maxRTO.String(), "seed": *seed, "frag_time": fragTime.String()},
		Rows: rows,
	}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	transportbench.WriteLab(stdout, rows, cfg.Client, *delay)
	return nil
}
