package daemon

import (
	"errors"
	"fmt"
	"math/bits"
	"net"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/engineconf"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/conf"
	"github.com/gclock/gclock/topology"
)

// Config is a daemon's configuration: one YAML file, usually the same on
// every host except node.id. Units are in the field names (_ppm, _bytes) or
// in the values (durations are written with their unit: 250ms).
type Config struct {
	Node       NodeConfig        `yaml:"node"`
	Peers      []Peer            `yaml:"peers"`
	Reference  ReferenceConfig   `yaml:"reference"`
	Topology   TopologyConfig    `yaml:"topology"`
	Sync       engineconf.Config `yaml:"sync"` // the engine's parameters, as a scenario's engine: section
	Clock      ClockConfig       `yaml:"clock"`
	Transport  TransportConfig   `yaml:"transport"`
	GlobalTime GlobalTimeConfig  `yaml:"global_time"`
	Metrics    MetricsConfig     `yaml:"metrics"`
	RealTime   RealTimeConfig    `yaml:"real_time"`
	Log        LogConfig         `yaml:"log"`
	Auth       AuthConfig        `yaml:"auth,omitempty"`  // cluster key (auth.go)
	NTP        NTPConfig         `yaml:"ntp"`             // daemon/ntp.go
	Refclock   RefclockConfig    `yaml:"refclock"`        // daemon/ntp.go
	ClockBound ClockBoundConfig  `yaml:"clockbound"`      // daemon/clockbound.go
	State      StateConfig       `yaml:"state,omitempty"` // state file (state.go)
}

// LogConfig asks for record files beside the daemon's log, like chrony's
// `log measurements`.
type LogConfig struct {
	// Measurements is a CSV file (created, or truncated) that gets one line
	// per exchange this node receives from its sources: the source, the
	// four stamps on the two local clocks (ns) and the round trip. Empty:
	// none.
	Measurements string `yaml:"measurements,omitempty"`
	// Format is the daemon's own log (stderr): "text" (slog's key=value
	// lines, the default; empty means text) or "json" (one JSON object per
	// line, for journald, Kubernetes and log collectors).
	Format string `yaml:"format,omitempty"`
}

// Log formats.
const (
	LogText = "text"
	LogJSON = "json"
)

// NodeConfig names this node.
type NodeConfig struct {
	// ID is this node's id; it must be one of the peers.
	ID uint32 `yaml:"id"`
	// Listen is the UDP host:port to bind; empty means this node's peer
	// address.
	Listen string `yaml:"listen"`
}

// Peer is one node of the cluster (this node included).
type Peer struct {
	ID      uint32 `yaml:"id"`
	Address string `yaml:"address"` // UDP host:port
}

// ReferenceConfig chooses the reference: global time is its clock.
type ReferenceConfig struct {
	// Order lists node ids: the first is the reference; when it has been
	// silent for FailoverAfter, the next one takes over, and so on.
	Order []uint32 `yaml:"order"`
	// FailoverAfter is how long the reference may be silent before the
	// next in Order takes over.
	FailoverAfter Duration `yaml:"failover_after"`
}

// Topologies.
const (
	TopoStar      = topology.KindStar
	TopoTree      = topology.KindTree
	TopoRing      = topology.KindRing
	TopoHypercube = topology.KindHypercube
	TopoMesh      = topology.KindMesh
	TopoExplicit  = topology.KindExplicit
)

// TopologyConfig says which nodes exchange messages. Graph positions follow
// the peer list sorted by id with the reference moved first, so the star's
// centre and the tree's root are the reference.
type TopologyConfig struct {
	Kind   string      `yaml:"kind"`            // star | tree | ring | hypercube | mesh | explicit
	Fanout int         `yaml:"fanout"`          // tree only
	Edges  [][2]uint32 `yaml:"edges,omitempty"` // explicit only: pairs of node ids
}

// Clock sources (clock.Config).
const (
	ClockRaw      = clock.SourceRaw      // CLOCK_MONOTONIC_RAW
	ClockEmulated = clock.SourceEmulated // CLOCK_MONOTONIC_RAW seen through clock.Emulated (the lab)
)

// ClockConfig is the local clock the daemon stamps with: the clock
// package's section, which also converts it (clock.EmulatedConfig.Params).
type ClockConfig = clock.Config

// EmulatedClockConfig are the lab's clock errors (clock.EmulatedConfig).
// Only an evaluator may know them; the engine never sees them.
type EmulatedClockConfig = clock.EmulatedConfig

// DriftStep changes the emulated drift After the daemon started.
type DriftStep = clock.DriftStepConfig

// TransportConfig is the UDP layer's.
type TransportConfig struct {
	// KernelTimestamps asks for SO_TIMESTAMPING software stamps on receive
	// and transmit; user-space stamps add tens of microseconds.
	KernelTimestamps bool `yaml:"kernel_timestamps"`
}

// GlobalTimeConfig is the shared-memory page for programs on this host.
type GlobalTimeConfig struct {
	ShmPath      string   `yaml:"shm_path"`      // empty: no page
	PublishEvery Duration `yaml:"publish_every"` // republish (heartbeat) at least this often; <= sync.stale_after/2
	// Group (a name or a gid) owns the page, of mode 0640: only root, the
	// daemon's user and the group's members read global time. Empty: mode
	// 0644, every local user reads it.
	Group string `yaml:"group"`
}

// PageGroup resolves global_time.group to a gid (0: none).
func (g GlobalTimeConfig) PageGroup() (int, error) {
	if g.Group == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(g.Group); err == nil {
		if n <= 0 {
			return 0, fmt.Errorf("gid %d: must be > 0 (root's group gives nothing: leave it empty)", n)
		}
		return n, nil
	}
	gr, err := user.LookupGroup(g.Group)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(gr.Gid)
}

// MetricsConfig is the Prometheus endpoint.
type MetricsConfig struct {
	// Listen is host:port, or unix:/path for a Unix socket; empty: no
	// metrics. A port without a host (":9190") listens on 127.0.0.1
	// only; every interface takes 0.0.0.0:9190 or [::]:9190, explicitly.
	Listen string `yaml:"listen"`
}

// Real-time modes (Jezequel 5.4).
const (
	RealTimeNone      = "none"               // global time is the reference's CLOCK_MONOTONIC_RAW
	RealTimeReference = "reference-realtime" // the reference's CLOCK_REALTIME
	RealTimeMeanDrift = "mean-drift"         // drifts corrected by the mean of all drifts
)

// RealTimeConfig chooses what global time counts (engine/realtime; its
// driver is daemon/realtime.go).
type RealTimeConfig struct {
	Mode string `yaml:"mode"` // none | reference-realtime | mean-drift
	// PollEvery is how often a node asks the reference for the real-time
	// scale (and reports its rate), and how often the reference samples its
	// CLOCK_REALTIME and recomputes the mean rate. Unused with mode none.
	PollEvery Duration `yaml:"poll_every"`
	// MaxSlewPPM bounds, in reference-realtime mode, how far the rate of
	// the reference's CLOCK_REALTIME (against global time) may move from
	// its rate measured over the last poll: 500 is the kernel PLL's and
	// adjtime's limit (ntpd). chrony slews up to its maxslewrate, 83333 ppm
	// by default: set chrony's maxslewrate 500 or raise this. A step, or a
	// faster slew, is detected at the next sample and counted; served time
	// slews through it.
	MaxSlewPPM float64 `yaml:"max_slew_ppm"`
	// Upstream is where the reference learns how good its CLOCK_REALTIME
	// is, in reference-realtime mode (daemon/upstream.go): kernel (the
	// default) reads adjtimex with every sample and folds it into served
	// UTC (bounds widened by maxerror, unsynced while the kernel says
	// STA_UNSYNC, the leap second passed on); none serves CLOCK_REALTIME
	// as UTC with no error of its own, as the operator vouches.
	Upstream string `yaml:"upstream"`
	// ChronySocket is chronyd's command socket, read with upstream kernel
	// for chronyd's tracking (stratum, reference id, root delay and
	// dispersion) when chronyd answers there; empty: not read.
	ChronySocket string `yaml:"chrony_socket"`
}

func (r *RealTimeConfig) validate(e *errs) {
	switch r.Upstream {
	case UpstreamKernel, UpstreamNone:
	default:
		e.add("real_time.upstream", "unknown upstream %q (kernel, none)", r.Upstream)
	}
	if r.ChronySocket != "" && !filepath.IsAbs(r.ChronySocket) {
		e.add("real_time.chrony_socket", "%q: want an absolute path (chronyd's bindcmdaddress)", r.ChronySocket)
	}
	switch r.Mode {
	case RealTimeNone, RealTimeReference, RealTimeMeanDrift:
	default:
		e.add("real_time.mode", "unknown mode %q (none, reference-realtime, mean-drift)", r.Mode)
	}
	if r.PollEvery < Duration(10*time.Millisecond) || r.PollEvery > Duration(time.Hour) {
		e.add("real_time.poll_every", "%v outside [10ms, 1h]", r.PollEvery)
	}
	if !(r.MaxSlewPPM >= 0 && r.MaxSlewPPM <= 100000) {
		e.add("real_time.max_slew_ppm", "%v outside [0, 100000]", r.MaxSlewPPM)
	}
}

// DefaultPort is the UDP port of the default config.
const DefaultPort = 3190

// DefaultConfig works for a small cluster: node 1 of three nodes on
// localhost ports 3190-3192, node 1 the reference with 2 and 3 as
// failovers, a star, the engine's defaults, the raw clock, kernel
// timestamps, the page at gtime.DefaultPath and no metrics.
func DefaultConfig() Config {
	peers := []Peer{}
	for i := uint32(1); i <= 3; i++ {
		peers = append(peers, Peer{ID: i, Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(DefaultPort+int(i)-1))})
	}
	return Config{
		Node:  NodeConfig{ID: 1},
		Peers: peers,
		// Ten seconds is five initial global periods: a reference that
		// missed that many rounds is gone, not slow.
		Reference:  ReferenceConfig{Order: []uint32{1, 2, 3}, FailoverAfter: Duration(10 * time.Second)},
		Topology:   TopologyConfig{Kind: TopoStar, Fanout: 2},
		Sync:       engineconf.Default(),
		Clock:      ClockConfig{Source: ClockRaw},
		Transport:  TransportConfig{KernelTimestamps: true},
		GlobalTime: GlobalTimeConfig{ShmPath: gtime.DefaultPath, PublishEvery: Duration(time.Second)},
		RealTime: RealTimeConfig{Mode: RealTimeNone, PollEvery: Duration(time.Second), MaxSlewPPM: 500, Upstream: UpstreamKernel,
			ChronySocket: DefaultChronySocket},
		NTP:        NTPConfig{Stratum: 1, RateLimit: NTPRateLimitConfig{Burst: 16, Leak: 2}},
		Refclock:   RefclockConfig{Every: Duration(250 * time.Millisecond)},
		ClockBound: ClockBoundConfig{Every: Duration(time.Second), VoidAfter: Duration(10 * time.Second)},
	}
}

// ErrConfig is wrapped by every configuration error (conf.ErrConfig, the
// one the engine's section and the simulator's scenarios wrap too).
var ErrConfig = conf.ErrConfig

// FieldError is one bad field (conf.FieldError): its YAML path
// (sync.min_global_period, peers[2].address) and, when the config came
// from a file, its line.
type FieldError = conf.FieldError

// errs collects FieldErrors.
type errs []error

func (e *errs) add(field, format string, args ...any) {
	*e = append(*e, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Validate checks every section and returns all problems found (joined),
// each a *FieldError naming the field.
func (c *Config) Validate() error {
	var e errs
	c.validateNodes(&e)
	c.validateTopology(&e)
	c.Sync.Check(func(field, format string, args ...any) { e.add("sync."+field, format, args...) })
	c.Clock.Check(func(field, format string, args ...any) { e.add("clock."+field, format, args...) })
	c.validateGlobalTime(&e)
	if l := c.Metrics.Listen; strings.HasPrefix(l, "unix:") {
		if !filepath.IsAbs(strings.TrimPrefix(l, "unix:")) {
			e.add("metrics.listen", "%q: a Unix socket needs an absolute path (unix:/run/gclock.metrics)", l)
		}
	} else if l != "" {
		checkHostPort(&e, "metrics.listen", c.Metrics.Listen, true)
	}
	c.RealTime.validate(&e)
	c.Auth.validate(&e)
	c.validateKeyless(&e) // keyless.go
	c.validateNTP(&e)
	c.validateClockBound(&e) // clockbound.go
	c.State.validate(&e)
	if m := c.Log.Measurements; m != "" && !filepath.IsAbs(m) {
		e.add("log.measurements", "%q: want an absolute path", m)
	}
	if f := c.Log.Format; f != "" && f != LogText && f != LogJSON {
		e.add("log.format", "unknown format %q (text, json)", f)
	}
	if len(e) == 0 {
		// The graph's connectivity (sync's rules are the engine's own,
		// checked above by c.Sync.Check).
		for _, ref := range c.Reference.Order {
			if _, _, err := c.Roles(ref); err != nil {
				e.add("topology", "with reference %d: %v", ref, err)
				break
			}
		}
	}
	return errors.Join(e...)
}

func checkHostPort(e *errs, field, v string, allowEmptyHost bool) {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		e.add(field, "%q is not host:port (%v)", v, err)
		return
	}
	if host == "" && !allowEmptyHost {
		e.add(field, "%q has no host", v)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		e.add(field, "%q: port %q is not in 1..65535", v, port)
	}
}

func (c *Config) validateNodes(e *errs) {
	if len(c.Peers) == 0 {
		e.add("peers", "empty: list every node of the cluster, this one included")
		return
	}
	ids := map[uint32]int{}
	addrs := map[string]int{}
	for i, p := range c.Peers {
		f := fmt.Sprintf("peers[%d]", i)
		if j, dup := ids[p.ID]; dup {
			e.add(f+".id", "%d already used by peers[%d]", p.ID, j)
		}
		ids[p.ID] = i
		checkHostPort(e, f+".address", p.Address, false)
		if j, dup := addrs[p.Address]; dup {
			e.add(f+".address", "%q already used by peers[%d]", p.Address, j)
		}
		addrs[p.Address] = i
	}
	if _, ok := ids[c.Node.ID]; !ok {
		e.add("node.id", "%d is not among the peers", c.Node.ID)
	}
	if c.Node.Listen != "" {
		checkHostPort(e, "node.listen", c.Node.Listen, true)
	}
	if len(c.Reference.Order) == 0 {
		e.add("reference.order", "empty: name the reference first, then failovers")
	}
	seen := map[uint32]bool{}
	for i, id := range c.Reference.Order {
		f := fmt.Sprintf("reference.order[%d]", i)
		if _, ok := ids[id]; !ok {
			e.add(f, "%d is not among the peers", id)
		}
		if seen[id] {
			e.add(f, "%d listed twice", id)
		}
		seen[id] = true
	}
	if c.Reference.FailoverAfter <= 0 {
		e.add("reference.failover_after", "%v, must be > 0", c.Reference.FailoverAfter)
	}
}

func (c *Config) validateTopology(e *errs) {
	t := c.Topology
	n := len(c.Peers)
	switch t.Kind {
	case TopoStar, TopoRing, TopoMesh:
	case TopoTree:
		if t.Fanout < 1 {
			e.add("topology.fanout", "%d, a tree needs fanout >= 1", t.Fanout)
		}
	case TopoHypercube:
		if n > 0 && bits.OnesCount(uint(n)) != 1 {
			e.add("topology.kind", "hypercube needs a power-of-two number of peers, have %d", n)
		}
	case TopoExplicit:
		if len(t.Edges) == 0 && n > 1 {
			e.add("topology.edges", "empty: an explicit topology lists its edges as [id, id] pairs")
		}
	default:
		e.add("topology.kind", "unknown topology %q (star, tree, ring, hypercube, mesh, explicit)", t.Kind)
		return
	}
	if t.Kind != TopoExplicit && len(t.Edges) > 0 {
		e.add("topology.edges", "only used with kind explicit (kind is %q)", t.Kind)
	}
	if t.Kind != TopoExplicit {
		return
	}
	ids := map[uint32]bool{}
	for _, p := range c.Peers {
		ids[p.ID] = true
	}
	for i, ed := range t.Edges {
		for k, id := range ed {
			if !ids[id] {
				e.add(fmt.Sprintf("topology.edges[%d][%d]", i, k), "%d is not among the peers", id)
			}
		}
		if ed[0] == ed[1] {
			e.add(fmt.Sprintf("topology.edges[%d]", i), "self loop on %d", ed[0])
		}
	}
}

func (c *Config) validateGlobalTime(e *errs) {
	g := c.GlobalTime
	if g.ShmPath != "" && !filepath.IsAbs(g.ShmPath) {
		e.add("global_time.shm_path", "%q must be an absolute path (or empty for no page)", g.ShmPath)
	}
	if _, err := g.PageGroup(); err != nil {
		e.add("global_time.group", "%q: %v", g.Group, err)
	}
	if g.PublishEvery <= 0 {
		e.add("global_time.publish_every", "%v, must be > 0", g.PublishEvery)
	} else if c.Sync.StaleAfter > 0 && g.PublishEvery > c.Sync.StaleAfter/2 {
		e.add("global_time.publish_every", "%v above sync.stale_after/2 (%v): readers would see a live daemon as stale",
			g.PublishEvery, c.Sync.StaleAfter/2)
	}
}

// Load reads a YAML config over DefaultConfig (absent fields keep their
// defaults), rejecting unknown fields, and validates it. Errors name the
// file, the line and the field.
func Load(path string) (Config, error) {
	data, err := conf.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return c, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse is Load on bytes: one YAML document (conf.Unmarshal: strict, at
// most conf.MaxBytes, aliases capped), a list in it replacing the
// default list.
func Parse(data []byte) (Config, error) {
	c := DefaultConfig()
	root, err := conf.Unmarshal(data, &c)
	if err != nil {
		return c, fmt.Errorf("decode: %w", err)
	}
	if err := c.Validate(); err != nil {
		conf.AddLines(err, root)
		return c, err
	}
	return c, nil
}

// ReferenceID is the configured reference: the first of reference.order
// (0 when the order is empty, which Validate rejects).
func (c *Config) ReferenceID() uint32 {
	if len(c.Reference.Order) == 0 {
		return 0
	}
	return c.Reference.Order[0]
}

// ListenAddr is node.listen, or this node's peer address when empty.
func (c *Config) ListenAddr() string {
	if c.Node.Listen != "" {
		return c.Node.Listen
	}
	for _, p := range c.Peers {
		if p.ID == c.Node.ID {
			return p.Address
		}
	}
	return ""
}

// order returns the peer ids in graph order: ref first, then by id.
func (c *Config) order(ref uint32) []uint32 {
	ids := make([]uint32, 0, len(c.Peers))
	for _, p := range c.Peers {
		if p.ID != ref {
			ids = append(ids, p.ID)
		}
	}
	slices.Sort(ids)
	return append([]uint32{ref}, ids...)
}

// EngineConfig converts the sync section into this node's engine.Config
// for the given sources and children (see Roles). Validate has checked the
// section with the engine's own rules (engineconf.Config.Check).
func (c *Config) EngineConfig(sources, children []engine.NodeID) engine.Config {
	e, _ := c.Sync.ToEngine()
	e.ID, e.Sources, e.Children = engine.NodeID(c.Node.ID), sources, children
	return e
}
