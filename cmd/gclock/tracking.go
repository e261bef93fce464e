package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gclock/gclock/cmd/internal/usage"
	"github.com/gclock/gclock/daemon"
)

func init() {
	register("tracking", "show the daemon's state as chronyc tracking does (reference, status, offset, bound, frequency)", func(args []string) error {
		return runView("tracking", args, os.Stdout, os.Stderr)
	})
	register("sources", "show the daemon's sources as chronyc sources does (selected, reach, RTT, last offset)", func(args []string) error {
		return runView("sources", args, os.Stdout, os.Stderr)
	})
	register("sourcestats", "show the daemon's estimators per source as chronyc sourcestats does", func(args []string) error {
		return runView("sourcestats", args, os.Stdout, os.Stderr)
	})
	register("waitsync", "wait until global time is synced, as chronyc waitsync (gclock now -check)", func(args []string) error {
		return runNow(append([]string{"-check"}, args...), os.Stdout, os.Stderr)
	})
}

const viewUsage = `usage: gclock %[1]s [-server ADDR | -config FILE] [-json] [-timeout D]

Asks a running daemon for its state over its metrics server (metrics.listen,
the path %[2]s) and prints it as chronyc %[1]s does. ADDR is
host:port or unix:/path; without -server: $GCLOCK_SERVER, else the
metrics.listen of -config FILE, else 127.0.0.1:9190 (deploy/gclock.yaml's port).

flags:
`

// defaultServer is where the production config serves its metrics.
const defaultServer = "127.0.0.1:9190"

func runView(what string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(what, flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "the daemon's metrics server, `host:port` or unix:/path")
	cfgPath := fs.String("config", "", "read the server address from this daemon config `FILE` (metrics.listen)")
	asJSON := fs.Bool("json", false, "print the daemon's view as JSON")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	fs.Usage = func() { fmt.Fprintf(stderr, viewUsage, what, daemon.ControlPath); fs.PrintDefaults() }
	if err := usage.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usage.Errorf("unexpected argument %q (see gclock %s -h)", fs.Arg(0), what)
	}
	if *timeout <= 0 {
		return usage.Errorf("-timeout %v: must be > 0", *timeout)
	}
	addr := cmp.Or(*server, os.Getenv("GCLOCK_SERVER"))
	if addr == "" && *cfgPath != "" {
		cfg, err := daemon.Load(*cfgPath)
		if err != nil {
			return err
		}
		if cfg.Metrics.Listen == "" {
			return fmt.Errorf("%s: metrics.listen is empty: the daemon serves no view (set it, e.g. 127.0.0.1:9190)", *cfgPath)
		}
		addr = cfg.Metrics.Listen
	}
	addr = cmp.Or(addr, defaultServer)
	v, raw, err := fetchView(addr, *timeout)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := stdout.Write(raw)
		return err
	}
	switch what {
	case "tracking":
		printTracking(stdout, v)
	case "sources":
		printSources(stdout, v)
	default:
		printSourcestats(stdout, v)
	}
	return nil
}

// fetchView GETs the daemon's view from addr (host:port, :port or unix:/path).
func fetchView(addr string, timeout time.Duration) (daemon.View, []byte, error) {
	var v daemon.View
	tr := &http.Transport{}
	url := "http://" + addr + daemon.ControlPath
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}
		url = "http://gclock" + daemon.ControlPath
	} else if host, port, err := net.SplitHostPort(addr); err != nil {
		return v, nil, usage.Errorf("-server %q: want host:port or unix:/path (%v)", addr, err)
	} else if host == "" || host == "0.0.0.0" || host == "::" {
		url = "http://" + net.JoinHostPort("127.0.0.1", port) + daemon.ControlPath // a wildcard listen answers on loopback
	}
	cl := &http.Client{Transport: tr, Timeout: timeout}
	defer tr.CloseIdleConnections()
	resp, err := cl.Get(url)
	if err != nil {
		return v, nil, fmt.Errorf("asking the daemon at %s: %w (hint: is gclock daemon running with metrics.listen set? -server)", addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return v, nil, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return v, nil, fmt.Errorf("%s: %s (an older daemon without %s?)", url, resp.Status, daemon.ControlPath)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, nil, fmt.Errorf("%s: not a daemon view: %w", url, err)
	}
	return v, raw, nil
}

// selected returns the source global time follows, if any.
func selected(v daemon.View) (daemon.ViewSource, bool) {
	for _, s := range v.Sources {
		if s.Selected {
			return s, true
		}
	}
	return daemon.ViewSource{}, false
}

func fmtDur(ns int64) string { return time.Duration(ns).String() }

func fmtSigned(ns int64) string {
	if ns >= 0 {
		return "+" + time.Duration(ns).String()
	}
	return time.Duration(ns).String()
}

func printTracking(w io.Writer, v daemon.View) {
	line := func(k, f string, a ...any) { fmt.Fprintf(w, "%-16s: %s\n", k, fmt.Sprintf(f, a...)) }
	line("Node", "%d", v.Node)
	switch {
	case v.Reference == v.Node:
		line("Reference", "node %d (this node: its clock is global time)", v.Reference)
	case v.Reference != 0:
		line("Reference", "node %d (%d reference changes)", v.Reference, v.ReferenceChanges)
	default:
		line("Reference", "none yet")
	}
	if v.Served.Timescale != "" && v.Served.Timescale != "reference" {
		// What clients get first, as chronyc tracking: the UTC block.
		printUTC(line, v.Served)
		line("Global time", "%s", v.Status)
	} else {
		line("Status", "%s", cmp.Or(v.Served.Status, v.Status))
	}
	if v.Status == "unsynced" {
		line("Bound", "none (no estimate yet)")
	} else {
		line("Global - local", "%s", fmtSigned(v.OffsetNs))
		line("Bound", "+-%s (width %s; guaranteed while synced)", fmtDur(v.BoundNs), fmtDur(v.WidthNs))
		line("Frequency", "%+.3f ppm (global time per local second)", v.FrequencyPPM)
	}
	if s, ok := selected(v); ok {
		line("Source", "node %d", s.ID)
		if s.SkewPPM > 0 {
			line("Skew bound", "%.3f ppm", s.SkewPPM)
		}
		if s.Differences > 0 {
			line("Last offset", "%s", fmtSigned(s.LastOffsetNs))
			line("RMS offset", "%s", fmtDur(s.RMSOffsetNs))
		}
		if s.LastRoundAgeNs >= 0 {
			line("Last exchange", "%s ago", time.Duration(s.LastRoundAgeNs).Round(time.Millisecond))
		}
		line("Update interval", "%s", fmtDur(s.GlobalPeriodNs))
	}
	if v.SelfPeriodNs > 0 {
		line("Self period", "%s", fmtDur(v.SelfPeriodNs))
	}
	var drops uint64
	for _, n := range v.Drops {
		drops += n
	}
	line("Dropped packets", "%d", drops)
}

// printUTC is the served UTC's block of gclock tracking: chronyc
// tracking's Reference ID, Stratum, Root delay, Root dispersion and Leap
// status of the reference's CLOCK_REALTIME, and the bound served.
func printUTC(line func(k, f string, a ...any), s daemon.ViewServed) {
	st := s.Status
	if s.Reason != "" {
		st += " (" + s.Reason + ")"
	}
	line("UTC", "%s: %s", s.Timescale, st)
	if s.BoundNs > 0 {
		line("UTC bound", "+-%s (served: the upstream's + the model's + global time's)", fmtDur(s.BoundNs))
	} else {
		line("UTC bound", "none (not synced)")
	}
	u := s.Upstream
	switch {
	case u == nil:
		line("Leap status", "Not synchronised (no model of UTC yet)")
		return
	case !u.Known:
		line("Leap status", "Normal (real_time.upstream none: CLOCK_REALTIME vouched for)")
		return
	case !u.Synced:
		line("Leap status", "Not synchronised")
	case u.Leap == 1:
		line("Leap status", "Insert second")
	case u.Leap == 2:
		line("Leap status", "Delete second")
	default:
		line("Leap status", "Normal")
	}
	if u.Stratum > 0 {
		line("Stratum", "%d (the reference's chronyd)", u.Stratum)
		line("UTC reference", "%08X", u.RefID)
		line("Root delay", "%s", fmtDur(u.RootDelayNs))
		line("Root dispersion", "%s", fmtDur(u.RootDispNs))
	} else {
		line("Stratum", "not known (chronyd not read)")
	}
	line("Upstream bound", "+-%s (the reference kernel's maxerror)", fmtDur(u.MaxErrorNs))
}

func printSources(w io.Writer, v daemon.View) {
	if len(v.Sources) == 0 {
		fmt.Fprintf(w, "node %d has no sources (status %s)\n", v.Node, v.Status)
	} else {
		fmt.Fprintf(w, "%-2s %-6s %-8s %7s %9s %12s %12s %12s %9s\n", "S", "ID", "State", "Rounds", "LastRx", "Shortest RTT", "Smooth RTT", "Last offset", "Period")
		for _, s := range v.Sources {
			mark, state := " ", "ok"
			if s.Selected {
				mark = "*"
			}
			if s.Silent {
				state = "silent"
			} else if s.Rounds == 0 {
				state = "waiting"
			}
			last, srtt, mrtt, off := "-", "-", "-", "-"
			if s.LastRoundAgeNs >= 0 {
				last = time.Duration(s.LastRoundAgeNs).Round(time.Millisecond).String()
			}
			if s.ShortestRTTNs >= 0 {
				srtt, mrtt = fmtDur(s.ShortestRTTNs), fmtDur(s.SmoothedRTTNs)
			}
			if s.Differences > 0 {
				off = fmtSigned(s.LastOffsetNs)
			}
			fmt.Fprintf(w, "%-2s %-6d %-8s %7d %9s %12s %12s %12s %9s\n", mark, s.ID, state, s.Rounds, last, srtt, mrtt, off, fmtDur(s.GlobalPeriodNs))
		}
	}
	if len(v.Children) > 0 {
		fmt.Fprintf(w, "\n%-8s %7s %9s %6s %8s %12s %9s %6s %9s\n", "Child", "Rounds", "Repeated", "Cut", "Retries", "Shortest RTT", "Period", "Pings", "Pace")
		for _, c := range v.Children {
			rtt := "-"
			if c.ShortestRTTNs >= 0 {
				rtt = fmtDur(c.ShortestRTTNs)
			}
			pings, pace := "-", "-"
			if c.RoundPings > 0 {
				pings = fmt.Sprint(c.RoundPings)
			}
			if c.ExchangePaceNs > 0 {
				pace = fmtDur(c.ExchangePaceNs)
			}
			fmt.Fprintf(w, "%-8d %7d %9d %6d %8d %12s %9s %6s %9s\n", c.ID, c.Rounds, c.RoundsRepeated, c.RoundsCut, c.ProbeRetries, rtt, fmtDur(c.GlobalPeriodNs), pings, pace)
		}
	}
}

func printSourcestats(w io.Writer, v daemon.View) {
	if len(v.Sources) == 0 {
		fmt.Fprintf(w, "node %d has no sources (status %s)\n", v.Node, v.Status)
		return
	}
	fmt.Fprintf(w, "%-6s %4s %8s %12s %10s %12s %12s  %s\n", "ID", "NP", "Restarts", "Freq ppm", "Skew ppm", "Last offset", "RMS offset", "Line (spread up/down)")
	for _, s := range v.Sources {
		skew, off, rms := "-", "-", "-"
		if s.SkewPPM > 0 {
			skew = fmt.Sprintf("%.3f", s.SkewPPM)
		}
		if s.Differences > 0 {
			off, rms = fmtSigned(s.LastOffsetNs), fmtDur(s.RMSOffsetNs)
		}
		line := "-"
		if s.Line != "" {
			line = s.Line
			if s.Line == "blend" {
				line = fmt.Sprintf("blend %.0f%% body", 100*s.BodyWeight)
			}
			if s.Line != "floor" && s.BodyLine != "" {
				line += " " + s.BodyLine
			}
			if s.ShapesDiffer {
				line += ", shapes differ"
			}
			// The memory of the line it rests on, where the clocks' wander
			// shortened it.
			mem := s.BodyMemoryNs
			if s.Line == "floor" {
				mem = s.FloorMemoryNs
			}
			if mem > 0 {
				line += ", memory " + fmtDur(mem)
			}
			if s.Span > 0 && s.Span < 1 {
				line += fmt.Sprintf(", newest %g of the window", s.Span) // the adaptive span's choice
			}
			if s.Line != "floor" && s.BodyStretch > 0 && s.Wander > 0 {
				// The body's memory, stretched by its rounds' noise and wander.
				line += fmt.Sprintf(", body memory x%.2f (wander %.4f ppm/sqrt(s))", s.BodyStretch, s.Wander)
			}
			if s.Line != "floor" && s.KalmanWeight > 0 {
				// The Kalman line's share of the body line.
				line += fmt.Sprintf(", Kalman %.0f%%", 100*s.KalmanWeight)
			}
			line += fmt.Sprintf(" (%s/%s)", fmtDur(s.DelaySpreadUpNs), fmtDur(s.DelaySpreadDownNs))
		}
		fmt.Fprintf(w, "%-6d %4d %8d %+12.3f %10s %12s %12s  %s\n", s.ID, s.Samples, s.EstimatorRestarts, s.FrequencyPPM, skew, off, rms, line)
	}
}
