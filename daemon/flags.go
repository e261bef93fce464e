package daemon

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/engine/engineconf"
)

// Flags are the command-line overrides of a Config. Register them with
// AddFlags before parsing; after parsing, Apply copies the flags that were
// given (and only those) over the file's values.
type Flags struct {
	fs               *flag.FlagSet
	id               uint
	listen           string
	peers            string
	reference        string
	topology         string
	estimator        string
	clock            string
	kernelTimestamps bool
	shm              string
	metrics          string
	realTime         string
	staleAfter       time.Duration
	profile          string
}

// AddFlags registers the override flags on fs.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.UintVar(&f.id, "id", 0, "override node.id")
	fs.StringVar(&f.listen, "listen", "", "override node.listen (UDP host:port)")
	fs.StringVar(&f.peers, "peers", "", "override peers: id=host:port,id=host:port,...")
	fs.StringVar(&f.reference, "reference", "", "override reference.order: id,id,... (first is the reference)")
	fs.StringVar(&f.topology, "topology", "", "override topology.kind (star, tree, ring, hypercube, mesh)")
	fs.StringVar(&f.estimator, "estimator", "", "override sync.estimator (minrtt, regression, hull, center)")
	fs.StringVar(&f.clock, "clock", "", "override clock.source (raw, emulated)")
	fs.BoolVar(&f.kernelTimestamps, "kernel-timestamps", true, "override transport.kernel_timestamps")
	fs.StringVar(&f.shm, "shm", "", "override global_time.shm_path (\"none\": no page)")
	fs.StringVar(&f.metrics, "metrics", "", "override metrics.listen (\"none\": no metrics)")
	fs.StringVar(&f.realTime, "real-time", "", "override real_time.mode (none, reference-realtime, mean-drift)")
	fs.DurationVar(&f.staleAfter, "stale-after", 0, "override sync.stale_after")
	fs.StringVar(&f.profile, "profile", "", "sync profile whose keys override the file's sync section, before the other flags: "+strings.Join(engineconf.ProfileNames(), ", ")+" (deploy/profiles)")
	return f
}

// Apply copies the flags set on the command line into c and validates the
// result. Errors name the flag.
func (f *Flags) Apply(c *Config) error {
	var err error
	if f.profile != "" {
		// First: -estimator and -stale-after then override the profile.
		if perr := c.Sync.ApplyProfile(f.profile); perr != nil {
			return fmt.Errorf("flag -profile: %w", perr)
		}
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if err != nil {
			return
		}
		bad := func(format string, args ...any) {
			err = fmt.Errorf("flag -%s: %s: %w", fl.Name, fmt.Sprintf(format, args...), ErrConfig)
		}
		switch fl.Name {
		case "id":
			if f.id > 1<<32-1 {
				bad("%d does not fit a node id", f.id)
				return
			}
			c.Node.ID = uint32(f.id)
		case "listen":
			c.Node.Listen = f.listen
		case "peers":
			peers, perr := parsePeers(f.peers)
			if perr != nil {
				bad("%v", perr)
				return
			}
			c.Peers = peers
		case "reference":
			var order []uint32
			for _, s := range strings.Split(f.reference, ",") {
				id, perr := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
				if perr != nil {
					bad("%q is not a node id", s)
					return
				}
				order = append(order, uint32(id))
			}
			c.Reference.Order = order
		case "topology":
			c.Topology.Kind = f.topology
		case "estimator":
			c.Sync.Estimator = f.estimator
		case "clock":
			c.Clock.Source = f.clock
		case "kernel-timestamps":
			c.Transport.KernelTimestamps = f.kernelTimestamps
		case "shm":
			c.GlobalTime.ShmPath = noneIsEmpty(f.shm)
		case "metrics":
			c.Metrics.Listen = noneIsEmpty(f.metrics)
		case "real-time":
			c.RealTime.Mode = f.realTime
		case "stale-after":
			c.Sync.StaleAfter = Duration(f.staleAfter)
		}
	})
	if err != nil {
		return err
	}
	if verr := c.Validate(); verr != nil {
		return fmt.Errorf("after flags: %w", verr)
	}
	return nil
}

func noneIsEmpty(s string) string {
	if s == "none" {
		return ""
	}
	return s
}

// parsePeers parses id=host:port,id=host:port.
func parsePeers(s string) ([]Peer, error) {
	var out []Peer
	for _, item := range strings.Split(s, ",") {
		idS, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return nil, fmt.Errorf("%q is not id=host:port", item)
		}
		id, err := strconv.ParseUint(idS, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q: id %q is not a number", item, idS)
		}
		out = append(out, Peer{ID: uint32(id), Address: addr})
	}
	return out, nil
}
