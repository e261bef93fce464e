// Package statuspage is the daemon's live status page: /status, a page of
// charts (offset, drift, bound width, periods over time) and the current
// values, and /status.json, the data it draws. The charts use uPlot, a
// small MIT-licensed chart library from npm, embedded in the binary with
// the page (assets/): the page loads nothing from elsewhere.
//
// The daemon samples itself once a second (History.Run) and keeps the last
// ten minutes. With ?nodes=URL,URL,... the page draws several daemons on
// the same charts (each daemon's /status.json allows cross-origin reads by
// the cluster's other pages only, never by any origin).
package statuspage

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// Period is a resync period this node knows: its own self-resync period,
// the one its source announced, or the one it keeps with a child.
type Period struct {
	Name    string  // "self", "source 1", "child 3"
	Seconds float64 // seconds
}

// Sample is one second of a node's state, as the page shows it.
type Sample struct {
	Node, Reference uint32
	Status          string // unsynced, synced, stale, degraded
	// Served, ServedStatus and ServedReason: with real_time, the UTC
	// timescale served, its status (what the page, NTP and /readyz say)
	// and why it is not synced; "" when global time itself is served.
	Served, ServedStatus, ServedReason string
	// OffsetNs is global time minus the local clock (est(x) - x); its
	// change over time is the local clock's drift against global time.
	OffsetNs int64
	// WidthNs is the width of the bounds [earliest, latest].
	WidthNs int64
	// DriftPPM is the rate of global time per local second, minus 1, in ppm.
	DriftPPM float64
	// LastOffsetNs and RMSOffsetNs: the selected source's last round
	// difference and its RMS (chronyc tracking); 0 before the first.
	LastOffsetNs, RMSOffsetNs int64
	Periods                   []Period
}

// Source takes a Sample of the running node.
type Source func() Sample

// Capacity is how many samples a History keeps: ten minutes at one a second.
const Capacity = 600

// PeerPage is where another daemon of the cluster serves its page.
type PeerPage struct {
	Node uint32 `json:"node"`
	URL  string `json:"url"` // http://host:port, without /status
}

// History keeps the last Capacity samples of a node.
type History struct {
	src   Source
	every time.Duration
	peers []PeerPage // the cluster's pages, for the page's "all nodes" link

	mu      sync.Mutex
	t       []int64 // unix ms
	samples []Sample
}

// NewHistory returns a History that samples src every interval (a second
// if <= 0) once Run is started.
func NewHistory(src Source, interval time.Duration) *History {
	if interval <= 0 {
		interval = time.Second
	}
	return &History{src: src, every: interval}
}

// SetPeers sets the pages of the cluster's daemons (this one included),
// for the page's link to a view of them all. Call it before serving.
func (h *History) SetPeers(p []PeerPage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peers = append([]PeerPage(nil), p...)
}

// Run samples until ctx ends.
func (h *History) Run(ctx context.Context) {
	tk := time.NewTicker(h.every)
	defer tk.Stop()
	h.Add(time.Now(), h.src())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tk.C:
			h.Add(now, h.src())
		}
	}
}

// Add appends a sample taken at t, dropping the oldest beyond Capacity.
func (h *History) Add(t time.Time, s Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.t) == Capacity {
		copy(h.t, h.t[1:])
		copy(h.samples, h.samples[1:])
		h.t, h.samples = h.t[:Capacity-1], h.samples[:Capacity-1]
	}
	h.t = append(h.t, t.UnixMilli())
	h.samples = append(h.samples, s)
}

// JSON is what /status.json serves: the latest values, then the history as
// columns (one array per series, aligned with T). Offsets are given
// relative to the first sample's (OffsetOriginNs), so that the numbers stay
// exact in a float64.
type JSON struct {
	Node           uint32             `json:"node"`
	Reference      uint32             `json:"reference"`
	Status         string             `json:"status"`
	Served         string             `json:"served,omitempty"`        // the UTC timescale served ("" for global time)
	ServedStatus   string             `json:"served_status,omitempty"` // its status: what the page, NTP and /readyz say
	ServedReason   string             `json:"served_reason,omitempty"` // why it is not synced
	UpdatedMs      int64              `json:"updated_unix_ms"`
	OffsetNs       int64              `json:"offset_ns"`
	OffsetText     string             `json:"offset"` // OffsetNs in seconds, exact (a float64 would round it)
	WidthNs        int64              `json:"width_ns"`
	DriftPPM       float64            `json:"drift_ppm"`
	LastOffsetNs   int64              `json:"last_offset_ns"`
	RMSOffsetNs    int64              `json:"rms_offset_ns"`
	Periods        map[string]float64 `json:"periods_s"`
	OffsetOriginNs int64              `json:"offset_origin_ns"`
	// History, oldest first.
	// The series are null where the node was unsynced (no estimate).
	T            []int64               `json:"t_unix_ms"`
	OffsetChange []*float64            `json:"offset_change_us"` // OffsetNs - OffsetOriginNs, us
	Width        []*float64            `json:"width_us"`
	Drift        []*float64            `json:"drift_ppm_history"`
	PeriodHist   map[string][]*float64 `json:"periods_s_history"` // null where a period was not known
	// Peers are the cluster's pages (assuming every daemon serves them on
	// this one's port), for a view of all nodes.
	Peers []PeerPage `json:"peer_pages"`
}

// Snapshot returns the history as served.
func (h *History) Snapshot() JSON {
	h.mu.Lock()
	defer h.mu.Unlock()
	j := JSON{Periods: map[string]float64{}, PeriodHist: map[string][]*float64{},
		T: append([]int64{}, h.t...), OffsetChange: []*float64{}, Width: []*float64{}, Drift: []*float64{},
		Peers: append([]PeerPage{}, h.peers...)}
	if len(h.samples) == 0 {
		j.Status = "starting"
		return j
	}
	last := h.samples[len(h.samples)-1]
	j.Node, j.Reference, j.Status = last.Node, last.Reference, last.Status
	j.Served, j.ServedStatus, j.ServedReason = last.Served, last.ServedStatus, last.ServedReason
	j.UpdatedMs = h.t[len(h.t)-1]
	j.OffsetNs, j.WidthNs, j.DriftPPM = last.OffsetNs, last.WidthNs, last.DriftPPM
	j.OffsetText = seconds(last.OffsetNs)
	j.LastOffsetNs, j.RMSOffsetNs = last.LastOffsetNs, last.RMSOffsetNs
	for _, p := range last.Periods {
		j.Periods[p.Name] = p.Seconds
	}
	origin := false
	for i, s := range h.samples {
		if s.Status == "unsynced" || s.Status == "" {
			j.OffsetChange, j.Width, j.Drift = append(j.OffsetChange, nil), append(j.Width, nil), append(j.Drift, nil)
		} else {
			if !origin {
				j.OffsetOriginNs, origin = s.OffsetNs, true
			}
			j.OffsetChange = append(j.OffsetChange, ptr(float64(s.OffsetNs-j.OffsetOriginNs)/1e3))
			j.Width = append(j.Width, ptr(float64(s.WidthNs)/1e3))
			j.Drift = append(j.Drift, ptr(s.DriftPPM))
		}
		for _, p := range s.Periods {
			col, ok := j.PeriodHist[p.Name]
			if !ok {
				col = make([]*float64, len(h.samples))
				j.PeriodHist[p.Name] = col
			}
			v := p.Seconds
			col[i] = &v
		}
	}
	return j
}

// Handler serves the page at /status (and its files under /status/) and
// the data at /status.json.
func Handler(h *History) http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(assets, "assets")
	files := http.StripPrefix("/status/", http.FileServerFS(sub))
	mux.Handle("GET /status/", files)
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		b, err := assets.ReadFile("assets/index.html")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		// The page reads it from its own origin. Only the cluster's other
		// pages (SetPeers) may read it from theirs, for the page of all
		// nodes: never a wildcard, so that a web page elsewhere cannot
		// make a visitor's browser read the cluster's state.
		w.Header().Add("Vary", "Origin")
		if o := r.Header.Get("Origin"); o != "" && h.allowOrigin(o) {
			w.Header().Set("Access-Control-Allow-Origin", o)
		}
		json.NewEncoder(w).Encode(h.Snapshot())
	})
	return mux
}

// allowOrigin says whether origin (a request's Origin header) is one of the
// peer pages' origins: scheme, host and port exactly as SetPeers gave them.
func (h *History) allowOrigin(origin string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.peers {
		if strings.TrimSuffix(p.URL, "/") == origin {
			return true
		}
	}
	return false
}

// seconds formats ns as seconds with nine decimals, exactly.
func seconds(ns int64) string {
	sign := ""
	u := uint64(ns)
	if ns < 0 {
		sign, u = "-", uint64(-ns) // -MinInt64 wraps to itself: still right as uint64
	}
	return fmt.Sprintf("%s%d.%09d s", sign, u/1e9, u%1e9)
}

func ptr(v float64) *float64 { return &v }
