package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/daemon"
)

func init() {
	register("keygen", "print a cluster key line for the daemon's auth.key_file (docs/daemon.md, Security)", func(args []string) error {
		return runKeygen(args, os.Stdout)
	})
}

const keygenUsage = `usage: gclock keygen [-id N] >> /etc/gclock/cluster.key

Prints one key file line, "ID SECRET" with 32 random bytes in hex. Keep the
file mode 0600 (the daemon refuses a file the group or others can read) and
copy it to every host; auth.key_id names the key to send with.

flags:
`

func runKeygen(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gclock keygen", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), keygenUsage); fs.PrintDefaults() }
	id := fs.Uint("id", 1, "key id (auth.key_id)")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("keygen: unexpected argument %q", fs.Arg(0))
	}
	if *id > 1<<32-1 {
		return fmt.Errorf("keygen: -id %d: want 0..%d", *id, uint32(1<<32-1))
	}
	line, err := daemon.NewKeyLine(uint32(*id))
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	_, err = io.WriteString(stdout, line)
	return err
}
