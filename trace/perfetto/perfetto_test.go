package perfetto

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/gclock/gclock/internal/perfettocheck"
	pb "github.com/gclock/gclock/internal/perfettopb"
	"github.com/gclock/gclock/trace/format"
)

// synth builds a well-formed merged stream in global order: procs processes
// with two tracks each, nested regions, counters, instants and messages
// (some still in flight at the end, one received without its send).
func synth(seed uint64, procs, steps int) []format.Merged {
	rng := rand.New(rand.NewPCG(seed, 11))
	var out []format.Merged
	depth := map[[2]uint32]int{}
	t := int64(1_700_000_000_000_000_000) // absolute ns, as a real clock gives
	type inflight struct {
		from, to uint32
		id       uint64
		due      int64
	}
	var fl []inflight
	var id uint64
	for range steps {
		t += 1 + rng.Int64N(1500)
		for i := 0; i < len(fl); {
			if fl[i].due <= t {
				out = append(out, format.Merged{Event: format.Event{Time: fl[i].due, Kind: format.Recv, Peer: fl[i].from, ID: fl[i].id, Value: 64}, Raw: fl[i].due - 333, Proc: fl[i].to})
				fl = append(fl[:i], fl[i+1:]...)
				continue
			}
			i++
		}
		p := uint32(rng.IntN(procs))
		tr := uint16(rng.IntN(2))
		k := [2]uint32{p, uint32(tr)}
		e := format.Merged{Event: format.Event{Time: t, Track: tr}, Raw: t - 500 + int64(p), Proc: p}
		switch r := rng.IntN(6); {
		case r == 0 || (r == 1 && depth[k] == 0):
			e.Kind, e.ID = format.Enter, uint64(1+depth[k])
			depth[k]++
		case r == 1:
			depth[k]--
			e.Kind, e.ID = format.Leave, uint64(depth[k]+1)
		case r == 2:
			e.Kind, e.ID, e.Value = format.Counter, 9, rng.Int64N(200)-100
		case r == 3:
			e.Kind, e.ID = format.Instant, 5
		default:
			q := uint32(rng.IntN(procs))
			id++
			e.Kind, e.Peer, e.ID, e.Value = format.Send, q, id, 8
			if rng.IntN(50) > 0 {
				fl = append(fl, inflight{p, q, id, t + 1 + rng.Int64N(3000)})
			}
		}
		out = append(out, e)
	}
	// A receive whose send is not in the trace.
	out = append(out, format.Merged{Event: format.Event{Time: t + 1, Kind: format.Recv, Peer: 1, ID: 1 << 40}, Raw: t, Proc: 0})
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Time < out[j-1].Time; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func write(t testing.TB, ev []format.Merged, opt Options) ([]byte, *Writer) {
	t.Helper()
	var b bytes.Buffer
	w := NewWriter(&b, opt)
	w.SetNames([]format.Name{{Proc: 0, ID: 1, Name: "outer \"region\""}, {Proc: 1, ID: 5, Name: "tick\xff"}, {Proc: 2, ID: 9, Name: "queue depth"}})
	w.SetProcess(0, "rank 0")
	for i := range ev {
		if err := w.Write(&ev[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w
}

// TestRoundTrip writes merged events, decodes the file with protowire and
// checks every event back: time to the nanosecond, type, process and track,
// name, counter value, raw local time, message fields, and that every
// delivered message is one flow from its send to its receive.
func TestRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		ev := synth(seed, 4, 4000)
		data, w := write(t, ev, Options{Metadata: []KV{{"method", "spline"}, {"note", "bad \xff utf-8"}}})
		tr, err := perfettocheck.Decode(data)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(tr.Events) != len(ev)+1 {
			t.Fatalf("seed %d: %d events, want %d and the run instant", seed, len(tr.Events), len(ev))
		}
		run := tr.Events[0]
		if a, _ := run.Arg("origin_ns"); run.Name != "gclock run" || a.String != strconv.FormatInt(ev[0].Time, 10) {
			t.Errorf("seed %d: run instant %+v", seed, run)
		}
		if a, _ := run.Arg("method"); a.String != "spline" {
			t.Errorf("seed %d: metadata lost: %+v", seed, run.Annotations)
		}
		flowFrom := map[uint64][3]uint64{} // flow id -> from, to, msg of its send
		var sends, flows, unbound int
		for i := range ev {
			m, e := &ev[i], &tr.Events[i+1]
			where := func() string { return "seed " + strconv.Itoa(int(seed)) + " event " + strconv.Itoa(i) }
			if int64(e.Time) != m.Time-ev[0].Time {
				t.Fatalf("%s: time %d, want %d", where(), e.Time, m.Time-ev[0].Time)
			}
			track := tr.Tracks[e.Track]
			proc := tr.Tracks[track.Parent]
			if !proc.Process || proc.Pid != int32(m.Proc)+1 {
				t.Fatalf("%s: on track %+v of %+v, want process %d", where(), track, proc, m.Proc)
			}
			if m.Proc == 0 && proc.ProcessName != "rank 0" {
				t.Fatalf("%s: process name %q", where(), proc.ProcessName)
			}
			if m.Kind != format.Counter && track.Name != "track "+strconv.Itoa(int(m.Track)) {
				t.Fatalf("%s: track %q, want track %d", where(), track.Name, m.Track)
			}
			local, _ := e.Arg("local_ns")
			switch m.Kind {
			case format.Enter, format.Instant:
				want := map[format.Kind]int{format.Enter: pb.TypeSliceBegin, format.Instant: pb.TypeInstant}[m.Kind]
				if e.Type != want || local.Int != m.Raw || e.Name == "" {
					t.Fatalf("%s: %+v for %+v", where(), e, m)
				}
				if m.Proc == 0 && m.ID == 1 && e.Name != `outer "region"` {
					t.Fatalf("%s: name %q", where(), e.Name)
				}
			case format.Leave:
				if e.Type != pb.TypeSliceEnd {
					t.Fatalf("%s: %+v for a leave", where(), e)
				}
			case format.Counter:
				if e.Type != pb.TypeCounter || e.Counter != m.Value || !track.Counter {
					t.Fatalf("%s: %+v on %+v for %+v", where(), e, track, m)
				}
				if m.Proc == 2 && track.Name != "queue depth" {
					t.Fatalf("%s: counter track %q", where(), track.Name)
				}
			case format.Send, format.Recv:
				peer, _ := e.Arg(map[bool]string{true: "to", false: "from"}[m.Kind == format.Send])
				msg, _ := e.Arg("msg")
				size, _ := e.Arg("bytes")
				if e.Type != pb.TypeInstant || peer.Uint != uint64(m.Peer) || msg.Uint != m.ID || size.Int != m.Value || local.Int != m.Raw {
					t.Fatalf("%s: %+v for %+v", where(), e, m)
				}
				if m.Kind == format.Send {
					sends++
					if e.Name != "send" || len(e.Flows) != 1 || len(e.Terminating) != 0 {
						t.Fatalf("%s: send %+v", where(), e)
					}
					if _, dup := flowFrom[e.Flows[0]]; dup {
						t.Fatalf("%s: flow id %d reused", where(), e.Flows[0])
					}
					flowFrom[e.Flows[0]] = [3]uint64{uint64(m.Proc), uint64(m.Peer), m.ID}
					continue
				}
				if e.Name != "recv" || len(e.Flows) != 0 {
					t.Fatalf("%s: recv %+v", where(), e)
				}
				if len(e.Terminating) == 0 {
					unbound++
					continue
				}
				if got := flowFrom[e.Terminating[0]]; got != [3]uint64{uint64(m.Peer), uint64(m.Proc), m.ID} {
					t.Fatalf("%s: recv of %d->%d msg %d ends flow %d, which %v started", where(), m.Peer, m.Proc, m.ID, e.Terminating[0], got)
				}
				delete(flowFrom, e.Terminating[0])
				flows++
			}
		}
		if unbound != 1 || w.Unbound != 1 {
			t.Errorf("seed %d: %d receives without a send (writer says %d), want 1", seed, unbound, w.Unbound)
		}
		if flows+len(flowFrom) != sends || flows < sends*9/10 {
			t.Errorf("seed %d: %d flows ended, %d open, %d sends", seed, flows, len(flowFrom), sends)
		}
	}
}

func TestEmptyTrace(t *testing.T) {
	data, _ := write(t, nil, Options{})
	tr, err := perfettocheck.Decode(data)
	if err != nil || len(tr.Events) != 1 || tr.Events[0].Name != "gclock run" {
		t.Fatalf("%v %+v", err, tr)
	}
}

func TestEventBeforeOrigin(t *testing.T) {
	w := NewWriter(&bytes.Buffer{}, Options{Origin: 100, OriginSet: true})
	err := w.Write(&format.Merged{Event: format.Event{Time: 99, Kind: format.Instant}})
	if err == nil || w.Close() == nil {
		t.Fatalf("event before the origin accepted: %v", err)
	}
}

// TestDecodeRejects: each fault is named.
func TestDecodeRejects(t *testing.T) {
	good, _ := write(t, synth(1, 2, 50), Options{})
	tests := []struct {
		name string
		doc  []byte
		want string
	}{
		{"cut", good[:len(good)-3], "packet"},
		{"wrong trace field", []byte{0x12, 0}, "Trace field 2"},
		{"empty packet", []byte{0x0a, 0}, "trusted_packet_sequence_id 0"},
		{"not cleared", []byte{0x0a, 2, 0x50, 1}, "does not clear"},
		{"flow id as varint", packetWith(t, good, []byte{0xf8, 0x02, 7}), "field 47 has wire type 0"},
		{"unknown event field", packetWith(t, good, []byte{0x08, 1}), "field 1 is not one gclock writes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := perfettocheck.Decode(tc.doc)
			if !errors.Is(err, perfettocheck.ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte(tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// packetWith returns good's first two packets and a third: a track event on
// the run track with extra bytes appended to its body.
func packetWith(t *testing.T, good []byte, extra []byte) []byte {
	t.Helper()
	var ev []byte
	ev = appendUint(ev, pb.EventType, pb.TypeInstant)
	ev = appendUint(ev, pb.EventTrackUUID, pb.RunTrackUUID)
	ev = append(ev, extra...)
	var p []byte
	p = appendUint(p, pb.PacketTimestamp, 0)
	p = appendUint(p, pb.PacketSequenceID, pb.SequenceID)
	p = appendUint(p, pb.PacketSequenceFlags, pb.SeqNeedsIncrementalState)
	p = appendString(p, pb.PacketTrackEvent, string(ev))
	// The first packet of good: the run track descriptor, clearing state.
	first := firstPacket(t, good)
	out := append([]byte{}, first...)
	out = appendString(out, pb.TracePacket, string(p))
	return out
}

func firstPacket(t *testing.T, b []byte) []byte {
	t.Helper()
	_, _, n := protowire.ConsumeTag(b)
	_, m := protowire.ConsumeBytes(b[n:])
	return b[:n+m]
}

func FuzzDecode(f *testing.F) {
	good, _ := write(f, synth(2, 3, 30), Options{})
	f.Add(good)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := perfettocheck.Decode(b)
		if err == nil && tr == nil {
			t.Fatal("nil trace without an error")
		}
		if err != nil && !errors.Is(err, perfettocheck.ErrInvalid) {
			t.Fatalf("error %v does not wrap ErrInvalid", err)
		}
	})
}

// FuzzWriter: whatever the event, the output decodes.
func FuzzWriter(f *testing.F) {
	f.Add(int64(5), uint8(1), uint64(1), uint32(2), uint16(0), int64(-3), "name")
	f.Fuzz(func(t *testing.T, tm int64, kind uint8, id uint64, peer uint32, track uint16, value int64, name string) {
		var b bytes.Buffer
		w := NewWriter(&b, Options{Metadata: []KV{{name, name}}})
		w.SetNames([]format.Name{{Proc: peer, ID: id, Name: name}})
		w.SetProcess(peer, name)
		ms := []format.Merged{
			{Event: format.Event{Time: tm, Kind: format.Send, ID: id, Peer: peer, Track: track, Value: value}, Proc: peer, Raw: tm},
			{Event: format.Event{Time: tm, Kind: format.Kind(kind%6 + 1), ID: id, Peer: peer, Track: track, Value: value}, Proc: peer, Raw: value},
		}
		for i := range ms {
			if err := w.Write(&ms[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		tr, err := perfettocheck.Decode(b.Bytes())
		if err != nil {
			t.Fatalf("%v", err)
		}
		if len(tr.Events) != 3 {
			t.Fatalf("%d events, want 3", len(tr.Events))
		}
	})
}

// BenchmarkWrite measures the writer per event.
func BenchmarkWrite(b *testing.B) {
	ev := synth(1, 8, 100000)
	b.ReportAllocs()
	n := 0
	var size int
	for b.Loop() {
		var buf countWriter
		w := NewWriter(&buf, Options{})
		for i := range ev {
			if err := w.Write(&ev[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		n += len(ev)
		size = int(buf)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
	b.ReportMetric(float64(size)/float64(len(ev)), "bytes/event")
}

type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }
