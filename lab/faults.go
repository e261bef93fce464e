package lab

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/lab/netlab"
	"golang.org/x/sys/unix"
)

// Faults the lab injects into a running RunGclock (docs/lab.md, "Faults";
// docs/daemon.md, "Restarts and state").

// Fault kinds.
const (
	// faultKill: SIGKILL the host's daemon, start it again (same config,
	// same state file) after For.
	faultKill = "kill"
	// faultStop: SIGSTOP the daemon, SIGCONT after For.
	faultStop = "stop"
	// faultPartition: the switch drops every frame from or to the host
	// for For.
	faultPartition = "partition"
	// faultPartitionOut: the switch drops every frame from the host (it
	// can hear, not speak) for For; faultPartitionIn every frame to it
	// (it can speak, not hear). One-way partitions.
	faultPartitionOut = "partition-out"
	faultPartitionIn  = "partition-in"
)

// knownFault reports whether kind is a fault kind.
func knownFault(kind string) bool {
	switch kind {
	case faultKill, faultStop, faultPartition, faultPartitionOut, faultPartitionIn:
		return true
	}
	return false
}

// partition reports whether kind is a partition (one-way or not).
func partition(kind string) bool {
	return kind == faultPartition || kind == faultPartitionOut || kind == faultPartitionIn
}

// Fault is one event of a run: at At (from the daemons' start) Kind
// happens to Host for For.
type Fault struct {
	At   time.Duration `json:"at"`
	Host int           `json:"host"`
	Kind string        `json:"kind"`
	For  time.Duration `json:"for"`
}

func (f Fault) String() string {
	return fmt.Sprintf("%s host %d at %v for %v", f.Kind, f.Host, f.At, f.For)
}

func (f Fault) end() time.Duration { return f.At + f.For }

// validate checks a fault against the run.
func (f Fault) validate(i, hosts int, d time.Duration) error {
	switch {
	case !knownFault(f.Kind):
		return fmt.Errorf("gclock: faults[%d].kind %q: want kill, stop, partition, partition-out or partition-in", i, f.Kind)
	case f.Host < 0 || f.Host >= hosts:
		return fmt.Errorf("gclock: faults[%d].host %d: want 0..%d", i, f.Host, hosts-1)
	case f.At <= 0 || f.For <= 0 || f.end() >= d:
		return fmt.Errorf("gclock: faults[%d] (%v): want 0 < at, 0 < for, at+for < duration %v", i, f, d)
	}
	return nil
}

// FaultWindow is how long after a fault's end FaultResult still counts.
const FaultWindow = 20 * time.Second

// FaultResult is what happened around one fault, per host: from the fault's
// start to FaultWindow after its end (or the end of the run).
type FaultResult struct {
	Fault Fault `json:"fault"`
	Host  int   `json:"host"`
	// Reads in the window; Inside: the truth inside [earliest, latest];
	// Synced and SyncedInside: the same for the reads claiming synced;
	// Unsynced: reads without bounds.
	Reads, Inside, Synced, SyncedInside, Unsynced int
	// MaxErrNs is the largest |estimate - truth| of reads with bounds;
	// MaxHalfWidthNs the largest half-width among them.
	MaxErrNs, MaxHalfWidthNs int64
	// MaxSyncedErrNs is the largest |estimate - truth| of synced reads.
	MaxSyncedErrNs int64
	// LostSynced: the host stopped saying synced in the window;
	// BackToSyncedS is the time from the fault's end to its first synced
	// read after the last read that was not (0: synced again by the end;
	// -1: not synced again in the window).
	LostSynced    bool    `json:"lost_synced"`
	BackToSyncedS float64 `json:"back_to_synced_s"`
}

// faultResults condenses the series around each fault.
func faultResults(series []SeriesPoint, faults []Fault, hosts int, runEnd time.Duration) []FaultResult {
	var out []FaultResult
	for _, f := range faults {
		to := min(runEnd, f.end()+FaultWindow)
		for h := range hosts {
			r := FaultResult{Fault: f, Host: h, BackToSyncedS: -1}
			var lastNot time.Duration
			backAt := time.Duration(-1)
			for _, p := range series {
				at := time.Duration(p.AtNs)
				if p.Host != h || at < f.At || at >= to {
					continue
				}
				r.Reads++
				inside := p.LoNs <= 0 && p.HiNs >= 0
				if inside {
					r.Inside++
				}
				if p.Synced {
					r.Synced++
					if inside {
						r.SyncedInside++
					}
					if backAt < 0 {
						backAt = at
					}
				} else {
					r.LostSynced, lastNot, backAt = true, at, -1
				}
				if p.LoNs == math.MinInt64 || p.HiNs == math.MaxInt64 {
					r.Unsynced++
					continue
				}
				r.MaxErrNs = max(r.MaxErrNs, abs64(p.ErrNs))
				if p.Synced {
					r.MaxSyncedErrNs = max(r.MaxSyncedErrNs, abs64(p.ErrNs))
				}
				r.MaxHalfWidthNs = max(r.MaxHalfWidthNs, (p.HiNs-p.LoNs)/2)
			}
			switch {
			case !r.LostSynced:
				r.BackToSyncedS = 0
			case backAt >= 0 && backAt > lastNot:
				r.BackToSyncedS = max(0, (backAt - f.end()).Seconds())
			}
			out = append(out, r)
		}
	}
	return out
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// faultRunner applies a run's faults as time passes.
type faultRunner struct {
	l              *Lab
	faults         []Fault
	started, ended []bool
	down           []bool // by host: killed and not started again
	stopped        []bool // by host: SIGSTOPped
	startDaemon    func(int) (*netlab.Proc, error)
}

func newFaultRunner(l *Lab, faults []Fault, startDaemon func(int) (*netlab.Proc, error)) *faultRunner {
	return &faultRunner{l: l, faults: faults, started: make([]bool, len(faults)), ended: make([]bool, len(faults)),
		down: make([]bool, l.Config().Hosts), stopped: make([]bool, l.Config().Hosts), startDaemon: startDaemon}
}

// step starts and ends the faults due at run time at; procs[i] is host
// i's daemon (replaced when a killed one starts again).
func (fr *faultRunner) step(at time.Duration, procs []*netlab.Proc) error {
	for i, f := range fr.faults {
		h := f.Host
		if !fr.started[i] && at >= f.At {
			fr.started[i] = true
			fr.l.Logger().Info("fault starts", "fault", f.String())
			switch f.Kind {
			case faultKill:
				if err := procs[h].Signal(unix.SIGKILL); err != nil {
					return fmt.Errorf("lab: gclock: %v: %w", f, err)
				}
				select {
				case <-procs[h].Done():
				case <-time.After(5 * time.Second):
					return fmt.Errorf("lab: gclock: %v: the daemon did not die", f)
				}
				fr.down[h] = true
			case faultStop:
				if err := procs[h].Signal(unix.SIGSTOP); err != nil {
					return fmt.Errorf("lab: gclock: %v: %w", f, err)
				}
				fr.stopped[h] = true
			case faultPartition:
				if err := fr.l.Switch().Partition(h, f.For); err != nil {
					return fmt.Errorf("lab: gclock: %v: %w", f, err)
				}
			case faultPartitionOut, faultPartitionIn:
				if err := fr.l.Switch().PartitionOneWay(h, f.Kind == faultPartitionOut, f.For); err != nil {
					return fmt.Errorf("lab: gclock: %v: %w", f, err)
				}
			}
		}
		if fr.started[i] && !fr.ended[i] && at >= f.end() {
			fr.ended[i] = true
			fr.l.Logger().Info("fault ends", "fault", f.String())
			switch f.Kind {
			case faultKill:
				p, err := fr.startDaemon(h)
				if err != nil {
					return fmt.Errorf("lab: gclock: %v: restart: %w", f, err)
				}
				procs[h], fr.down[h] = p, false
			case faultStop:
				if err := procs[h].Signal(unix.SIGCONT); err != nil {
					return fmt.Errorf("lab: gclock: %v: %w", f, err)
				}
				fr.stopped[h] = false
			}
		}
	}
	return nil
}

// resume continues the stopped daemons, so that they can be stopped.
func (fr *faultRunner) resume(procs []*netlab.Proc) {
	for h, s := range fr.stopped {
		if s && h < len(procs) {
			_ = procs[h].Signal(unix.SIGCONT)
		}
	}
}

// ParseFault parses KIND:HOST:AT:FOR (kill:1:20s:3s, stop:2:40s:10s,
// partition:3:15s:30s, partition-in:0:30s:8s), the `gclock lab --fault`
// syntax.
func ParseFault(s string) (Fault, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 4 {
		return Fault{}, fmt.Errorf("fault %q: want KIND:HOST:AT:FOR (kill:1:20s:3s)", s)
	}
	f := Fault{Kind: parts[0]}
	if !knownFault(f.Kind) {
		return Fault{}, fmt.Errorf("fault %q: kind %q: want kill, stop, partition, partition-out or partition-in", s, f.Kind)
	}
	h, err := strconv.Atoi(parts[1])
	if err != nil || h < 0 {
		return Fault{}, fmt.Errorf("fault %q: host %q: want a host index", s, parts[1])
	}
	f.Host = h
	if f.At, err = time.ParseDuration(parts[2]); err != nil || f.At <= 0 {
		return Fault{}, fmt.Errorf("fault %q: at %q: want a positive duration (20s)", s, parts[2])
	}
	if f.For, err = time.ParseDuration(parts[3]); err != nil || f.For <= 0 {
		return Fault{}, fmt.Errorf("fault %q: for %q: want a positive duration (3s)", s, parts[3])
	}
	return f, nil
}

// randomFaults is a Jepsen-style schedule (`gclock lab --faults
// random:SEED`): from warmup to the end of a run of duration on hosts
// hosts, one fault at a time of a kind, host and length drawn with seed
// (kill, stop and the three partitions, 2 to 12 s), each followed by a
// quiet gap of 8 to 20 s in which the cluster must settle. The reference
// (host 0, and whoever took over) is hit as often as any host.
func randomFaults(seed uint64, hosts int, warmup, duration time.Duration) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x6661756c74))
	kinds := []string{faultKill, faultStop, faultPartition, faultPartitionOut, faultPartitionIn}
	var out []Fault
	at := warmup + 2*time.Second
	for {
		f := Fault{At: at, Host: rng.IntN(hosts), Kind: kinds[rng.IntN(len(kinds))],
			For: time.Duration(2+rng.IntN(11)) * time.Second}
		if f.end()+5*time.Second >= duration {
			return out
		}
		out = append(out, f)
		at = f.end() + time.Duration(8+rng.IntN(13))*time.Second
	}
}

// ParseFaults parses the `gclock lab --faults` value: random:SEED.
func ParseFaults(s string, hosts int, warmup, duration time.Duration) ([]Fault, error) {
	v, ok := strings.CutPrefix(s, "random:")
	if !ok {
		return nil, fmt.Errorf("faults %q: want random:SEED", s)
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("faults %q: seed %q: want an unsigned integer", s, v)
	}
	fs := randomFaults(seed, hosts, warmup, duration)
	if len(fs) == 0 {
		return nil, fmt.Errorf("faults %q: a run of %v (warm-up %v) leaves no room for a fault: want a longer --duration", s, duration, warmup)
	}
	return fs, nil
}
