package probe

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/trace"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
)

func TestCodecRoundTrip(t *testing.T) {
	b := AppendRequest(nil, Request{Seq: 1<<63 + 5})
	r, err := DecodeRequest(b)
	if err != nil || r.Seq != 1<<63+5 {
		t.Fatalf("request: %+v, %v", r, err)
	}
	rep := Reply{Seq: 7, SrcRecv: -1 << 62, SrcSend: 1 << 62}
	got, err := DecodeReply(AppendReply(nil, rep))
	if err != nil || got != rep {
		t.Fatalf("reply: %+v, %v", got, err)
	}
}

func TestDecodeErrors(t *testing.T) {
	req := AppendRequest(nil, Request{Seq: 1})
	rep := AppendReply(nil, Reply{Seq: 1, SrcRecv: 10, SrcSend: 20})
	mut := func(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }
	backwards := AppendReply(nil, Reply{Seq: 1, SrcRecv: 20, SrcSend: 10})
	for _, tc := range []struct {
		name  string
		b     []byte
		reply bool
	}{
		{"short request", req[:15], false},
		{"reply as request", rep, false},
		{"bad magic", mut(req, 0, 'X'), false},
		{"bad version", mut(req, 4, 9), false},
		{"request kind in reply", mut(rep, 5, kindRequest), true},
		{"reserved", mut(rep, 6, 1), true},
		{"long reply", append(bytes.Clone(rep), 0), true},
		{"sent before received", backwards, true},
	} {
		var err error
		if tc.reply {
			_, err = DecodeReply(tc.b)
		} else {
			_, err = DecodeRequest(tc.b)
		}
		if !errors.Is(err, ErrPacket) {
			t.Errorf("%s: err %v, want ErrPacket", tc.name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(AppendRequest(nil, Request{Seq: 3}))
	f.Add(AppendReply(nil, Reply{Seq: 3, SrcRecv: 1, SrcSend: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeRequest(b); err == nil {
			if !bytes.Equal(AppendRequest(nil, r), b) {
				t.Fatalf("request %x does not re-encode", b)
			}
		}
		if r, err := DecodeReply(b); err == nil {
			if !bytes.Equal(AppendReply(nil, r), b) || r.SrcSend < r.SrcRecv {
				t.Fatalf("reply %x: %+v", b, r)
			}
		}
	})
}

func listen(t *testing.T) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback UDP: %v", err)
	}
	return pc
}

// A reply to an earlier attempt (a duplicate, or late) is ignored, and the
// exchange still completes.
func TestStaleRepliesIgnored(t *testing.T) {
	pc := listen(t)
	defer pc.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			req, err := DecodeRequest(buf[:n])
			if err != nil {
				continue
			}
			if req.Seq == 1 {
				continue // the first attempt is "lost"
			}
			// a stale reply first, a garbage datagram, then the real one
			pc.WriteTo(AppendReply(nil, Reply{Seq: req.Seq - 1, SrcRecv: 1, SrcSend: 1}), addr)
			pc.WriteTo([]byte("junk"), addr)
			pc.WriteTo(AppendReply(nil, Reply{Seq: req.Seq, SrcRecv: 100, SrcSend: 200}), addr)
		}
	}()
	c, err := Dial(pc.LocalAddr().String(), clock.Raw{}, ClientConfig{Timeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Probe()
	if err != nil {
		t.Fatal(err)
	}
	if s.SrcRecv != 100 || s.SrcSend != 200 || s.LocRecv < s.LocSend {
		t.Fatalf("sample %+v", s)
	}
	if c.Stats.Timeouts != 1 || c.Stats.Stale != 1 || c.Stats.Bad != 1 || c.Stats.Exchanges != 1 {
		t.Fatalf("stats %+v, want 1 timeout, 1 stale, 1 bad, 1 exchange", c.Stats)
	}
}

func TestNoServer(t *testing.T) {
	pc := listen(t)
	addr := pc.LocalAddr().String()
	pc.Close()
	c, err := Dial(addr, clock.Raw{}, ClientConfig{Timeout: 5 * time.Millisecond, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Probe(); err == nil {
		t.Fatal("probe without a server succeeded")
	}
}

// A process on an emulated clock (+2 ms, +100 ppm against the reference)
// records start, on-demand and end sessions over real UDP; the linear
// correction built from its file maps local times onto the reference's
// clock. The truth is the emulated clock's inverse, which neither the
// prober nor the correction sees.
func TestRecorderSessionsCorrectAgainstTruth(t *testing.T) {
	raw := clock.Raw{}
	pc := listen(t)
	srv := Serve(pc, raw, nil)
	defer srv.Close()
	emu, err := clock.NewEmulated(clock.EmuParams{Origin: raw.Now(), Offset: 2_000_000, DriftPPM: 100})
	if err != nil {
		t.Fatal(err)
	}
	local := emu.On(raw)
	c, err := Dial(pc.LocalAddr().String(), local, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var f bytes.Buffer
	rec, err := trace.New(&f, trace.Config{Proc: 1, Host: 1, Name: "p1", Clock: local, ClockName: "emulated", Prober: c, SyncMaxMessages: 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := rec.Track(0)
	var stamps []int64
	for i := range 3 {
		time.Sleep(300 * time.Millisecond)
		tr.Instant(rec.Name("tick"))
		stamps = append(stamps, local.Now())
		if i == 1 {
			if err := rec.Timesync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := format.Summarize(bytes.NewReader(f.Bytes()), "p1", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Sessions) != 3 {
		t.Fatalf("%d sessions, want start, on-demand and end", len(sum.Sessions))
	}
	ex := 0
	for _, s := range sum.Sessions {
		ex += len(s.Samples)
	}
	ms, ch, err := correct.Build([]correct.Input{correct.InputOf(sum)}, correct.Linear)
	if err != nil {
		t.Fatal(err)
	}
	var worst int64
	for _, x := range stamps {
		e := ms[0].Global(x) - emu.TruthAt(x)
		worst = max(worst, e, -e)
	}
	t.Logf("%d exchanges in 3 sessions (%v); server answered %d, client %+v; worst |corrected - truth| %d ns over %d stamps",
		ex, ch[0].Reason, srv.Stats().Answered, c.Stats, worst, len(stamps))
	// Uncorrected the error is 2 ms plus 100 ppm; an offset-only fit would
	// be off by ~60 us at the ends. Loopback exchanges are tens of us wide.
	if worst > 30_000 {
		t.Fatalf("corrected time off the truth by %d ns", worst)
	}
}
