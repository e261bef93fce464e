package daemon

import (
	"net/http"
	"strconv"
	"time"

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
	Status           string // gtime/engine status name: unsynced, synced, stale, no-daemon
	// Offset is global time minus the local clock now (est(x) - x): large
	// between hosts booted at different times, it is the mapping's offset.
	Offset time.Duration
	// EstimatedError is the half-width of the bounds now.
	EstimatedError time.Duration
	// FrequencyAdjustment is the estimated rate of global time per local
	// ns, minus 1 (the mapping's skew).
	FrequencyAdjustment float64
	Sources             []SourceStats
	Children            []ChildStats
	Messages            []MessageCount
}

// SourceStats describe the rounds this node received from one source.
type SourceStats struct {
	ID                uint32
	Rounds            uint64 // global resyncs accepted
	EstimatorRestarts uint64 // estimator windows restarted (inconsistent samples)
	// Silent: nothing from the source for 3 of its announced global
	// periods plus a round of probe retries (engine.SourceSnapshot.Silent).
	Silent bool
}

// ChildStats describe the rounds this node drives with one child.
type ChildStats struct {
	ID             uint32
	GlobalPeriod   time.Duration // current global resync period
	Rounds         uint64        // rounds completed
	RoundsRepeated uint64        // rounds repeated for a long RTT (NETWORK_LATENCY_ERROR_THRESH)
	ProbeRetries   uint64        // probes retried after a timeout
	ShortestRTT    time.Duration // shortest exchange RTT ever; negative before the first round
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

// statuses are the values of the gclock_status metric's label.
var statuses = []string{"unsynced", "synced", "stale", "no-daemon"}

// Collector builds the metrics from a Snapshot at every scrape (as
// node_exporter's timex collector does), in base units.
type Collector struct {
	src                                    Snapshotter
	offset, estErr, freq, st               *prometheus.Desc
	srcRounds, restarts                    *prometheus.Desc
	rounds, repeated, retries, rtt, period *prometheus.Desc
	msg                                    *prometheus.Desc
	refChanges, silent                     *prometheus.Desc
}

// NewCollector returns a collector over src.
func NewCollector(src Snapshotter) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("gclock_"+name, help, append([]string{"node"}, labels...), nil)
	}
	return &Collector{
		src:        src,
		offset:     d("offset_seconds", "Global time minus the local clock (CLOCK_MONOTONIC_RAW), seconds."),
		estErr:     d("estimated_error_seconds", "Half-width of the guaranteed bounds on global time, seconds."),
		freq:       d("frequency_adjustment_ratio", "Estimated rate of global time per local second, minus 1."),
		st:         d("status", "1 for the node's current status, 0 for the others.", "status", "reference"),
		srcRounds:  d("source_rounds_total", "Global resync rounds accepted from a source.", "source"),
		restarts:   d("estimator_restarts_total", "Estimator windows restarted on inconsistent samples.", "source"),
		rounds:     d("child_rounds_total", "Global resync rounds completed with a child.", "child"),
		repeated:   d("child_rounds_repeated_total", "Rounds repeated because their shortest round trip was too long.", "child"),
		retries:    d("probe_retries_total", "Probes retried after a timeout.", "child"),
		rtt:        d("shortest_rtt_seconds", "Shortest exchange round trip seen with a child, seconds.", "child"),
		period:     d("global_period_seconds", "Current global resync period of a child, seconds.", "child"),
		msg:        d("sync_messages_total", "Sync messages by type and direction.", "type", "direction"),
		refChanges: d("reference_changes_total", "Reference changes made by this node (failover, joining the current reference)."),
		silent:     d("source_silent", "1 while a source has been silent for 3 of its global periods and a round of retries.", "source"),
	}
}

// Describe sends every descriptor.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.offset, c.estErr, c.freq, c.st, c.srcRounds, c.restarts,
		c.rounds, c.repeated, c.retries, c.rtt, c.period, c.msg, c.refChanges, c.silent} {
		ch <- d
	}
}

// Collect takes one snapshot and sends its metrics.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
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
	ref := strconv.FormatUint(uint64(s.Reference), 10)
	for _, name := range statuses {
		v := 0.0
		if name == s.Status {
			v = 1
		}
		g(c.st, v, name, ref)
	}
	for _, src := range s.Sources {
		id := strconv.FormatUint(uint64(src.ID), 10)
		cnt(c.srcRounds, src.Rounds, id)
		cnt(c.restarts, src.EstimatorRestarts, id)
		silent := 0.0
		if src.Silent {
			silent = 1
		}
		g(c.silent, silent, id)
	}
	for _, ch := range s.Children {
		id := strconv.FormatUint(uint64(ch.ID), 10)
		cnt(c.rounds, ch.Rounds, id)
		cnt(c.repeated, ch.RoundsRepeated, id)
		cnt(c.retries, ch.ProbeRetries, id)
		if ch.ShortestRTT >= 0 {
			g(c.rtt, ch.ShortestRTT.Seconds(), id)
		}
		g(c.period, ch.GlobalPeriod.Seconds(), id)
	}
	for _, m := range s.Messages {
		cnt(c.msg, m.Count, m.Type, m.Direction)
	}
}

// MetricsHandler serves src's metrics from a private registry (no Go
// runtime or process metrics unless the caller adds them).
func MetricsHandler(src Snapshotter) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewCollector(src)); err != nil {
		return nil, err
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}), nil
}
