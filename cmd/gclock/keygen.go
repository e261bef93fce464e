package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/wire"
	"github.com/gclock/gclock/wire/keyfile"
)

func init() {
	register("keygen", "print a cluster key line for the daemon's auth.key_file (docs/daemon.md, Security)", func(args []string) error {
		return runKeygen(args, os.Stdout)
	})
}

const keygenUsage = `usage: gclock keygen [-id N] [-o FILE]
       gclock keygen -links -master FILE -node N -peers 1,2,3 [-id N] [-o FILE]

Prints one key file line, "ID SECRET" with 32 random bytes in hex, or with
-o writes it to a new FILE of mode 0600 (never over an existing one: a
cluster has one key, made once and copied to every host, e.g. install -m 600
cluster.key /etc/gclock/cluster.key). The daemon refuses a key file the
group or others can read; auth.key_id names the key to send with.

With -links, prints node N's link keys instead, one "ID SECRET peer=P" line
per other peer, derived from the cluster key -id in the key file -master:
give each node only its own file and keep the master off the nodes, so that
a compromised host cannot pose as another node (docs/daemon.md, Security).

flags:
`

func runKeygen(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gclock keygen", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), keygenUsage); fs.PrintDefaults() }
	id := fs.Uint("id", 1, "key id (auth.key_id)")
	links := fs.Bool("links", false, "print a node's link keys derived from -master")
	master := fs.String("master", "", "with -links: the key file holding the cluster key -id")
	node := fs.Uint("node", 0, "with -links: the node id the keys are for")
	peers := fs.String("peers", "", "with -links: every node id of the cluster, comma-separated")
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
	var line string
	var err error
	if *links {
		line, err = keygenLinks(uint32(*id), *master, *node, *peers)
	} else if line, err = keyfile.NewLine(uint32(*id)); err != nil {
		err = fmt.Errorf("keygen: %w", err)
	}
	if err != nil {
		return err
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

// keygenLinks returns node's link key lines derived from the cluster key
// id in the key file master.
func keygenLinks(id uint32, master string, node uint, peers string) (string, error) {
	if master == "" || peers == "" || node > 1<<32-1 {
		return "", errors.New("keygen: -links needs -master FILE, -node N (0..4294967295) and -peers 1,2,3")
	}
	keys, err := keyfile.Read(master)
	if err != nil {
		return "", fmt.Errorf("keygen: -master: %w", err)
	}
	i := slices.IndexFunc(keys, func(k wire.Key) bool { return k.ID == id && !k.Link })
	if i < 0 {
		return "", fmt.Errorf("keygen: -master %s: no cluster key with id %d (-id)", master, id)
	}
	var ids []uint32
	for _, f := range strings.Split(peers, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return "", fmt.Errorf("keygen: -peers: %q is not a node id", f)
		}
		ids = append(ids, uint32(v))
	}
	if !slices.Contains(ids, uint32(node)) {
		return "", fmt.Errorf("keygen: -node %d is not among -peers %s", node, peers)
	}
	return keyfile.LinkLines(keys[i], uint32(node), ids), nil
}
