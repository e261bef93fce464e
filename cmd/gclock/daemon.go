package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gclock/gclock/daemon"
	"go.yaml.in/yaml/v3"
)

func init() {
	register("daemon", "run the sync daemon on this host (UDP, shared-memory page, metrics)", func(args []string) error {
		return runDaemon(args, os.Stdout, os.Stderr)
	})
}

const daemonUsage = `usage: gclock daemon [-config FILE] [overrides] [-print-config] [-v]

Runs the gclock engine on this host: exchanges sync messages with its peers over
UDP (kernel timestamps), publishes global time to the shared-memory page that
'gclock now' and include/gclock.h read, and serves Prometheus metrics.
Without -config the defaults apply (a three-node star on 127.0.0.1:3190-3192).
Flags given on the command line override the file. See docs/daemon.md.

flags:
`

func runDaemon(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "YAML config file (default: built-in defaults)")
	printCfg := fs.Bool("print-config", false, "print the effective config as YAML and exit")
	verbose := fs.Bool("v", false, "debug logging")
	over := daemon.AddFlags(fs)
	fs.Usage = func() { fmt.Fprint(stderr, daemonUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q (see gclock daemon -h)", fs.Arg(0))
	}
	cfg := daemon.DefaultConfig()
	if *path != "" {
		var err error
		if cfg, err = daemon.Load(*path); err != nil {
			return err
		}
	}
	if err := over.Apply(&cfg); err != nil {
		return err
	}
	if *printCfg {
		enc := yaml.NewEncoder(stdout)
		enc.SetIndent(2)
		defer enc.Close()
		return enc.Encode(cfg)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return daemon.Run(ctx, cfg, logger)
}
