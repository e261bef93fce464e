package measure

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/conf"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"
	"github.com/gclock/gclock/wire/keyfile"
)

type measureFlags struct {
	rank      int
	peers     string
	page      string
	clockCfg  string
	op        string
	runs      int
	start     string
	period    time.Duration
	lead      time.Duration
	count     int
	repeat    int
	spin      time.Duration
	schedFIFO int
	sizes     string
	out       string
	timeout   time.Duration
	verbose   bool
	keyFile   string
	keyID     uint
	insecure  bool
	interlv   bool
}

func (f *measureFlags) register(fs *flag.FlagSet, latency bool) {
	fs.IntVar(&f.rank, "rank", 0, "this node's rank (its index in -peers)")
	fs.StringVar(&f.peers, "peers", "", "every node's UDP address by rank, comma-separated (host:port,...)")
	fs.StringVar(&f.page, "page", gtime.DefaultPath, "the daemon's global-time page")
	fs.StringVar(&f.clockCfg, "clock-config", "", "daemon config whose clock section is this node's own clock (the lab's emulated clocks); default CLOCK_MONOTONIC_RAW")
	fs.StringVar(&f.out, "o", "", "write this node's stamps to FILE (default stamps-r<rank>.csv)")
	fs.DurationVar(&f.lead, "lead", 200*time.Millisecond, "first scheduled start this long after every node is up")
	fs.DurationVar(&f.timeout, "setup-timeout", 60*time.Second, "wait this long at most for a synced page and for every node")
	fs.BoolVar(&f.verbose, "v", false, "log progress to stderr")
	fs.StringVar(&f.keyFile, "key", "", "the cluster key `file` (the daemons' auth.key_file): every datagram sealed and checked with it")
	fs.UintVar(&f.keyID, "key-id", 1, "the key id to seal with (auth.key_id)")
	fs.BoolVar(&f.insecure, "insecure", false, "run without -key although a peer is off loopback (private networks only)")
	if latency {
		fs.IntVar(&f.count, "count", 100, "messages per size and direction")
		fs.DurationVar(&f.period, "period", 2*time.Millisecond, "time between two messages")
		fs.StringVar(&f.sizes, "sizes", "64-65536", "message sizes in bytes: a list (64,1024) or a range of powers of two (64-65536)")
		fs.BoolVar(&f.interlv, "interleave", false, "send the sizes in turn, each spread over the whole run (default: size after size)")
		return
	}
	fs.StringVar(&f.op, "op", OpAllreduce, "operation: barrier, reduce, allreduce, page, cmd (the command after --)")
	fs.IntVar(&f.runs, "runs", 100, "iterations (each: a scheduled and a barrier-started execution)")
	fs.StringVar(&f.start, "start", StartBoth, "executions per iteration: both, scheduled or barrier")
	fs.DurationVar(&f.period, "period", 10*time.Millisecond, "time between the scheduled starts of two iterations (both executions must fit)")
	fs.IntVar(&f.count, "count", 1, "reduce/allreduce: int64s per node; page: 8-KB pages per client")
	fs.IntVar(&f.repeat, "repeat", 4, "run the operation this many times inside one timed execution")
	fs.DurationVar(&f.spin, "spin-window", 0, "poll the page for the scheduled start only this long before it, sleeping until then (0: busy-wait all the way, as ReproMPI)")
	fs.IntVar(&f.schedFIFO, "sched-fifo", 0, "wait and run the operation under SCHED_FIFO at this priority (1..99; needs -spin-window, root or CAP_SYS_NICE): a node without a core of its own")
}

// ParseSizes reads "64,1024" or "64-65536" (powers of two).
func ParseSizes(s string) ([]int, error) {
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 1 || b < a || b > 2*maxChunk {
			return nil, fmt.Errorf("-sizes %q: want LO-HI with 1 <= LO <= HI <= %d", s, 2*maxChunk)
		}
		var out []int
		for v := a; v <= b; v *= 2 {
			out = append(out, v)
		}
		return out, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 || v > 2*maxChunk {
			return nil, fmt.Errorf("-sizes %q: %q is not a number of bytes in 1..%d", s, p, 2*maxChunk)
		}
		if len(out) == 1024 {
			return nil, fmt.Errorf("-sizes %q: more than 1024 sizes", s)
		}
		out = append(out, v)
	}
	return out, nil
}

func parsePeers(s string) ([]netip.AddrPort, error) {
	if s == "" {
		return nil, errors.New("-peers: empty (want every node's host:port by rank)")
	}
	var out []netip.AddrPort
	for i, p := range strings.Split(s, ",") {
		a, err := netip.ParseAddrPort(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("-peers: entry %d %q: %w", i, p, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// clockSection reads the clock: section of a daemon config (the rest of
// the file is the daemon's business), raw when there is none.
func clockSection(file string) (clock.Config, error) {
	c := clock.Config{Source: clock.SourceRaw}
	data, err := conf.ReadFile(file)
	if err != nil {
		return c, err
	}
	root, err := conf.Parse(data)
	if err != nil {
		return c, err
	}
	n := conf.Field(root, "clock")
	if n == nil {
		return c, nil
	}
	if err := conf.Decode(n, "clock", &c); err != nil {
		return c, err
	}
	var e conf.Errors
	c.Check(e.Under("clock"))
	err = e.Err()
	conf.AddLines(err, root)
	return c, err
}

// localClock returns the node's own clock: CLOCK_MONOTONIC_RAW, or the
// emulated clock of a daemon config (as the daemon builds it, with
// clock.EmulatedConfig.Params).
func localClock(file string) (func(raw int64) int64, error) {
	if file == "" {
		return func(r int64) int64 { return r }, nil
	}
	c, err := clockSection(file)
	if err != nil {
		return nil, fmt.Errorf("-clock-config %s: %w", file, err)
	}
	if c.Source != clock.SourceEmulated {
		return func(r int64) int64 { return r }, nil
	}
	m := c.Emulated
	if m.OriginRaw == 0 {
		return nil, fmt.Errorf("-clock-config %s: clock.emulated.origin_raw is 0: the node cannot rebuild the daemon's clock", file)
	}
	emu, err := m.New()
	if err != nil {
		return nil, fmt.Errorf("-clock-config %s: %w", file, err)
	}
	var mu sync.Mutex
	return func(r int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		return emu.Read(r)
	}, nil
}

// UsageError is NodeMain's error for a command line typed wrong (a bad
// flag, an unexpected argument, a flag value out of range), as opposed to
// a measurement that failed: gclock exits 2 on it. Printed is true when
// the flag package has already written it, with the usage, to stderr.
type UsageError struct {
	Err     error
	Printed bool
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// NodeMain is `gclock measure [latency]`: one node, its flags in args,
// usage printed on -h or a bad flag, logs on stderr. It writes the node's
// stamp file and returns when the measurement is over or ctx ends. A
// command line typed wrong comes back as a *UsageError.
func NodeMain(ctx context.Context, args []string, latency bool, usage string, stderr io.Writer) error {
	name := "gclock measure"
	if latency {
		name += " latency"
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	var f measureFlags
	f.register(fs, latency)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &UsageError{Err: err, Printed: true}
	}
	bad := func(err error) error { return &UsageError{Err: err} }
	cfg := DefaultConfig()
	cfg.Rank, cfg.Lead, cfg.Period, cfg.Count, cfg.SetupTimeout = f.rank, f.lead, f.period, f.count, f.timeout
	if latency {
		if fs.NArg() > 0 {
			return bad(fmt.Errorf("unexpected argument %q", fs.Arg(0)))
		}
		cfg.Op = OpLatency
		sz, err := ParseSizes(f.sizes)
		if err != nil {
			return bad(err)
		}
		cfg.Sizes, cfg.Interleave = sz, f.interlv
	} else {
		cfg.Op, cfg.Runs, cfg.Start, cfg.Repeat, cfg.Command, cfg.SpinWindow = f.op, f.runs, f.start, f.repeat, fs.Args(), f.spin
		cfg.SchedFIFO = f.schedFIFO
		if cfg.Op != OpCmd && fs.NArg() > 0 {
			return bad(fmt.Errorf("unexpected argument %q (a command runs only with -op cmd)", fs.Arg(0)))
		}
	}
	peers, err := parsePeers(f.peers)
	if err != nil {
		return bad(err)
	}
	cfg.Peers, cfg.Insecure = peers, f.insecure
	if f.keyFile != "" {
		if cfg.Keyring, err = keyring(f.keyFile, f.keyID); err != nil {
			return err
		}
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := cfg.Validate(); err != nil {
		return bad(err)
	}
	out := f.out
	if out == "" {
		out = fmt.Sprintf("stamps-r%d.csv", f.rank)
	}
	local, err := localClock(f.clockCfg)
	if err != nil {
		return err
	}
	rd, err := gtime.Open(f.page)
	if err != nil {
		return fmt.Errorf("-page: %w", err)
	}
	defer rd.Close()
	// Bound to this node's own address, not every interface: its
	// datagrams leave from the address its peers expect.
	me := peers[f.rank]
	conn, err := transport.ListenUDP(me.String(), transport.UDPOptions{Timestamps: latency})
	if err != nil {
		return err
	}
	stamps, err := Run(ctx, cfg, conn, Clocks{Local: local, Global: rd.At})
	if err != nil {
		return err
	}
	return WriteStampFile(out, stamps)
}

// keyring reads a key file as the daemon does (keyfile.Read: mode
// and owner checked) and seals with key id.
func keyring(file string, id uint) (*wire.Keyring, error) {
	if id > 1<<32-1 {
		return nil, fmt.Errorf("-key-id %d: want 0..%d", id, uint32(1<<32-1))
	}
	keys, err := keyfile.Read(file)
	if err != nil {
		return nil, fmt.Errorf("-key: %w", err)
	}
	kr, err := wire.NewKeyring(uint32(id), keys)
	if err != nil {
		return nil, fmt.Errorf("-key %s: %w", file, err)
	}
	return kr, nil
}

// WriteStampFile writes stamps to a new file at path.
func WriteStampFile(path string, stamps []Stamp) error {
	fo, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteStamps(fo, stamps); err != nil {
		fo.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return fo.Close()
}
