package refclock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestLayout pins struct sock_sample as chrony 4.x declares it, field by
// field at C's offsets for this platform.
func TestLayout(t *testing.T) {
	s := Sample{Time: 1_764_032_400_123_456_789, Offset: -0.00125, Pulse: false, Leap: LeapInsert}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != Size || (longSize == 8 && Size != 40) || (longSize == 4 && Size != 32) {
		t.Fatalf("size %d (long %d)", len(b), longSize)
	}
	ne := binary.NativeEndian
	L := longSize
	if sec := getLong(b); sec != 1_764_032_400 {
		t.Errorf("tv_sec %d", sec)
	}
	if usec := getLong(b[L:]); usec != 123_456 {
		t.Errorf("tv_usec %d, want 123456 (truncated)", usec)
	}
	if off := math.Float64frombits(ne.Uint64(b[2*L:])); off != -0.00125 {
		t.Errorf("offset %v", off)
	}
	if p := ne.Uint32(b[2*L+8:]); p != 0 {
		t.Errorf("pulse %d", p)
	}
	if l := ne.Uint32(b[2*L+12:]); l != 1 {
		t.Errorf("leap %d", l)
	}
	if m := ne.Uint32(b[2*L+20:]); m != 0x534f434b {
		t.Errorf("magic %#x", m)
	}
	if longSize == 8 && binary.NativeEndian.Uint16([]byte{1, 0}) == 1 {
		// amd64/arm64: the exact bytes chronyd reads.
		want := []byte{
			0x90, 0xff, 0x24, 0x69, 0, 0, 0, 0, // 1764032400
			0x40, 0xe2, 0x01, 0, 0, 0, 0, 0, // 123456
			0x7b, 0x14, 0xae, 0x47, 0xe1, 0x7a, 0x54, 0xbf, // -0.00125
			0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
			0x4b, 0x43, 0x4f, 0x53,
		}
		if !bytes.Equal(b, want) {
			t.Errorf("bytes\n% x\nwant\n% x", b, want)
		}
	}
}

func TestRoundTripAndErrors(t *testing.T) {
	good := []Sample{
		{Time: 0, Offset: 0},
		{Time: 1_764_032_400_999_999_999, Offset: 1e-9, Leap: LeapDelete},
		{Time: 1e18, Offset: -999, Pulse: true},
	}
	for _, s := range good {
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		got, err := Parse(b)
		want := s
		want.Time -= want.Time % 1000
		if err != nil || got != want {
			t.Errorf("Parse(Marshal(%+v)) = %+v, %v", s, got, err)
		}
	}
	bad := []struct {
		name string
		s    Sample
	}{
		{"NaN offset", Sample{Offset: math.NaN()}},
		{"infinite offset", Sample{Offset: math.Inf(1)}},
		{"huge offset", Sample{Offset: 2e6}},
		{"leap 3", Sample{Leap: 3}},
		{"negative time", Sample{Time: -1}},
	}
	for _, c := range bad {
		if _, err := c.s.MarshalBinary(); !errors.Is(err, ErrSample) {
			t.Errorf("%s: err %v, want ErrSample", c.name, err)
		}
	}
	b, _ := Sample{Time: 5e9}.MarshalBinary()
	wrongMagic := bytes.Clone(b)
	wrongMagic[Size-1] ^= 0xff
	badUsec := bytes.Clone(b)
	putLong(badUsec[longSize:], 1_000_000)
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrSize},
		{"short", b[:Size-1], ErrSize},
		{"long", append(bytes.Clone(b), 0), ErrSize},
		{"magic", wrongMagic, ErrMagic},
		{"usec 1e6", badUsec, ErrSample},
	} {
		if _, err := Parse(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
	}
}

// FuzzParse: arbitrary datagrams never panic, and what parses re-encodes
// to the same bytes (pad and pulse normalised).
func FuzzParse(f *testing.F) {
	b, _ := Sample{Time: 1_764_032_400_123_456_000, Offset: 0.5}.MarshalBinary()
	f.Add(b)
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, Size))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		out, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("parsed %+v does not encode: %v", s, err)
		}
		s2, err := Parse(out)
		if err != nil || s2 != s {
			t.Fatalf("round trip %+v -> %+v, %v", s, s2, err)
		}
	})
}

// TestSender sends to a Unix datagram socket made as chronyd makes it:
// nothing there yet (an error, no panic), then samples arrive intact, and
// after the socket is recreated (chronyd restarted) sending resumes.
func TestSender(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chrony.sock")
	s := NewSender(path)
	defer s.Close()
	smp := Sample{Time: time.Now().UnixNano(), Offset: 1.5e-6}
	if err := s.Send(smp); err == nil {
		t.Fatal("Send with no socket: no error")
	}
	listen := func() *net.UnixConn {
		os.Remove(path)
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	recv := func(c *net.UnixConn) Sample {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 100)
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	c := listen()
	if err := s.Send(smp); err != nil {
		t.Fatal(err)
	}
	if got := recv(c); got.Offset != smp.Offset || got.Time != smp.Time-smp.Time%1000 {
		t.Errorf("received %+v, sent %+v", got, smp)
	}
	c.Close()
	c = listen() // chronyd restarted: a new socket at the same path
	defer c.Close()
	var err error
	for range 2 { // the first send may still go to the old, closed socket
		if err = s.Send(smp); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("after a restart of the receiver: %v", err)
	}
	recv(c)
}
