package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/daemon"
)

func init() {
	register("keygen", "print a cluster key line for the daemon's auth.key_file (docs/daemon.md, Security)", func(args []string) error {
		return runKeygen(args, os.Stdout)
	})
}

const keygenUsage = `usage: gclock keygen [-id N] [-o FILE]

Prints one key file line, "ID SECRET" with 32 random bytes in hex, or with
-o writes it to a new FILE of mode 0600 (never over an existing one: a
cluster has one key, made once and copied to every host, e.g. install -m 600
cluster.key /etc/gclock/cluster.key). The daemon refuses a key file the
group or others can read; auth.key_id names the key to send with.

flags:
`

func runKeygen(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gclock keygen", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), keygenUsage); fs.PrintDefaults() }
	id := fs.Uint("id", 1, "key id (auth.key_id)")
	out := fs.String("o", "", "write the key to this new `file` (mode 0600; refused if it exists)")
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
	if *out == "" {
		_, err = io.WriteString(stdout, line)
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, iofs.ErrExist) {
		return fmt.Errorf("keygen: %s exists: not overwritten (a cluster has one key: copy that file to every host, or remove it to make a new one)", *out)
	}
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Chmod(0o600); err != nil { // the umask may have cleared bits, never set them; be explicit
		f.Close()
		return fmt.Errorf("keygen: %w", err)
	}
	if _, err := io.WriteString(f, line); err != nil {
		f.Close()
		return fmt.Errorf("keygen: %s: %w", *out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("keygen: %s: %w", *out, err)
	}
	return nil
}
