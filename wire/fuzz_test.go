package wire

import (
	"bytes"
	"testing"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

// FuzzUnmarshal feeds arbitrary bytes to the decoder: it must not panic,
// and whatever it accepts must re-encode to exactly the same bytes (the
// format is canonical) and decode again to the same packet.
func FuzzUnmarshal(f *testing.F) {
	for _, p := range samplePackets() {
		b, err := p.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte("GC\x01\x03"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Packet
		if err := p.UnmarshalBinary(b); err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error %v is not a *DecodeError", err)
			}
			return
		}
		enc, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded packet does not encode: %v", err)
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("re-encoding differs:\n in % x\nout % x", b, enc)
		}
		var q Packet
		if err := q.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-decoding: %v", err)
		}
		enc2, _ := q.MarshalBinary()
		if !bytes.Equal(enc, enc2) {
			t.Fatal("second round trip differs")
		}
	})
}

// FuzzRoundTrip builds packets from fuzzed fields, encodes them and checks
// that decoding gives back the same encoding.
func FuzzRoundTrip(f *testing.F) {
	f.Add(uint8(OpProbeReply), uint32(1), uint32(2), uint32(3), int64(-4), int64(5), float64(0.5), uint16(2), []byte("page"))
	f.Add(uint8(OpRealTimeQuery), uint32(1), uint32(2), uint32(3), int64(-4), int64(5), float64(1.00001), uint16(2), []byte{})
	f.Add(uint8(OpRealTimeInfo), uint32(1), uint32(2), uint32(2), int64(-4), int64(5), float64(1e-5), uint16(2), []byte{})
	f.Add(uint8(OpStatusQuery), uint32(1), uint32(2), uint32(3), int64(-4), int64(5), float64(0), uint16(engine.FlagBeat|engine.FlagLease), []byte{})
	f.Add(uint8(OpTimeDiff|ReliableFlag), uint32(0), uint32(0), uint32(0), int64(0), int64(0), float64(0), uint16(1024), []byte{})
	f.Fuzz(func(t *testing.T, op uint8, sender, seq, round uint32, a, c int64, x float64, n uint16, data []byte) {
		p := Packet{Op: Op(op), Sender: sender, Seq: seq}
		if p.Op.Kind() <= OpPeriodChange && p.Op.Kind() > 0 {
			p.Msg.Type = engine.MsgType(p.Op.Kind())
			p.Msg.From = engine.NodeID(sender)
			p.Msg.Round = round
			p.Msg.Term = seq ^ round
			p.Msg.T2, p.Msg.T3, p.Msg.Err = a, c, x
			p.Msg.Mapping.X0, p.Msg.Mapping.Skew, p.Msg.Mapping.Valid = a, x, c&1 == 1
			p.Msg.Samples = make([]estimate.Sample, int(n)%(MaxSamples+1))
			for i := range p.Msg.Samples {
				p.Msg.Samples[i].SrcSend = a + int64(i)
				p.Msg.Samples[i].SrcRecv = c - int64(i)
			}
		}
		p.Status.Local, p.Status.Time.Est = a, c
		p.Status.Term, p.Status.Flags, p.Status.Sent = round, uint8(n), c
		p.Page.Addr, p.Page.Data = uint64(a), data
		p.AckOp = Op(round)
		p.RealTime = RealTime{Rate: x, RateErr: float64(n), Mode: uint8(round), At: a, Offset: c, Slope: x, Err: c, SlopeErr: float64(seq), After: c, Prev: a,
			UpKnown: a&1 == 1, UpSynced: a&2 != 0, UpLeap: uint8(seq & 3), UpStratum: uint8(seq >> 2 & 15), UpRefID: seq >> 8,
			UpMaxErr: int64(n), UpEstErr: int64(round), UpRootDelay: int64(seq & 0xff), UpRootDisp: int64(n >> 4)}
		b, err := p.MarshalBinary()
		if err != nil {
			return // invalid packets are refused by the encoder; fine
		}
		var q Packet
		if err := q.UnmarshalBinary(b); err != nil {
			t.Fatalf("decode of an encoded %v: %v", p.Op, err)
		}
		b2, err := q.MarshalBinary()
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("round trip of %v differs (err %v)", p.Op, err)
		}
	})
}
