package daemon

import (
	"cmp"
	"encoding/json"
	"net/http"
	"sort"
	"time"
)

// ControlPath is where the metrics server serves View as JSON: what
// `gclock tracking`, `gclock sources` and `gclock sourcestats` print, as
// chronyc prints chronyd's state.
const ControlPath = "/control/view.json"

// View is the operator's view of a running daemon, taken at one instant:
// chronyc tracking (the node), sources and sourcestats (per source). Times
// are ns; OffsetNs is a decimal string because global time minus the
// local clock can exceed 2^53 ns (hosts booted months apart), where a JSON
// number read as a double is rounded.
type View struct {
	Node             uint32            `json:"node"`
	Reference        uint32            `json:"reference"`
	ReferenceChanges uint64            `json:"reference_changes"`
	Status           string            `json:"status"`
	OffsetNs         int64             `json:"offset_ns,string"`
	BoundNs          int64             `json:"bound_ns"` // half-width of the guaranteed bounds
	WidthNs          int64             `json:"width_ns"`
	FrequencyPPM     float64           `json:"frequency_ppm"`
	SelfPeriodNs     int64             `json:"self_period_ns"`
	Sources          []ViewSource      `json:"sources"`
	Children         []ViewChild       `json:"children"`
	Drops            map[string]uint64 `json:"dropped_packets"`
	StatusChanges    map[string]uint64 `json:"status_changes"`
	// TakenAt is when the daemon took the view (its CLOCK_REALTIME, RFC 3339).
	TakenAt string `json:"taken_at"`
	// Served is what clients get (Snapshot.ServedState): its status is the
	// one every surface reports; Status above is global time's.
	Served ViewServed `json:"served"`
}

// ViewServed is the time a node serves (the page, NTP, /readyz): global
// time, or UTC with real_time and its upstream, as chronyc tracking shows
// chronyd's.
type ViewServed struct {
	Timescale string `json:"timescale"` // reference (global time), realtime, mean-drift
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"` // why UTC is not served
	BoundNs   int64  `json:"bound_ns"`         // half-width of the served bounds (0: not synced)
	// The reference's CLOCK_REALTIME (reference-realtime, once a model is
	// known): whether its kernel says synchronised, the leap announced
	// (0 none, 1 insert, 2 delete), chronyd's stratum, reference id, root
	// delay and dispersion, the kernel's maxerror.
	Upstream *ViewUpstream `json:"upstream,omitempty"`
}

// ViewUpstream is ViewServed's upstream.
type ViewUpstream struct {
	Known       bool   `json:"known"` // false: real_time.upstream none
	Synced      bool   `json:"synced"`
	Leap        uint8  `json:"leap"`
	Stratum     uint8  `json:"stratum"`
	RefID       uint32 `json:"ref_id"`
	RootDelayNs int64  `json:"root_delay_ns"`
	RootDispNs  int64  `json:"root_dispersion_ns"`
	MaxErrorNs  int64  `json:"max_error_ns"`
}

// ViewSource is one source's line of `gclock sources` and `gclock sourcestats`.
type ViewSource struct {
	ID                uint32  `json:"id"`
	Selected          bool    `json:"selected"`
	Silent            bool    `json:"silent"`
	Rounds            uint64  `json:"rounds"`
	EstimatorRestarts uint64  `json:"estimator_restarts"`
	FrequencyBreaks   uint64  `json:"frequency_breaks"` // the centre line followed a frequency jump (docs/estimators.md, "Frequency breaks")
	Checks            uint64  `json:"checks"`           // check exchanges judged between rounds (docs/estimators.md, "Check exchanges")
	CheckBreaks       uint64  `json:"check_breaks"`     // times they missed the line and a round was asked for at once
	CheckTrends       uint64  `json:"check_trends"`     // of check_breaks, those their midpoints' trend found (docs/estimators.md, "The checks' trend")
	Samples           int     `json:"samples"`
	FrequencyPPM      float64 `json:"frequency_ppm"`
	SkewPPM           float64 `json:"skew_ppm"` // bound of the frequency's error (0: no bound yet)
	GlobalPeriodNs    int64   `json:"global_period_ns"`
	LastRoundAgeNs    int64   `json:"last_round_age_ns"` // < 0 before the first round
	LastOffsetNs      int64   `json:"last_offset_ns"`
	RMSOffsetNs       int64   `json:"rms_offset_ns"`
	Differences       int     `json:"differences"`
	ShortestRTTNs     int64   `json:"shortest_rtt_ns"` // < 0 before the first round
	SmoothedRTTNs     int64   `json:"smoothed_rtt_ns"`
	// Line: what the centre line rests on (floor, body, blend, asymmetric;
	// SourceStats.Line), the body's weight and each direction's delay
	// spread.
	Line              string  `json:"line,omitempty"`
	BodyLine          string  `json:"body_line,omitempty"`
	BodyWeight        float64 `json:"body_weight,omitempty"`
	ShapesDiffer      bool    `json:"shapes_differ,omitempty"`
	DelaySpreadUpNs   int64   `json:"delay_spread_up_ns,omitempty"`
	DelaySpreadDownNs int64   `json:"delay_spread_down_ns,omitempty"`
	// FloorMemoryNs and BodyMemoryNs: each line's memory where the rounds
	// shortened it (SourceStats.FloorMemory); absent while the default
	// holds.
	FloorMemoryNs int64 `json:"floor_memory_ns,omitempty"`
	BodyMemoryNs  int64 `json:"body_memory_ns,omitempty"`
	// Span: the share of the window the line rests on (SourceStats.Span).
	Span float64 `json:"span,omitempty"`
	// BodyStretch and Wander: the body line's memory over the centre
	// line's, and the wander the rounds show (SourceStats).
	BodyStretch float64 `json:"body_stretch,omitempty"`
	Wander      float64 `json:"wander_ppm_per_sqrt_s,omitempty"`
	// KalmanWeight: the Kalman line's weight in the body line
	// (SourceStats).
	KalmanWeight float64 `json:"kalman_weight,omitempty"`
}

// ViewChild is one child this node drives rounds with.
type ViewChild struct {
	ID             uint32 `json:"id"`
	GlobalPeriodNs int64  `json:"global_period_ns"`
	Rounds         uint64 `json:"rounds"`
	RoundsRepeated uint64 `json:"rounds_repeated"`
	RoundsCut      uint64 `json:"rounds_cut,omitempty"`
	ProbeRetries   uint64 `json:"probe_retries"`
	ProbesResent   uint64 `json:"probes_resent,omitempty"`
	ShortestRTTNs  int64  `json:"shortest_rtt_ns"`
	RoundPings     int    `json:"round_pings,omitempty"`      // exchanges the last round asked for
	ExchangePaceNs int64  `json:"exchange_pace_ns,omitempty"` // time an exchange of its rounds takes, smoothed
}

// newView builds the view from the snapshots the metrics export.
func newView(s Snapshot, sec SecuritySnapshot, at time.Time) View {
	v := View{Node: s.Node, Reference: s.Reference, ReferenceChanges: s.ReferenceChanges, Status: s.Status,
		OffsetNs: int64(s.Offset), BoundNs: int64(s.EstimatedError), WidthNs: int64(s.Width),
		FrequencyPPM: s.FrequencyAdjustment * 1e6, SelfPeriodNs: int64(s.SelfPeriod),
		Drops: sec.Drops, StatusChanges: sec.StatusChanges, TakenAt: at.UTC().Format(time.RFC3339Nano),
		Sources: []ViewSource{}, Children: []ViewChild{}}
	st, _, reason := s.ServedState()
	v.Served = ViewServed{Timescale: cmp.Or(s.Served, "reference"), Status: st, Reason: reason, BoundNs: int64(s.ServedMaxError)}
	if u := s.Upstream; s.HaveUpstream {
		v.Served.Upstream = &ViewUpstream{Known: u.Known, Synced: u.Synced || !u.Known, Leap: u.Leap, Stratum: u.Stratum, RefID: u.RefID,
			RootDelayNs: u.RootDelay, RootDispNs: u.RootDisp, MaxErrorNs: u.MaxErr}
	}
	for _, src := range s.Sources {
		v.Sources = append(v.Sources, ViewSource{ID: src.ID, Selected: src.Selected, Silent: src.Silent,
			Rounds: src.Rounds, EstimatorRestarts: src.EstimatorRestarts, FrequencyBreaks: src.FrequencyBreaks, Checks: src.Checks, CheckBreaks: src.CheckBreaks, CheckTrends: src.CheckTrends, Samples: src.Samples,
			FrequencyPPM: src.Frequency * 1e6, SkewPPM: src.Skew * 1e6, GlobalPeriodNs: int64(src.GlobalPeriod),
			LastRoundAgeNs: int64(src.LastRoundAge), LastOffsetNs: int64(src.LastOffset), RMSOffsetNs: int64(src.RMSOffset),
			Differences: src.Differences, ShortestRTTNs: int64(src.ShortestRTT), SmoothedRTTNs: int64(src.SmoothedRTT),
			Line: src.Line, BodyLine: src.BodyLine, BodyWeight: src.BodyWeight, ShapesDiffer: src.ShapesDiffer, DelaySpreadUpNs: int64(src.DelaySpreadUp), DelaySpreadDownNs: int64(src.DelaySpreadDown),
			FloorMemoryNs: int64(src.FloorMemory), BodyMemoryNs: int64(src.BodyMemory), Span: src.Span,
			BodyStretch: src.BodyStretch, Wander: src.Wander, KalmanWeight: src.KalmanWeight})
	}
	sort.Slice(v.Sources, func(i, j int) bool { return v.Sources[i].ID < v.Sources[j].ID })
	for _, c := range s.Children {
		v.Children = append(v.Children, ViewChild{ID: c.ID, GlobalPeriodNs: int64(c.GlobalPeriod), Rounds: c.Rounds,
			RoundsRepeated: c.RoundsRepeated, RoundsCut: c.RoundsCut, ProbeRetries: c.ProbeRetries, ProbesResent: c.ProbesResent, ShortestRTTNs: int64(c.ShortestRTT),
			RoundPings: c.RoundPings, ExchangePaceNs: int64(c.ExchangePace)})
	}
	sort.Slice(v.Children, func(i, j int) bool { return v.Children[i].ID < v.Children[j].ID })
	return v
}

// ViewHandler serves newView(src(), sec(), now) as JSON at ControlPath.
func ViewHandler(src Snapshotter, sec func() SecuritySnapshot) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		v := newView(src.Snapshot(), sec(), time.Now())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(v)
	})
}
