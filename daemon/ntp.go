package daemon

// Standard clients and the system clock (docs/daemon.md, "NTP and
// chrony"): an NTPv4 server answering client requests with served global
// time (UTC in real_time.mode reference-realtime), and a chrony SOCK
// refclock feed so that chronyd can discipline CLOCK_REALTIME from it.
// Both read served time the same way: the engine's estimate and bounds at
// the instant asked, through the real-time map (realtime.go), without the
// page's never-backwards slew (clients filter; they want the estimate).

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/internal/rawclock"
	"github.com/gclock/gclock/internal/refclock"
	"github.com/gclock/gclock/ntp"
	"github.com/gclock/gclock/transport"
)

// NTPConfig is the NTP server (off by default).
type NTPConfig struct {
	// Listen is the UDP host:port to answer NTP client requests on
	// (":123", "10.0.0.5:123"); empty: no NTP server. It needs a
	// real_time.mode other than none: NTP serves UTC.
	Listen string `yaml:"listen"`
	// Stratum is what the reference announces: 1 (the default) when its
	// CLOCK_REALTIME is the cluster's primary; set the stratum of the
	// reference's own NTP source plus one to tell clients the truth about
	// the chain. The other nodes announce one more.
	Stratum int `yaml:"stratum"`
	// Allow lists the client networks answered (CIDRs, or addresses);
	// empty: ntp.DefaultAllow, loopback and the private and link-local
	// ranges (10/8, 172.16/12, 192.168/16, 100.64/10, 169.254/16, fc00::/7,
	// fe80::/10). Serving the Internet takes ["0.0.0.0/0", "::/0"]. Other
	// sources get no answer (counted as denied).
	Allow []string `yaml:"allow,omitempty"`
	// RateLimit limits each client address's answers (chrony's ratelimit).
	RateLimit NTPRateLimitConfig `yaml:"rate_limit"`
}

// NTPRateLimitConfig limits the answers per client address (an IPv6 /64
// counts as one), as chrony's ratelimit does, and is off by default as
// chrony's is (Interval 0): a limit per address can be spent by anyone who
// forges that address. With Interval set: Burst at once, one every
// Interval on average; beyond, one request in 2^Leak is still answered (so
// a client whose address a flood forges keeps at least that share), one in
// 2^KoD of the others gets a kiss-o'-death RATE (0: none, chrony's
// default), and the rest are dropped. (1s, 16, 2) never limits an NTP
// client (they poll every 16 s or more after a burst of at most 8).
type NTPRateLimitConfig struct {
	Interval Duration `yaml:"interval"` // 0: no limit (the default)
	Burst    int      `yaml:"burst"`
	Leak     int      `yaml:"leak"`
	KoD      int      `yaml:"kod"`
}

func (r NTPRateLimitConfig) limit() ntp.RateLimit {
	return ntp.RateLimit{Interval: int64(r.Interval), Burst: r.Burst, Leak: r.Leak, KoD: r.KoD}
}

// allowPrefixes parses ntp.allow (empty: ntp.DefaultAllow); a bare address
// is its own /32 or /128.
func (c NTPConfig) allowPrefixes() ([]netip.Prefix, error) {
	if len(c.Allow) == 0 {
		return ntp.DefaultAllow, nil
	}
	var ps []netip.Prefix
	for _, a := range c.Allow {
		p, err := netip.ParsePrefix(a)
		if err != nil {
			addr, err2 := netip.ParseAddr(a)
			if err2 != nil {
				return nil, fmt.Errorf("%q: not a CIDR (10.0.0.0/8) or an address: %w", a, err)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		ps = append(ps, p.Masked())
	}
	return ps, nil
}

// RefclockConfig is the chrony SOCK refclock feed (off by default).
type RefclockConfig struct {
	// Sock is the path of the Unix datagram socket chronyd creates for a
	// `refclock SOCK <path>` line; empty: no feed.
	Sock string `yaml:"sock"`
	// Every is how often a sample is sent (chronyd's median filter takes
	// them in at each refclock poll).
	Every Duration `yaml:"every"`
}

func (c *Config) validateNTP(e *errs) {
	n, r := c.NTP, c.Refclock
	if n.Stratum < 1 || n.Stratum > 15 {
		e.add("ntp.stratum", "%d outside [1, 15]", n.Stratum)
	}
	if _, err := n.allowPrefixes(); err != nil {
		e.add("ntp.allow", "%v", err)
	}
	if err := n.RateLimit.limit().Check(); err != nil {
		e.add("ntp.rate_limit", "%v (interval 0: no limit)", err)
	}
	if n.Listen != "" {
		checkHostPort(e, "ntp.listen", n.Listen, true)
		if c.RealTime.Mode == RealTimeNone {
			e.add("ntp.listen", "%q: NTP serves UTC, but real_time.mode is none (global time counts the reference's "+
				"CLOCK_MONOTONIC_RAW): set real_time.mode reference-realtime", n.Listen)
		}
		if sameSocket(n.Listen, c.ListenAddr()) {
			e.add("ntp.listen", "%q: the same UDP socket as the daemon's own (%s): use another port (123)", n.Listen, c.ListenAddr())
		}
	}
	if r.Sock != "" {
		if !filepath.IsAbs(r.Sock) {
			e.add("refclock.sock", "%q: want an absolute path (chrony's refclock SOCK path)", r.Sock)
		}
		if c.RealTime.Mode == RealTimeNone {
			e.add("refclock.sock", "%q: the system clock counts UTC, but real_time.mode is none (global time counts the "+
				"reference's CLOCK_MONOTONIC_RAW): set real_time.mode reference-realtime", r.Sock)
		}
	}
	if r.Every < Duration(10*time.Millisecond) || r.Every > Duration(time.Hour) {
		e.add("refclock.every", "%v outside [10ms, 1h]", r.Every)
	}
}

// sameSocket reports whether two host:port addresses would bind the same
// UDP socket (same port, and the same host or a wildcard).
func sameSocket(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}

// servedAt is served global time at the CLOCK_MONOTONIC_RAW instant raw:
// the engine's estimate through the real-time map. ok is false while
// there is no bounded reading or no real-time scale.
func (n *node) servedAt(raw int64) (engine.Time, bool) {
	local := n.clk.fromRaw(raw)
	n.mu.Lock()
	t := n.eng.Estimate(local)
	n.mu.Unlock()
	if n.rt == nil {
		return t, false
	}
	ts := []engine.Time{t}
	if !n.rt.apply(ts) {
		return ts[0], false
	}
	return ts[0], true
}

// servesOwnWall: this node is the reference and serves its own
// CLOCK_REALTIME (a refclock would only feed chronyd its own clock back).
func (n *node) servesOwnWall() bool {
	return n.cfg.RealTime.Mode == RealTimeReference && n.reference() == engine.NodeID(n.cfg.Node.ID)
}

// ntpSource is the NTP server's view of the node (ntp.Source).
type ntpSource struct {
	n         *node
	precision int8
	mu        sync.Mutex
	self      ntp.Server
	selfAt    time.Time
}

// At is served time at raw with its bound; not OK unless the engine is
// synced (only then are the bounds promised).
func (s *ntpSource) At(raw int64) ntp.Reading {
	t, ok := s.n.servedAt(raw)
	if !ok || t.Status != engine.StatusSynced {
		return ntp.Reading{}
	}
	return ntp.Reading{Time: t.Est, MaxErr: max(t.Est-t.Earliest, t.Latest-t.Est), OK: true}
}

// Self is refreshed at most once a second (it reads the engine's
// snapshot): stratum, reference id and the time of the last update.
func (s *ntpSource) Self() ntp.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Since(s.selfAt) < time.Second {
		return s.self
	}
	n := s.n
	raw := n.sys.raw()
	now, ok := n.servedAt(raw)
	srv := ntp.Server{Synced: ok && now.Status == engine.StatusSynced, Precision: s.precision,
		RefID: ntp.RefIDString("GCLK")}
	// The reference's stratum: its upstream's plus one when the upstream
	// is read (chronyd's tracking tells it; the kernel alone only says
	// there is a source: at least 2), else ntp.stratum. An unsynchronised
	// upstream answers leap 3, stratum 16 (servedAt is not ok then).
	stratum := n.cfg.NTP.Stratum
	if up, has := s.upstream(); has && up.Known {
		srv.Synced = srv.Synced && up.Synced
		stratum = max(stratum, 2)
		if up.Stratum > 0 {
			stratum = int(up.Stratum) + 1
		}
		srv.Leap, srv.RootDelay = up.Leap, up.RootDelay
		if up.RefID != 0 {
			srv.RefID = up.RefID
		}
	}
	srv.Stratum = uint8(min(stratum, ntp.MaxStratum))
	if ref := n.reference(); ref != engine.NodeID(n.cfg.Node.ID) {
		srv.Stratum = uint8(min(stratum+1, ntp.MaxStratum))
		srv.RefID = ntp.RefIDString("GCLK")
		// The reference id of a stratum >= 2 server is its source's IPv4
		// address (clients use it to detect loops).
		local := n.clk.fromRaw(raw)
		n.mu.Lock()
		x := n.eng.In(local)
		tr := n.eng.Node().Tracking(x)
		es := n.eng.Node().Snapshot()
		n.mu.Unlock()
		src := ref
		if tr.HasSelected {
			src = tr.Selected
		}
		if a, ok := n.peers[src]; ok && a.Addr().Is4() {
			b := a.Addr().As4()
			srv.RefID = uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		}
		var last int64 = math.MinInt64
		for _, so := range es.Sources {
			if so.Rounds > 0 {
				last = max(last, so.LastRound)
			}
		}
		if srv.Synced && last != math.MinInt64 {
			srv.RefTime = now.Est - max(0, x-last)
		}
	} else if srv.Synced {
		srv.RefTime = now.Est // the reference is the source of global time
	}
	s.self, s.selfAt = srv, time.Now()
	return srv
}

// upstream is the upstream state of the served real-time model.
func (s *ntpSource) upstream() (realtime.Upstream, bool) {
	if s.n.rt == nil {
		return realtime.Upstream{}, false
	}
	return s.n.rt.upstreamState()
}

// clockPrecision is log2 of the smallest step between two different reads
// of CLOCK_MONOTONIC_RAW (NTP's precision field), at most -10.
func clockPrecision() int8 {
	best := rawclock.Step(64)
	p := int8(math.Ceil(math.Log2(float64(best) / 1e9)))
	return min(max(p, -30), -10)
}

// extras are the NTP server and the refclock feed of one daemon run.
type extras struct {
	ntpConn *transport.UDPConn
	ntpSrv  *ntp.Responder
	rc      *refclockStats // nil: no feed
	// rt is the real-time scale whose upstream state is exported (nil: not
	// reference-realtime).
	rt *realTime
}

// openExtras binds the NTP socket (so that a port in use fails the start).
func (n *node) openExtras() (*extras, error) {
	x := &extras{}
	if n.rt != nil && n.cfg.RealTime.Mode == RealTimeReference {
		x.rt = n.rt
	}
	if l := n.cfg.NTP.Listen; l != "" {
		ap, err := resolve(l)
		if err != nil {
			return nil, fmt.Errorf("ntp.listen: %w", err)
		}
		if x.ntpConn, err = transport.ListenUDP(ap.String(), transport.UDPOptions{Timestamps: n.cfg.Transport.KernelTimestamps}); err != nil {
			return nil, fmt.Errorf("ntp.listen: %w", err)
		}
		x.ntpSrv = ntp.NewResponder(x.ntpConn, &ntpSource{n: n, precision: clockPrecision()}, n.sys.raw, n.log)
		allow, err := n.cfg.NTP.allowPrefixes()
		if err == nil {
			err = x.ntpSrv.SetPolicy(ntp.Policy{Allow: allow, Limit: n.cfg.NTP.RateLimit.limit()})
		}
		if err != nil {
			x.close()
			return nil, fmt.Errorf("ntp: %w", err) // Validate refuses it first
		}
	}
	if n.cfg.Refclock.Sock != "" {
		x.rc = &refclockStats{}
	}
	return x, nil
}

var (
	ntpRequestsDesc = prometheus.NewDesc("gclock_ntp_requests_total",
		"NTP datagrams received, by result: answered, refused (not a client request), write_error, denied (not in ntp.allow: "+
			"dropped), limited (over ntp.rate_limit: dropped), kod (over ntp.rate_limit: a kiss-o'-death RATE sent).", []string{"result"}, nil)
	ntpUnsyncedDesc = prometheus.NewDesc("gclock_ntp_unsynchronised_replies_total",
		"NTP replies that said unsynchronised (leap 3, stratum 16): the engine was not synced.", nil, nil)
	ntpKernelDesc = prometheus.NewDesc("gclock_ntp_kernel_stamps_total",
		"NTP requests whose receive time was the kernel's stamp.", nil, nil)
	upSyncedDesc = prometheus.NewDesc("gclock_realtime_upstream_synced",
		"1 when the reference's CLOCK_REALTIME is synchronised (its kernel says neither STA_UNSYNC nor TIME_ERROR) or "+
			"real_time.upstream is none, 0 when not: served UTC is then unsynced. Absent until a model is known.", nil, nil)
	upMaxErrDesc = prometheus.NewDesc("gclock_realtime_upstream_max_error_seconds",
		"The reference kernel's maxerror of CLOCK_REALTIME when the served model was sampled: the served UTC bounds include it.", nil, nil)
	upEstErrDesc = prometheus.NewDesc("gclock_realtime_upstream_estimated_error_seconds",
		"The reference kernel's esterror of CLOCK_REALTIME when the served model was sampled.", nil, nil)
	upLeapDesc = prometheus.NewDesc("gclock_realtime_upstream_leap",
		"The leap second announced by the reference's kernel (STA_INS 1, STA_DEL 2, none 0), passed on to NTP clients.", nil, nil)
	refclockDesc = prometheus.NewDesc("gclock_refclock_samples_total",
		"chrony SOCK refclock samples, by result: sent, failed (chronyd not reachable), unsynced (none sent: not synced), "+
			"reference (none sent: this node serves its own CLOCK_REALTIME).", []string{"result"}, nil)
)

// Describe implements prometheus.Collector (the metrics of what is on).
func (x *extras) Describe(ch chan<- *prometheus.Desc) {
	if x.ntpSrv != nil {
		ch <- ntpRequestsDesc
		ch <- ntpUnsyncedDesc
		ch <- ntpKernelDesc
	}
	if x.rc != nil {
		ch <- refclockDesc
	}
	if x.rt != nil {
		ch <- upSyncedDesc
		ch <- upMaxErrDesc
		ch <- upEstErrDesc
		ch <- upLeapDesc
	}
}

// Collect implements prometheus.Collector.
func (x *extras) Collect(ch chan<- prometheus.Metric) {
	c := func(d *prometheus.Desc, v uint64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	if x.ntpSrv != nil {
		st := x.ntpSrv.Stats()
		c(ntpRequestsDesc, st.Answered, "answered")
		c(ntpRequestsDesc, st.Refused, "refused")
		c(ntpRequestsDesc, st.WriteErrors, "write_error")
		c(ntpRequestsDesc, st.Denied, "denied")
		c(ntpRequestsDesc, st.Limited, "limited")
		c(ntpRequestsDesc, st.KoD, "kod")
		c(ntpUnsyncedDesc, st.Unsynced)
		c(ntpKernelDesc, st.KernelStamps)
	}
	if x.rc != nil {
		c(refclockDesc, x.rc.sent.Load(), "sent")
		c(refclockDesc, x.rc.failed.Load(), "failed")
		c(refclockDesc, x.rc.unsynced.Load(), "unsynced")
		c(refclockDesc, x.rc.skippedRef.Load(), "reference")
	}
	if x.rt != nil {
		if up, ok := x.rt.upstreamState(); ok {
			g := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
			}
			synced := 0.0
			if !up.Known || up.Synced {
				synced = 1
			}
			g(upSyncedDesc, synced)
			g(upMaxErrDesc, float64(up.MaxErr)/1e9)
			g(upEstErrDesc, float64(up.EstErr)/1e9)
			g(upLeapDesc, float64(up.Leap))
		}
	}
}

// close releases what openExtras opened when the daemon does not start.
func (x *extras) close() {
	if x.ntpConn != nil {
		x.ntpConn.Close()
	}
}

// start runs the NTP server and the refclock feed until ctx is done; the
// returned function waits for them.
func (x *extras) start(ctx context.Context, n *node) (wait func()) {
	var wg sync.WaitGroup
	if x.ntpSrv != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.log.Info("ntp server started", "listen", x.ntpConn.LocalAddr(), "stratum", n.cfg.NTP.Stratum)
			if err := x.ntpSrv.Serve(ctx); err != nil {
				n.log.Error("ntp server stopped", "err", err)
			}
			n.log.Info("ntp server stopping", "stats", x.ntpSrv.Stats()) // ntp.Stats.LogValue: one field each
		}()
	}
	if x.rc != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.runRefclock(ctx, x.rc)
		}()
	}
	return wg.Wait
}

// refclockStats counts the feed's samples.
type refclockStats struct {
	sent, failed, unsynced, skippedRef atomic.Uint64
}

// runRefclock sends chronyd a sample every refclock.every: offset = served
// global time - CLOCK_REALTIME at one instant (a CLOCK_MONOTONIC_RAW read
// and the wall-raw offset of rawclock.WallOffset, the median of five
// sandwiched reads). Nothing is sent while the engine is not synced (chronyd
// then sees the refclock go silent and stops using it) nor while this node
// is the reference serving its own CLOCK_REALTIME.
func (n *node) runRefclock(ctx context.Context, st *refclockStats) {
	path := n.cfg.Refclock.Sock
	s := refclock.NewSender(path)
	defer s.Close()
	t := time.NewTicker(n.cfg.Refclock.Every.D())
	defer t.Stop()
	n.log.Info("refclock feed started", "sock", path, "every", n.cfg.Refclock.Every)
	failing := false
	for {
		select {
		case <-ctx.Done():
			n.log.Info("refclock feed stopping", "sock", path, "sent", st.sent.Load(), "failed", st.failed.Load(),
				"unsynced", st.unsynced.Load(), "skipped_as_reference", st.skippedRef.Load())
			return
		case <-t.C:
		}
		if n.servesOwnWall() {
			st.skippedRef.Add(1)
			continue
		}
		raw := n.sys.raw()
		off, _ := rawclock.WallOffset()
		g, ok := n.servedAt(raw)
		if !ok || g.Status != engine.StatusSynced {
			st.unsynced.Add(1)
			continue
		}
		real := raw + off
		err := s.Send(refclock.Sample{Time: real, Offset: float64(g.Est-real) / 1e9})
		switch {
		case err != nil:
			st.failed.Add(1)
			if !failing {
				n.log.Warn("refclock: cannot send to chronyd (is it running with `refclock SOCK "+path+"`?)", "err", err)
			}
			failing = true
		default:
			st.sent.Add(1)
			if failing {
				n.log.Info("refclock: chronyd reached", "sock", path)
			}
			failing = false
		}
	}
}
