package main

import (
	"cmp"
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gclock/gclock/lab"
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

// benchTransportRow is one line of the report (and of -json).
type benchTransportRow struct {
	Mode           string  `json:"mode"` // "ack-omission" or "ack-per-message"
	LossPct        float64 `json:"loss_pct"`
	Requests       int     `json:"requests"`
	Failed         int     `json:"failed"`
	Messages       uint64  `json:"messages"`
	MessagesPerReq float64 `json:"messages_per_request"`
	Acks           uint64  `json:"acks"`
	Retransmits    uint64  `json:"retransmits"`
	RelayDropped   uint64  `json:"relay_dropped"`
	ElapsedS       float64 `json:"elapsed_seconds"`
	ReqPerSec      float64 `json:"requests_per_second"`
	P50us          float64 `json:"latency_p50_us"`
	P99us          float64 `json:"latency_p99_us"`
	MaxUs          float64 `json:"latency_max_us"`
	// SpeedupPct: on the ack-omission row, how much faster the same work ran
	// than with an ACK per message at the same loss (elapsed_base/elapsed - 1).
	SpeedupPct float64 `json:"speedup_pct,omitempty"`
	Runs       int     `json:"runs"` // repetitions; this row is the one of median elapsed time
}

type benchTransportReport struct {
	Command string                `json:"command"`
	Config  map[string]any        `json:"config,omitempty"`
	Rows    []benchTransportRow   `json:"pages,omitempty"`
	RTT     *transport.RTTResult  `json:"rtt,omitempty"`
	Remote  *transport.PageResult `json:"remote,omitempty"` // -peer mode
	Stats   *transport.Stats      `json:"stats,omitempty"`  // -peer mode: the client's counters
}

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
	if err := fs.Parse(args); err != nil {
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
	client := transport.PageClientConfig{Requests: *requests, Concurrency: *concurrency, PageSize: *pageSize}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	switch {
	case *serve != "" && *peer != "":
		return errors.New("-serve and -peer exclude each other")
	case *serve != "":
		return benchServe(ctx, *serve, *pageSize, *ackEvery, epCfg, log, stderr)
	case *peer != "":
		return benchPeer(ctx, *peer, *listen, client, *ackEvery, epCfg, *jsonOut, stdout)
	}

	var rates []float64
	for _, f := range strings.Split(*losses, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || v >= 100 {
			return fmt.Errorf("-loss: %q is not a percentage in [0, 100)", f)
		}
		rates = append(rates, v)
	}
	rep := benchTransportReport{
		Command: "gclock bench-transport " + strings.Join(args, " "),
		Config: map[string]any{"requests": *requests, "concurrency": *concurrency, "page_bytes": *pageSize,
			"repeat": *repeat, "warmup": *warmup, "dup_pct": *dup, "initial_rto": initialRTO.String(), "min_rto": minRTO.String(), "max_rto": maxRTO.String(), "seed": *seed},
	}
	for _, l := range rates {
		// Repeat each pair, alternating which mode runs first, and keep the
		// run of median elapsed time per mode: on a shared machine one
		// scheduling stall can dominate a single run.
		var runs [2][]benchTransportRow // [0] ack per message, [1] omission
		for r := range *repeat {
			order := []bool{true, false}
			if r%2 == 1 {
				order = []bool{false, true}
			}
			for _, every := range order {
				res, err := transport.RunLoopbackPages(ctx, transport.LoopbackPageConfig{
					Client: client, AckEvery: every, Loss: l / 100, Dup: *dup / 100, Seed: *seed + uint64(r), Endpoint: epCfg, Warmup: *warmup,
				})
				if err != nil {
					return fmt.Errorf("pages at %.0f%% loss: %w", l, err)
				}
				row := benchTransportRow{
					Mode: "ack-omission", LossPct: l, Requests: res.Requests, Failed: res.Failed,
					Messages: res.Messages, MessagesPerReq: res.MessagesPerReq, Acks: res.Acks,
					Retransmits: res.Retransmits, RelayDropped: res.Relay.Dropped,
					ElapsedS: res.Elapsed.Seconds(), ReqPerSec: res.ReqPerSec,
					P50us: us(res.P50), P99us: us(res.P99), MaxUs: us(res.Max),
				}
				i := 1
				if every {
					row.Mode, i = "ack-per-message", 0
				}
				runs[i] = append(runs[i], row)
			}
		}
		base, omit := medianRow(runs[0]), medianRow(runs[1])
		if omit.ElapsedS > 0 {
			omit.SpeedupPct = 100 * (base.ElapsedS/omit.ElapsedS - 1)
		}
		rep.Rows = append(rep.Rows, base, omit)
	}
	if *probes > 0 {
		r, err := transport.MeasureRTT(ctx, transport.RTTConfig{Probes: *probes, Interval: *interval})
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
	printBenchTransport(stdout, rep)
	return nil
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// medianRow returns the run of median elapsed time.
func medianRow(rows []benchTransportRow) benchTransportRow {
	s := slices.Clone(rows)
	slices.SortFunc(s, func(a, b benchTransportRow) int { return cmp.Compare(a.ElapsedS, b.ElapsedS) })
	m := s[len(s)/2]
	m.Runs = len(rows)
	return m
}

func printBenchTransport(w io.Writer, rep benchTransportReport) {
	fmt.Fprintf(w, "page transfer on loopback through a lossy relay (%v requests of %v bytes, concurrency %v; median of %v runs)\n",
		rep.Config["requests"], rep.Config["page_bytes"], rep.Config["concurrency"], rep.Config["repeat"])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tloss %\tmessages\tmsgs/req\tacks\tretrans\tfailed\treq/s\tp50 us\tp99 us\tmax us\tspeedup\t")
	for _, r := range rep.Rows {
		sp := ""
		if r.Mode == "ack-omission" {
			sp = fmt.Sprintf("%+.0f%%", r.SpeedupPct)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.2f\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%s\t\n",
			r.Mode, r.LossPct, r.Messages, r.MessagesPerReq, r.Acks, r.Retransmits, r.Failed,
			r.ReqPerSec, r.P50us, r.P99us, r.MaxUs, sp)
	}
	tw.Flush()
	fmt.Fprintln(w, "speedup: elapsed time with an ACK per message / with ACK omission - 1, same work (Mocha, 16-node MM: up to 92%)")
	if r := rep.RTT; r != nil {
		fmt.Fprintf(w, "\nprobe round trip minus responder hold time, loopback (%d probes; %d retried, %d without all kernel stamps)\n",
			r.User.N, r.Retried, r.Missing)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "stamps\tmin us\tp50 us\tp99 us\t")
		for _, s := range []struct {
			name string
			v    transport.RTTStats
		}{{"user space", r.User}, {"kernel (SO_TIMESTAMPING)", r.Kernel}} {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t\n", s.name, float64(s.v.Min)/1e3, float64(s.v.P50)/1e3, float64(s.v.P99)/1e3)
		}
		tw.Flush()
		fmt.Fprintf(w, "kernel stamps converted realtime->raw with a clock sandwich of half-width <= %d ns\n", r.MaxHalfWidth)
	}
}

// benchServe runs a page server until ctx ends.
func benchServe(ctx context.Context, addr string, pageSize int, ackEvery bool, cfg transport.Config, log *slog.Logger, stderr io.Writer) error {
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
	fmt.Fprintf(stderr, "gclock bench-transport: serving %d-byte pages on %v (ack-every %v); interrupt to stop\n", pageSize, conn.LocalAddr(), ackEvery)
	err = ep.Run(ctx)
	log.Info("page server stopped", "stats", ep.Stats())
	return err
}

// benchPeer runs the client side against a remote page server.
func benchPeer(ctx context.Context, peer, listen string, client transport.PageClientConfig, ackEvery bool, cfg transport.Config, jsonOut bool, w io.Writer) error {
	server, err := netip.ParseAddrPort(peer)
	if err != nil {
		return fmt.Errorf("-peer %q: %w", peer, err)
	}
	conn, err := transport.ListenUDP(listen, transport.UDPOptions{})
	if err != nil {
		return err
	}
	cfg.ID, cfg.Conn, cfg.AckEvery = 1, conn, ackEvery
	ep, err := transport.New(cfg)
	if err != nil {
		conn.Close()
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ep.Run(ctx) }()
	res, err := transport.RunPageClient(ctx, ep, server, client)
	st := ep.Stats()
	cancel()
	<-done
	if err != nil {
		return err
	}
	if jsonOut {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(benchTransportReport{Command: "gclock bench-transport -peer " + peer, Remote: &res, Stats: &st})
	}
	fmt.Fprintf(w, "%d requests to %v (ack-every %v): %d failed, %.0f req/s, p50 %.1f us, p99 %.1f us, client sent %d datagrams (%d retransmissions, %d acks)\n",
		res.Requests, server, ackEvery, res.Failed, res.ReqPerSec, us(res.P50), us(res.P99), st.Sent, st.Retransmits, st.SentAcks)
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	if *fragTime < 0 || *fragTime > time.Hour {
		return fmt.Errorf("-frag-time %v: want 0..1h", *fragTime)
	}
	rates, err := parseLossList(*losses)
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
	cfg := lab.TransportBenchConfig{
		Losses: rates, Delay: *delay, Warmup: *warmup, Endpoint: ep, Seed: *seed, Logger: log, FragTime: *fragTime,
		Client: transport.PageClientConfig{Requests: *requests, Concurrency: *concurrency, PageSize: *pageSize},
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := lab.BenchTransport(ctx, cfg)
	if err != nil {
		return err
	}
	rep := struct {
		Command string                  `json:"command"`
		Config  map[string]any          `json:"config"`
		Rows    []lab.TransportBenchRow `json:"pages"`
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
	fmt.Fprintf(stdout, "page transfer between lab hosts through the switch (%d requests of %d bytes, concurrency %d, link %v each way)\n",
		*requests, *pageSize, *concurrency, *delay)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tloss %\tmessages\tmsgs/req\tacks\tretrans\tframes\tdropped\tfailed\treq/s\tp50 us\tp99 us\tmax us\tspeedup\t")
	for _, r := range rows {
		sp := ""
		if r.Mode == "ack-omission" {
			sp = fmt.Sprintf("%+.0f%%", r.SpeedupPct)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%.2f\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%s\t\n",
			r.Mode, r.LossPct, r.Messages, r.MessagesPerReq, r.Acks, r.Retransmits, r.Frames, r.Dropped, r.Failed,
			r.ReqPerSec, r.P50us, r.P99us, r.MaxUs, sp)
	}
	tw.Flush()
	fmt.Fprintln(stdout, "speedup: elapsed time with an ACK per message / with ACK omission - 1, same work, same lab (Mocha, 16-node MM: up to 92%)")
	return nil
}

// parseLossList parses comma-separated percentages in [0, 100).
func parseLossList(s string) ([]float64, error) {
	var rates []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || v >= 100 {
			return nil, fmt.Errorf("-loss: %q is not a percentage in [0, 100)", f)
		}
		rates = append(rates, v)
	}
	return rates, nil
}
