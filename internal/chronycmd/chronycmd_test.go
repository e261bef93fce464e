package chronycmd

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// floatEncode is chrony's UTI_FloatHostToNetwork for the values the tests
// use (no clamping at the exponent's ends): the inverse of Float, rounding
// to its 25-bit coefficient.
func floatEncode(x float64) uint32 {
	var exp int
	var coef int64
	if x != 0 {
		_, e := math.Frexp(x)
		for exp = e + 1; ; exp++ { // value = coef * 2^(exp - 25), |coef| < 2^24
			if coef = int64(math.Round(math.Ldexp(x, 25-exp))); coef >= -(1<<24) && coef < 1<<24 {
				break
			}
		}
	}
	return uint32(exp&0x7f)<<25 | uint32(coef)&(1<<25-1)
}

// trackingReply builds a tracking reply to seq as chronyd sends it, with
// the other fields of RPY_Tracking non-zero and extra trailing bytes
// (both ignored).
func trackingReply(seq uint32, t Tracking) []byte {
	be := binary.BigEndian
	b := make([]byte, TrackingReplyLen+4)
	b[0], b[1] = version, typeReply
	be.PutUint16(b[4:], reqTracking)
	be.PutUint16(b[6:], rpyTracking)
	be.PutUint32(b[16:], seq)
	d := b[replyHeaderLen:]
	be.PutUint32(d[offRefID:], t.RefID)
	for i := 4; i < 24; i++ { // ip_addr
		d[i] = 0xa5
	}
	be.PutUint16(d[offStratum:], t.Stratum)
	be.PutUint16(d[offLeap:], t.Leap)
	be.PutUint32(d[28:], 0)
	be.PutUint32(d[32:], 1_764_000_000) // ref_time
	be.PutUint32(d[offCorrection:], floatEncode(t.Correction))
	for off := 44; off < 64; off += 4 { // last offset .. skew
		be.PutUint32(d[off:], floatEncode(-12.5))
	}
	be.PutUint32(d[offRootDelay:], floatEncode(t.RootDelay))
	be.PutUint32(d[offRootDisp:], floatEncode(t.RootDisp))
	be.PutUint32(d[72:], floatEncode(16))
	return b
}

// TestFloat: chrony's 32-bit float (7-bit exponent, 25-bit coefficient)
// decoded as chrony's UTI_FloatNetworkToHost does, at its ends.
func TestFloat(t *testing.T) {
	enc := func(exp, coef int) uint32 { return uint32(exp&127)<<25 | uint32(coef&(1<<25-1)) }
	for _, tt := range []struct {
		x    uint32
		want float64
	}{
		{enc(2, 1<<23), 1},
		{enc(1, -(1 << 23)), -0.5},
		{enc(0, 0), 0},
		{enc(-10, 1<<24-1), float64(1<<24-1) * math.Pow(2, -35)},
		{enc(-64, 1), math.Pow(2, -89)},
		{enc(63, -(1 << 24)), -math.Pow(2, 62)},
		{enc(63, 1<<24-1), float64(1<<24-1) * math.Pow(2, 38)},
		{0x00000001, math.Pow(2, -25)},
		{0x01ffffff, -math.Pow(2, -25)}, // exponent 0, coefficient -1
	} {
		if got := Float(tt.x); got != tt.want {
			t.Errorf("%#08x: %g, want %g", tt.x, got, tt.want)
		}
	}
}

// TestFloatEncode: values through the test's encoder and back come out
// within the coefficient's rounding (half a unit in 2^-24 relative).
func TestFloatEncode(t *testing.T) {
	for _, x := range []float64{0, 1, -1, 1.234567e-3, -2.5e-7, 4e-9, -0.75, 0.0041, 999.9, 3.14159e5, -9.99e5, math.Pow(2, -60)} {
		got := Float(floatEncode(x))
		if math.Abs(got-x) > math.Abs(x)*math.Pow(2, -24) {
			t.Errorf("%g: decoded %g", x, got)
		}
	}
}

// TestTrackingRequest: REQ_TRACKING's header, padded with zeros to the
// reply's length.
func TestTrackingRequest(t *testing.T) {
	r := TrackingRequest(0x01020309)
	want := make([]byte, 104)
	copy(want, []byte{6, 1, 0, 0, 0, 33, 0, 0, 1, 2, 3, 9})
	if string(r) != string(want) {
		t.Errorf("request % x\nwant    % x", r, want)
	}
}

// TestParseTracking: the fields taken, from replies of several shapes.
func TestParseTracking(t *testing.T) {
	for _, want := range []Tracking{
		{RefID: 0xc0a80101, Stratum: 2, Leap: 1, Correction: 1.234567e-3, RootDelay: 1, RootDisp: 1},
		{RefID: 0x47434c4b, Stratum: 1, Leap: 0, Correction: -2.5e-7, RootDelay: 0.004, RootDisp: 0.0011},
		{RefID: 0x7f7f0101, Stratum: 3, Leap: 2, Correction: 4e-9},
		{Stratum: 16, Leap: 3, Correction: -0.75, RootDelay: 999, RootDisp: 999.5},
		{Stratum: 0, Correction: 9.99e5},
	} {
		for _, n := range []int{TrackingReplyLen, TrackingReplyLen + 4} { // exact, and with trailing bytes
			got, err := ParseTracking(trackingReply(77, want)[:n], 77)
			if err != nil {
				t.Errorf("%+v (%d bytes): %v", want, n, err)
				continue
			}
			if got.RefID != want.RefID || got.Stratum != want.Stratum || got.Leap != want.Leap ||
				!near(got.Correction, want.Correction) || !near(got.RootDelay, want.RootDelay) || !near(got.RootDisp, want.RootDisp) {
				t.Errorf("%d bytes: got %+v, want %+v", n, got, want)
			}
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= math.Abs(b)*math.Pow(2, -24) }

// TestParseTrackingRefused: every check, each with an error naming the
// field and where it is.
func TestParseTrackingRefused(t *testing.T) {
	good := trackingReply(7, Tracking{RefID: 0x47434c4b, Stratum: 2, Correction: 1e-6, RootDelay: 0.001, RootDisp: 0.002})
	put32 := func(off int, v uint32) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) } }
	for _, tt := range []struct {
		name string
		b    []byte
		edit func(b []byte)
		seq  uint32
		want string
	}{
		{"empty", []byte{}, nil, 7, "0 bytes, want at least 104"},
		{"short", good[:50], nil, 7, "50 bytes, want at least 104"},
		{"one short", good[:103], nil, 7, "103 bytes"},
		{"version 5", good, func(b []byte) { b[0] = 5 }, 7, "version 5 type 2 (bytes 0-1)"},
		{"request type", good, func(b []byte) { b[1] = 1 }, 7, "version 6 type 1"},
		{"another command", good, func(b []byte) { b[5] = 34 }, 7, "command 34 reply 5 (bytes 4-7)"},
		{"another reply", good, func(b []byte) { b[7] = 1 }, 7, "command 33 reply 1"},
		{"status failed", good, func(b []byte) { b[9] = 1 }, 7, "status 1 (bytes 8-9"},
		{"status unauthorised", good, func(b []byte) { b[9] = 3 }, 7, "status 3"},
		{"sequence", good, nil, 8, "sequence 7 (bytes 16-19), want 8"},
		{"leap 4", good, func(b []byte) { b[28+27] = 4 }, 7, "leap status 4 (byte 54)"},
		{"stratum 17", good, func(b []byte) { b[28+25] = 17 }, 7, "stratum 17 (byte 52)"},
		{"correction 1e6", good, put32(28+40, floatEncode(1e6)), 7, "current correction 1e+06 s (byte 68)"},
		{"correction -1e9", good, put32(28+40, floatEncode(-1e9)), 7, "current correction -1e+09 s"},
		{"negative root delay", good, put32(28+64, 1<<24), 7, "root delay -0.5 s (byte 92)"},
		{"root delay 1000", good, put32(28+64, floatEncode(1000)), 7, "root delay 1000 s"},
		{"negative root dispersion", good, put32(28+68, floatEncode(-1e-9)), 7, "root dispersion -9.999999717180685e-10 s (byte 96)"},
		{"root dispersion 2^61", good, put32(28+68, 63<<25|1<<23), 7, "root dispersion 2.305843009213694e+18 s"},
	} {
		b := append([]byte(nil), tt.b...)
		if tt.edit != nil {
			tt.edit(b)
		}
		got, err := ParseTracking(b, tt.seq)
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %+v, %v; want ErrRefused with %q", tt.name, got, err, tt.want)
		}
		if got != (Tracking{}) {
			t.Errorf("%s: a refused reply gave %+v", tt.name, got)
		}
	}
}

// TestReplySequence: the header's sequence, from 20 bytes on.
func TestReplySequence(t *testing.T) {
	b := trackingReply(0xdeadbeef, Tracking{})
	if s, ok := ReplySequence(b[:20]); !ok || s != 0xdeadbeef {
		t.Errorf("20 bytes: %#x, %v", s, ok)
	}
	if s, ok := ReplySequence(b[:19]); ok {
		t.Errorf("19 bytes: %#x, %v; want not ok", s, ok)
	}
}

// FuzzParseTracking: any datagram is refused with ErrRefused, or is a
// tracking reply to seq of at least 104 bytes whose fields are in range
// and read from where the layout puts them; never a panic.
func FuzzParseTracking(f *testing.F) {
	f.Add(trackingReply(1, Tracking{RefID: 0x7f7f0101, Stratum: 3, RootDisp: 0.25}), uint32(1))
	f.Add(trackingReply(9, Tracking{RefID: 1, Correction: 1e-6}), uint32(9))
	f.Add([]byte{6, 2}, uint32(0))
	f.Add([]byte{6, 2, 0, 0, 0, 33, 0, 5}, uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, seq uint32) {
		tr, err := ParseTracking(b, seq)
		if err != nil {
			if !errors.Is(err, ErrRefused) {
				t.Fatalf("error without ErrRefused: %v", err)
			}
			return
		}
		if s, ok := ReplySequence(b); len(b) < TrackingReplyLen || !ok || s != seq || b[0] != 6 || b[1] != 2 {
			t.Fatalf("accepted % x for sequence %d", b, seq)
		}
		if tr.Leap > 3 || tr.Stratum > 16 || !(math.Abs(tr.Correction) < 1e6) ||
			!(tr.RootDelay >= 0 && tr.RootDelay < 1000) || !(tr.RootDisp >= 0 && tr.RootDisp < 1000) {
			t.Fatalf("accepted %+v", tr)
		}
		be := binary.BigEndian
		if tr.RefID != be.Uint32(b[28:]) || tr.Correction != Float(be.Uint32(b[68:])) || tr.RootDisp != Float(be.Uint32(b[96:])) {
			t.Fatalf("%+v not read from % x", tr, b[28:104])
		}
	})
}
