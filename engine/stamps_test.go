package engine

import (
	"testing"

	"github.com/gclock/gclock/estimate"
)

// stampChild is node 1, child of the reference 0, ticked at t0.
func stampChild(t *testing.T) *Node {
	t.Helper()
	c := DefaultConfig()
	c.ID, c.Sources = 1, []NodeID{0}
	n, err := New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.Tick(t0)
	n.Ready()
	return n
}

const t0 = int64(1e9)

// probeAt steps probe seq from the reference at local now with receive
// stamp t2 (0: none) and returns the reply.
func probeAt(t *testing.T, n *Node, seq uint32, t2, now int64) Message {
	t.Helper()
	n.Step(Message{Type: MsgProbe, From: 0, To: 1, Round: 1, Seq: seq, T2: t2}, now)
	r := n.Ready()
	if len(r.Messages) != 1 || r.Messages[0].Type != MsgProbeReply {
		t.Fatalf("want one reply, got %+v", r.Messages)
	}
	return r.Messages[0]
}

// timeDiffBack steps the reference's time diff for round with one sample
// made of reply at local now and returns the sample the engine used.
func timeDiffBack(t *testing.T, n *Node, round uint32, reply Message, now int64) estimate.Sample {
	t.Helper()
	const src = int64(5e12) // the reference's clock
	s := estimate.Sample{SrcSend: src, LocRecv: reply.T2, LocSend: reply.T3, SrcRecv: src + 200_000}
	n.Step(Message{Type: MsgTimeDiff, From: 0, To: 1, Round: round, Samples: []estimate.Sample{s},
		Mapping: estimate.Mapping{X0: src, Y0: src, Valid: true}}, now)
	r := n.Ready()
	if len(r.Rounds) != 1 || len(r.Rounds[0].Samples) != 1 {
		t.Fatalf("want one round of one sample, got %+v", r.Rounds)
	}
	return r.Rounds[0].Samples[0]
}

// TestTxStampReply: a reply's transmit stamp replaces its T3 in the sample
// its time diff brings back when it lies between T2 and the time diff's
// arrival; otherwise the sample keeps the engine's T3, and the stamp is
// counted as rejected, unknown, duplicated or expired.
func TestTxStampReply(t *testing.T) {
	const (
		recv = t0 + 1000  // the probe's Step
		back = t0 + 50000 // the time diff's Step
	)
	tests := []struct {
		name     string
		stamps   []int64 // TxStamps for the reply, in order
		seq      uint32  // TxStamp's sequence number (0: the probe's)
		tick     int64   // a Tick between the stamp and the time diff (0: none)
		wantSend int64
		want     StampSnapshot
	}{
		{"none", nil, 0, 0, recv, StampSnapshot{ReplyOwn: 1}},
		{"accepted", []int64{recv + 20}, 0, 0, recv + 20, StampSnapshot{ReplyStamped: 1}},
		{"before T2 rejected", []int64{recv - 1}, 0, 0, recv, StampSnapshot{ReplyOwn: 1, Rejected: 1}},
		{"after the time diff rejected", []int64{back + 1}, 0, 0, recv, StampSnapshot{ReplyOwn: 1, Rejected: 1}},
		{"unknown reply", []int64{recv + 20}, 99, 0, recv, StampSnapshot{ReplyOwn: 1, Unknown: 1}},
		{"duplicated: the first kept", []int64{recv + 20, recv + 30}, 0, 0, recv + 20, StampSnapshot{ReplyStamped: 1, Duplicates: 1}},
		{"expired", []int64{recv + 20}, 0, recv + StampTTL*5/4 + 1, recv, StampSnapshot{ReplyOwn: 1, Expired: 1}},
		{"not yet expired", []int64{recv + 20}, 0, recv + StampTTL/2, recv + 20, StampSnapshot{ReplyStamped: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := stampChild(t)
			reply := probeAt(t, n, 7, 0, recv)
			if reply.T2 != recv || reply.T3 != recv {
				t.Fatalf("reply T2 %d T3 %d, want both %d", reply.T2, reply.T3, recv)
			}
			seq := reply.Seq
			if tt.seq != 0 {
				seq = tt.seq
			}
			for _, s := range tt.stamps {
				n.TxStamp(MsgProbeReply, 0, seq, s)
			}
			now := back
			if tt.tick != 0 {
				// Tick twice: once to schedule the scan, once past it.
				n.Tick(tt.tick - StampTTL/4)
				n.Tick(tt.tick)
				n.Ready()
				now = tt.tick + 1000
			}
			got := timeDiffBack(t, n, 1, reply, now)
			if got.LocSend != tt.wantSend || got.LocRecv != recv {
				t.Errorf("sample LocRecv %d LocSend %d, want %d %d", got.LocRecv, got.LocSend, recv, tt.wantSend)
			}
			if s := n.Snapshot().Stamps; s != tt.want {
				t.Errorf("stamps %+v, want %+v", s, tt.want)
			}
			if len(n.replies.byKey) != 0 || len(n.replies.byT3) != 0 {
				t.Errorf("%d replies still kept after their time diff", len(n.replies.byKey))
			}
		})
	}
}

// TestProbeRecvStamp: a probe's receive stamp (Message.T2) is the reply's
// T2 when it lies within MaxSampleRTT before the Step; otherwise the
// Step's time is.
func TestProbeRecvStamp(t *testing.T) {
	const now = t0 + 2*MaxSampleRTT
	tests := []struct {
		name     string
		t2, want int64
		rejected uint64
	}{
		{"none", 0, now, 0},
		{"kernel stamp", now - 30_000, now - 30_000, 0},
		{"oldest accepted", now - MaxSampleRTT, now - MaxSampleRTT, 0},
		{"too old", now - MaxSampleRTT - 1, now, 1},
		{"after the Step", now + 1, now, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := stampChild(t)
			r := probeAt(t, n, 1, tt.t2, now)
			if r.T2 != tt.want || r.T3 != now {
				t.Errorf("reply T2 %d T3 %d, want %d %d", r.T2, r.T3, tt.want, now)
			}
			if got := n.Snapshot().Stamps.Rejected; got != tt.rejected {
				t.Errorf("rejected %d, want %d", got, tt.rejected)
			}
		})
	}
}

// TestTxStampProbe: a probe's transmit stamp becomes the sample's T1 when
// it lies between the engine's send time and the reply's arrival; a stamp
// for another probe, a second one, or one out of range is not used.
func TestTxStampProbe(t *testing.T) {
	const sent, arrive = int64(1000), int64(1500)
	tests := []struct {
		name     string
		stamps   []int64
		seq      uint32 // 0: the probe's
		wantSend int64
		want     StampSnapshot
	}{
		{"none", nil, 0, sent, StampSnapshot{ProbeOwn: 1}},
		{"accepted", []int64{1005}, 0, 1005, StampSnapshot{ProbeStamped: 1}},
		{"before the send rejected", []int64{999}, 0, sent, StampSnapshot{ProbeOwn: 1, Rejected: 1}},
		{"after the reply rejected", []int64{arrive + 1}, 0, sent, StampSnapshot{ProbeOwn: 1, Rejected: 1}},
		{"another probe", []int64{1005}, 42, sent, StampSnapshot{ProbeOwn: 1, Unknown: 1}},
		{"duplicated: the first kept", []int64{1005, 1010}, 0, 1005, StampSnapshot{ProbeStamped: 1, Duplicates: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ID, c.Children, c.PingsPerRound = 0, []NodeID{1}, 1
			src, err := New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			src.Tick(sent)
			p := src.Ready().Messages[0]
			seq := p.Seq
			if tt.seq != 0 {
				seq = tt.seq
			}
			for _, s := range tt.stamps {
				src.TxStamp(MsgProbe, 1, seq, s)
			}
			src.Step(Message{Type: MsgProbeReply, From: 1, To: 0, Round: p.Round, Seq: p.Seq, T2: 7000, T3: 7010}, arrive)
			var got []estimate.Sample
			for _, m := range src.Ready().Messages {
				if m.Type == MsgTimeDiff {
					got = m.Samples
				}
			}
			if len(got) != 1 || got[0].SrcSend != tt.wantSend {
				t.Fatalf("time diff samples %+v, want one with SrcSend %d", got, tt.wantSend)
			}
			if s := src.Snapshot().Stamps; s != tt.want {
				t.Errorf("stamps %+v, want %+v", s, tt.want)
			}
			// A stamp for a probe no longer in flight is unknown.
			src.TxStamp(MsgProbe, 1, p.Seq, 1005)
			src.TxStamp(MsgProbe, 9, p.Seq, 1005)
			if s := src.Snapshot().Stamps; s.Unknown != tt.want.Unknown+2 {
				t.Errorf("unknown %d after the round, want %d", s.Unknown, tt.want.Unknown+2)
			}
		})
	}
}

// TestTxStampBounded: at most MaxPendingStamps replies are kept; the
// others are counted as expired and their samples keep the engine's T3.
func TestTxStampBounded(t *testing.T) {
	n := stampChild(t)
	now := t0
	for seq := uint32(1); seq <= MaxPendingStamps+10; seq++ {
		now += 10
		probeAt(t, n, seq, 0, now)
	}
	if got := len(n.replies.byKey); got != MaxPendingStamps {
		t.Errorf("%d replies kept, want %d", got, MaxPendingStamps)
	}
	if got := n.Snapshot().Stamps.Expired; got != 10 {
		t.Errorf("expired %d, want 10", got)
	}
	// A duplicated probe keeps the first reply's times.
	n2 := stampChild(t)
	first := probeAt(t, n2, 3, 0, t0+100)
	probeAt(t, n2, 3, 0, t0+200)
	if r := n2.replies.byKey[replyKey{0, 3}]; r.t3 != first.T3 || len(n2.replies.byKey) != 1 {
		t.Errorf("kept %+v (%d), want the first reply's T3 %d", r, len(n2.replies.byKey), first.T3)
	}
}
