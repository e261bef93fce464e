package daemon

import (
	"math"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/gtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Snapshot is what the metrics need from a running node, taken at scrape
// time. Durations are int64 ns; the collector converts to base units.
type Snapshot struct {
	Node      uint32
	Reference uint32 // the current reference (reference failover)
	// ReferenceChanges counts the reference changes this node made
	// (failover, or joining the current reference at start).
	ReferenceChanges uint64
	// Term is the reference election's current term; StaleTerm counts the
	// engine messages refused because they came from an older term.
	Term      uint32
	StaleTerm uint64
	Status    string // gtime/engine status name: unsynced, synced, stale, no-daemon
	// Served is the timescale this node serves (the page, NTP, gclock
	// now: "reference" for global time, "realtime" or "mean-drift" for
	// UTC) and ServedStatus its status: Status itself on the reference
	// timescale; with real_time, unsynced while there is no model of UTC
	// or the reference's CLOCK_REALTIME is unsynchronised, whatever
	// global time's status. ServedReason says why UTC is not served ("" when
	// it is, or on the reference timescale).
	Served       string
	ServedStatus string
	ServedReason string
	// ServedMaxError is the half-width of the served time's bounds now
	// (UTC's with real_time, global time's otherwise); 0 while not synced.
	ServedMaxError time.Duration
	// Upstream is the state of the reference's CLOCK_REALTIME served with
	// UTC (reference-realtime: the model's), when HaveUpstream.
	Upstream     realtime.Upstream
	HaveUpstream bool
	// Offset is global time minus the local clock now (est(x) - x): large
	// between hosts booted at different times, it is the mapping's offset.
	Offset time.Duration
	// EstimatedError is the half-width of the bounds now.
	EstimatedError time.Duration
	// Width is latest - earliest now (the status page's bound width).
	Width time.Duration
	// FrequencyAdjustment is the estimated rate of global time per local
	// ns, minus 1 (the mapping's skew).
	FrequencyAdjustment float64
	// SelfPeriod is the node's self-resync period (Liao: how often the
	// measured drift is applied between rounds).
	SelfPeriod time.Duration
	Sources    []SourceStats
	Children   []ChildStats
	Messages   []MessageCount
	// TakenAt is the wall-clock time of the snapshot: the metrics export
	// when things happened as Unix timestamps (Prometheus' convention),
	// not ages.
	TakenAt time.Time
}

// unixSeconds is t as Unix seconds, split before the float so that the ns
// part keeps its precision as far as a float64 of ~1.8e9 s can.
func unixSeconds(t time.Time) float64 {
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}

// SourceStats describe the rounds this node received from one source.
type SourceStats struct {
	ID                uint32
	Rounds            uint64 // global resyncs accepted
	EstimatorRestarts uint64 // estimator windows restarted (inconsistent samples)
	// FrequencyBreaks: the centre line's window restarted after two rounds
	// in a row, the second early, lay far off it on one side (the clock's
	// frequency jumped; estimate's CenterBreaks).
	FrequencyBreaks uint64
	// Checks: check exchanges from the source judged against the centre
	// line between rounds; CheckBreaks: times they missed it on one side
	// (two beyond it within 8 checks, or their midpoints' trend) and the
	// node asked for a round at once (engine ChecksPerPeriod;
	// docs/estimators.md, "Check exchanges"); CheckTrends: those of
	// CheckBreaks the trend found.
	Checks, CheckBreaks, CheckTrends uint64
	// Exchanges from the source kept out of the estimators
	// (gclock_samples_rejected_total): Corrupt ones had timestamps out of
	// order, BelowFloor ones a round trip impossibly far below the path's
	// recent floor (engine.Config.FloorSlack; a wrong stamp),
	// OneWayBelowFloor ones a single direction's delay impossibly far below
	// the rest of its round's.
	RejectedCorrupt, RejectedBelowFloor, RejectedOneWayBelowFloor uint64
	// Silent: nothing from the source for 3 of its announced global
	// periods plus a round of probe retries (engine.SourceSnapshot.Silent).
	Silent bool

	// What chronyc sourcestats shows, and chronyc tracking for the
	// selected source.

	// Selected: global time follows this source now (the narrowest
	// bounds; engine.Tracking.Selected). At most one source is selected.
	Selected bool
	// Samples is the number of exchanges in the estimator window (NP).
	Samples int
	// Frequency is the estimated rate of the source's clock per local
	// second, minus 1 (the selected estimator's skew; sourcestats
	// Frequency, tracking Residual freq); Skew bounds its error (the
	// Hull's skew bound; sourcestats Freq Skew). Frequency is exported
	// once a round came, Skew once the Hull has a bound (> 0).
	Frequency, Skew float64
	// GlobalPeriod is the global resync period the source announced: how
	// often its rounds come (tracking Update interval).
	GlobalPeriod time.Duration
	// LastRoundAge is the time since the last accepted round; negative
	// before the first (tracking Ref time, as an age).
	LastRoundAge time.Duration
	// LastOffset is the last round's difference between the measured
	// offset and the one projected with the drift (Liao's Tdiff minus its
	// projection; tracking Last offset); RMSOffset the root mean square of
	// the last rmsRounds such differences (tracking RMS offset). Rounds
	// counts them; both are meaningful only when it is > 0.
	LastOffset, RMSOffset time.Duration
	Differences           int
	// ShortestRTT is the shortest round trip of the rounds' best
	// exchanges, SmoothedRTT their moving average (1/8 per round, as TCP's
	// SRTT); negative before the first round.
	ShortestRTT, SmoothedRTT time.Duration
	// Line is what the centre line rests on ("floor", "body", "blend":
	// estimate.CenterShape.Kind; "" for another estimator), BodyWeight the
	// body's share in it, ShapesDiffer whether the two directions' delays
	// differ in shape (the line then guesses: estimate.CenterShape), and
	// DelaySpreadUp and DelaySpreadDown each direction's robust delay
	// spread (to the source, from it). BodyLine names the body line
	// ("lower": the lower tenth of each direction's delays, matched;
	// "midpoints"; estimate.CenterShape.Body).
	Line                           string
	BodyLine                       string
	BodyWeight                     float64
	ShapesDiffer                   bool
	DelaySpreadUp, DelaySpreadDown time.Duration
	// FloorMemory and BodyMemory are the floor line's and the body line's
	// memories where the rounds shortened them (the clocks' frequency
	// wanders: estimate's floorCurve and bodyCurve); 0 while the default
	// (sync.center_memory rounds, the body twice that) holds.
	FloorMemory, BodyMemory time.Duration
	// Span is the share of the window the line rests on (estimate's
	// CenterShape.Span: 1 the whole, 0.5-0.125 its newest part; 0 where
	// the span does not adapt).
	Span float64
	// BodyStretch is the body line's memory over the centre line's, and
	// Wander the clocks' wander the rounds show, ppm/sqrt(s) (estimate's
	// CenterShape.Stretch and Wander; 0: not chosen, not measured).
	BodyStretch, Wander float64
	// KalmanWeight is the Kalman line's weight in the body line
	// (estimate's CenterShape.Kalman: the filter of the rounds' own
	// locations, blended by how well each line predicted them; 0: not
	// read).
	KalmanWeight float64
}

// ChildStats describe the rounds this node drives with one child.
type ChildStats struct {
	ID             uint32
	GlobalPeriod   time.Duration // current global resync period
	Rounds         uint64        // rounds completed
	RoundsRepeated uint64        // rounds repeated for a long RTT (NETWORK_LATENCY_ERROR_THRESH)
	RoundsEarly    uint64        // rounds brought forward by a frequency break's error report (engine.BreakErr)
	RoundsChecked  uint64        // rounds started at once because the child's check exchanges missed its line (engine.CheckErr)
	Checks         uint64        // check exchanges answered and sent to the child (engine ChecksPerPeriod)
	RoundsCut      uint64        // rounds ended by sync.round_budget before their pings_per_round exchanges
	ProbeRetries   uint64        // probes retried after a timeout
	ProbesResent   uint64        // replies to probes the transport sent more than once: no sample kept (engine.Message.Resent)
	ShortestRTT    time.Duration // shortest exchange RTT ever; negative before the first round
	RoundPings     int           // exchanges the last round asked for (pings_per_round, ramp_pings_per_round, or fewer when the slots are short); 0 before the first
	ExchangePace   time.Duration // time an exchange of this child's rounds takes, smoothed over rounds; 0 before the first round ended
}

// MessageCount counts messages of one type in one direction.
type MessageCount struct {
	Type      string // probe, probe_reply, time_diff, err_report, ack, ...
	Direction string // sent, received, retransmitted, dropped
	Count     uint64
}

// Snapshotter gives the state to export; the daemon's run loop implements
// it (it must be safe to call from the HTTP server's goroutine).
type Snapshotter interface {
	Snapshot() Snapshot
}

// ServedState is the one status every surface reports (the page,
// /readyz, NTP, gclock-wait, gclock tracking, gclock_served_status,
// systemd's READY and STATUS, the status page): the served time's status
// and what it is ("global time", or "UTC (realtime)"), and why UTC is not
// served. A Snapshot from before real_time existed (Served empty) is
// global time's.
func (s Snapshot) ServedState() (status, what, reason string) {
	if s.ServedStatus == "" || s.Served == "" || s.Served == gtime.TimescaleReference.String() {
		return s.Status, "global time", ""
	}
	return s.ServedStatus, "UTC (" + s.Served + ")", s.ServedReason
}

// statuses are the values of the gclock_status metric's label (a status
// outside the list is exported too, as 1).
var statuses = []string{"unsynced", "synced", "stale", "degraded", "no-daemon"}

// buildLabels names the running binary (gclock_build_info).
type buildLabels struct {
	Version   string // the main module's version, "(devel)" for a plain go build
	Revision  string // the VCS revision, with "-dirty" for a modified tree; "unknown" without VCS data
	GoVersion string
}

// currentBuild returns the binary's build info (a variable for the golden test).
var currentBuild = sync.OnceValue(func() buildLabels {
	b := buildLabels{Version: "unknown", Revision: "unknown", GoVersion: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Revision != "unknown" {
		b.Revision += "-dirty"
	}
	return b
})

// collector builds the metrics from a Snapshot at every scrape (as
// node_exporter's timex collector does), in base units.
type collector struct {
	src                                                              Snapshotter
	offset, estErr, freq, st                                         *prometheus.Desc
	srcRounds, restarts, rejected, breaks                            *prometheus.Desc
	rounds, repeated, cut, retries, resent, rtt, period, pings, pace *prometheus.Desc
	early, checked, chChecks, checks, checkBrk, checkTr              *prometheus.Desc
	msg                                                              *prometheus.Desc
	refChanges, silent                                               *prometheus.Desc
	term, staleTerm                                                  *prometheus.Desc
	servedSt, servedErr                                              *prometheus.Desc
	build                                                            buildLabels

	// chronyc tracking (the selected source) and sourcestats (each source).
	buildInfo, refID, selfPeriod                        *prometheus.Desc
	age, lastOff, rmsOff, resid, skew, interval         *prometheus.Desc
	srcSel, srcSamples, srcFreq, srcSkew, srcPeriod     *prometheus.Desc
	srcAge, srcLastOff, srcRMS, srcShortRTT, srcSmooRTT *prometheus.Desc
	srcBody, srcSpread, srcShapes, srcMemory, srcSpan   *prometheus.Desc
	srcStretch, srcWander, srcKalman                    *prometheus.Desc
}

// newCollector returns a collector over src.
func newCollector(src Snapshotter) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("gclock_"+name, help, append([]string{"node"}, labels...), nil)
	}
	return &collector{
		src:        src,
		offset:     d("offset_seconds", "Global time minus the local clock (CLOCK_MONOTONIC_RAW), seconds."),
		estErr:     d("max_error_seconds", "Half-width of the guaranteed bounds on global time, seconds: a bound (timex's maxerror), not an estimate."),
		freq:       d("frequency_adjustment_ratio", "Estimated rate of global time per local second, minus 1."),
		st:         d("status", "1 for the status of global time (the cluster's sync) on this node, 0 for the others; what clients get is gclock_served_status.", "status", "reference"),
		servedSt:   d("served_status", "1 for the status of the time this node serves (the page, NTP, /readyz, gclock-wait: UTC with real_time, else global time), 0 for the others; reason says why UTC is not served.", "status", "timescale", "reason"),
		servedErr:  d("served_max_error_seconds", "Half-width of the bounds of the time this node serves (UTC with real_time), seconds; absent while it is not synced."),
		srcRounds:  d("source_rounds_total", "Global resync rounds accepted from a source.", "source"),
		restarts:   d("estimator_restarts_total", "Estimator windows restarted on inconsistent samples.", "source"),
		breaks:     d("source_frequency_breaks_total", "Frequency breaks: the centre line restarted from a round it missed far beyond its usual misses, confirmed by the next round on the same side (a clock's frequency jumped).", "source"),
		rejected:   d("samples_rejected_total", "Exchanges from a source kept out of the estimators, by reason: corrupt (timestamps out of order), below_floor (round trip impossibly far below the path's recent floor: a wrong stamp), one_way_below_floor (one direction's delay impossibly far below the rest of its round's).", "source", "reason"),
		rounds:     d("child_rounds_total", "Global resync rounds completed with a child.", "child"),
		repeated:   d("child_rounds_repeated_total", "Rounds repeated because their shortest round trip was too long.", "child"),
		checks:     d("source_check_exchanges_total", "Check exchanges from a source judged against the centre line between rounds (sync.checks_per_period).", "source"),
		checkBrk:   d("source_check_breaks_total", "Times check exchanges missed the centre line on one side (two beyond it within 8 checks, or their midpoints drifting away from it) and the node asked its source for a round at once (a clock's frequency jumped).", "source"),
		checkTr:    d("source_check_trends_total", "Of source_check_breaks_total, the times the check exchanges' midpoints drifting away from the centre line found it (their trend test), not two beyond it.", "source"),
		chChecks:   d("child_check_exchanges_total", "Check exchanges answered by a child and sent to it between rounds (sync.checks_per_period).", "child"),
		checked:    d("child_rounds_checked_total", "Rounds started at once because the child's check exchanges missed its centre line (its error report said so).", "child"),
		early:      d("child_rounds_early_total", "Rounds brought forward because the child's centre line missed a round as a frequency break would (its error report said so): the next round confirms it and measures the new frequency.", "child"),
		cut:        d("child_rounds_cut_total", "Rounds ended by sync.round_budget before their pings_per_round exchanges.", "child"),
		retries:    d("probe_retries_total", "Probes retried after a timeout.", "child"),
		resent:     d("probes_resent_total", "Replies to probes the transport sent more than once: acknowledged, no sample kept (their times may belong to different copies).", "child"),
		rtt:        d("shortest_rtt_seconds", "Shortest exchange round trip seen with a child, seconds.", "child"),
		pings:      d("child_round_pings", "Exchanges the last round with a child asked for (sync.pings_per_round, ramp_pings_per_round, or fewer when the node's round slots are short).", "child"),
		pace:       d("child_exchange_pace_seconds", "Time an exchange of a child's rounds takes, smoothed over rounds, seconds: what sizes the rounds the node's slots can serve.", "child"),
		period:     d("global_period_seconds", "Current global resync period of a child, seconds.", "child"),
		msg:        d("sync_messages_total", "Sync messages by type and direction.", "type", "direction"),
		refChanges: d("reference_changes_total", "Reference changes made by this node (failover, joining the current reference)."),
		term:       d("reference_term", "Current term of the reference election (engine.Member): the reference of term t is reference.order[t mod len]."),
		staleTerm:  d("stale_term_messages_total", "Engine messages refused because they came from an older term (a reference that has not yet learned it was replaced)."),
		silent:     d("source_silent", "1 while a source has been silent for 3 of its global periods and a round of retries.", "source"),
		build:      currentBuild(),

		buildInfo:   prometheus.NewDesc("gclock_build_info", "1, labelled with the daemon's module version, VCS revision and Go version.", []string{"version", "revision", "goversion"}, nil),
		refID:       d("reference_id", "Id of the cluster's current reference node (chronyc tracking Reference ID)."),
		selfPeriod:  d("self_period_seconds", "Self-resync period: how often the measured drift is applied between rounds, seconds."),
		age:         d("last_update_timestamp_seconds", "Unix time of the last accepted round from the selected source, seconds (chronyc tracking Ref time)."),
		lastOff:     d("last_offset_seconds", "Measured minus projected offset in the selected source's last round, seconds (chronyc tracking Last offset)."),
		rmsOff:      d("rms_offset_seconds", "Root mean square of the selected source's recent round differences, seconds (chronyc tracking RMS offset)."),
		resid:       d("residual_frequency_ratio", "Selected source's clock rate per local second, minus 1, as its estimator has it (chronyc tracking Residual freq)."),
		skew:        d("skew_ratio", "Bound on the error of the residual frequency (chronyc tracking Skew)."),
		interval:    d("update_interval_seconds", "Global resync period the selected source announced, seconds (chronyc tracking Update interval)."),
		srcSel:      d("source_selected", "1 for the source global time follows now (the narrowest bounds), 0 for the others.", "source"),
		srcSamples:  d("source_samples", "Exchanges in a source's estimator window (chronyc sourcestats NP).", "source"),
		srcFreq:     d("source_frequency_ratio", "A source's clock rate per local second, minus 1 (chronyc sourcestats Frequency).", "source"),
		srcSkew:     d("source_skew_ratio", "Bound on the error of a source's frequency (chronyc sourcestats Freq Skew).", "source"),
		srcPeriod:   d("source_period_seconds", "Global resync period a source announced, seconds.", "source"),
		srcAge:      d("source_last_round_timestamp_seconds", "Unix time of the last accepted round from a source, seconds.", "source"),
		srcLastOff:  d("source_last_offset_seconds", "Measured minus projected offset in a source's last round, seconds.", "source"),
		srcRMS:      d("source_rms_offset_seconds", "Root mean square of a source's recent round differences, seconds (chronyc sourcestats Std Dev).", "source"),
		srcShortRTT: d("source_shortest_rtt_seconds", "Shortest round trip of a source's rounds' best exchanges, seconds.", "source"),
		srcSmooRTT:  d("source_smoothed_rtt_seconds", "Moving average (1/8 per round) of the round trip of a source's rounds' best exchanges, seconds.", "source"),
		srcBody:     d("source_body_weight_ratio", "Share of the body of the delays in a source's centre line: 0 the fastest exchanges alone (a sharp floor), 1 the body alone (bell-shaped jitter).", "source"),
		srcSpread:   d("source_delay_spread_seconds", "Robust spread (1.4826 MAD) of a source's one-way delays, by direction (up: to the source, down: from it), seconds.", "source", "direction"),
		srcMemory:   d("source_line_memory_shortened_seconds", "Memory of a source's centre line (line=floor: the fastest exchanges; body: the body of the delays) where the rounds showed the clocks' frequency moving and shortened it; 0 while the default memory holds.", "source", "line"),
		srcSpan:     d("source_line_span_ratio", "Share of the window a source's centre line rests on where its span adapts: 1 the whole window, 0.5, 0.25 or 0.125 its newest part, chosen by how well each predicted the newest rounds.", "source"),
		srcStretch:  d("source_body_memory_stretch_ratio", "Memory of a source's body line over its centre line's, chosen from the noise of the rounds' own locations and the wander they show (a fourth root of each).", "source"),
		srcKalman:   d("source_body_kalman_weight_ratio", "Weight of the Kalman line of a source's rounds (offset and frequency, the gain from the rounds' noise and wander) in its body line, against the exponentially weighted line, by how well each predicted the rounds.", "source"),
		srcWander:   d("source_clock_wander_ppm_per_sqrt_second", "The clocks' wander a source's rounds show, as a random walk of the relative frequency, ppm per square root of a second (the body line's memory follows it).", "source"),
		srcShapes:   d("source_delay_shapes_differ", "1 while the two directions' delays to a source differ in shape (the centre line then rests on the floor alone).", "source"),
	}
}

// Describe sends every descriptor.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.offset, c.estErr, c.freq, c.st, c.srcRounds, c.restarts, c.rejected, c.breaks,
		c.rounds, c.repeated, c.early, c.checked, c.chChecks, c.checks, c.checkBrk, c.checkTr, c.cut, c.retries, c.resent, c.rtt, c.period, c.pings, c.pace, c.msg, c.refChanges, c.silent, c.term, c.staleTerm,
		c.servedSt, c.servedErr,
		c.buildInfo, c.refID, c.selfPeriod, c.age, c.lastOff, c.rmsOff, c.resid, c.skew, c.interval,
		c.srcSel, c.srcSamples, c.srcFreq, c.srcSkew, c.srcPeriod, c.srcAge, c.srcLastOff, c.srcRMS,
		c.srcShortRTT, c.srcSmooRTT, c.srcBody, c.srcSpread, c.srcShapes, c.srcMemory, c.srcSpan,
		c.srcStretch, c.srcWander, c.srcKalman} {
		ch <- d
	}
}

// Collect takes one snapshot and sends its metrics.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Snapshot()
	node := strconv.FormatUint(uint64(s.Node), 10)
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{node}, labels...)...)
	}
	cnt := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{node}, labels...)...)
	}
	g(c.offset, s.Offset.Seconds())
	g(c.estErr, s.EstimatedError.Seconds())
	g(c.freq, s.FrequencyAdjustment)
	cnt(c.refChanges, s.ReferenceChanges)
	g(c.term, float64(s.Term))
	cnt(c.staleTerm, s.StaleTerm)
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, c.build.Version, c.build.Revision, c.build.GoVersion)
	g(c.refID, float64(s.Reference))
	g(c.selfPeriod, s.SelfPeriod.Seconds())
	ref := strconv.FormatUint(uint64(s.Reference), 10)
	known := false
	for _, name := range statuses {
		v := 0.0
		if name == s.Status {
			v, known = 1, true
		}
		g(c.st, v, name, ref)
	}
	if !known && s.Status != "" {
		g(c.st, 1, s.Status, ref)
	}
	sst, _, reason := s.ServedState()
	scale := s.Served
	if scale == "" {
		scale = gtime.TimescaleReference.String()
	}
	known = false
	for _, name := range statuses {
		v, r := 0.0, ""
		if name == sst {
			v, known, r = 1, true, reason
		}
		g(c.servedSt, v, name, scale, r)
	}
	if !known && sst != "" {
		g(c.servedSt, 1, sst, scale, reason)
	}
	if sst == "synced" || sst == "degraded" {
		g(c.servedErr, s.ServedMaxError.Seconds())
	}
	for _, src := range s.Sources {
		id := strconv.FormatUint(uint64(src.ID), 10)
		cnt(c.srcRounds, src.Rounds, id)
		cnt(c.restarts, src.EstimatorRestarts, id)
		cnt(c.rejected, src.RejectedCorrupt, id, "corrupt")
		cnt(c.rejected, src.RejectedBelowFloor, id, "below_floor")
		cnt(c.rejected, src.RejectedOneWayBelowFloor, id, "one_way_below_floor")
		cnt(c.breaks, src.FrequencyBreaks, id)
		cnt(c.checks, src.Checks, id)
		cnt(c.checkBrk, src.CheckBreaks, id)
		cnt(c.checkTr, src.CheckTrends, id)
		g(c.silent, b2f(src.Silent), id)
		g(c.srcSel, b2f(src.Selected), id)
		g(c.srcSamples, float64(src.Samples), id)
		if src.Rounds > 0 {
			g(c.srcFreq, src.Frequency, id)
		}
		if src.Skew > 0 {
			g(c.srcSkew, src.Skew, id)
		}
		if src.Line != "" {
			g(c.srcBody, src.BodyWeight, id)
			g(c.srcSpread, src.DelaySpreadUp.Seconds(), id, "up")
			g(c.srcSpread, src.DelaySpreadDown.Seconds(), id, "down")
			g(c.srcShapes, b2f(src.ShapesDiffer), id)
			g(c.srcMemory, src.FloorMemory.Seconds(), id, "floor")
			g(c.srcMemory, src.BodyMemory.Seconds(), id, "body")
			if src.Span > 0 {
				g(c.srcSpan, src.Span, id)
			}
			if src.BodyStretch > 0 {
				g(c.srcStretch, src.BodyStretch, id)
			}
			if src.Wander > 0 {
				g(c.srcWander, src.Wander, id)
			}
			if src.KalmanWeight > 0 {
				g(c.srcKalman, src.KalmanWeight, id)
			}
		}
		g(c.srcPeriod, src.GlobalPeriod.Seconds(), id)
		if src.LastRoundAge >= 0 && !s.TakenAt.IsZero() {
			g(c.srcAge, unixSeconds(s.TakenAt.Add(-src.LastRoundAge)), id)
		}
		if src.Differences > 0 {
			g(c.srcLastOff, src.LastOffset.Seconds(), id)
			g(c.srcRMS, src.RMSOffset.Seconds(), id)
		}
		if src.ShortestRTT >= 0 {
			g(c.srcShortRTT, src.ShortestRTT.Seconds(), id)
		}
		if src.SmoothedRTT >= 0 {
			g(c.srcSmooRTT, src.SmoothedRTT.Seconds(), id)
		}
		if !src.Selected {
			continue
		}
		// chronyc tracking: the same figures for the selected source,
		// without a source label.
		if src.Rounds > 0 {
			g(c.resid, src.Frequency)
		}
		if src.Skew > 0 {
			g(c.skew, src.Skew)
		}
		g(c.interval, src.GlobalPeriod.Seconds())
		if src.LastRoundAge >= 0 && !s.TakenAt.IsZero() {
			g(c.age, unixSeconds(s.TakenAt.Add(-src.LastRoundAge)))
		}
		if src.Differences > 0 {
			g(c.lastOff, src.LastOffset.Seconds())
			g(c.rmsOff, src.RMSOffset.Seconds())
		}
	}
	for _, ch := range s.Children {
		id := strconv.FormatUint(uint64(ch.ID), 10)
		cnt(c.rounds, ch.Rounds, id)
		cnt(c.repeated, ch.RoundsRepeated, id)
		cnt(c.early, ch.RoundsEarly, id)
		cnt(c.checked, ch.RoundsChecked, id)
		cnt(c.chChecks, ch.Checks, id)
		cnt(c.cut, ch.RoundsCut, id)
		cnt(c.retries, ch.ProbeRetries, id)
		cnt(c.resent, ch.ProbesResent, id)
		if ch.ShortestRTT >= 0 {
			g(c.rtt, ch.ShortestRTT.Seconds(), id)
		}
		g(c.period, ch.GlobalPeriod.Seconds(), id)
		if ch.RoundPings > 0 {
			g(c.pings, float64(ch.RoundPings), id)
		}
		if ch.ExchangePace > 0 {
			g(c.pace, ch.ExchangePace.Seconds(), id)
		}
	}
	for _, m := range s.Messages {
		cnt(c.msg, m.Count, m.Type, m.Direction)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// nodeLabelled is a collector whose metrics metricsHandler labels with
// node, as every gclock_ metric is (the NTP server's, real time's, the
// refclock feed's: their collectors do not know the node).
type nodeLabelled struct {
	prometheus.Collector
	node uint32
}

// metricsHandler serves src's metrics from a private registry (no Go
// runtime or process metrics unless the caller adds them), with the extra
// collectors given (other metric families, built elsewhere).
func metricsHandler(src Snapshotter, extra ...prometheus.Collector) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(newCollector(src)); err != nil {
		return nil, err
	}
	for _, c := range extra {
		r := prometheus.Registerer(reg)
		if l, ok := c.(nodeLabelled); ok {
			c, r = l.Collector, prometheus.WrapRegistererWith(prometheus.Labels{"node": strconv.FormatUint(uint64(l.node), 10)}, reg)
		}
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}), nil
}

// rmsRounds is how many recent round differences gclock_rms_offset_seconds
// averages: about chrony's default of up to 64 samples per source, and at
// the longest global periods still only tens of minutes of history.
const rmsRounds = 64

// srttGain is the weight of a new round's round trip in the smoothed RTT
// (TCP's SRTT, RFC 6298's alpha).
const srttGain = 1.0 / 8

// roundTracker keeps per source what the engine does not: the recent round
// differences (EvGlobalResync's value) and a smoothed round trip. The
// daemon feeds it the events of every Step; it has its own lock, so that
// the metrics never wait for it long.
type roundTracker struct {
	mu  sync.Mutex
	src map[engine.NodeID]*roundHistory
}

type roundHistory struct {
	diffs [rmsRounds]float64 // ring of round differences, ns
	n     int                // differences held (<= rmsRounds)
	next  int                // where the next one goes
	srtt  float64            // ns; valid when haveRTT
	// haveRTT: srtt holds at least one round trip.
	haveRTT bool
}

// rttSource gives the best exchange's round trip of the last round from a
// source (engine.Node.LastRTT).
type rttSource interface {
	LastRTT(engine.NodeID) (int64, bool)
}

// note records the rounds among evs; eng is the engine that produced them,
// asked for the rounds' round trips (call with the engine's lock held).
func (t *roundTracker) note(eng rttSource, evs []engine.Event) {
	for _, ev := range evs {
		if ev.Kind != engine.EvGlobalResync {
			continue
		}
		t.mu.Lock()
		if t.src == nil {
			t.src = map[engine.NodeID]*roundHistory{}
		}
		h := t.src[ev.Peer]
		if h == nil {
			h = &roundHistory{}
			t.src[ev.Peer] = h
		}
		h.diffs[h.next] = ev.Value
		h.next = (h.next + 1) % rmsRounds
		h.n = min(h.n+1, rmsRounds)
		if rtt, ok := eng.LastRTT(ev.Peer); ok {
			if !h.haveRTT {
				h.srtt, h.haveRTT = float64(rtt), true
			} else {
				h.srtt += srttGain * (float64(rtt) - h.srtt)
			}
		}
		t.mu.Unlock()
	}
}

// fill sets the round differences and the smoothed round trip of ss.
func (t *roundTracker) fill(ss *SourceStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ss.SmoothedRTT = -1
	h := t.src[engine.NodeID(ss.ID)]
	if h == nil {
		return
	}
	if h.haveRTT {
		ss.SmoothedRTT = time.Duration(math.Round(h.srtt))
	}
	if h.n == 0 {
		return
	}
	sum := 0.0
	for _, d := range h.diffs[:h.n] {
		sum += d * d
	}
	ss.Differences = h.n
	ss.RMSOffset = time.Duration(math.Round(math.Sqrt(sum / float64(h.n))))
	ss.LastOffset = time.Duration(math.Round(h.diffs[(h.next+rmsRounds-1)%rmsRounds]))
}

// trackingStats fills what chronyc tracking and sourcestats show into
// s.Sources (built from es.Sources, in the same order): es and tr are the
// engine's snapshot and tracking at engine time x.
func trackingStats(s *Snapshot, es engine.Snapshot, tr engine.Tracking, x int64, rt *roundTracker) {
	s.SelfPeriod = time.Duration(es.SelfPeriod)
	for i := range s.Sources {
		ss := &s.Sources[i]
		ss.LastRoundAge, ss.ShortestRTT = -1, -1
		if i < len(es.Sources) {
			e := es.Sources[i]
			ss.Frequency, ss.Skew = e.Skew, e.SkewErr
			ss.GlobalPeriod = time.Duration(e.GlobalPeriod)
			if e.HasLine {
				ss.Line, ss.BodyWeight, ss.ShapesDiffer = e.Line.Kind(), e.Line.BodyWeight, e.Line.Asymmetric
				ss.BodyLine = e.Line.Body
				ss.DelaySpreadUp, ss.DelaySpreadDown = time.Duration(e.Line.SpreadUp), time.Duration(e.Line.SpreadDown)
				ss.FloorMemory, ss.BodyMemory = time.Duration(e.Line.FloorMemory), time.Duration(e.Line.Memory)
				ss.Span = e.Line.Span
				ss.BodyStretch, ss.Wander, ss.KalmanWeight = e.Line.Stretch, e.Line.Wander, e.Line.Kalman
			}
			if e.Rounds > 0 {
				ss.LastRoundAge = time.Duration(max(0, x-e.LastRound))
			}
		}
		for _, t := range tr.Sources {
			if uint32(t.Source) == ss.ID {
				ss.Samples = t.Samples
				ss.ShortestRTT = time.Duration(t.ShortestRTT)
			}
		}
		ss.Selected = tr.HasSelected && uint32(tr.Selected) == ss.ID
		rt.fill(ss)
	}
}
