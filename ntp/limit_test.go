package ntp

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

// memConn is a Conn fed from a script of datagrams: each read moves the
// fake raw clock to the datagram's time; writes are recorded. After the
// script, reads fail with net.ErrClosed and Serve returns.
type memConn struct {
	in   []memDatagram
	now  int64
	sent map[netip.AddrPort][][]byte
}

type memDatagram struct {
	at   int64
	from netip.AddrPort
	b    []byte
}

func (c *memConn) ReadFromStamped(b []byte) (int, netip.AddrPort, int64, error) {
	if len(c.in) == 0 {
		return 0, netip.AddrPort{}, 0, net.ErrClosed
	}
	d := c.in[0]
	c.in = c.in[1:]
	c.now = d.at
	return copy(b, d.b), d.from, 0, nil
}

func (c *memConn) WriteTo(b []byte, to netip.AddrPort) error {
	c.sent[to] = append(c.sent[to], append([]byte(nil), b...))
	return nil
}

func (c *memConn) Close() error { return nil }

type fixedSource struct{}

func (s fixedSource) At(raw int64) Reading {
	return Reading{Time: 1_764_000_000_000_000_000 + raw, MaxErr: 1000, OK: true}
}
func (s fixedSource) Self() Server { return Server{Synced: true, Stratum: 2, RefID: 1, Precision: -20} }

// serveScript runs a Responder with policy p over the script and returns
// the connection (what was sent) and the stats.
func serveScript(t *testing.T, p Policy, in []memDatagram) (*memConn, Stats) {
	t.Helper()
	c := &memConn{in: in, sent: map[netip.AddrPort][][]byte{}}
	r := NewResponder(c, fixedSource{}, func() int64 { return c.now }, nil)
	if err := r.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c, r.Stats()
}

// kinds counts the replies: answers and KoD RATEs.
func kinds(t *testing.T, replies [][]byte) (answers, kods int) {
	t.Helper()
	for _, b := range replies {
		var p Packet
		if err := p.UnmarshalBinary(b); err != nil {
			t.Fatal(err)
		}
		switch {
		case p.Stratum == 0 && p.Leap == LeapUnsync && p.RefID == RefIDString("RATE"):
			kods++
			if p.Poll < 0 {
				t.Errorf("KoD RATE with poll %d, want at least the limit's interval", p.Poll)
			}
		case p.Stratum == 2:
			answers++
		default:
			t.Errorf("reply %+v: neither an answer nor a KoD RATE", p)
		}
	}
	return
}

// TestRateLimit: a source sending 2000 requests/s for 10 s gets its burst
// and one answer a second, then one in 2^leak of the rest answered (the
// leak), a KoD RATE for one in 2^kod of the others and nothing for the
// rest; a client polling every 2 s from another address meanwhile gets
// every answer; an address outside the allow list gets nothing.
func TestRateLimit(t *testing.T) {
	const ms = int64(1e6)
	flood := netip.MustParseAddrPort("10.0.0.1:123")
	polite := netip.MustParseAddrPort("[fd00::2]:4000")
	denied := netip.MustParseAddrPort("8.8.8.8:123")
	lim := RateLimit{Interval: 1000 * ms, Burst: 16, Leak: 2, KoD: 2}
	var in []memDatagram
	for i := range int64(20000) {
		at := i * ms / 2
		in = append(in, memDatagram{at, flood, request(4, uint64(i))})
		if i%4000 == 0 {
			in = append(in, memDatagram{at, polite, request(4, uint64(i))}, memDatagram{at, denied, request(4, uint64(i))})
		}
	}
	c, st := serveScript(t, Policy{Allow: DefaultAllow, Limit: lim}, in)
	a, k := kinds(t, c.sent[flood])
	t.Logf("flood of 20000 requests in 10 s: %d answers, %d KoD RATE, %d dropped; stats %+v", a, k, 20000-a-k, st)
	// Over the limit: 19974 requests, a quarter answered (sd 61), 3/16
	// KoD (sd 55).
	over := 20000 - 26
	if lo, hi := 26+over/4-300, 26+over/4+300; a < lo || a > hi {
		t.Errorf("flood: %d answers, want the burst, one a second and a quarter of the rest (%d..%d)", a, lo, hi)
	}
	if want := over * 3 / 16; k < want-300 || k > want+300 {
		t.Errorf("flood: %d KoD RATE, want about %d (a quarter of the three quarters not leaked)", k, want)
	}
	if pa, pk := kinds(t, c.sent[polite]); pa != 5 || pk != 0 {
		t.Errorf("polite client: %d answers, %d KoD; want all 5 answered", pa, pk)
	}
	if n := len(c.sent[denied]); n != 0 || st.Denied != 5 {
		t.Errorf("denied address: %d replies, %d counted denied; want none, 5", n, st.Denied)
	}
	if st.Limited != uint64(20000-a-k) || st.KoD != uint64(k) || st.Answered != uint64(a+5) {
		t.Errorf("stats %+v", st)
	}

	// No limit and no allow list: everything answered.
	in = in[:0]
	for i := range int64(1000) {
		in = append(in, memDatagram{i * ms / 2, denied, request(4, uint64(i))})
	}
	if _, st := serveScript(t, Policy{}, in); st.Answered != 1000 {
		t.Errorf("no policy: %d of 1000 answered", st.Answered)
	}
}

// TestRateLimitSpoofedClient is issue 29's first NTP attack: 100
// requests a second forged with a client's source address while the
// client asks once a second. Before, the limit (on by default) cut the
// client to 0 answers of 10 (its requests fell in the bucket the flood
// emptied; one in four of them got a KoD RATE). Off (chrony's default and
// now gclock's) it gets every answer; on, the leak answers at least one
// in 2^leak of its requests whatever the flood (here: at least a sixth of
// 200 with leak 2, a quarter expected), and none is a KoD with kod 0.
func TestRateLimitSpoofedClient(t *testing.T) {
	const ms = int64(1e6)
	client := netip.MustParseAddrPort("10.0.0.7:123")
	for _, tc := range []struct {
		name string
		lim  RateLimit
		want int // of 200
	}{
		{"off", RateLimit{}, 200},
		{"on, leak 2", RateLimit{Interval: 1000 * ms, Burst: 16, Leak: 2}, 200 / 6},
		{"on, leak 1", RateLimit{Interval: 1000 * ms, Burst: 16, Leak: 1}, 200 / 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in []memDatagram
			for i := range int64(20000) {
				at := i * 10 * ms
				// The forged copies come from the same address and port.
				in = append(in, memDatagram{at, client, request(4, uint64(1e9+i))})
				if i%100 == 50 {
					in = append(in, memDatagram{at, client, request(4, uint64(i))})
				}
			}
			c, _ := serveScript(t, Policy{Limit: tc.lim}, in)
			// The client's answers: those whose origin is one of its own
			// transmit times.
			got := 0
			for _, b := range c.sent[client] {
				var p Packet
				if err := p.UnmarshalBinary(b); err != nil {
					t.Fatal(err)
				}
				if p.Stratum != 0 && p.Origin < 1e9 {
					got++
				}
			}
			t.Logf("client: %d of 200 answered under 100 forged requests a second", got)
			if got < tc.want {
				t.Errorf("client: %d of 200 answered under a forged flood, want at least %d", got, tc.want)
			}
		})
	}
}

// TestRateLimitTableFlood is issue 29's second NTP attack: 10,000 forged
// source addresses, each asking twice a second (over its limit: its
// record never idles), and a new client asking once a second. Before, the
// full 4096-source table put every newcomer in one shared bucket, which
// the flood kept empty (the new client got 54% of answers; here
// none). Now a newcomer replaces the least recently seen record of its
// slot and gets its own full burst: every answer, while the flood goes on.
func TestRateLimitTableFlood(t *testing.T) {
	const ms = int64(1e6)
	lim := RateLimit{Interval: 1000 * ms, Burst: 16, Leak: 2}
	client := netip.MustParseAddrPort("10.9.9.9:123")
	var in []memDatagram
	at := int64(0)
	for second := range 20 {
		for range 2 {
			for i := range 10000 {
				a := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
				in = append(in, memDatagram{at, netip.AddrPortFrom(a, 123), request(4, 1)})
				at += ms / 20 // 20,000 requests a second
			}
		}
		in = append(in, memDatagram{at, client, request(4, uint64(second))})
	}
	c, st := serveScript(t, Policy{Limit: lim}, in)
	a, _ := kinds(t, c.sent[client])
	t.Logf("new client under a 10,000-address flood: %d of 20 answered; stats %+v", a, st)
	if a != 20 {
		t.Errorf("new client: %d of 20 answered under a flood of 10,000 forged addresses, want all", a)
	}
}

// TestRateLimitCheck: out-of-range limits are refused.
func TestRateLimitCheck(t *testing.T) {
	for _, l := range []RateLimit{{Interval: -1}, {Interval: 1, Burst: 0}, {Interval: 1, Burst: 2000}, {Interval: 1, Burst: 1, Leak: 17},
		{Interval: 1, Burst: 1, Leak: 0}, {Interval: 1, Burst: 8, Leak: 2, KoD: 5}} {
		if l.Check() == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	for _, l := range []RateLimit{{Interval: 1e9, Burst: 8, Leak: 2}, {}, {Burst: 16, Leak: 2}} {
		if err := l.Check(); err != nil {
			t.Error(err)
		}
	}
}

// FuzzKissOfDeath: a KoD only for a valid client request, never larger
// than it, echoing its transmit time, stratum 0 and the code.
func FuzzKissOfDeath(f *testing.F) {
	f.Add(request(4, 99), int8(3))
	f.Add([]byte{}, int8(0))
	f.Add(request(2, 1), int8(-5))
	f.Fuzz(func(t *testing.T, req []byte, poll int8) {
		out := make([]byte, HeaderLen)
		n, err := KissOfDeath(out, req, "RATE", poll)
		if err != nil {
			return
		}
		var q, p Packet
		q.UnmarshalBinary(req)
		p.UnmarshalBinary(out[:n])
		if n > len(req) || p.Origin != q.Transmit || p.Stratum != 0 || p.RefID != RefIDString("RATE") || p.Poll < poll || q.Mode != ModeClient {
			t.Fatalf("KoD %+v for request %+v", p, q)
		}
	})
}
