package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/eval/limit"
	"github.com/gclock/gclock/internal/quantile"
	"github.com/gclock/gclock/lab"
)

// labReplayRow is one file's (or all files') replay figures, |error| in ns.
type labReplayRow struct {
	File      string `json:"file"`
	Exchanges int    `json:"exchanges"`
	Rounds    int    `json:"rounds"`
	Restarts  int    `json:"restarts"`
	// Exchanges the floor filter kept out, as the daemon does (--floor):
	// on their round trip, and on one direction alone.
	BelowFloor       int `json:"below_floor"`
	OneWayBelowFloor int `json:"one_way_below_floor"`
	// Rounds the centre line found suspect of a frequency break, and the
	// breaks confirmed (--breaks).
	Suspects    int     `json:"break_suspects"`
	Breaks      int     `json:"breaks"`
	Evaluations int     `json:"evaluations"`
	P50Ns       int64   `json:"error_p50_ns"`
	P90Ns       int64   `json:"error_p90_ns"`
	P99Ns       int64   `json:"error_p99_ns"`
	BiasNs      float64 `json:"error_bias_ns"`
	// Limit: the median |error| on the same exchanges and evaluations of
	// the textbook estimator least on the files' mean (--limit;
	// eval/limit, Common: one choice for the files given), and which; on
	// the "all" row their mean. Luckiest: the least of the file's own
	// textbook medians and which (the mean of them on "all").
	LimitNs      float64 `json:"limit_ns,omitempty"`
	LimitName    string  `json:"limit,omitempty"`
	LuckiestNs   float64 `json:"luckiest_ns,omitempty"`
	LuckiestName string  `json:"luckiest,omitempty"`
	// OracleNs: the Kalman filter told the clocks' true wander (0 on raw
	// clocks) on the same exchanges (eval/limit's oracle).
	OracleNs float64 `json:"oracle_ns,omitempty"`
	// Truth: "raw" (both clocks the kernel's) or "emulated" (the run's
	// clocks rebuilt from its daemons' configs beside the file).
	Truth string `json:"truth,omitempty"`
}

// runLabReplay is `gclock lab replay`: the centre-line estimator replayed
// on the exchanges a raw-clock lab run logged (--clocks raw --measurements).
func runLabReplay(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gclock lab replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: gclock lab replay [flags] measurements-h1.csv ...

Replays exchanges logged by daemons (log.measurements; gclock lab
--measurements writes /run/gclab/gclock/measurements-h<i>.csv, and lab bench
keeps them) through the centre-line estimator, one file (one source) at a
time, and prints its error against the truth. Where the daemons' configs lie
beside the file (h<i>.yaml, as a lab run writes them) and their clocks are
emulated, the truth is those clocks rebuilt, as the lab's evaluator does;
otherwise it is a raw run's: both clocks are the kernel's, offset 0. Use it
to try estimator settings on the same exchanges.

flags:
`)
		fs.PrintDefaults()
	}
	rc := daemon.DefaultReplayConfig()
	points := fs.Int("center-points", 0, "exchanges per side the centre line is fitted to (0: the default, 15)")
	band := fs.Duration("center-band", 0, "or all within this of the line's margin (0: the default, 500ns)")
	window := fs.Int("window", rc.Hull.Window, "exchanges the hull keeps")
	memory := fs.Float64("center-memory", lab.LabDaemonConfig().Sync.CenterMemory, "the centre line's memory in rounds, as the lab's daemons (sync.center_memory; 0: none)")
	warmup := fs.Duration("warmup", time.Duration(rc.Warmup), "left out of the figures after the first exchange")
	asJSON := fs.Bool("json", false, "print JSON")
	withLimit := fs.Bool("limit", false, "also the limit: the textbook estimator (eval/limit) least on the files' mean, chosen with hindsight for the files given, beside each file's own best, and the oracle (a Kalman filter told the clocks' true random walk of the frequency: none on raw clocks)")
	floorCheck := fs.String("floor", "on", "the floor filter the daemon runs before its estimators: on (round trip and one way), round-trip (the round trip alone), off")
	breaks := fs.Bool("breaks", true, "frequency breaks cut the centre line's window, as the daemon's (estimate.HullConfig.CenterBreaks; the replay has no early rounds: a suspect waits for the next logged round)")
	floorOnly := fs.Bool("floor-only", false, "the centre line on the fastest exchanges alone (the estimator before the body line)")
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("lab replay: no measurements file")
	}
	rc.Hull.Window, rc.Hull.CenterPoints, rc.Hull.CenterBand, rc.Warmup = *window, *points, int64(*band), int64(*warmup)
	rc.Hull.CenterMemory = *memory
	rc.Hull.CenterFloorOnly, rc.Limit = *floorOnly, *withLimit
	rc.Hull.CenterBreaks = *breaks
	switch *floorCheck {
	case "on":
	case "round-trip":
		fc := *rc.Floor
		fc.NoOneWay = true
		rc.Floor = &fc
	case "off":
		rc.Floor = nil
	default:
		return fmt.Errorf("lab replay: --floor %q: want on, round-trip or off", *floorCheck)
	}
	var rows []labReplayRow
	var all []int64
	var limits []limit.Result // --limit: each file's, and its row in rows
	var limitRows []int
	total := labReplayRow{File: "all"}
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("lab replay: %w", err)
		}
		ms, err := daemon.ReadMeasurements(f, path)
		f.Close()
		if err != nil {
			return fmt.Errorf("lab replay: %w", err)
		}
		frc := rc
		truth := "raw"
		if len(ms) > 0 {
			tr, wander, err := replayTruth(path, ms[0].Source)
			if err != nil {
				return fmt.Errorf("lab replay: %w", err)
			}
			if tr != nil {
				frc.Truth, frc.Wander, truth = tr, wander, "emulated"
			}
		}
		res, err := daemon.Replay(ms, frc)
		if err != nil {
			return fmt.Errorf("lab replay: %s: %w", path, err)
		}
		row := replayRow(path, res.Errors)
		row.Exchanges, row.Rounds, row.Restarts, row.Truth = res.Exchanges, res.Rounds, res.Restarts, truth
		row.BelowFloor, row.OneWayBelowFloor = res.BelowFloor, res.OneWayBelowFloor
		row.Suspects, row.Breaks = res.Suspects, res.Breaks
		if res.Limit != nil {
			row.LuckiestNs, row.LuckiestName, row.OracleNs = res.Limit.Best, res.Limit.BestName, res.Limit.Oracle
			limits = append(limits, *res.Limit)
			limitRows = append(limitRows, len(rows))
		}
		rows = append(rows, row)
		all = append(all, res.Errors...)
		total.Exchanges += res.Exchanges
		total.Rounds += res.Rounds
		total.Restarts += res.Restarts
		total.BelowFloor += res.BelowFloor
		total.OneWayBelowFloor += res.OneWayBelowFloor
		total.Suspects += res.Suspects
		total.Breaks += res.Breaks
	}
	t := replayRow("all", all)
	if c, ok := limit.Common(limits); ok {
		for k, i := range limitRows {
			rows[i].LimitNs, rows[i].LimitName = c.PerHost[k], c.Name
		}
		t.LimitNs, t.LimitName, t.OracleNs = c.Mean, c.String(), c.Oracle
		t.LuckiestNs, t.LuckiestName = c.Luckiest, "mean of the files' own best"
	}
	t.Exchanges, t.Rounds, t.Restarts = total.Exchanges, total.Rounds, total.Restarts
	t.BelowFloor, t.OneWayBelowFloor = total.BelowFloor, total.OneWayBelowFloor
	t.Suspects, t.Breaks = total.Suspects, total.Breaks
	rows = append(rows, t)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	lim := func(r labReplayRow) string {
		if !*withLimit || r.LimitName == "" {
			return ""
		}
		return fmt.Sprintf(" %9.3f %9.2fx %11.3f %9.3f  %s (own best %s)", r.LimitNs/1e3, float64(r.P50Ns)/r.LimitNs, r.LuckiestNs/1e3, r.OracleNs/1e3, r.LimitName, r.LuckiestName)
	}
	head := ""
	if *withLimit {
		head = fmt.Sprintf(" %9s %10s %11s %9s  %s", "limit us", "p50/limit", "luckiest us", "oracle us", "best textbook")
	}
	fmt.Fprintf(stdout, "%-40s %8s %9s %6s %8s %6s %6s %9s %9s %9s %9s%s\n", "file", "truth", "exchanges", "rounds", "restarts", "breaks", "evals", "p50 us", "p90 us", "p99 us", "bias us", head)
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-40s %8s %9d %6d %8d %6d %6d %9.3f %9.3f %9.3f %9.3f%s\n", r.File, r.Truth, r.Exchanges, r.Rounds, r.Restarts, r.Breaks, r.Evaluations,
			float64(r.P50Ns)/1e3, float64(r.P90Ns)/1e3, float64(r.P99Ns)/1e3, r.BiasNs/1e3, lim(r))
	}
	return nil
}

func replayRow(name string, errs []int64) labReplayRow {
	r := labReplayRow{File: name, Evaluations: len(errs)}
	if len(errs) == 0 {
		return r
	}
	abs := make([]int64, len(errs))
	var sum float64
	for i, e := range errs {
		abs[i] = max(e, -e)
		sum += float64(e)
	}
	// Nearest rank (quantile.Of): where p*n is a whole number, one
	// rank lower than the floor(p*n)+1-th this used to report.
	q := quantile.Of(abs, 0.5, 0.9, 0.99)
	r.P50Ns, r.P90Ns, r.P99Ns, r.BiasNs = q[0], q[1], q[2], sum/float64(len(errs))
	return r
}

// replayTruth rebuilds the truth of the exchanges in the measurements file
// at path (measurements-h<i>.csv, its host's config h<i>.yaml beside it)
// with the source of node id source (the h*.yaml there whose node.id it
// is): lab.EmulatedTruth. nil truth, no error: no configs beside the file,
// or a raw clock (the raw run's truth). An emulated host whose source's
// config is missing is an error: its figures would otherwise be judged
// against the wrong truth.
func replayTruth(path string, source int) (truth func(int64) (int64, bool), wander float64, err error) {
	dir, base := filepath.Split(path)
	var host int
	if _, err := fmt.Sscanf(base, "measurements-h%d.csv", &host); err != nil {
		return nil, 0, nil
	}
	hostPath := filepath.Join(dir, fmt.Sprintf("h%d.yaml", host))
	hostCfg, err := daemon.Load(hostPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	if hostCfg.Clock.Source != daemon.ClockEmulated {
		return nil, 0, nil
	}
	cfgs, _ := filepath.Glob(filepath.Join(dir, "h*.yaml"))
	for _, p := range cfgs {
		c, err := daemon.Load(p)
		if err != nil {
			return nil, 0, err
		}
		if int(c.Node.ID) != source {
			continue
		}
		if c.Clock.Source != daemon.ClockEmulated {
			return nil, 0, fmt.Errorf("%s: emulated clock, but its source's (%s) is %q: no common truth", path, p, c.Clock.Source)
		}
		truth, wander, err := lab.EmulatedTruth(hostCfg.Clock.Emulated, c.Clock.Emulated)
		if err != nil {
			return nil, 0, fmt.Errorf("%s and %s: %w", hostPath, p, err)
		}
		return truth, wander, nil
	}
	return nil, 0, fmt.Errorf("%s: emulated clock, but no config beside it has node.id %d, its source: no truth to judge it against", path, source)
}
