package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/netmodel"
)

// RunSpec is one `gclock lab` run: a lab, its switch validated, gclock's
// daemons with busy loops beside them and, on the same lab at the same
// time, the peers (chronyd, ptp4l) they are compared with.
type RunSpec struct {
	Lab netlab.Config
	// Gclock runs the daemons (Command required; Duration and Warmup are
	// the run's).
	Gclock GclockConfig
	// Peers are PeerChrony and/or PeerPTP4L, run with Peer.
	Peers []string
	Peer  PeerConfig
	// Validate is the switch validation before the run; nil: none.
	Validate *netlab.ValidateConfig
	// Load is the number of CPU-bound processes beside the daemons (0..64).
	Load int
	// LoadOutside is the number of busy loops outside the lab's namespaces
	// (StartLoadOutside, 0..64).
	LoadOutside int
	// Flood is the softirq load in frames per second (StartFlood; 0: none).
	Flood int
	// Cross is the cross traffic's share of the port rate (StartCross; 0:
	// none; needs Lab.PortRate).
	Cross float64
	// LoadCommand (and LoadEnv added to its environment) runs the load
	// generators: `gclock` (LoadGenMain behind `gclock lab loadgen`).
	// Required for Flood and Cross.
	LoadCommand, LoadEnv []string
	// Progress, if set, gets a line when the daemons start.
	Progress io.Writer
}

// RunReport is what Run found (`gclock lab --json`).
type RunReport struct {
	Hosts      int                `json:"hosts"`
	Link       string             `json:"link"`
	DurationNs int64              `json:"duration_ns"`
	WarmupNs   int64              `json:"warmup_ns"`
	SchedFIFO  bool               `json:"switch_sched_fifo"`
	Validation []netlab.DirResult `json:"validation"`
	// Switch is what the switch did to every direction during the run
	// (frames, drops, its release lateness and write cost).
	Switch []netlab.DirStats `json:"switch,omitempty"`
	Load   int               `json:"load"`
	// The load beside it (RunSpec) and the switch's port model.
	LoadOutside int     `json:"load_outside,omitempty"`
	Flood       int     `json:"flood_pps,omitempty"`
	Cross       float64 `json:"cross,omitempty"`
	PortRate    int64   `json:"port_rate_bps,omitempty"`
	// Ports: what every egress port's queue sent during the run (with a
	// port rate).
	Ports []netlab.PortStats `json:"ports,omitempty"`
	// LoadAvg is the machine's load average (1, 5, 15 min, /proc/loadavg)
	// when the daemons started and when they stopped.
	LoadAvgStart [3]float64 `json:"loadavg_start"`
	LoadAvgEnd   [3]float64 `json:"loadavg_end"`
	Clocks       string     `json:"clocks"` // emulated or raw
	// Wander is the emulated clocks' frequency change (emulated only).
	Wander *Wander `json:"wander,omitempty"`
	// Summary and Nodes are gclock's, under `gclock sim --json`'s names.
	Summary GclockSummary       `json:"summary"`
	Nodes   []GclockSummary     `json:"nodes"`
	Truth   []ClockTruth        `json:"clocks_truth"`
	Compare map[string]Summary  `json:"compare,omitempty"`
	Notes   map[string][]string `json:"notes,omitempty"`
	// Faults: what happened around each fault (per host).
	Faults []FaultResult `json:"faults,omitempty"`
	// LimitError names a replay for the limit that failed
	// (GclockResult.LimitError).
	LimitError string `json:"limit_error,omitempty"`

	// Gclock is the daemons' whole evaluation (series, logs), Peers the
	// peers' results.
	Gclock GclockResult `json:"-"`
	Peers  []PeerResult `json:"-"`
}

// Run builds the lab (root), validates its switch, runs gclock's daemons
// (and the peers) with the busy loops beside them, evaluates them against
// the emulated clocks and removes the lab.
func Run(ctx context.Context, spec RunSpec) (RunReport, error) {
	var rep RunReport
	cfg, gc, pc := spec.Lab, spec.Gclock, spec.Peer
	if err := spec.Check(); err != nil {
		return rep, err
	}
	l, err := Up(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer l.Down()

	rep = RunReport{Hosts: cfg.Hosts, Link: cfg.Link.String(), DurationNs: pc.Duration.Nanoseconds(),
		WarmupNs: pc.Warmup.Nanoseconds(), SchedFIFO: cfg.SchedFIFO, Load: spec.Load, Clocks: "raw",
		LoadOutside: spec.LoadOutside, Flood: spec.Flood, Cross: spec.Cross, PortRate: cfg.PortRate}
	if gc.Emulate {
		rep.Clocks, rep.Wander = "emulated", &gc.Wander
		// One origin for the daemons' clocks and chronyd's: chronyd runs
		// on the same emulated clocks, through the clock shim.
		if gc.Origin == 0 {
			gc.Origin = gtime.RawNow()
		}
		if slices.Contains(spec.Peers, PeerChrony) && pc.Clocks == nil {
			if pc.Clocks, err = gc.HostClocks(cfg.Hosts); err != nil {
				return rep, err
			}
		}
	}
	if spec.Validate != nil {
		if rep.Validation, err = l.Validate(ctx, *spec.Validate); err != nil {
			return rep, err
		}
	}
	if err := startLoads(ctx, l, spec, max(gc.Duration, pc.Duration)+loadMargin); err != nil {
		return rep, err
	}
	if spec.Progress != nil {
		peers := ""
		if len(spec.Peers) > 0 {
			peers = " and " + strings.Join(spec.Peers, ", ")
		}
		fmt.Fprintf(spec.Progress, "gclock lab: running gclock daemons%s for %v with %s\n", peers, gc.Duration, describeLoad(spec, cfg.PortRate))
	}
	rep.LoadAvgStart = loadAvg()
	var results []PeerResult
	var perr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if len(spec.Peers) > 0 {
			results, perr = l.runPeers(ctx, spec.Peers, pc)
		}
	}()
	if sw := l.Switch(); sw != nil {
		sw.ResetStats()
	}
	gres, gerr := l.RunGclock(ctx, gc)
	<-done
	rep.LoadAvgEnd = loadAvg()
	if sw := l.Switch(); sw != nil {
		rep.Switch = sw.Stats()
		rep.Ports = sw.PortStats()
	}
	if gerr != nil {
		return rep, gerr
	}
	if perr != nil {
		return rep, perr
	}
	rep.Summary, rep.Nodes, rep.Truth, rep.Faults = gres.Summary, gres.Nodes, gres.Clocks, gres.Faults
	rep.LimitError = gres.LimitError
	if len(results) > 0 {
		rep.Compare = map[string]Summary{}
		rep.Notes = map[string][]string{}
		for _, r := range results {
			rep.Compare[r.Peer] = r.Summary
			rep.Notes[r.Peer] = r.Notes
		}
	}
	rep.Gclock, rep.Peers = gres, results
	return rep, nil
}

// Check reports the first field of spec that Run cannot run.
func (spec RunSpec) Check() error {
	cfg := spec.Lab
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := spec.Peer.Validate(cfg.Hosts); err != nil {
		return err
	}
	if err := spec.Gclock.Validate(); err != nil {
		return err
	}
	if err := checkLoads(spec, cfg.PortRate); err != nil {
		return fmt.Errorf("lab: run: %w", err)
	}
	for _, p := range spec.Peers {
		if p != PeerChrony && p != PeerPTP4L {
			return fmt.Errorf("lab: run: unknown peer %q (want %s, %s)", p, PeerChrony, PeerPTP4L)
		}
	}
	return nil
}

// loadMargin is how much longer than the run the load generators may run
// (the lab stops them at its end; the bound is for a lab that dies).
const loadMargin = 30 * time.Second

// checkLoads checks the loads spec asks for (Load, LoadOutside, Flood,
// Cross and LoadCommand) on a lab whose ports run at portRate bit/s.
func checkLoads(spec RunSpec, portRate int64) error {
	if spec.Load < 0 || spec.Load > 64 {
		return fmt.Errorf("load %d: want 0..64", spec.Load)
	}
	if spec.LoadOutside < 0 || spec.LoadOutside > 64 {
		return fmt.Errorf("load outside %d: want 0..64", spec.LoadOutside)
	}
	if spec.Flood < 0 || spec.Flood > 1e6 {
		return fmt.Errorf("flood %d frames/s: want 0..1000000", spec.Flood)
	}
	if !(spec.Cross >= 0 && spec.Cross <= 1) {
		return fmt.Errorf("cross traffic %v: want a share of the port rate in [0, 1]", spec.Cross)
	}
	if spec.Cross > 0 && portRate <= 0 {
		return fmt.Errorf("cross traffic %v needs a port rate (--port-rate)", spec.Cross)
	}
	if (spec.Cross > 0 || spec.Flood > 0) && len(spec.LoadCommand) == 0 {
		return fmt.Errorf("cross traffic and flood need the load generator command (RunSpec.LoadCommand)")
	}
	return nil
}

// startLoads starts every load spec asks for, each stopped when l goes down
// (Down stops every process the lab started).
func startLoads(ctx context.Context, l *Lab, spec RunSpec, d time.Duration) error {
	if spec.Load > 0 {
		if _, err := l.StartLoad(spec.Load); err != nil {
			return err
		}
	}
	if spec.LoadOutside > 0 {
		if _, err := l.StartLoadOutside(spec.LoadOutside); err != nil {
			return err
		}
	}
	if spec.Flood > 0 {
		if _, err := l.StartFlood(ctx, spec.LoadCommand, spec.LoadEnv, spec.Flood, d); err != nil {
			return err
		}
	}
	if spec.Cross > 0 {
		if _, err := l.StartCross(spec.LoadCommand, spec.LoadEnv, spec.Cross, d); err != nil {
			return err
		}
	}
	return nil
}

// describeLoad says in words what load a run has beside the daemons.
func describeLoad(spec RunSpec, portRate int64) string {
	s := fmt.Sprintf("%d busy loops beside them", spec.Load)
	if spec.LoadOutside > 0 {
		s += fmt.Sprintf(", %d outside the lab", spec.LoadOutside)
	}
	if spec.Flood > 0 {
		s += fmt.Sprintf(", a flood of %d frames/s (softirq)", spec.Flood)
	}
	if spec.Cross > 0 {
		s += fmt.Sprintf(", cross traffic at %.0f%% of %sbit/s ports", 100*spec.Cross, netmodel.FormatRate(portRate))
	}
	return s
}

// loadAvg reads the machine's load average (1, 5 and 15 minutes) from
// /proc/loadavg; zeros when it cannot.
func loadAvg() [3]float64 {
	var v [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return v
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		v[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return v
}
