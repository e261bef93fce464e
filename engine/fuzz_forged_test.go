package engine_test

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/wire"
)

// The engine against forged messages (docs/daemon.md, "Security"): a
// source and a child exchange honest rounds on simulated clocks; then the
// child gets arbitrary messages under its source's id (decoded from bytes
// by package wire as the daemon does, or built from raw fields, NaN and
// huge floats and far round numbers included, which the decoder would
// refuse but another driver might not) interleaved with the honest
// traffic; then honest traffic only. Whatever came in, every read has
// Earliest <= Est <= Latest, and once the forged data has left the
// estimator window the child is synced again with the truth inside its
// bounds: no message wedges it.

// fclock is a simulated clock: local = ideal*(1+drift) + offset.
type fclock struct {
	drift  float64
	offset int64
}

func (c fclock) local(ideal int64) int64 { return ideal + int64(float64(ideal)*c.drift) + c.offset }

func (c fclock) ideal(local int64) int64 {
	return int64(math.Ceil(float64(local-c.offset) / (1 + c.drift)))
}

type forgedSim struct {
	t      *testing.T
	nodes  [2]*engine.Node
	clocks [2]fclock
	now    int64 // ideal ns
	next   [2]int64
	queue  []delivery
	delay  int64
}

type delivery struct {
	at int64
	to int
	m  engine.Message
}

func newForgedSim(t *testing.T) *forgedSim {
	s := &forgedSim{t: t, clocks: [2]fclock{{0, 0}, {30e-6, 5e6}}, now: 1e9, delay: 40e3}
	for i := range 2 {
		c := engine.DefaultConfig()
		c.ID = engine.NodeID(i)
		if i == 0 {
			c.Children = []engine.NodeID{1}
		} else {
			c.Sources = []engine.NodeID{0}
		}
		c.Estimator = "hull"
		c.Window = 16
		c.InitialGlobalPeriod, c.MinGlobalPeriod, c.MaxGlobalPeriod = 250*time.Millisecond, 250*time.Millisecond, 250*time.Millisecond
		n, err := engine.New(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.nodes[i] = n
		n.Tick(s.clocks[i].local(s.now))
		s.collect(i)
	}
	return s
}

// collect takes node i's output: messages onto the wire, its next tick.
func (s *forgedSim) collect(i int) {
	r := s.nodes[i].Ready()
	for _, m := range r.Messages {
		// Every message keeps within the limits the decoder checks: the
		// engine sends nothing the other side would refuse.
		if f, v := engine.InvalidFields(&m, m.Type); f != "" {
			s.t.Fatalf("node %d sent %v with %s = %v", i, m.Type, f, v)
		}
		// A little jitter, deterministic: the exchanges are not all alike.
		d := s.delay + int64(m.Seq%7)*3e3
		s.queue = append(s.queue, delivery{at: s.now + d, to: int(m.To), m: m})
	}
	s.next[i] = 0
	if r.NextTick != 0 {
		s.next[i] = max(s.clocks[i].ideal(r.NextTick), s.now)
	}
}

// run advances the simulation to ideal time until.
func (s *forgedSim) run(until int64) {
	for {
		at, who, qi := until, -1, -1
		for i, n := range s.next {
			if n != 0 && n < at {
				at, who = n, i
			}
		}
		for k, d := range s.queue {
			if d.at < at {
				at, who, qi = d.at, d.to, k
			}
		}
		if who < 0 {
			s.now = until
			return
		}
		s.now = at
		if qi >= 0 {
			d := s.queue[qi]
			s.queue = append(s.queue[:qi], s.queue[qi+1:]...)
			s.nodes[who].Step(d.m, s.clocks[who].local(s.now))
		} else {
			s.nodes[who].Tick(s.clocks[who].local(s.now))
		}
		s.collect(who)
		s.check()
	}
}

// check: the child's read is ordered, whatever it was told.
func (s *forgedSim) check() {
	t := s.nodes[1].Read(s.clocks[1].local(s.now))
	if t.Status != engine.StatusUnsynced && !(t.Earliest <= t.Est && t.Est <= t.Latest) {
		s.t.Fatalf("at %d: read %+v out of order", s.now, t)
	}
}

// forged turns fuzz bytes into messages under the source's id: a chunk
// starting with an even byte is a datagram for wire to decode, one with
// an odd byte a message built from raw fields.
func forged(data []byte) []engine.Message {
	var out []engine.Message
	for len(data) >= 2 {
		n := min(int(data[1])+2, len(data))
		chunk := data[2:n]
		kind := data[0]
		data = data[n:]
		if kind%2 == 0 {
			var p wire.Packet
			if p.UnmarshalBinary(chunk) != nil || p.Op.Kind() > wire.OpPeriodChange {
				continue
			}
			m := p.Msg
			m.From, m.To = 0, 1
			out = append(out, m)
			continue
		}
		var raw [12]uint64
		for i := range raw {
			if len(chunk) >= 8*(i+1) {
				raw[i] = binary.BigEndian.Uint64(chunk[8*i:])
			}
		}
		m := engine.Message{Type: engine.MsgType(1 + kind/2%5), From: 0, To: 1, Round: uint32(raw[0]), Seq: uint32(raw[0] >> 32),
			T2: int64(raw[1]), T3: int64(raw[2]), Err: math.Float64frombits(raw[3]), Period: int64(raw[4])}
		m.Mapping = estimate.Mapping{X0: int64(raw[5]), Y0: int64(raw[6]), Skew: math.Float64frombits(raw[7]), W0: int64(raw[8]),
			SkewErr: math.Float64frombits(raw[9]), Wander: math.Float64frombits(raw[10]), Valid: raw[11]&1 == 1}
		if k := int(raw[11] >> 60); k > 0 {
			base := int64(raw[1] >> 2)
			for j := range k {
				o := base + int64(j)*1e6
				m.Samples = append(m.Samples, estimate.Sample{SrcSend: o, LocRecv: o + int64(raw[2]%1e9), LocSend: o + int64(raw[2]%1e9) + 1e3, SrcRecv: o + 5e4})
			}
		}
		out = append(out, m)
	}
	return out
}

func FuzzEngineForgedMessages(f *testing.F) {
	// The cases: a time diff with round 2^31 and a mapping 1000 s
	// off; NaN and 1e300 mapping floats; probes under the source's id.
	far := wire.Packet{Op: wire.OpTimeDiff, Sender: 0, Seq: 1, Msg: engine.Message{Type: engine.MsgTimeDiff, To: 1, Round: 1 << 31,
		Samples: []estimate.Sample{{SrcSend: 2e9, LocRecv: 2e9 + 1e12, LocSend: 2e9 + 1e12 + 1e3, SrcRecv: 2e9 + 5e4}},
		Mapping: estimate.Mapping{X0: 2e9, Y0: 2e9 + 1e12, Skew: 1e-6, W0: 700e3, SkewErr: 1e-9, Valid: true}}}
	b, err := far.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(append([]byte{0, byte(len(b))}, b...))
	nan := make([]byte, 2+12*8)
	nan[0], nan[1] = 5, 12*8 // a time diff from raw fields
	binary.BigEndian.PutUint64(nan[2:], 1<<31)
	binary.BigEndian.PutUint64(nan[2+7*8:], math.Float64bits(math.NaN()))
	binary.BigEndian.PutUint64(nan[2+9*8:], math.Float64bits(1e300))
	binary.BigEndian.PutUint64(nan[2+11*8:], 1|3<<60)
	f.Add(nan)
	f.Add([]byte{1, 8, 0, 0, 0, 1, 0, 0, 0, 9}) // a probe
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs := forged(data)
		if len(msgs) > 64 {
			msgs = msgs[:64]
		}
		s := newForgedSim(t)
		s.run(6e9) // synced on honest rounds
		// The forged messages, one every 20 ms between honest rounds.
		for _, m := range msgs {
			s.run(s.now + 20e6)
			s.nodes[1].Step(m, s.clocks[1].local(s.now))
			s.collect(1)
			s.check()
		}
		// Honest traffic: enough rounds for the window (16) to forget
		// the forged ones, and for a source renumbered by a forged round
		// to be taken back (3 silent periods).
		s.run(s.now + 20e9)
		local := s.clocks[1].local(s.now)
		tm := s.nodes[1].Read(local)
		truth := s.now // the source's clock is the ideal one
		if tm.Status != engine.StatusSynced || truth < tm.Earliest || truth > tm.Latest {
			t.Fatalf("after %d forged messages and 20 s of honest rounds: read %+v, truth %d (%+d from the estimate); snapshot %+v",
				len(msgs), tm, truth, tm.Est-truth, s.nodes[1].Snapshot())
		}
	})
}
