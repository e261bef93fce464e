package ntp

import (
	crand "crypto/rand"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"net/netip"
)

// RateLimit limits the answers each source gets, as chrony's ratelimit
// does: a source may get Burst answers at once and one every Interval on
// average (a token bucket, kept as one "theoretical arrival time" per
// source: GCRA). Beyond the limit, one request in 2^Leak is still answered
// (at random, so that nobody can time it), one in 2^KoD of the others gets
// a kiss-o'-death RATE (RFC 5905, 7.4) telling a real client to poll less
// often (KoD 0: none, chrony's default), and the rest are dropped. IPv6
// sources count by /64, as chrony does. Interval 0: no limit (the default
// of the daemon's ntp.rate_limit, as of chrony's).
//
// A limit per source address can always be spent by someone who forges
// that address: the leak is what keeps the real client answered (one
// request in 2^Leak at worst, chrony's answer too); and the table of
// sources has a fixed size, its least recently seen record replaced by a
// newcomer, so that a flood of forged addresses only resets limits (a
// fresh record holds a full burst) and never puts a real client in a
// bucket shared with the flood.
type RateLimit struct {
	Interval int64 // ns
	Burst    int
	Leak     int // 1..4 with a limit (chrony's range)
	KoD      int // 0..4
}

// Check names the first field out of range.
func (l RateLimit) Check() error {
	switch {
	case l.Interval < 0:
		return fmt.Errorf("ntp rate limit: interval %d ns: want >= 0", l.Interval)
	case l.Interval > 0 && (l.Burst < 1 || l.Burst > 1024):
		return fmt.Errorf("ntp rate limit: burst %d: want 1..1024", l.Burst)
	case l.Interval > 0 && (l.Leak < 1 || l.Leak > 4), l.Leak < 0 || l.Leak > 4:
		return fmt.Errorf("ntp rate limit: leak %d: want 1..4 (one over-limit request in 2^leak answered, so that a forged flood never cuts a client off)", l.Leak)
	case l.KoD < 0 || l.KoD > 4:
		return fmt.Errorf("ntp rate limit: kod %d: want 0..4", l.KoD)
	}
	return nil
}

// Verdicts of limiter.take.
const (
	answer = iota
	kod    // over the limit: a KoD RATE
	drop   // over the limit: nothing
)

// The limiter's table, as chrony's clientlog.c: a hash table of
// limitSlots slots of slotSize records each, the slot chosen by a keyed
// hash of the address (the key random per limiter, so that nobody can aim
// addresses at one slot). A newcomer takes an empty record of its slot or
// replaces the least recently seen one. 8192 records of 40 bytes: 320 KB,
// allocated when a limit is set; an active client (one request per 16 s or
// more often) keeps its record unless more than 8 addresses of its slot
// are more recent, which takes more than 8192 sources at once.
const (
	slotSize   = 8
	limitSlots = 1024
)

// limiter is the per-source state of a RateLimit. Not safe for concurrent
// use (the responder's one goroutine owns it).
type limiter struct {
	lim     RateLimit
	seed    maphash.Seed
	table   []record // limitSlots * slotSize; an invalid addr: empty
	rng     *rand.Rand
	evicted uint64 // records replaced by a newcomer
}

type record struct {
	addr netip.Addr
	tat  int64 // the theoretical arrival time of the next request at the average rate
	last int64 // the last request's time (the least recent is replaced)
}

func newLimiter(l RateLimit) *limiter {
	var seed [32]byte
	crand.Read(seed[:])
	return &limiter{lim: l, seed: maphash.MakeSeed(), table: make([]record, limitSlots*slotSize),
		rng: rand.New(rand.NewChaCha8(seed))}
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
	r := l.record(key(a), now)
	r.last = now
	// GCRA: the request conforms when its theoretical arrival time is at
	// most (Burst-1) intervals ahead of now.
	iv := l.lim.Interval
	t := max(r.tat, now)
	if t-now <= int64(l.lim.Burst-1)*iv {
		r.tat = t + iv
		return answer
	}
	if l.rng.Uint64()&(1<<l.lim.Leak-1) == 0 {
		return answer // the leak
	}
	if l.lim.KoD > 0 && l.rng.Uint64()&(1<<l.lim.KoD-1) == 0 {
		return kod
	}
	return drop
}

// record returns k's record, a new one (a full bucket at now) in an empty
// place or in place of the least recently seen of k's slot.
func (l *limiter) record(k netip.Addr, now int64) *record {
	i := int(maphash.Comparable(l.seed, k)%limitSlots) * slotSize
	slot := l.table[i : i+slotSize]
	oldest := -1
	for j := range slot {
		switch {
		case slot[j].addr == k:
			return &slot[j]
		case !slot[j].addr.IsValid():
			slot[j] = record{addr: k, tat: now}
			return &slot[j]
		case oldest < 0 || slot[j].last < slot[oldest].last:
			oldest = j
		}
	}
	l.evicted++
	slot[oldest] = record{addr: k, tat: now}
	return &slot[oldest]
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
