// Package daemoncmd is the command line of the sync daemon, shared by
// `gclock daemon` and the daemon-only binary `gclockd` (which links none of
// the simulator's plotting code): flags, config file, logging, signals.
package daemoncmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/daemon"
	"go.yaml.in/yaml/v3"
)

// Usage is the daemon's help text before its flags; %s is the command name
// ("gclock daemon" or "gclockd").
const Usage = `usage: %s [-config FILE] [-auto-id] [overrides] [-print-config] [-log-format text|json] [-v]

Runs the gclock engine on this host: exchanges sync messages with its peers over
UDP (kernel timestamps), publishes global time to the shared-memory page that
'gclock now' and include/gclock.h read, and serves Prometheus metrics.
Without -config the defaults apply (a three-node star on 127.0.0.1:3190-3192).
Flags given on the command line override the file. See docs/daemon.md.

flags:
`

// Run parses args, loads the config and runs the daemon until SIGINT or
// SIGTERM. name is the command as the user typed it, for the help text.
// The daemon logs to stderr; -print-config writes to stdout.
func Run(name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "YAML config `FILE` (default: built-in defaults)")
	printCfg := fs.Bool("print-config", false, "print the effective config as YAML and exit")
	verbose := fs.Bool("v", false, "debug logging")
	logFormat := fs.String("log-format", "", "log lines as `text` (key=value) or json (one object per line); overrides log.format")
	autoID := fs.Bool("auto-id", false, "set node.id to the peer whose address is one of this host's (one config file for every host)")
	over := daemon.AddFlags(fs)
	fs.Usage = func() { fmt.Fprintf(stderr, Usage, name); fs.PrintDefaults() }
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usage.Errorf("unexpected argument %q (see %s -h)", fs.Arg(0), name)
	}
	cfg := daemon.DefaultConfig()
	if *path != "" {
		var err error
		if cfg, err = daemon.Load(*path); err != nil {
			return err
		}
	}
	if *logFormat != "" {
		cfg.Log.Format = *logFormat
	}
	if err := over.Apply(&cfg); err != nil {
		return err
	}
	if *autoID {
		local, err := hostAddrs()
		if err != nil {
			return fmt.Errorf("-auto-id: %w", err)
		}
		id, err := AutoID(cfg.Peers, local, lookupHost)
		if err != nil {
			return fmt.Errorf("-auto-id: %w", err)
		}
		cfg.Node.ID = id
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("-auto-id: node %d: %w", id, err)
		}
	}
	if *printCfg {
		// The effective config, then the checks the daemon makes at start:
		// a config that prints but would not start fails here too (exit 1).
		enc := yaml.NewEncoder(stdout)
		enc.SetIndent(2)
		if err := enc.Encode(cfg); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
		if err := daemon.Preflight(cfg); err != nil {
			return fmt.Errorf("-print-config: the daemon would not start: %w", err)
		}
		return nil
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := NewLogger(stderr, cfg.Log.Format, level).With("node", cfg.Node.ID)
	warnTimescale(logger, cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return daemon.Run(ctx, cfg, logger)
}

// NewLogger returns the daemon's logger writing to w: format is
// daemon.LogJSON for one JSON object per line, anything else (daemon.LogText
// or empty) for slog's text lines. A message repeated more than QuietBurst
// times in QuietWindow is held back (quiet.go).
func NewLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: readableAttr}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == daemon.LogJSON {
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			a = readableAttr(groups, a)
			if a.Value.Kind() == slog.KindDuration {
				// JSON would print a number of ns; "1.5s" as the text lines do.
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(newQuietHandler(h, time.Now))
}

// readableAttr logs an enum by its name: a value with a String method
// (statuses, message types) is its String, not the number JSON would
// print. Errors and the handlers' own kinds are left alone.
func readableAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindAny {
		return a
	}
	switch v := a.Value.Any().(type) {
	case error:
		return a
	case fmt.Stringer:
		a.Value = slog.StringValue(v.String())
	}
	return a
}

// warnTimescale says at start when the config serves what a production
// host should not: an emulated clock (the lab's made-up offset and drift),
// or the reference's raw clock instead of UTC.
func warnTimescale(l *slog.Logger, cfg daemon.Config) {
	if cfg.Clock.Source == daemon.ClockEmulated {
		l.Warn("clock.source is emulated: this daemon's clock has a made-up offset and drift (the lab's); use raw on real hosts (deploy/gclock.yaml)")
	}
	if cfg.RealTime.Mode == daemon.RealTimeNone {
		l.Info("global time is the reference's CLOCK_MONOTONIC_RAW (real_time.mode none), not UTC; real_time.mode reference-realtime serves UTC")
	}
}
