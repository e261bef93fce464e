package daemon

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/gclock/gclock/daemon/internal/statuspage"
	"github.com/gclock/gclock/gtime"
)

// mountStatus serves the live status page (/status, /status.json, package
// statuspage) on the metrics server's mux; the caller runs sample, which
// samples the node every second until its context ends.
func mountStatus(mux *http.ServeMux, src Snapshotter, cfg Config) (sample func(context.Context)) {
	h := statuspage.NewHistory(func() statuspage.Sample { return statusSample(src.Snapshot()) }, 0)
	h.SetPeers(peerPages(cfg))
	sp := statuspage.Handler(h)
	mux.Handle("/status", sp)
	mux.Handle("/status/", sp)
	mux.Handle("/status.json", sp)
	mountHealth(mux, src)
	// The metrics server's root leads to the status page (a browser
	// pointed at metrics.listen); any other unknown path is 404.
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status", http.StatusFound)
	})
	return h.Run
}

// mountHealth serves /healthz (the daemon answers: 200) and /readyz (200
// when the time this node serves is synced, 503 with the status
// otherwise), for Kubernetes probes and load balancers: /status.json
// answers 200 whatever the status.
//
// /readyz follows what clients get (the page, NTP, gclock now), as
// chronyc waitsync and a Kubernetes probe on a time service are meant:
// with real_time, the served UTC's status, so a node whose reference's
// CLOCK_REALTIME is unsynchronised is not ready though global time is
// synced. /readyz?scale=global answers for global time alone (the
// cluster's sync, as before real_time folded its upstream in);
// scale=served is the default.
func mountHealth(mux *http.ServeMux, src Snapshotter) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		scale := r.URL.Query().Get("scale")
		if scale != "" && scale != "served" && scale != "global" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "scale %q: want served (the default: what the page and NTP serve) or global (global time alone)\n", scale)
			return
		}
		s := src.Snapshot()
		status, what, reason := s.ServedState()
		if scale == "global" {
			status, what, reason = s.Status, "global time", ""
		}
		if status != "synced" {
			w.WriteHeader(http.StatusServiceUnavailable)
			why := ""
			if reason != "" {
				why = ": " + reason
			}
			fmt.Fprintf(w, "not ready: %s %s%s (global time %s; node %d, reference %d)\n", what, status, why, s.Status, s.Node, s.Reference)
			return
		}
		width := s.Width
		if scale != "global" && s.ServedMaxError > 0 {
			width = 2 * s.ServedMaxError
		}
		fmt.Fprintf(w, "ready: %s synced, bound width %v (node %d, reference %d)\n", what, width, s.Node, s.Reference)
	})
}

// statusSample is what the status page shows of a Snapshot.
func statusSample(s Snapshot) statuspage.Sample {
	out := statuspage.Sample{Node: s.Node, Reference: s.Reference, Status: s.Status,
		OffsetNs: int64(s.Offset), WidthNs: int64(s.Width), DriftPPM: s.FrequencyAdjustment * 1e6}
	if s.Served != "" && s.Served != gtime.TimescaleReference.String() {
		out.Served, out.ServedStatus, out.ServedReason = s.Served, s.ServedStatus, s.ServedReason
	}
	if s.SelfPeriod > 0 {
		out.Periods = append(out.Periods, statuspage.Period{Name: "self", Seconds: s.SelfPeriod.Seconds()})
	}
	for _, src := range s.Sources {
		if src.GlobalPeriod > 0 {
			out.Periods = append(out.Periods, statuspage.Period{Name: fmt.Sprintf("source %d", src.ID), Seconds: src.GlobalPeriod.Seconds()})
		}
		if src.Selected && src.Differences > 0 {
			out.LastOffsetNs, out.RMSOffsetNs = int64(src.LastOffset), int64(src.RMSOffset)
		}
	}
	for _, c := range s.Children {
		out.Periods = append(out.Periods, statuspage.Period{Name: fmt.Sprintf("child %d", c.ID), Seconds: c.GlobalPeriod.Seconds()})
	}
	return out
}

// metricsBind is the address metrics.listen binds: a Unix socket as
// given; a host:port without a host (":9190") on 127.0.0.1, this host
// only, never every interface: the metrics and the status page show the
// cluster's state, so listening beyond the host takes an explicit
// address (0.0.0.0:9190, [::]:9190 or the host's own).
func metricsBind(listen string) string {
	if listen == "" || strings.HasPrefix(listen, "unix:") {
		return listen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host != "" {
		return listen
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// peerPages are the status pages of the cluster's daemons, assuming each
// serves them on this daemon's metrics port at its peer address's host
// (one config file for the cluster). None when metrics are on a Unix
// socket, on loopback (no other host can reach them) or have no port.
func peerPages(cfg Config) []statuspage.PeerPage {
	l := metricsBind(cfg.Metrics.Listen)
	if l == "" || strings.HasPrefix(l, "unix:") || onLoopback(l) {
		return nil
	}
	_, port, err := net.SplitHostPort(l)
	if err != nil || port == "" || port == "0" {
		return nil
	}
	var out []statuspage.PeerPage
	seen := map[string]bool{}
	for _, p := range cfg.Peers {
		host, _, err := net.SplitHostPort(p.Address)
		if err != nil {
			continue
		}
		u := "http://" + net.JoinHostPort(host, port)
		if seen[u] {
			// Daemons sharing a host (a test on loopback) cannot all serve
			// on one port: no cluster view.
			return nil
		}
		seen[u] = true
		out = append(out, statuspage.PeerPage{Node: p.ID, URL: u})
	}
	return out
}
