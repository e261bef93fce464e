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
// and one answer a second, a KoD RATE for one in 2^leak of the rest and
// nothing for the others; a client polling every 2 s from another address
// meanwhile gets every answer; an address outside the allow list gets
// nothing; a full source table shares one bucket among the newcomers.
func TestRateLimit(t *testing.T) {
	const ms = int64(1e6)
	flood := netip.MustParseAddrPort("10.0.0.1:123")
	polite := netip.MustParseAddrPort("[fd00::2]:4000")
	denied := netip.MustParseAddrPort("8.8.8.8:123")
	lim := RateLimit{Interval: 1000 * ms, Burst: 16, Leak: 2}
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
	if a > 16+10+1 || a < 16+9 {
		t.Errorf("flood: %d answers, want the burst of 16 and one a second (26)", a)
	}
	if want := (20000 - a) / 4; k < want-1 || k > want+1 {
		t.Errorf("flood: %d KoD RATE, want one in 4 of the %d limited (%d)", k, 20000-a, want)
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

	// A full table: maxSources sources, then 100 more at the same instant
	// share one bucket (16 answers between them).
	in = in[:0]
	for i := range maxSources + 100 {
		a := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		in = append(in, memDatagram{0, netip.AddrPortFrom(a, 123), request(4, 1)})
	}
	_, st = serveScript(t, Policy{Limit: lim}, in)
	if st.Answered != maxSources+16 {
		t.Errorf("full table: %d answered, want %d (every known source, the burst of the shared bucket)", st.Answered, maxSources+16)
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

// TestRateLimitCheck: out-of-range limits are refused.
func TestRateLimitCheck(t *testing.T) {
	for _, l := range []RateLimit{{Interval: -1}, {Interval: 1, Burst: 0}, {Interval: 1, Burst: 2000}, {Interval: 1, Burst: 1, Leak: 17}} {
		if l.Check() == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	if err := (RateLimit{Interval: 1e9, Burst: 8, Leak: 2}).Check(); err != nil {
		t.Error(err)
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
