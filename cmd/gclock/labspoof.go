package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/netlab"
)

const labSpoofUsage = `usage: gclock lab spoof [flags]

Runs daemons in a lab (hosts 0..N-1) and a spoofer in its own namespace
(host N) that sends them forged probes, replies, time diffs, error reports,
period changes, status and real-time queries from forged source addresses,
plus replays and shifted copies of traffic it tapped on host 1 (--capture),
at --rate datagrams a second from the end of the warm-up; the reference is
stopped at --kill-ref. Once with a cluster key and once without (--key
both), it reports per host the evaluations with the truth outside the
bounds, the worst error and width while synced, failover and the drop
counters (docs/daemon.md, "Security"). With --insider the spoofer holds the
cluster key and sends what a key holder sends to wedge a node: probes sealed
with sequence numbers of 2^63 and beyond the jump limit, replays, and
replays to another node than their destination (one run, with the key).
Root.

flags:
`

func runLabSpoof(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gclock lab spoof", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labSpoofUsage); fs.PrintDefaults() }
	d := lab.DefaultSpoofConfig()
	daemons := fs.Int("daemons", d.Daemons, "daemons (the lab gets one more host, the spoofer's)")
	key := fs.String("key", "both", "cluster key: on, off or both (one run each)")
	rate := fs.Int("rate", d.Rate, "forged datagrams per second")
	capture := fs.Duration("capture", d.Capture, "tap host 1's traffic this long from the start for replays (0: no replays)")
	duration := fs.Duration("duration", d.Duration, "run length")
	warmup := fs.Duration("warmup", d.Warmup, "the attack starts here; evaluations before are not counted")
	kill := fs.Duration("kill-ref", d.KillRefAt, "stop the reference's daemon at this time (0: never)")
	seed := fs.Uint64("seed", d.Seed, "seed of the clocks and of the forgeries")
	insider := fs.Bool("insider", false, "the spoofer holds the cluster key (implies --key on)")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("lab spoof: unexpected argument %q", fs.Arg(0))
	}
	var keys []bool
	switch *key {
	case "on":
		keys = []bool{true}
	case "off":
		keys = []bool{false}
	case "both":
		keys = []bool{true, false}
	default:
		return fmt.Errorf("lab spoof: --key %q: want on, off or both", *key)
	}
	if *insider {
		keys = []bool{true}
	}
	if err := netlab.Check(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab spoof: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := netlab.DefaultConfig()
	cfg.Hosts, cfg.SchedFIFO, cfg.Seed = *daemons+1, true, *seed
	cfg.RunDir, err = os.MkdirTemp("", "gclab-spoof-")
	if err != nil {
		return fmt.Errorf("lab spoof: %w", err)
	}
	for _, k := range keys {
		sc := d
		sc.Command, sc.SpoofCommand = []string{self, "daemon"}, []string{self, "lab", "spoof-send"}
		sc.Daemons, sc.Key, sc.Rate, sc.Capture, sc.Duration, sc.Warmup, sc.KillRefAt, sc.Seed = *daemons, k, *rate, *capture, *duration, *warmup, *kill, *seed
		sc.Insider = *insider
		l, err := lab.Up(ctx, cfg)
		if err != nil {
			return err
		}
		res, err := l.RunSpoof(ctx, sc)
		l.Down()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\nlogs: %s\n\n", lab.SpoofReport(res), res.Logs)
		if len(keys) > 1 {
			// The next run reuses the directory: keep this one's logs.
			os.Rename(res.Logs, fmt.Sprintf("%s-key-%v-%d", res.Logs, k, time.Now().Unix()))
		}
	}
	return nil
}

// runLabSpoofSend is the spoofer process (started by RunSpoof in its
// namespace): gclock lab spoof-send -config FILE.
func runLabSpoofSend(args []string) error {
	fs := flag.NewFlagSet("gclock lab spoof-send", flag.ContinueOnError)
	cf := fs.String("config", "", "the spoofer's JSON config (written by gclock lab spoof)")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if *cf == "" {
		return fmt.Errorf("lab spoof-send: -config FILE is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return lab.SpoofSendFile(ctx, *cf)
}
