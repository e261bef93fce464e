package ntp

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// request is a client request as ntpdig/chronyd send it: version v, mode
// 3, a transmit timestamp.
func request(v uint8, xmt uint64) []byte {
	p := Packet{Version: v, Mode: ModeClient, Poll: 6, Transmit: xmt}
	b, _ := p.MarshalBinary()
	return b
}

func TestTimestampRoundTrip(t *testing.T) {
	for _, ns := range []int64{0, 1, 999_999_999, 1_764_000_000_123_456_789, -1, -2_208_988_800_000_000_000,
		2_085_978_496_000_000_000 /* 2036-02-07, the era change */, 2_085_978_496_000_000_000 + 5} {
		ts := Timestamp(ns)
		if got := UnixNs(ts, ns+3_000_000_000); got < ns-1 || got > ns+1 {
			t.Errorf("UnixNs(Timestamp(%d)) = %d, want within 1 ns", ns, got)
		}
	}
	// RFC 5905: 2036-02-07T06:28:16Z is era 1, timestamp 0.
	if ts := Timestamp(2_085_978_496_000_000_000); ts != 0 {
		t.Errorf("Timestamp(era change) = %#x, want 0", ts)
	}
	// 1970-01-01 is 2208988800 s after 1900.
	if ts := Timestamp(0); ts != 2208988800<<32 {
		t.Errorf("Timestamp(0) = %#x", ts)
	}
	if ts := Timestamp(500_000_000); ts&0xffffffff != 1<<31 {
		t.Errorf("half a second: fraction %#x, want 0x80000000", ts&0xffffffff)
	}
}

func TestShort(t *testing.T) {
	tests := []struct {
		ns   int64
		want uint32
	}{
		{0, 0}, {-5, 0}, {1, 1}, {15258, 1}, {15259, 2}, {1_000_000_000, 1 << 16},
		{65536 * 1_000_000_000, math.MaxUint32}, {math.MaxInt64, math.MaxUint32},
	}
	for _, tt := range tests {
		if got := Short(tt.ns); got != tt.want {
			t.Errorf("Short(%d) = %d, want %d", tt.ns, got, tt.want)
		}
		// Rounded up: the short value never understates the duration.
		if tt.ns > 0 && tt.want != math.MaxUint32 && ShortNs(tt.want) < tt.ns-1 {
			t.Errorf("Short(%d) = %d stands for %d ns: understated", tt.ns, tt.want, ShortNs(tt.want))
		}
	}
}

// TestRespond checks every field of a reply (RFC 5905, 7.3 and 9.2).
func TestRespond(t *testing.T) {
	const now = int64(1_764_032_400_000_000_000) // 2025-11-25T01:00:00Z
	xmt := uint64(0x1234567890abcdef)
	srv := Server{Synced: true, Stratum: 1, RefID: RefIDString("GCLK"), Precision: -24, RefTime: now - 3e9}
	rx := Reading{Time: now, MaxErr: 120_000, OK: true}
	tx := Reading{Time: now + 40_000, MaxErr: 150_000, OK: true}
	for _, v := range []uint8{3, 4} {
		out := make([]byte, 64)
		n, err := Respond(out, request(v, xmt), rx, tx, srv)
		if err != nil || n != HeaderLen {
			t.Fatalf("v%d: Respond = %d, %v", v, n, err)
		}
		var p Packet
		if err := p.UnmarshalBinary(out[:n]); err != nil {
			t.Fatal(err)
		}
		if p.Leap != LeapNone || p.Version != v || p.Mode != ModeServer || p.Stratum != 1 || p.Poll != 6 || p.Precision != -24 {
			t.Errorf("v%d: header %+v", v, p)
		}
		if p.Origin != xmt {
			t.Errorf("origin %#x, want the request's transmit %#x", p.Origin, xmt)
		}
		if got := UnixNs(p.Receive, now); got < now-1 || got > now+1 {
			t.Errorf("receive %d, want %d", got, now)
		}
		if got := UnixNs(p.Transmit, now); got < now+40_000-1 || got > now+40_001 {
			t.Errorf("transmit %d, want %d", got, now+40_000)
		}
		if got := UnixNs(p.RefTime, now); got < now-3e9-1 || got > now-3e9+1 {
			t.Errorf("reference time %d", got)
		}
		if p.RefID != 0x47434c4b {
			t.Errorf("refid %#x, want GCLK", p.RefID)
		}
		// The larger of the two errors, rounded up, never less.
		if d := ShortNs(p.RootDispersion); d < 150_000 || d > 150_000+2*15259 {
			t.Errorf("root dispersion %d ns, want 150 us rounded up", d)
		}
		if p.RootDelay != 0 {
			t.Errorf("root delay %d, want 0", p.RootDelay)
		}
	}
}

// TestRespondUpstream: a server below a stratum-2 upstream passes on the
// leap announcement and the root delay, and its root distance (delay/2 +
// dispersion) is still the readings' bound, not more than a step of the
// short format above it.
func TestRespondUpstream(t *testing.T) {
	const now = int64(1_764_032_400_000_000_000)
	for _, tt := range []struct {
		leap  uint8
		delay int64
	}{
		{LeapInsert, 4_000_000},
		{LeapDelete, 0},
		{LeapNone, 30_000_000},
	} {
		srv := Server{Synced: true, Stratum: 3, RefID: 0x0a000001, Leap: tt.leap, RootDelay: tt.delay}
		rx := Reading{Time: now, MaxErr: 16_000_000, OK: true}
		out := make([]byte, HeaderLen)
		n, err := Respond(out, request(4, 1), rx, rx, srv)
		if err != nil {
			t.Fatal(err)
		}
		var p Packet
		p.UnmarshalBinary(out[:n])
		dist := ShortNs(p.RootDelay)/2 + ShortNs(p.RootDispersion)
		if p.Leap != tt.leap || p.Stratum != 3 || ShortNs(p.RootDelay) < tt.delay-15259 || dist < rx.MaxErr || dist > rx.MaxErr+2*15259 {
			t.Errorf("leap %d delay %d: reply leap %d stratum %d root delay %d ns, root distance %d ns, want >= %d",
				tt.leap, tt.delay, p.Leap, p.Stratum, ShortNs(p.RootDelay), dist, rx.MaxErr)
		}
	}
}

func TestRespondUnsynced(t *testing.T) {
	good := Server{Synced: true, Stratum: 2, RefID: 0x0a4d0001}
	r := Reading{Time: 1e18, MaxErr: 10, OK: true}
	cases := []struct {
		name   string
		rx, tx Reading
		srv    Server
	}{
		{"not synced", r, r, Server{Stratum: 2}},
		{"no receive reading", Reading{}, r, good},
		{"no transmit reading", r, Reading{}, good},
		{"stratum 0", r, r, Server{Synced: true}},
		{"leap 3 from upstream", r, r, Server{Synced: true, Stratum: 2, Leap: LeapUnsync}},
	}
	for _, c := range cases {
		out := make([]byte, HeaderLen)
		n, err := Respond(out, request(4, 1), c.rx, c.tx, c.srv)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var p Packet
		p.UnmarshalBinary(out[:n])
		if p.Leap != LeapUnsync || p.Stratum != MaxStratum || p.RootDispersion != math.MaxUint32 {
			t.Errorf("%s: leap %d stratum %d dispersion %#x, want 3, 16, max", c.name, p.Leap, p.Stratum, p.RootDispersion)
		}
	}
}

func TestRespondRefuses(t *testing.T) {
	r := Reading{Time: 1e18, OK: true}
	srv := Server{Synced: true, Stratum: 1}
	out := make([]byte, HeaderLen)
	mode := func(m uint8) []byte {
		b := request(4, 1)
		b[0] = b[0]&^7 | m
		return b
	}
	cases := []struct {
		name string
		req  []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"47 bytes", request(4, 1)[:47], ErrShort},
		{"server reply (mode 4)", mode(4), ErrMode},
		{"symmetric active (mode 1)", mode(1), ErrMode},
		{"control (mode 6)", mode(6), ErrMode},
		{"private (mode 7, ntpdc monlist)", mode(7), ErrMode},
		{"broadcast (mode 5)", mode(5), ErrMode},
		{"version 2", request(2, 1), ErrVersion},
		{"version 5", request(5, 1), ErrVersion},
	}
	for _, c := range cases {
		if _, err := Respond(out, c.req, r, r, srv); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
	// A request with extension fields or a MAC is answered with the bare
	// header: smaller than the request.
	long := append(request(4, 7), make([]byte, 20)...)
	n, err := Respond(make([]byte, 128), long, r, r, srv)
	if err != nil || n != HeaderLen {
		t.Errorf("request with a MAC: %d, %v", n, err)
	}
	if _, err := Respond(make([]byte, 10), request(4, 1), r, r, srv); err == nil {
		t.Error("Respond into a 10-byte buffer: no error")
	}
}

// FuzzRespond feeds arbitrary requests: no panic, a reply only for a valid
// client request, never larger than it, and echoing its transmit stamp.
func FuzzRespond(f *testing.F) {
	f.Add(request(4, 99))
	f.Add(request(3, 0))
	f.Add([]byte{})
	f.Add(append(request(4, 1), make([]byte, 68)...))
	f.Add(bytes.Repeat([]byte{0xff}, 48))
	f.Fuzz(func(t *testing.T, req []byte) {
		out := make([]byte, 128)
		r := Reading{Time: 1_764_000_000_000_000_000, MaxErr: 1000, OK: true}
		n, err := Respond(out, req, r, r, Server{Synced: true, Stratum: 2, RefID: 1, Precision: -20})
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with %d bytes", err, n)
			}
			return
		}
		if n > len(req) || n != HeaderLen {
			t.Fatalf("reply of %d bytes to a request of %d", n, len(req))
		}
		var q, p Packet
		q.UnmarshalBinary(req)
		p.UnmarshalBinary(out[:n])
		if q.Mode != ModeClient || (q.Version != 3 && q.Version != 4) {
			t.Fatalf("answered mode %d version %d", q.Mode, q.Version)
		}
		if p.Origin != q.Transmit || p.Mode != ModeServer || p.Version != q.Version {
			t.Fatalf("reply %+v to %+v", p, q)
		}
	})
}

// FuzzUnmarshal: any 48 bytes decode and re-encode to themselves.
func FuzzUnmarshal(f *testing.F) {
	f.Add(request(4, 5))
	f.Add(make([]byte, 48))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Packet
		if err := p.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrShort) || len(b) >= HeaderLen {
				t.Fatalf("%d bytes: %v", len(b), err)
			}
			return
		}
		out, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded header does not encode: %v", err)
		}
		if !bytes.Equal(out, b[:HeaderLen]) {
			t.Fatalf("re-encoded % x, want % x", out, b[:HeaderLen])
		}
	})
}
