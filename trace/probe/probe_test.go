package probe

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/trace"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/wire"
)

func listen(t *testing.T) net.PacketConn {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback UDP: %v", err)
	}
	return pc
}

// A reply to an earlier attempt (a duplicate, or late) is ignored, and the
// exchange still completes: the first probe is "lost", the second is
// answered with a stale reply, a garbage datagram, then the real one.
func TestStaleRepliesIgnored(t *testing.T) {
	pc := listen(t)
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		var first uint32
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var req wire.Packet
			if err := req.UnmarshalBinary(buf[:n]); err != nil || req.Op.Kind() != wire.OpProbe {
				continue
			}
			if first == 0 {
				first = req.Seq
				continue // the first attempt is "lost"
			}
			reply := func(seq uint32, t2, t3 int64) []byte {
				p := wire.Packet{Op: wire.OpProbeReply, Seq: seq, Msg: engine.Message{Type: engine.MsgProbeReply, Seq: req.Msg.Seq, T2: t2, T3: t3}}
				b, err := p.MarshalBinary()
				if err != nil {
					panic(err)
				}
				return b
			}
			pc.WriteTo(reply(first, 1, 1), addr)
			pc.WriteTo([]byte("junk"), addr)
			pc.WriteTo(reply(req.Seq, 100, 200), addr)
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

// A probe server answers with its clock's stamps in the daemon's wire
// format, and refuses other requests.
func TestServerAnswers(t *testing.T) {
	srv, err := Listen("127.0.0.1:0", clock.Raw{}, nil)
	if err != nil {
		t.Skipf("no loopback UDP: %v", err)
	}
	defer srv.Close()
	c, err := Dial(srv.Addr().String(), clock.Raw{}, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 5 {
		s, err := c.Probe()
		if err != nil {
			t.Fatal(err)
		}
		// One clock on both ends: the reference's stamps lie inside the
		// process's round trip.
		if !(s.LocSend <= s.SrcRecv && s.SrcRecv <= s.SrcSend && s.SrcSend <= s.LocRecv) {
			t.Errorf("sample %+v: stamps out of order on one clock", s)
		}
	}
	if st := srv.Stats(); st.Answered != 5 || st.Bad != 0 {
		t.Errorf("server stats %+v, want 5 answered", st)
	}
	// A status query is not a probe: no answer, counted as bad.
	pc := listen(t)
	defer pc.Close()
	q := wire.Packet{Op: wire.OpStatusQuery, Seq: 9}
	b, err := q.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.WriteTo(b, net.UDPAddrFromAddrPort(srv.Addr())); err != nil {
		t.Fatal(err)
	}
	pc.WriteTo([]byte("junk"), net.UDPAddrFromAddrPort(srv.Addr()))
	deadline := time.Now().Add(2 * time.Second)
	for srv.Stats().Bad < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if st := srv.Stats(); st.Bad != 2 || st.Answered != 5 {
		t.Errorf("server stats %+v, want 2 bad", st)
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
	srv, err := Listen("127.0.0.1:0", raw, nil)
	if err != nil {
		t.Skipf("no loopback UDP: %v", err)
	}
	defer srv.Close()
	emu, err := clock.NewEmulated(clock.EmuParams{Origin: raw.Now(), Offset: 2_000_000, DriftPPM: 100})
	if err != nil {
		t.Fatal(err)
	}
	local := emu.On(raw)
	c, err := Dial(srv.Addr().String(), local, ClientConfig{})
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
