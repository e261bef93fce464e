package lab

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/ntp"
)

// TestLabUTCFailover is issue 29 item 4 over real daemons: three hosts
// serve UTC (reference-realtime, poll_every 1 s and max_slew_ppm 500 as
// deploy/gclock.yaml, upstream none: the lab's truth is the machine's
// CLOCK_REALTIME, which every namespace shares), with reference failover
// (order h0, h1, h2, failover_after 2 s). The reference's daemon is
// SIGKILLed 16 s in; every host's page is read every 10 ms (RunGclock's
// evaluator) and NTP is asked from h2's namespace every 250 ms after the
// kill:
//
//   - "new reference serves UTC": h1 takes over and serves its own
//     CLOCK_REALTIME. Every read of h1 and h2 with bounds (synced or
//     stale) holds CLOCK_REALTIME; from one failover time after the kill
//     (failover_after + a status query's timeout) on, every read has
//     bounds at most twice as wide as the median synced read of the 6 s
//     before the kill (reads within a second after a stall of the whole
//     machine left out and counted); both hosts are synced and answer NTP
//     with leap 0 by the end.
//   - "no UTC source left": h1's upstream is its own chronyd (-x, no
//     source: "not synchronised"). From one failover time and a second
//     after the kill on, no page of h1 or h2 says synced, every NTP answer
//     has leap 3, and gclock_served_status says unsynced with the
//     upstream's reason (the metric GclockNoUTCSource alerts on).
//
// Root only (network namespaces); the two cases run as parallel labs,
// about 30 s. -utcfailover-keep DIR keeps each case's series and logs.
func TestLabUTCFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two 28-s labs")
	}
	for _, tc := range []struct {
		name   string
		source bool // h1 has a UTC source
	}{{"new reference serves UTC", true}, {"no UTC source left", false}} {
		t.Run(tc.name, func(t *testing.T) { labUTCFailover(t, tc.source) })
	}
}

// utcFailoverKeep: a directory where TestLabUTCFailover leaves each case's
// series (series.csv: every read, WriteSeries) and the daemons' logs.
var utcFailoverKeep = flag.String("utcfailover-keep", "", "TestLabUTCFailover: keep each case's series and daemon logs under this directory")

// keepRun copies a run's series and daemon logs to dir/name.
func keepRun(t *testing.T, dir, name string, res GclockResult) {
	d := filepath.Join(dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Errorf("keep: %v", err)
		return
	}
	if err := WriteSeries(filepath.Join(d, "series.csv"), res.Series); err != nil {
		t.Errorf("keep: %v", err)
	}
	logs, _ := filepath.Glob(filepath.Join(res.Logs, "h*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err == nil {
			err = os.WriteFile(filepath.Join(d, filepath.Base(l)), b, 0o644)
		}
		if err != nil {
			t.Errorf("keep: %v", err)
		}
	}
	t.Logf("series and logs kept in %s", d)
}

// utcFailoverFigures are one host's reads around the kill.
type utcFailoverFigures struct {
	synced, outside     int     // synced reads from the warm-up on, of them UTC outside the bounds
	stale, staleOutside int     // the same for the other reads with bounds (stale, degraded)
	before              int64   // median width of the synced reads in the 6 s before the kill
	during, after       int64   // widest read with bounds within one failover time, and after it
	afterReads          int     // reads after one failover time
	afterBounded        int     // of them with bounds
	afterSynced         int     // of them synced
	lateSynced          int     // synced reads from one failover time and a second on
	syncedS, recoverS   float64 // from the kill to the synced reads, to the widths within 2x, for good (-1: not by the end)
	// stalled: reads after one failover time left out of the width
	// criterion: within a second after the evaluator itself went 200 ms
	// without a read (the machine stalled: every daemon's model aged
	// meanwhile, failover or not).
	stalled int
}

func labUTCFailover(t *testing.T, source bool) {
	const hosts = 3
	l, gc := gclockLab(t, hosts)
	var chrony *chronyNoSource
	if !source {
		if _, err := exec.LookPath("chronyd"); err != nil {
			t.Skipf("chronyd not installed (ci/deps.sh installs chrony): %v", err)
		}
		var err error
		if chrony, err = l.startChronyNoSource(1); err != nil {
			t.Fatal(err)
		}
	}
	base := LabDaemonConfig()
	base.RealTime = daemon.RealTimeConfig{Mode: daemon.RealTimeReference, PollEvery: daemon.Duration(time.Second), MaxSlewPPM: 500,
		Upstream: daemon.UpstreamNone}
	base.NTP.Listen = ":123"
	base.NTP.RateLimit = daemon.NTPRateLimitConfig{}
	gc.Base = &base
	gc.Duration, gc.Warmup = 28*time.Second, 10*time.Second
	gc.FailoverAfter = 2 * time.Second
	gc.Trace = true
	kill := 16 * time.Second
	// Killed for good: started again 1 s before the end, after the
	// evaluation window.
	gc.Faults = []Fault{{At: kill, Host: 0, Kind: faultKill, For: gc.Duration - kill - time.Second}}
	if chrony != nil {
		gc.Tweak = func(host int, c *daemon.Config) {
			if host == 1 {
				c.RealTime.Upstream, c.RealTime.ChronySocket = daemon.UpstreamKernel, chrony.Cmd
			}
		}
	}
	foTime := gc.FailoverAfter + queryTimeout(gc.FailoverAfter)
	end := gc.Faults[0].end()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	done := runGclockAsync(ctx, l, gc)
	// NTP from h2's namespace to h1 and h2 every 250 ms from the kill on,
	// and the served status once the new reference's UTC (or its
	// absence) has had time to reach every host.
	type answer struct {
		at   time.Duration
		leap uint8
	}
	var answers [hosts][]answer
	var statuses [hosts]string
	var wg sync.WaitGroup
	wg.Go(func() {
		for at := kill; at < end-500*time.Millisecond; at += 250 * time.Millisecond {
			select {
			case <-time.After(time.Until(start.Add(at))):
			case <-ctx.Done():
				return
			}
			for _, h := range []int{1, 2} {
				err := l.InHost(2, func() error {
					qctx, qcancel := context.WithTimeout(ctx, 200*time.Millisecond)
					defer qcancel()
					r, err := ntp.Query(qctx, netip.AddrPortFrom(netlab.HostAddr(h), 123).String())
					if err != nil && r.Reply.Mode != ntp.ModeServer {
						return err
					}
					answers[h] = append(answers[h], answer{time.Since(start), r.Reply.Leap})
					return nil
				})
				if err != nil {
					t.Logf("host %d: NTP at %v: %v", h, at, err)
				}
			}
			if at >= kill+foTime+4*time.Second && statuses[1] == "" {
				for _, h := range []int{1, 2} {
					statuses[h] = servedStatus(t, filepath.Join(l.Config().RunDir, "gclock", fmt.Sprintf("metrics-h%d.sock", h)))
				}
			}
		}
	})
	r := <-done
	wg.Wait()
	if r.err != nil {
		t.Fatalf("RunGclock: %v", r.err)
	}
	res := r.res
	if *utcFailoverKeep != "" {
		keepRun(t, *utcFailoverKeep, strings.ReplaceAll(t.Name(), "/", "-"), res)
	}
	if len(res.Failover.Takeovers) != 1 || res.Failover.Takeovers[0].To != 1 {
		t.Fatalf("takeovers %+v, want h1 after the kill of h0", res.Failover.Takeovers)
	}
	t.Logf("takeover by h1 seen %.2f s after the kill (limit %.2f s); one failover time %v", res.Failover.Takeovers[0].Seconds, res.Failover.LimitS, foTime)

	for _, h := range []int{1, 2} {
		f := utcFailoverReads(res.Series, h, gc.Warmup, kill, foTime, end)
		// NTP: the leap of every answer from one failover time and a
		// second after the kill on, and when leap 0 came back for good.
		leaps := map[uint8]int{}
		ntpBack := -1.0
		for _, a := range answers[h] {
			if a.at >= kill+foTime+time.Second {
				leaps[a.leap]++
			}
			if a.leap == ntp.LeapUnsync {
				ntpBack = -1
			} else if ntpBack < 0 {
				ntpBack = (a.at - kill).Seconds()
			}
		}
		t.Logf("h%d: %d synced reads (UTC outside %d), %d stale (outside %d); width median before %.0f us, widest within one failover time %.0f us, "+
			"after it %.0f us (%.2fx; %d reads after a stall left out); synced again %.2f s after the kill (%d of %d reads after one failover time synced); "+
			"width within 2x for good %.2f s after the kill; NTP leaps after it %v, leap 0 for good %.2f s after the kill; %s",
			h, f.synced, f.outside, f.stale, f.staleOutside, float64(f.before)/1e3, float64(f.during)/1e3, float64(f.after)/1e3,
			float64(f.after)/float64(max(f.before, 1)), f.stalled, f.syncedS, f.afterSynced, f.afterReads, f.recoverS, leaps, ntpBack, statuses[h])
		if f.outside != 0 || f.synced == 0 {
			t.Errorf("h%d: UTC outside the served bounds in %d of %d synced reads, want 0", h, f.outside, f.synced)
		}
		if f.staleOutside != 0 {
			t.Errorf("h%d: UTC outside the served bounds in %d of %d stale reads, want 0", h, f.staleOutside, f.stale)
		}
		if f.before == 0 {
			t.Errorf("h%d: no synced read in the 6 s before the kill", h)
			continue
		}
		if source {
			if f.afterBounded != f.afterReads || f.afterReads == 0 {
				t.Errorf("h%d: %d of %d reads with bounds from one failover time after the kill on, want all: h1 serves UTC", h, f.afterBounded, f.afterReads)
			}
			if f.after > 2*f.before {
				t.Errorf("h%d: served width up to %.0f us from one failover time after the kill on, more than twice the %.0f us median before",
					h, float64(f.after)/1e3, float64(f.before)/1e3)
			}
			if f.syncedS < 0 || ntpBack < 0 || !strings.Contains(statuses[h], `status="synced"`) {
				t.Errorf("h%d: not synced again by the end (pages synced from %.2f s, NTP leap 0 from %.2f s after the kill; %s): h1 serves UTC",
					h, f.syncedS, ntpBack, statuses[h])
			}
			continue
		}
		// No UTC source: h2 may serve the old reference's model (its
		// bounds growing, still honest) until its next poll of h1.
		if f.lateSynced != 0 {
			t.Errorf("h%d: %d synced reads from one failover time and a second after the kill on, yet no host serves UTC", h, f.lateSynced)
		}
		if len(leaps) != 1 || leaps[ntp.LeapUnsync] == 0 {
			t.Errorf("h%d: NTP leaps %v from one failover time and a second after the kill on, want only 3", h, leaps)
		}
		if !strings.Contains(statuses[h], `status="unsynced"`) || !strings.Contains(statuses[h], `reason="upstream-unsynchronised"`) ||
			!strings.Contains(statuses[h], `timescale="realtime"`) {
			t.Errorf("h%d: served status %q, want unsynced for the upstream", h, statuses[h])
		}
	}
}

// hostReads yields host h's reads in series with their time and the end
// of the last stall of the evaluator before them (a second after a gap of
// stallGap between two reads: the reads just after it are late).
func hostReads(series []SeriesPoint, h int) func(yield func(hostRead) bool) {
	return func(yield func(hostRead) bool) {
		var prev, stallEnd time.Duration
		for _, p := range series {
			at := time.Duration(p.AtNs)
			if p.Host != h {
				continue
			}
			if prev > 0 && at-prev >= stallGap {
				stallEnd = at + time.Second
			}
			prev = at
			if !yield(hostRead{p, at, stallEnd}) {
				return
			}
		}
	}
}

// hostRead is one read of hostReads.
type hostRead struct {
	SeriesPoint
	at, stallEnd time.Duration
}

// utcFailoverReads condenses host h's reads (series: CLOCK_REALTIME is the
// truth) from warm to end around a kill at kill.
func utcFailoverReads(series []SeriesPoint, h int, warm, kill, foTime, end time.Duration) utcFailoverFigures {
	var f utcFailoverFigures
	var before []int64
	for r := range hostReads(series, h) {
		p, at, stallEnd := r.SeriesPoint, r.at, r.stallEnd
		if at < warm || at >= end {
			continue
		}
		w := p.HiNs - p.LoNs
		if at >= kill+foTime {
			f.afterReads++
		}
		if !p.Bounded {
			continue
		}
		out := p.LoNs > 0 || p.HiNs < 0
		if p.Synced {
			f.synced++
			if out {
				f.outside++
			}
		} else {
			f.stale++
			if out {
				f.staleOutside++
			}
		}
		switch {
		case at < kill-6*time.Second:
		case at < kill:
			if p.Synced {
				before = append(before, w)
			}
		case at < kill+foTime:
			f.during = max(f.during, w)
		default:
			f.afterBounded++
			if p.Synced {
				f.afterSynced++
			}
			if p.Synced && at >= kill+foTime+time.Second {
				f.lateSynced++
			}
			if at < stallEnd {
				f.stalled++
			} else {
				f.after = max(f.after, w)
			}
		}
	}
	f.syncedS, f.recoverS = -1, -1
	if len(before) == 0 {
		return f
	}
	slices.Sort(before)
	f.before = before[len(before)/2]
	// For good: the first read after the kill from which every read is
	// synced, or has bounds within twice the width before.
	for r := range hostReads(series, h) {
		p, at := r.SeriesPoint, r.at
		if at < kill || at >= end || at < r.stallEnd {
			continue
		}
		if !p.Synced {
			f.syncedS = -1
		} else if f.syncedS < 0 {
			f.syncedS = (at - kill).Seconds()
		}
		if !p.Bounded || p.HiNs-p.LoNs > 2*f.before {
			f.recoverS = -1
		} else if f.recoverS < 0 {
			f.recoverS = (at - kill).Seconds()
		}
	}
	return f
}

// stallGap: the evaluator reads every 10 ms; this long without a read of
// a host, the lab's machine stalled.
const stallGap = 200 * time.Millisecond

// servedStatus is the gclock_served_status line that is 1 in the metrics
// at sock ("" with the error logged when they cannot be read).
func servedStatus(t *testing.T, sock string) string {
	c := http.Client{Timeout: time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://gclock/metrics")
	if err != nil {
		t.Errorf("metrics %s: %v", sock, err)
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("metrics %s: %v", sock, err)
	}
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "gclock_served_status{") && strings.HasSuffix(l, " 1") {
			return l
		}
	}
	return ""
}

// chronyNoSource is chronyd -x with no source in one host: its tracking
// says "not synchronised" (leap 3, stratum 0), the state of a host whose
// NTP daemon has lost its servers.
type chronyNoSource struct {
	Cmd  string // its command socket (real_time.chrony_socket)
	Proc *netlab.Proc
}

// startChronyNoSource starts it in host; the lab's Down stops it.
func (l *Lab) startChronyNoSource(host int) (*chronyNoSource, error) {
	dir, err := l.peerDir(fmt.Sprintf("chrony-nosource-h%d", host))
	if err != nil {
		return nil, fmt.Errorf("lab: chronyd without source: %w", err)
	}
	c := &chronyNoSource{Cmd: filepath.Join(dir, "chronyd.sock")}
	if c.Proc, err = l.startChronydIn(host, dir, c.Cmd, ""); err != nil {
		return nil, fmt.Errorf("lab: chronyd without source: %w", err)
	}
	return c, nil
}

// TestUTCFailoverReads: the figures TestLabUTCFailover judges, on a made-up
// series of one host read every 10 ms: a kill at 10 s, one failover time
// of 2.5 s, a stall of the evaluator at 15 s (its reads for a second
// after it are left out of the widths, not of the counts: 650 reads after
// one failover time, 29 missed).
func TestUTCFailoverReads(t *testing.T) {
	const ms = time.Millisecond
	var series []SeriesPoint
	for at := 3 * time.Second; at < 20*time.Second; at += 10 * ms {
		if at > 15*time.Second && at < 15*time.Second+300*ms {
			continue // the evaluator stalled
		}
		w := int64(1000) // width before: 1000 ns
		p := SeriesPoint{AtNs: int64(at), Host: 1, Synced: true, Bounded: true}
		switch {
		case at >= 10*time.Second && at < 12*time.Second:
			w, p.Synced = 5000, false // the old model, stale
		case at >= 15*time.Second+300*ms && at < 16*time.Second:
			w = 9000 // after the stall
		case at >= 12*time.Second:
			w = 1500
		}
		p.LoNs, p.HiNs = -w/2, w/2
		if at == 17*time.Second {
			p.LoNs = 1 // the truth below the bounds
		}
		series = append(series, p, SeriesPoint{AtNs: int64(at), Host: 2, Synced: true, Bounded: true, LoNs: -1e6, HiNs: 1e6})
	}
	f := utcFailoverReads(series, 1, 4*time.Second, 10*time.Second, 2500*ms, 19*time.Second)
	if f.before != 1000 || f.during != 5000 || f.after != 1500 || f.outside != 1 || f.stalled != 100 {
		t.Errorf("before %d, during %d, after %d, outside %d, stalled %d; want 1000, 5000, 1500, 1, 100", f.before, f.during, f.after, f.outside, f.stalled)
	}
	if f.syncedS != 2 || f.recoverS != 2 || f.afterReads != 621 || f.afterBounded != 621 || f.stale != 200 {
		t.Errorf("synced after %v s, recovered after %v s, %d reads after, %d with bounds, %d stale; want 2, 2, 621, 621, 200",
			f.syncedS, f.recoverS, f.afterReads, f.afterBounded, f.stale)
	}
}
