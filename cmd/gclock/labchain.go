package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/netlab"
)

const labChainUsage = `usage: gclock lab chain [flags]

Measures the chain to programs' clocks: gclock's refclock feed to chronyd,
which steers CLOCK_REALTIME (docs/daemon.md, "NTP and chrony"). Runs the
daemons in reference-realtime mode on a lab (host 0 the reference) and on
every other host one chronyd -x (never touches the clock) per --setting,
all fed the same samples through a relay that makes the system clock they
discipline an emulated one (--sys-offset, --sys-drift, --sys-wander). Every
chronyd's estimate is read every --read-every and judged against the truth;
the report gives per host gclock's own error and each setting's chain error
(median and p99), and the bound the ClockBound segment would publish for
the clock chronyd steers. Root, chronyd.

flags:
`

// settingFlags collects repeated --setting flags.
type settingFlags []lab.ChainSetting

func (s *settingFlags) String() string { return fmt.Sprint(len(*s)) }
func (s *settingFlags) Set(v string) error {
	cs, err := lab.ParseChainSetting(v)
	if err != nil {
		return err
	}
	*s = append(*s, cs)
	return nil
}

func runLabChain(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gclock lab chain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), labChainUsage); fs.PrintDefaults() }
	d := lab.DefaultChainConfig()
	hosts := fs.Int("hosts", 4, "lab hosts (host 0 is the reference: no chronyd)")
	duration := fs.Duration("duration", d.Gclock.Duration, "run length")
	warmup := fs.Duration("warmup", d.Gclock.Warmup, "readings before this are not counted")
	every := fs.Duration("every", d.Every, "the daemons' refclock.every")
	readEvery := fs.Duration("read-every", d.ReadEvery, "how often every chronyd's tracking is read")
	seed := fs.Uint64("seed", d.Gclock.Seed, "seed of the emulated clocks (gclock's and the system clock's)")
	sysOffset := fs.Duration("sys-offset", d.SysClock.Offset, "the emulated system clock's initial offset")
	sysDrift := fs.Float64("sys-drift", d.SysClock.DriftPPM, "the emulated system clock's drift (ppm) that chronyd does not know")
	sysWander := fs.String("sys-wander", "default", "the emulated system clock's wander: default (the lab's, as --wander), none, or RW:SINE:PERIOD (random walk ppm/sqrt(s), sine ppm, its period), e.g. 0.02:1:5m")
	var settings settingFlags
	fs.Var(&settings, "setting", "a chrony setting NAME=REFCLOCK-OPTIONS[;EXTRA-LINE...] (repeatable; default: shipped, poll0, poll1, poll2, poll4)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usage.Errorf("lab chain: unexpected argument %q", fs.Arg(0))
	}
	cc := d
	cc.Gclock.Duration, cc.Gclock.Warmup, cc.Gclock.Seed = *duration, *warmup, *seed
	cc.Every, cc.ReadEvery = *every, *readEvery
	cc.SysClock.Offset, cc.SysClock.DriftPPM, cc.SysClock.Seed = *sysOffset, *sysDrift, *seed
	switch *sysWander {
	case "default":
	case "none":
		cc.SysClock.Wander = lab.Wander{}
	default:
		w, err := parseSysWander(*sysWander)
		if err != nil {
			return usage.Errorf("lab chain: --sys-wander: %v", err)
		}
		cc.SysClock.Wander = w
	}
	if len(settings) > 0 {
		cc.Settings = settings
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab chain: %w", err)
	}
	cc.Gclock.Command = []string{self, "daemon"}
	if err := cc.Validate(); err != nil {
		return usage.Errorf("lab chain: %v", err)
	}
	if err := netlab.Check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := netlab.DefaultConfig()
	cfg.Hosts, cfg.SchedFIFO, cfg.Seed = *hosts, true, *seed
	if cfg.RunDir, err = os.MkdirTemp("", "gclab-chain-"); err != nil {
		return fmt.Errorf("lab chain: %w", err)
	}
	fmt.Fprintf(stderr, "gclock lab chain: %d hosts, %d chronyd -x per host, %v (logs: %s)\n", *hosts, len(cc.Settings), *duration, cfg.RunDir)
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return err
	}
	res, err := l.RunChain(ctx, cc)
	l.Down()
	if err != nil {
		return err
	}
	if *asJSON {
		e := json.NewEncoder(stdout)
		e.SetIndent("", "  ")
		return e.Encode(res)
	}
	fmt.Fprintf(stdout, "%s\nlogs: %s\ncommand: gclock lab chain %s\n", lab.ChainReport(res), res.Logs, shellJoin(args))
	return nil
}

// parseSysWander reads RW:SINE:PERIOD.
func parseSysWander(s string) (lab.Wander, error) {
	f := strings.Split(s, ":")
	if len(f) != 3 {
		return lab.Wander{}, fmt.Errorf("%q: want default, none or RW:SINE:PERIOD (e.g. 0.02:1:5m)", s)
	}
	rw, err1 := strconv.ParseFloat(f[0], 64)
	sine, err2 := strconv.ParseFloat(f[1], 64)
	period, err3 := time.ParseDuration(f[2])
	switch {
	case err1 != nil || !(rw >= 0 && rw <= 10):
		return lab.Wander{}, fmt.Errorf("%q: random walk %q: want 0..10 ppm/sqrt(s)", s, f[0])
	case err2 != nil || !(sine >= 0 && sine <= 100):
		return lab.Wander{}, fmt.Errorf("%q: sine %q: want 0..100 ppm", s, f[1])
	case err3 != nil || (sine > 0 && period < 2*time.Second):
		return lab.Wander{}, fmt.Errorf("%q: period %q: want a duration of at least 2s", s, f[2])
	}
	return lab.Wander{RandomWalkPPM: rw, SinePPM: sine, SinePeriod: period}, nil
}

// shellJoin quotes the arguments that a shell would split.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if a == "" || strings.ContainsAny(a, " \t;'\"$*?()<>|&") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
