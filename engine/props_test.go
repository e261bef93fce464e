package engine

import (
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/satmath"
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

// randomMapping returns a mapping and a true line inside its bounds.
func randomMapping(r *rand.Rand, x0 int64) (m estimate.Mapping, trueY0 int64, trueSkew float64) {
	m = estimate.Mapping{
		X0:      x0,
		Y0:      x0 + r.Int64N(2e9) - 1e9,
		Skew:    (r.Float64()*2 - 1) * 1e-4,
		W0:      r.Int64N(100_000),
		SkewErr: r.Float64() * 1e-5,
		Valid:   true,
	}
	trueY0 = m.Y0 + int64((r.Float64()*2-1)*float64(m.W0))
	trueSkew = m.Skew + (r.Float64()*2-1)*m.SkewErr
	return m, trueY0, trueSkew
}

func lineAt(y0 int64, skew float64, x0, x int64) int64 {
	dx := x - x0
	return y0 + dx + int64(math.Round(skew*float64(dx)))
}

// TestJezequel51ComposeContainsTheTruth: for random source and local
// mappings and true lines inside their bounds, the composed mapping (and
// MapInterval over the exact inner interval) contains the composed truth.
func TestJezequel51ComposeContainsTheTruth(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		base := int64(1e15) + r.Int64N(1e12)
		f, fy0, fs := randomMapping(r, base)
		g, gy0, gs := randomMapping(r, f.Y0+r.Int64N(1e10)-5e9)
		x0 := base + r.Int64N(1e11) - 5e10
		c := Compose(g, f, x0)
		for range 8 {
			x := x0 + r.Int64N(2*int64(time.Hour)) - int64(time.Hour)
			y := lineAt(fy0, fs, f.X0, x)
			z := lineAt(gy0, gs, g.X0, y)
			if _, lo, hi := c.At(x); z < lo || z > hi {
				t.Fatalf("case %d: composed truth %d outside [%d, %d] at dx %d\nf=%+v\ng=%+v\nc=%+v", i, z, lo, hi, x-x0, f, g, c)
			}
			fe, flo, fhi := f.At(x)
			_, glo, ghi, ok := MapInterval(g, fe, flo, fhi)
			if !ok || z < glo || z > ghi {
				t.Fatalf("case %d: MapInterval [%d, %d] ok=%v misses %d", i, glo, ghi, ok, z)
			}
		}
	}
}

func TestReanchorNeverNarrower(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		m, _, _ := randomMapping(r, r.Int64N(1e15))
		m.Wander = r.Float64() * 1e-16
		a := Reanchor(m, m.X0+r.Int64N(1e11)-5e10)
		for range 8 {
			x := m.X0 + r.Int64N(1e12) - 5e11
			e1, lo1, hi1 := m.At(x)
			e2, lo2, hi2 := a.At(x)
			if lo2 > lo1 || hi2 < hi1 || satmath.AbsDiff(e1, e2) > 1 {
				t.Fatalf("reanchored [%d %d] est %d narrower than [%d %d] est %d", lo2, hi2, e2, lo1, hi1, e1)
			}
		}
	}
}

func TestMapIntervalRefusesWhatItCannotBound(t *testing.T) {
	id := Identity(0)
	tests := []struct {
		name   string
		m      estimate.Mapping
		lo, hi int64
		ok     bool
	}{
		{"identity", id, -5, 5, true},
		{"invalid mapping", estimate.Mapping{}, 0, 1, false},
		{"empty interval", id, 5, -5, false},
		{"beyond the horizon", id, 0, ComposeHorizon + 1, false},
		{"bound growing as fast as time", estimate.Mapping{Valid: true, SkewErr: 0.6}, 0, 1, false},
		{"unbounded width", estimate.Mapping{Valid: true, W0: maxWidth}, 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, _, ok := MapInterval(tt.m, tt.lo, tt.lo, tt.hi); ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
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
