package main

import (
	"io"
	"os"

	"github.com/gclock/gclock/cmd/internal/daemoncmd"
)

func init() {
	register("daemon", "run the sync daemon on this host (UDP, shared-memory page, metrics)", func(args []string) error {
		return runDaemon(args, os.Stdout, os.Stderr)
	})
}

// runDaemon is `gclock daemon`: the same command line as gclockd.
func runDaemon(args []string, stdout, stderr io.Writer) error {
	return daemoncmd.Run("gclock daemon", args, stdout, stderr)
}
