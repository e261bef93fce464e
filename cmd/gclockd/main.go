// Command gclockd is the gclock sync daemon alone: the same command line as
// `gclock daemon`, in a binary that links neither the simulator nor its
// plotting code, for hosts that only run the daemon.
//
//	gclockd -config /etc/gclock/gclock.yaml
//	gclockd -print-config
//	gclockd version
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/gclock/gclock/cmd/internal/buildinfo"
	"github.com/gclock/gclock/cmd/internal/complete"
	"github.com/gclock/gclock/cmd/internal/daemoncmd"
	"github.com/gclock/gclock/cmd/internal/usage"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 1 && (args[0] == "version" || args[0] == "-version" || args[0] == "--version") {
		buildinfo.Read().Fprint(os.Stdout, "gclockd")
		return 0
	}
	if len(args) >= 1 && args[0] == "completion" {
		// gclockd completion bash|zsh|fish: its flags (and their listed
		// values) read from its own help.
		if len(args) != 2 {
			fmt.Fprintln(os.Stderr, "usage: gclockd completion bash|zsh|fish")
			return usage.ExitCode
		}
		var help bytes.Buffer
		daemoncmd.Run("gclockd", []string{"-h"}, &help, &help)
		if err := complete.FlagsOnly(os.Stdout, args[1], "gclockd", complete.Flags(help.String()), []string{"version", "completion"}); err != nil {
			fmt.Fprintf(os.Stderr, "gclockd completion: %v\n", err)
			return usage.ExitCode
		}
		return 0
	}
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		// Help asked for is output, not an error: stdout.
		daemoncmd.Run("gclockd", []string{"-h"}, os.Stdout, os.Stdout)
		return 0
	}
	if err := daemoncmd.Run("gclockd", args, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		isUsage, printed := usage.Is(err)
		if !printed {
			fmt.Fprintf(os.Stderr, "gclockd: %v\n", err)
		}
		if isUsage {
			return usage.ExitCode
		}
		return 1
	}
	return 0
}
