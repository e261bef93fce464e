package cmdmon

import (
	"encoding/binary"
	"math"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFloat(t *testing.T) {
	for _, c := range []struct {
		bits uint32
		want float64
	}{
		{0, 0},
		// exponent 1, coefficient 2^24-... : 2^23 * 2^(1-25) = 0.5
		{1<<25 | 1<<23, 0.5},
		// exponent -1 (0x7f), coefficient 3: 3 * 2^-26
		{0x7f<<25 | 3, 3 * math.Ldexp(1, -26)},
		// coefficient -1 (all 25 bits), exponent 0: -2^-25
		{1<<25 - 1, -math.Ldexp(1, -25)},
	} {
		if got := DecodeFloat(c.bits); got != c.want {
			t.Errorf("DecodeFloat(%#x) = %g, want %g", c.bits, got, c.want)
		}
	}
	for _, v := range []float64{1, -1, 0.5, 1e-6, -3.2e-7, 5.000123e-3, -0.004321987, 123.456, 1e-12} {
		got := DecodeFloat(EncodeFloat(v))
		if math.Abs(got-v) > math.Abs(v)*math.Ldexp(1, -23) {
			t.Errorf("%g -> %#x -> %g", v, EncodeFloat(v), got)
		}
	}
}

// reply builds a tracking reply as chronyd sends it.
func reply(seq uint32, tr Tracking) []byte {
	b := make([]byte, ReplyLen)
	b[0], b[1] = protoVersion, pktReply
	binary.BigEndian.PutUint16(b[4:], reqTracking)
	binary.BigEndian.PutUint16(b[6:], rpyTracking)
	binary.BigEndian.PutUint32(b[16:], seq)
	d := b[headerReply:]
	binary.BigEndian.PutUint32(d, tr.RefID)
	binary.BigEndian.PutUint16(d[24:], tr.Stratum)
	binary.BigEndian.PutUint16(d[26:], tr.LeapStatus)
	for i, v := range []float64{tr.Correction, tr.LastOffset, tr.RMSOffset, tr.FreqPPM, tr.ResidFreqPPM,
		tr.SkewPPM, tr.RootDelay, tr.RootDispersion, tr.LastUpdateInterval} {
		binary.BigEndian.PutUint32(d[40+4*i:], EncodeFloat(v))
	}
	return b
}

func TestDecodeTrackingReply(t *testing.T) {
	tr := Tracking{RefID: 0x0a4d0001, Stratum: 2, Correction: 1.234e-6, FreqPPM: -12.5, RootDelay: 2e-4}
	good := reply(7, tr)
	got, err := DecodeTrackingReply(good, 7)
	if err != nil || got.RefID != tr.RefID || got.Stratum != 2 || !got.Synced() ||
		math.Abs(got.Correction-1.234e-6) > 1e-13 || got.OffsetNs() != -1234 || math.Abs(got.FreqPPM+12.5) > 1e-5 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	unsynced := reply(7, Tracking{LeapStatus: LeapUnsynchronised})
	if g, _ := DecodeTrackingReply(unsynced, 7); g.Synced() {
		t.Fatal("a reply without reference is synced")
	}
	mut := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, c := range []struct {
		name, want string
		b          []byte
	}{
		{"short", "header", good[:10]},
		{"version", "version 5", mut(func(b []byte) []byte { b[0] = 5; return b })},
		{"type", "packet type 1", mut(func(b []byte) []byte { b[1] = 1; return b })},
		{"sequence", "sequence 7, want 8", good},
		{"status", "status 2", mut(func(b []byte) []byte { b[9] = 2; return b })},
		{"reply", "reply 6", mut(func(b []byte) []byte { b[7] = 6; return b })},
		{"truncated", "want 104", good[:60]},
	} {
		seq := uint32(7)
		if c.name == "sequence" {
			seq = 8
		}
		if _, err := DecodeTrackingReply(c.b, seq); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}

// TestClient: a fake chronyd on a Unix socket answers a late reply first
// and then the right one; a silent one times out.
func TestClient(t *testing.T) {
	dir := t.TempDir()
	srvPath := filepath.Join(dir, "chronyd.sock")
	srv, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: srvPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 1024)
		for {
			n, from, err := srv.ReadFromUnix(buf)
			if err != nil {
				return
			}
			if n != ReplyLen || buf[0] != protoVersion || binary.BigEndian.Uint16(buf[4:]) != reqTracking {
				continue // a malformed request: chronyd drops it too
			}
			seq := binary.BigEndian.Uint32(buf[8:])
			srv.WriteToUnix(reply(seq-1, Tracking{RefID: 9, Correction: 1}), from)
			srv.WriteToUnix(reply(seq, Tracking{RefID: 1, Correction: -2.5e-6}), from)
		}
	}()
	c, err := Dial(srvPath, filepath.Join(dir, "client.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		tr, err := c.Tracking(2 * time.Second)
		if err != nil || tr.RefID != 1 || tr.OffsetNs() != 2500 {
			t.Fatalf("tracking %+v, %v", tr, err)
		}
	}
	silent, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "silent.sock"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	c2, err := Dial(filepath.Join(dir, "silent.sock"), filepath.Join(dir, "client2.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Tracking(50 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("a silent chronyd: %v", err)
	}
}

// FuzzDecodeTrackingReply: any bytes decode or fail with an error.
func FuzzDecodeTrackingReply(f *testing.F) {
	f.Add(reply(1, Tracking{RefID: 3, Correction: 1e-3}))
	f.Add([]byte{6, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeTrackingReply(b, 1)
	})
}
