package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

// samplePackets holds one packet of every op, with values chosen to cover
// negative, large and boundary numbers.
func samplePackets() []Packet {
	page := make([]byte, 8192)
	for i := range page {
		page[i] = byte(i * 7)
	}
	return []Packet{
		{Op: OpProbe, Sender: 0, Seq: 1, Msg: engine.Message{Type: engine.MsgProbe, From: 0, To: 3, Round: 9, Seq: 27, Term: 7}},
		{Op: OpProbeReply, Sender: 3, Seq: 1, Msg: engine.Message{Type: engine.MsgProbeReply, From: 3, To: 0, Round: 9, Seq: 27,
			T2: MaxTime - 5 - 60e9, T3: MaxTime - 5}},
		{Op: OpTimeDiff, Sender: 0, Seq: math.MaxUint32, Msg: engine.Message{Type: engine.MsgTimeDiff, From: 0, To: 2, Round: 1, Seq: 2,
			Samples: []estimate.Sample{{SrcSend: 1, LocRecv: 2, LocSend: 3, SrcRecv: 4}, {SrcSend: -MaxTime + 1, LocRecv: MaxTime - 9, LocSend: MaxTime - 1, SrcRecv: -MaxTime + 60e9}},
			Mapping: estimate.Mapping{X0: 1e18, Y0: -1e18, Skew: 12.5e-6, W0: 800, SkewErr: 1e-7, Wander: 1e-20, Valid: true}}},
		{Op: OpTimeDiff, Sender: 5, Seq: 0, Msg: engine.Message{Type: engine.MsgTimeDiff, From: 5, To: 6}},
		{Op: OpErrReport | ReliableFlag, Sender: 2, Seq: 44, Msg: engine.Message{Type: engine.MsgErrReport, From: 2, To: 0, Round: 3, Err: 2.75}},
		{Op: OpAck, Sender: 0, Seq: 44, AckOp: OpErrReport | ReliableFlag},
		{Op: OpStatusQuery, Sender: 9, Seq: 100},
		{Op: OpStatusReply, Sender: 1, Seq: 100, Status: Status{Local: 123456789, Time: engine.Time{Est: 5, Earliest: 4, Latest: 6, Mono: 5, Status: engine.StatusStale}, Reference: 2, Term: 5, Flags: engine.FlagVote | engine.FlagLease}},
		{Op: OpGetPage, Sender: 1, Seq: 5, Page: Page{Addr: 0xdeadbeef000}},
		{Op: OpPageGrant | ReliableFlag, Sender: 2, Seq: 5, Page: Page{Addr: 0xdeadbeef000, Data: page}},
		{Op: OpRealTimeQuery, Sender: 3, Seq: 6, RealTime: RealTime{Rate: 1.00004, RateErr: 2e-7, After: math.MinInt64}},
		{Op: OpRealTimeInfo, Sender: 1, Seq: 6, RealTime: RealTime{Mode: 1, At: 123456789, Offset: 1.7e18, Slope: -2.5e-5, Err: 12, SlopeErr: 5e-4, Prev: -7}},
		{Op: OpPeriodChange | ReliableFlag, Sender: 0, Seq: 45, Msg: engine.Message{Type: engine.MsgPeriodChange, From: 0, To: 2, Round: 7, Seq: 3, Period: 16e9}},
		{Op: OpAck, Sender: 2, Seq: 45, AckOp: OpPeriodChange | ReliableFlag},
		{Op: OpPut | ReliableFlag, Sender: 3, Seq: 8, Page: Page{Addr: 1<<32 | 7, Data: []byte{1, 2, 3}}},
		{Op: OpPut, Sender: 3, Seq: 9, Page: Page{Addr: 2}},
		{Op: OpRealTimeInfo, Sender: 1, Seq: 7, RealTime: RealTime{Mode: 1, At: 123456789, Offset: 1.7e18, Slope: -2.5e-5, Err: 12, SlopeErr: 5e-4, Prev: -7,
			UpKnown: true, UpSynced: true, UpLeap: 1, UpStratum: 2, UpRefID: 0x0a000001, UpMaxErr: 16e9, UpEstErr: 3, UpRootDelay: 4, UpRootDisp: 5}},
		{Op: OpAuthChallenge, Sender: 2, Seq: 10, Nonce: 0xdeadbeef01234567},
		{Op: OpAuthResponse, Sender: 1, Seq: 10, Nonce: 0xdeadbeef01234567},
		{Op: OpStatusQuery, Sender: 2, Seq: 101, Status: Status{Term: 4, Flags: engine.FlagBeat | engine.FlagLease, Sent: 1_700_000_000_123_456_789}},
		{Op: OpTimeDiff, Sender: 5, Seq: 3, Msg: engine.Message{Type: engine.MsgTimeDiff, From: 5, To: 6, Round: 7, Unsure: true, Check: true,
			Samples: []estimate.Sample{{SrcSend: 10, LocRecv: 20, LocSend: 30, SrcRecv: 40}}}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, p := range samplePackets() {
		t.Run(p.Op.String(), func(t *testing.T) {
			b, err := p.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			n, err := p.Size()
			if err != nil || n != len(b) {
				t.Fatalf("Size = %d, %v; encoded %d bytes", n, err, len(b))
			}
			var q Packet
			if err := q.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(p), normalize(q)) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", q, p)
			}
			b2 := make([]byte, MaxPacket)
			n2, err := q.MarshalBinaryTo(b2)
			if err != nil || !bytes.Equal(b, b2[:n2]) {
				t.Fatalf("re-encoding differs (err %v)", err)
			}
		})
	}
}

// normalize maps empty slices to nil so DeepEqual compares contents.
func normalize(p Packet) Packet {
	if len(p.Msg.Samples) == 0 {
		p.Msg.Samples = nil
	}
	if len(p.Page.Data) == 0 {
		p.Page.Data = nil
	}
	return p
}

func TestHeaderLayout(t *testing.T) {
	p := Packet{Op: OpGetPage | ReliableFlag, Sender: 0x01020304, Seq: 0x0a0b0c0d, Page: Page{Addr: 1}}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{'G', 'C', Version, 0x93, 1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1}
	if !bytes.Equal(b, want) {
		t.Fatalf("bytes\n got % x\nwant % x", b, want)
	}
	h, err := ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.Op.Kind() != OpGetPage || !h.Op.Reliable() || h.Sender != 0x01020304 || h.Seq != 0x0a0b0c0d || h.Length != 8 {
		t.Fatalf("header %+v", h)
	}
}

func TestOpClass(t *testing.T) {
	tests := []struct {
		op    Op
		class Class
		reply Op
	}{
		{OpProbe, ClassRequest, OpProbeReply},
		{OpStatusQuery | ReliableFlag, ClassRequest, OpStatusReply},
		{OpGetPage, ClassRequest, OpPageGrant},
		{OpRealTimeQuery, ClassRequest, OpRealTimeInfo},
		{OpRealTimeInfo, ClassReply, 0},
		{OpProbeReply, ClassReply, 0},
		{OpPageGrant | ReliableFlag, ClassReply, 0},
		{OpTimeDiff, ClassOneWay, 0},
		{OpErrReport, ClassOneWay, 0},
		{OpPeriodChange | ReliableFlag, ClassOneWay, 0},
		{OpPut | ReliableFlag, ClassOneWay, 0},
		{OpAck, ClassAck, 0},
		{0, ClassUnknown, 0},
		{0x7f, ClassUnknown, 0},
	}
	for _, tt := range tests {
		if got := tt.op.Class(); got != tt.class {
			t.Errorf("%v.Class() = %d, want %d", tt.op, got, tt.class)
		}
		r, ok := tt.op.ReplyOp()
		if ok != (tt.reply != 0) || r != tt.reply {
			t.Errorf("%v.ReplyOp() = %v, %v; want %v", tt.op, r, ok, tt.reply)
		}
	}
	if OpProbe.WithReliable(true) != OpProbe|ReliableFlag || (OpProbe|ReliableFlag).WithReliable(false) != OpProbe {
		t.Error("WithReliable")
	}
}

// valid returns a valid encoding to corrupt.
func valid(t *testing.T, i int) []byte {
	t.Helper()
	p := samplePackets()[i]
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeErrors(t *testing.T) {
	const timediff, probe, status, grant, periodChange = 2, 0, 7, 9, 12
	tests := []struct {
		name   string
		in     func() []byte
		field  string
		offset int
		err    error
	}{
		{"empty", func() []byte { return nil }, "header", 0, ErrShort},
		{"short header", func() []byte { return valid(t, probe)[:13] }, "header", 0, ErrShort},
		{"magic", func() []byte { b := valid(t, probe); b[0] = 'X'; return b }, "header.magic", 0, ErrMagic},
		{"version", func() []byte { b := valid(t, probe); b[2] = 1; return b }, "header.version", 2, ErrVersion},
		{"op zero", func() []byte { b := valid(t, probe); b[3] = 0; return b }, "header.op", 3, ErrOp},
		{"op unknown flagged", func() []byte { b := valid(t, probe); b[3] = 0xff; return b }, "header.op", 3, ErrOp},
		{"length larger", func() []byte { b := valid(t, probe); b[13]++; return b }, "header.length", 12, ErrLength},
		{"truncated body", func() []byte { return valid(t, probe)[:20] }, "header.length", 12, ErrLength},
		{"short body, consistent length", func() []byte {
			b := valid(t, probe)[:20]
			binary.BigEndian.PutUint16(b[12:], 6)
			return b
		}, "msg.round", 18, ErrShort},
		{"trailing bytes", func() []byte {
			b := append(valid(t, probe), 0, 0)
			binary.BigEndian.PutUint16(b[12:], uint16(len(b)-HeaderLen))
			return b
		}, "body", HeaderLen + probeReplyLen, ErrLength},
		{"probe padding", func() []byte { b := valid(t, probe); b[len(b)-3] = 1; return b }, "probe.pad", HeaderLen + probeReplyLen - 3, ErrValue},
		{"status query padding", func() []byte { b := valid(t, 6); b[len(b)-1] = 0xff; return b }, "status-query.pad", HeaderLen + statusLen - 1, ErrValue},
		{"status query flags", func() []byte { b := valid(t, 6); b[HeaderLen+4] = 0x80; return b }, "status-query.flags", HeaderLen + 4, ErrValue},
		{"status reply flags", func() []byte { b := valid(t, status); b[len(b)-1] = 0x40; return b }, "status.flags", len(valid(t, status)) - 1, ErrValue},
		{"realtime query padding", func() []byte { b := valid(t, 10); b[len(b)-1] = 1; return b }, "realtime-query.pad", HeaderLen + rtInfoLen - 1, ErrValue},
		{"mapping skew NaN", func() []byte {
			b := valid(t, timediff)
			binary.BigEndian.PutUint64(b[len(b)-33:], math.Float64bits(math.NaN()))
			return b
		}, "timediff.mapping.skew", HeaderLen, ErrValue},
		{"mapping skew 1e300", func() []byte {
			b := valid(t, timediff)
			binary.BigEndian.PutUint64(b[len(b)-33:], math.Float64bits(1e300))
			return b
		}, "timediff.mapping.skew", HeaderLen, ErrValue},
		{"mapping skew 2e-3", func() []byte {
			b := valid(t, timediff)
			binary.BigEndian.PutUint64(b[len(b)-33:], math.Float64bits(-2e-3))
			return b
		}, "timediff.mapping.skew", HeaderLen, ErrValue},
		{"mapping width negative", func() []byte {
			b := valid(t, timediff)
			binary.BigEndian.PutUint64(b[len(b)-25:], uint64(1<<63))
			return b
		}, "timediff.mapping.w0", HeaderLen, ErrValue},
		{"mapping wander infinite", func() []byte {
			b := valid(t, timediff)
			binary.BigEndian.PutUint64(b[len(b)-9:], math.Float64bits(math.Inf(1)))
			return b
		}, "timediff.mapping.wander", HeaderLen, ErrValue},
		{"sample out of order", func() []byte {
			b := valid(t, timediff)
			binary.BigEndian.PutUint64(b[HeaderLen+14+16:], uint64(1)) // first sample's LocSend below its LocRecv
			return b
		}, "timediff.sample", HeaderLen, ErrValue},
		{"error report NaN", func() []byte {
			b := valid(t, 4)
			binary.BigEndian.PutUint64(b[len(b)-8:], math.Float64bits(math.NaN()))
			return b
		}, "errreport.err", HeaderLen, ErrValue},
		{"reply T3 before T2", func() []byte {
			b := valid(t, 1)
			binary.BigEndian.PutUint64(b[len(b)-8:], 0)
			return b
		}, "probereply.t3", HeaderLen, ErrValue},
		{"sample count beyond data", func() []byte {
			b := valid(t, timediff)
			binary.BigEndian.PutUint16(b[HeaderLen+16:], 3)
			return b
		}, "timediff.count", 30, ErrLength},
		{"sample count huge", func() []byte {
			b := valid(t, timediff)
			binary.BigEndian.PutUint16(b[HeaderLen+16:], 0xffff)
			return b
		}, "timediff.count", 30, ErrTooLarge},
		{"mapping valid byte", func() []byte { b := valid(t, timediff); b[len(b)-1] = 8; return b }, "timediff.mapping.valid", len(valid(t, timediff)) - 1, ErrValue},
		{"status value", func() []byte { b := valid(t, status); b[HeaderLen+40] = 9; return b }, "status.status", HeaderLen + 40, ErrValue},
		{"status no-daemon", func() []byte { b := valid(t, status); b[HeaderLen+40] = 3; return b }, "status.status", HeaderLen + 40, ErrValue},
		{"ack of unknown op", func() []byte { b := valid(t, 5); b[len(b)-1] = 0x7f; return b }, "ack.op", HeaderLen, ErrOp},
		{"ack of an ack", func() []byte { b := valid(t, 5); b[len(b)-1] = byte(OpAck); return b }, "ack.op", HeaderLen, ErrOp},
		{"grant without address", func() []byte {
			b := valid(t, grant)[:HeaderLen+4]
			binary.BigEndian.PutUint16(b[12:], 4)
			return b
		}, "getpgrant.addr", HeaderLen, ErrShort},
		{"realtime rate NaN", func() []byte {
			b := valid(t, 10)
			binary.BigEndian.PutUint64(b[HeaderLen:], math.Float64bits(math.NaN()))
			return b
		}, "realtime-query.rate", HeaderLen, ErrValue},
		{"period zero", func() []byte { b := valid(t, periodChange); clear(b[len(b)-8:]); return b }, "periodchange.period", HeaderLen + 16, ErrValue},
		{"period negative", func() []byte { b := valid(t, periodChange); b[len(b)-8] = 0x80; return b }, "periodchange.period", HeaderLen + 16, ErrValue},
		{"realtime mode", func() []byte { b := valid(t, 11); b[HeaderLen] = 3; return b }, "realtime-info.mode", HeaderLen, ErrValue},
		{"realtime negative err", func() []byte {
			b := valid(t, 11)
			binary.BigEndian.PutUint64(b[HeaderLen+25:], uint64(1<<63))
			return b
		}, "realtime-info.err", HeaderLen, ErrValue},
		{"realtime upstream flags", func() []byte { b := valid(t, 11); b[HeaderLen+1+6*8] = 0x10; return b }, "realtime-info.up_flags", HeaderLen + 1 + 6*8, ErrValue},
		{"realtime upstream stratum 16", func() []byte { b := valid(t, 11); b[HeaderLen+1+6*8] = 1; b[HeaderLen+2+6*8] = 16; return b }, "realtime-info.up_stratum", HeaderLen, ErrValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Packet
			err := p.UnmarshalBinary(tt.in())
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v, want a *DecodeError", err)
			}
			if de.Field != tt.field || de.Offset != tt.offset || !errors.Is(err, tt.err) {
				t.Fatalf("got %v (field %q offset %d), want field %q offset %d, %v", err, de.Field, de.Offset, tt.field, tt.offset, tt.err)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	tests := []struct {
		name string
		p    Packet
		err  error
	}{
		{"unknown op", Packet{Op: 0x42}, ErrOp},
		{"type mismatch", Packet{Op: OpProbe, Msg: engine.Message{Type: engine.MsgTimeDiff}}, ErrValue},
		{"from mismatch", Packet{Op: OpProbe, Sender: 1, Msg: engine.Message{Type: engine.MsgProbe, From: 2}}, ErrValue},
		{"too many samples", Packet{Op: OpTimeDiff, Msg: engine.Message{Type: engine.MsgTimeDiff, Samples: make([]estimate.Sample, MaxSamples+1)}}, ErrTooLarge},
		{"page too large", Packet{Op: OpPageGrant, Page: Page{Data: make([]byte, MaxPageData+1)}}, ErrTooLarge},
		{"ack of nothing", Packet{Op: OpAck}, ErrValue},
		{"ack of an ack", Packet{Op: OpAck, AckOp: OpAck}, ErrValue},
		{"period zero", Packet{Op: OpPeriodChange, Msg: engine.Message{Type: engine.MsgPeriodChange}}, ErrValue},
		{"bad status", Packet{Op: OpStatusReply, Status: Status{Time: engine.Time{Status: 7}}}, ErrValue},
		{"unknown flags", Packet{Op: OpStatusQuery, Status: Status{Flags: 0x80}}, ErrValue},
		{"realtime rate infinite", Packet{Op: OpRealTimeQuery, RealTime: RealTime{Rate: math.Inf(1)}}, ErrValue},
		{"realtime slope error negative", Packet{Op: OpRealTimeInfo, RealTime: RealTime{SlopeErr: -1}}, ErrValue},
		{"realtime upstream leap 3", Packet{Op: OpRealTimeInfo, RealTime: RealTime{UpKnown: true, UpLeap: 3}}, ErrValue},
		{"realtime upstream stratum 16", Packet{Op: OpRealTimeInfo, RealTime: RealTime{UpKnown: true, UpStratum: 16}}, ErrValue},
		{"realtime upstream max error negative", Packet{Op: OpRealTimeInfo, RealTime: RealTime{UpKnown: true, UpMaxErr: -1}}, ErrValue},
		{"realtime upstream fields without known", Packet{Op: OpRealTimeInfo, RealTime: RealTime{UpSynced: true}}, ErrValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.p.MarshalBinary(); !errors.Is(err, tt.err) {
				t.Fatalf("err %v, want %v", err, tt.err)
			}
		})
	}
	p := samplePackets()[1]
	if _, err := p.MarshalBinaryTo(make([]byte, 10)); !errors.Is(err, ErrBuffer) {
		t.Fatalf("small buffer: %v", err)
	}
	// The largest packets fit in MaxPacket: a TimeDiff of MaxSamples (the
	// largest round the engine lets a source send, repeated once) sealed.
	big := []Packet{
		{Op: OpTimeDiff, Msg: engine.Message{Type: engine.MsgTimeDiff, Samples: make([]estimate.Sample, MaxSamples)}},
		{Op: OpPageGrant, Page: Page{Data: make([]byte, MaxPageData)}},
	}
	for _, p := range big {
		n, err := p.MarshalBinaryTo(make([]byte, MaxPacket))
		if err != nil || n > MaxPacket {
			t.Fatalf("%v: %d bytes, %v", p.Op, n, err)
		}
		if p.Op == OpTimeDiff && n+AuthLen > MaxPacket {
			t.Fatalf("the largest TimeDiff, %d bytes, sealed (%d more) exceeds MaxPacket %d", n, AuthLen, MaxPacket)
		}
		var q Packet
		if err := q.UnmarshalBinary(make([]byte, 0)); err == nil {
			t.Fatal("empty input decoded")
		}
	}
}

// TestDecodeReuse checks that decoding into the same Packet reuses its
// buffers: the steady state of a receive loop allocates nothing.
func TestDecodeReuse(t *testing.T) {
	ps := samplePackets()
	td, _ := ps[2].MarshalBinary()
	pg, _ := ps[9].MarshalBinary()
	var p Packet
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.UnmarshalBinary(td); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("timediff decode into a reused packet: %.1f allocs", allocs)
	}
	var q Packet
	allocs = testing.AllocsPerRun(100, func() {
		if err := q.UnmarshalBinary(pg); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("page decode into a reused packet: %.1f allocs", allocs)
	}
	buf := make([]byte, MaxPacket)
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := ps[2].MarshalBinaryTo(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("MarshalBinaryTo: %.1f allocs", allocs)
	}
}

func BenchmarkMarshalBinaryTo(b *testing.B) {
	buf := make([]byte, MaxPacket)
	for _, p := range samplePackets() {
		n, _ := p.Size()
		b.Run(fmt.Sprintf("%v/%dB", p.Op, n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.MarshalBinaryTo(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshalBinary(b *testing.B) {
	for _, p := range samplePackets() {
		enc, err := p.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%v/%dB", p.Op, len(enc)), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			var q Packet
			for b.Loop() {
				if err := q.UnmarshalBinary(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestStatusDegradedRoundTrips: a degraded node still answers status
// queries (failover asks them), so its status must encode.
func TestStatusDegradedRoundTrips(t *testing.T) {
	p := Packet{Op: OpStatusReply, Sender: 2, Seq: 9, Status: Status{Local: 5, Time: engine.Time{Est: 7, Earliest: 6, Latest: 8, Mono: 7, Status: engine.StatusDegraded}, Reference: 1}}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var q Packet
	if err := q.UnmarshalBinary(b); err != nil || q.Status != p.Status {
		t.Fatalf("decoded %+v, %v", q.Status, err)
	}
}
