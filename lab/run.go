package lab

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// RunSpec is one `gclock lab` run: a lab, its switch validated, gclock's
// daemons with busy loops beside them and, on the same lab at the same
// time, the peers (chronyd, ptp4l) they are compared with.
type RunSpec struct {
	Lab Config
	// Gclock runs the daemons (Command required; Duration and Warmup are
	// the run's).
	Gclock GclockConfig
	// Peers are PeerChrony and/or PeerPTP4L, run with Peer.
	Peers []string
	Peer  PeerConfig
	// Validate is the switch validation before the run; nil: none.
	Validate *ValidateConfig
	// Load is the number of CPU-bound processes beside the daemons (0..64).
	Load int
	// Progress, if set, gets a line when the daemons start.
	Progress io.Writer
}

// RunReport is what Run found (`gclock lab --json`).
type RunReport struct {
	Hosts      int         `json:"hosts"`
	Link       string      `json:"link"`
	DurationNs int64       `json:"duration_ns"`
	WarmupNs   int64       `json:"warmup_ns"`
	Realtime   bool        `json:"switch_realtime"`
	Validation []DirResult `json:"validation"`
	// Switch is what the switch did to every direction during the run
	// (frames, drops, its release lateness and write cost).
	Switch []DirStats `json:"switch,omitempty"`
	Load   int        `json:"load"`
	Clocks string     `json:"clocks"` // emulated or raw
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
	if err := pc.Validate(cfg.Hosts); err != nil {
		return rep, err
	}
	if err := gc.Validate(); err != nil {
		return rep, err
	}
	if spec.Load < 0 || spec.Load > 64 {
		return rep, fmt.Errorf("lab: run: load %d: want 0..64", spec.Load)
	}
	for _, p := range spec.Peers {
		if p != PeerChrony && p != PeerPTP4L {
			return rep, fmt.Errorf("lab: run: unknown peer %q (want %s, %s)", p, PeerChrony, PeerPTP4L)
		}
	}
	l, err := Up(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer l.Down()

	rep = RunReport{Hosts: cfg.Hosts, Link: cfg.Link.String(), DurationNs: pc.Duration.Nanoseconds(),
		WarmupNs: pc.Warmup.Nanoseconds(), Realtime: cfg.Realtime, Load: spec.Load, Clocks: "raw"}
	if gc.Emulate {
		rep.Clocks, rep.Wander = "emulated", &gc.Wander
	}
	if spec.Validate != nil {
		if rep.Validation, err = l.Validate(ctx, *spec.Validate); err != nil {
			return rep, err
		}
	}
	if spec.Load > 0 {
		stopLoad, err := l.StartLoad(spec.Load)
		if err != nil {
			return rep, err
		}
		defer stopLoad()
	}
	if spec.Progress != nil {
		peers := ""
		if len(spec.Peers) > 0 {
			peers = " and " + strings.Join(spec.Peers, ", ")
		}
		fmt.Fprintf(spec.Progress, "gclock lab: running gclock daemons%s for %v with %d busy loops beside them\n", peers, gc.Duration, spec.Load)
	}
	var results []PeerResult
	var perr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if len(spec.Peers) > 0 {
			results, perr = l.RunPeers(ctx, spec.Peers, pc)
		}
	}()
	if sw := l.Switch(); sw != nil {
		sw.ResetStats()
	}
	gres, gerr := l.RunGclock(ctx, gc)
	<-done
	if sw := l.Switch(); sw != nil {
		rep.Switch = sw.Stats()
	}
	if gerr != nil {
		return rep, gerr
	}
	if perr != nil {
		return rep, perr
	}
	rep.Summary, rep.Nodes, rep.Truth, rep.Faults = gres.Summary, gres.Nodes, gres.Clocks, gres.Faults
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
