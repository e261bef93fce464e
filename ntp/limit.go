package ntp

import (
	"fmt"
	"math"
	"math/bits"
	"net/netip"
)

// RateLimit limits the answers each source gets, as chrony's ratelimit
// does: a source may get Burst answers at once and one every Interval on
// average (a token bucket, kept as one "theoretical arrival time" per
// source: GCRA). A request over the limit is dropped, except one in
// 2^Leak, which gets a kiss-o'-death RATE (RFC 5905, 7.4) telling a real
// client to poll less often; a spoofed source's victim gets at most that
// share of 48-byte replies, never more bytes than were sent. IPv6 sources
// count by /64, as chrony does. Interval 0: no limit.
type RateLimit struct {
	Interval int64 // ns
	Burst    int
	Leak     int
}

// Check names the first field out of range.
func (l RateLimit) Check() error {
	switch {
	case l.Interval < 0:
		return fmt.Errorf("ntp rate limit: interval %d ns: want >= 0", l.Interval)
	case l.Interval > 0 && (l.Burst < 1 || l.Burst > 1024):
		return fmt.Errorf("ntp rate limit: burst %d: want 1..1024", l.Burst)
	case l.Leak < 0 || l.Leak > 16:
		return fmt.Errorf("ntp rate limit: leak %d: want 0..16", l.Leak)
	}
	return nil
}

// Verdicts of limiter.take.
const (
	answer = iota
	kod    // over the limit: a KoD RATE
	drop   // over the limit: nothing
)

// maxSources bounds the limiter's table (about 100 KB): beyond it, new
// sources share one bucket until idle entries are swept.
const maxSources = 4096

// limiter is the per-source state of a RateLimit. Not safe for concurrent
// use (the responder's one goroutine owns it).
type limiter struct {
	lim       RateLimit
	tat       map[netip.Addr]source
	shared    source // the bucket of sources the full table has no room for
	lastSweep int64
}

type source struct {
	tat     int64  // the theoretical arrival time of the next request at the average rate
	limited uint64 // requests over the limit so far (the leak counts them)
}

func newLimiter(l RateLimit) *limiter {
	return &limiter{lim: l, tat: map[netip.Addr]source{}, lastSweep: math.MinInt64}
}

// key is the source a request counts against: the IPv4 address, or the
// IPv6 /64.
func key(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// take counts one request from a at now (ns, any monotonic clock) and
// says what it gets.
func (l *limiter) take(a netip.Addr, now int64) int {
	if l.lim.Interval <= 0 {
		return answer
	}
	k := key(a)
	s, ok := l.tat[k]
	var sp *source
	switch {
	case ok:
		sp = &s
	case len(l.tat) < maxSources:
		s = source{tat: now}
		sp = &s
	default:
		if now-l.lastSweep >= l.lim.Interval {
			l.sweep(now)
		}
		if len(l.tat) < maxSources {
			s = source{tat: now}
			sp = &s
		} else {
			sp, k = &l.shared, netip.Addr{}
		}
	}
	v := l.step(sp, now)
	if k.IsValid() {
		l.tat[k] = *sp
	}
	return v
}

// step is GCRA on one source: the request conforms when its theoretical
// arrival time is at most (Burst-1) intervals ahead of now.
func (l *limiter) step(s *source, now int64) int {
	iv := l.lim.Interval
	t := max(s.tat, now)
	if t-now <= int64(l.lim.Burst-1)*iv {
		s.tat = t + iv
		return answer
	}
	s.limited++
	if s.limited&(1<<l.lim.Leak-1) == 0 {
		return kod
	}
	return drop
}

// sweep forgets the sources whose bucket is full again (idle: a new entry
// would be the same).
func (l *limiter) sweep(now int64) {
	l.lastSweep = now
	for k, s := range l.tat {
		if s.tat <= now {
			delete(l.tat, k)
		}
	}
}

// pollFor is the poll exponent (log2 s) a KoD RATE asks for: at least the
// limit's interval.
func pollFor(interval int64) int8 {
	s := uint64(max((interval+nsPerSecond-1)/nsPerSecond, 1))
	return int8(min(bits.Len64(s-1), 17))
}

// KissOfDeath writes into out (at least HeaderLen bytes) a kiss-o'-death
// reply with the 4-character code (RFC 5905, 7.4: leap 3, stratum 0, the
// code in the reference id, the request's transmit time as origin), poll
// at least minPoll, and returns its length; the request is checked as
// Respond checks it.
func KissOfDeath(out, req []byte, code string, minPoll int8) (int, error) {
	q, err := parseRequest(req)
	if err != nil {
		return 0, err
	}
	p := Packet{Leap: LeapUnsync, Version: q.Version, Mode: ModeServer, Stratum: 0,
		Poll: max(q.Poll, minPoll), RefID: RefIDString(code), Origin: q.Transmit}
	return p.MarshalBinaryTo(out)
}

// DefaultAllow are the client networks an NTP server answers by default:
// loopback, the private ranges (RFC 1918, RFC 6598 shared space, IPv6
// unique local) and link-local, where a cluster's clients live. The public
// Internet needs an explicit allow list (0.0.0.0/0, ::/0).
var DefaultAllow = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
}

// allowed: a is in one of the prefixes (nil: every address).
func allowed(allow []netip.Prefix, a netip.Addr) bool {
	if allow == nil {
		return true
	}
	a = a.Unmap()
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
