package engine

import (
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/topology"
)

func TestDefaultConfigValidates(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	tests := []struct {
		field  string
		mutate func(*Config)
	}{
		{"Sources", func(c *Config) { c.Sources = []NodeID{c.ID} }},
		{"Children", func(c *Config) { c.Sources = []NodeID{1}; c.Children = []NodeID{1} }},
		{"Children", func(c *Config) { c.Children = []NodeID{2, 2} }},
		{"Estimator", func(c *Config) { c.Estimator = "ntp" }},
		{"PingsPerRound", func(c *Config) { c.PingsPerRound = 0 }},
		{"MinGlobalPeriod", func(c *Config) { c.MinGlobalPeriod = 0 }},
		{"MinGlobalPeriod", func(c *Config) { c.MinGlobalPeriod = c.MaxGlobalPeriod + 1 }},
		{"InitialGlobalPeriod", func(c *Config) { c.InitialGlobalPeriod = c.MaxGlobalPeriod + 1 }},
		{"MinSelfPeriod", func(c *Config) { c.MinSelfPeriod = c.MaxSelfPeriod + 1 }},
		{"MaxSelfPeriod", func(c *Config) { c.MaxSelfPeriod = -1 }},
		{"ProbeTimeout", func(c *Config) { c.ProbeTimeout = 0 }},
		{"StaleAfter", func(c *Config) { c.StaleAfter = 0 }},
		{"DifferenceThresh", func(c *Config) { c.DifferenceThresh = 0 }},
		{"NetworkLatencyErrorThresh", func(c *Config) { c.NetworkLatencyErrorThresh = -time.Nanosecond }},
		{"Granularity", func(c *Config) { c.Granularity = -1 }},
		{"HullMinDelay", func(c *Config) { c.HullMinDelay = -1 }},
		{"ErrorThresh", func(c *Config) { c.ErrorThresh = 0 }},
		{"ErrorThresh", func(c *Config) { c.ErrorThresh = math.NaN() }},
		{"LargeDrift", func(c *Config) { c.LargeDrift = -1e-6 }},
		{"MaxSlewRate", func(c *Config) { c.MaxSlewRate = 0 }},
		{"MaxDrift", func(c *Config) { c.MaxDrift = 1 }},
		{"MaxWander", func(c *Config) { c.MaxWander = math.Inf(1) }},
		{"RetryRTTs", func(c *Config) { c.RetryRTTs = 0.5 }},
		{"SuccessThresh", func(c *Config) { c.SuccessThresh = 0 }},
		{"Window", func(c *Config) { c.Window = 1 }},
		{"MaxConcurrentRounds", func(c *Config) { c.MaxConcurrentRounds = -1 }},
		{"MaxProbeRetries", func(c *Config) { c.MaxProbeRetries = -1 }},
		{"RoundBudget", func(c *Config) { c.RoundBudget = -time.Nanosecond }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			c := DefaultConfig()
			c.ID = 3
			tt.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), "node 3") {
				t.Fatalf("error %q does not name %s and the node", err, tt.field)
			}
			if _, err := New(c, nil); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
}

// FuzzStep feeds arbitrary messages and times to a node with sources and
// children: it must never panic, Read's Mono must never decrease and
// Earliest <= Latest must hold.
func FuzzStep(f *testing.F) {
	f.Add(uint8(1), uint8(0), uint32(1), uint32(1), int64(100), int64(100), int64(200), 1.5, []byte{1, 2, 3, 4})
	f.Add(uint8(3), uint8(0), uint32(1), uint32(0), int64(5), int64(3), int64(9), 0.0, []byte{})
	f.Add(uint8(4), uint8(2), uint32(1), uint32(1), int64(0), int64(0), int64(1e9), math.NaN(), []byte{9})
	f.Fuzz(func(t *testing.T, typ, from uint8, round, seq uint32, t2, t3, at int64, e float64, data []byte) {
		c := testConfig(1, []NodeID{0, 3}, []NodeID{2, 4})
		n, err := NewWithEstimators(c, nil, DefaultEstimators)
		if err != nil {
			t.Fatal(err)
		}
		n.Tick(0)
		n.Ready()
		var ss []estimate.Sample
		for k := 0; k+4 <= len(data); k += 4 {
			b := func(i int) int64 { return int64(int8(data[k+i])) * 1000 }
			ss = append(ss, estimate.Sample{SrcSend: at + b(0), LocRecv: at + b(1), LocSend: at + b(2), SrcRecv: at + b(3)})
		}
		m := Message{Type: MsgType(typ % 6), From: NodeID(from % 5), To: 1, Round: round, Seq: seq, T2: t2, T3: t3, Err: e,
			Samples: ss, Mapping: estimate.Mapping{X0: t2, Y0: t3, W0: int64(len(data)), Valid: len(data)%2 == 0}}
		var last int64
		for i := range 3 {
			n.Step(m, at+int64(i))
			n.Tick(at + int64(i) + 1)
			rd := n.Ready()
			_ = rd
			r := n.Read(at + int64(i))
			if i > 0 && r.Mono < last {
				t.Fatalf("Mono went back: %d -> %d", last, r.Mono)
			}
			if r.Earliest > r.Latest {
				t.Fatalf("Earliest %d > Latest %d", r.Earliest, r.Latest)
			}
			last = r.Mono
			m.Round++
		}
		_ = n.Snapshot()
	})
}

// benchDur is the simulated time of BenchmarkTree10kMemory.
var benchDur int64 = 2e9

// BenchmarkTree10kMemory builds 10,000 nodes on a 4-ary tree, runs two
// seconds of simulated time with the real estimators, and reports the live
// heap per node.
func BenchmarkTree10kMemory(b *testing.B) {
	g, err := topology.Tree(10000, 4)
	if err != nil {
		b.Fatal(err)
	}
	roles, _ := topology.Roles(g, 0)
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tn := newTestNet(b, 1, configsFrom(roles, func(c *Config) { c.Estimator = "minrtt" }), randomClocks(10000, 1, 50),
			fixedLink(5000), DefaultEstimators)
		tn.run(benchDur, 0, nil)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/10000, "heapB/node")
		runtime.KeepAlive(tn)
	}
}

// TestProbeReplyDriverStamps: a driver's better stamps (T1: the probe's
// kernel transmit time, through TxStamp; T4: the reply's kernel receive
// time, older than the Step call) go into the sample; stamps outside
// [own send, T4] and [own send, Step time] are ignored.
func TestProbeReplyDriverStamps(t *testing.T) {
	tests := []struct {
		name               string
		t1, t4             int64 // relative to the probe's engine send time (1000)
		wantSend, wantRecv int64
	}{
		{"engine stamps", 0, 0, 1000, 1500},
		{"kernel stamps", 1005, 1490, 1005, 1490},
		{"T1 before own send ignored", 990, 1490, 1000, 1490},
		{"T1 after T4 ignored", 1495, 1490, 1000, 1490},
		{"T4 after Step ignored", 1005, 1600, 1005, 1500},
		{"T4 before own send ignored", 1005, 900, 1005, 1500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ID, c.Children, c.PingsPerRound = 0, []NodeID{1}, 1
			src, err := New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			src.Tick(1000)
			r := src.Ready()
			if len(r.Messages) != 1 || r.Messages[0].Type != MsgProbe {
				t.Fatalf("want one probe, got %+v", r.Messages)
			}
			p := r.Messages[0]
			if tt.t1 != 0 {
				src.TxStamp(MsgProbe, 1, p.Seq, tt.t1)
			}
			src.Step(Message{Type: MsgProbeReply, From: 1, To: 0, Round: p.Round, Seq: p.Seq,
				T2: 7000, T3: 7010, T4: tt.t4}, 1500)
			r = src.Ready()
			var td *Message
			for i := range r.Messages {
				if r.Messages[i].Type == MsgTimeDiff {
					td = &r.Messages[i]
				}
			}
			if td == nil || len(td.Samples) != 1 {
				t.Fatalf("want a time diff with one sample, got %+v", r.Messages)
			}
			s := td.Samples[0]
			if s.SrcSend != tt.wantSend || s.SrcRecv != tt.wantRecv || s.LocRecv != 7000 || s.LocSend != 7010 {
				t.Errorf("sample %+v, want SrcSend %d SrcRecv %d", s, tt.wantSend, tt.wantRecv)
			}
		})
	}
}

// TestProbeReplyResent: a reply to a probe the driver sent more than once
// (Message.Resent: its times may belong to different copies) acknowledges
// the probe but is kept as no sample; the round probes on for its
// exchanges. A child whose every reply comes to a resent probe ends its
// round without a time diff after MaxProbeRetries of them, as a silent one
// does, instead of probing forever.
func TestProbeReplyResent(t *testing.T) {
	tests := []struct {
		name       string
		resent     []bool // per reply, in order
		wantTD     int    // samples of the time diff; -1: none sent
		wantResent uint64
	}{
		{"none resent", []bool{false, false, false}, 3, 0},
		{"one resent", []bool{false, true, false, false}, 3, 1},
		{"first two resent", []bool{true, true, false, false, false}, 3, 2},
		{"all resent", []bool{true, true, true, true, true, true, true, true, true}, -1, 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.ID, c.Children, c.PingsPerRound = 0, []NodeID{1}, 3
			src, err := New(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			now := int64(1000)
			src.Tick(now)
			r := src.Ready()
			tdSamples := -1
			for i, resent := range tt.resent {
				var p *Message
				for j := range r.Messages {
					if r.Messages[j].Type == MsgProbe {
						p = &r.Messages[j]
					}
				}
				if p == nil {
					t.Fatalf("reply %d: no probe to answer (messages %+v)", i, r.Messages)
				}
				now += 500
				src.Step(Message{Type: MsgProbeReply, From: 1, To: 0, Round: p.Round, Seq: p.Seq,
					T2: 7000 + now, T3: 7010 + now, Resent: resent}, now)
				r = src.Ready()
				for _, m := range r.Messages {
					if m.Type == MsgTimeDiff {
						tdSamples = len(m.Samples)
						for _, s := range m.Samples {
							if s.RTT() != 500-10 {
								t.Errorf("sample %+v: round trip %d, want 490 (a resent reply's sample kept?)", s, s.RTT())
							}
						}
					}
				}
			}
			if tdSamples != tt.wantTD {
				t.Errorf("time diff samples %d, want %d", tdSamples, tt.wantTD)
			}
			for _, m := range r.Messages {
				if m.Type == MsgProbe && tt.wantTD < 0 {
					t.Errorf("still probing after %d resent replies: %+v", len(tt.resent), m)
				}
			}
			snap := src.Snapshot()
			if ch := snap.Children; len(ch) != 1 || ch[0].Resent != tt.wantResent {
				t.Errorf("children %+v, want Resent %d", ch, tt.wantResent)
			}
			if st := snap.Stamps; st.Resent != tt.wantResent || st.ProbeOwn+st.ProbeStamped != uint64(len(tt.resent))-tt.wantResent {
				t.Errorf("stamps %+v: want %d resent and %d exchanges kept", st, tt.wantResent, uint64(len(tt.resent))-tt.wantResent)
			}
		})
	}
}
