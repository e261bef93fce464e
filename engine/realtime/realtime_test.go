package realtime

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
)

const sec = int64(time.Second)

func testConfig(mode Mode, id engine.NodeID) Config {
	return Config{Mode: mode, ID: id, Reference: 1, Poll: sec, Lead: 5 * sec, MaxSlew: 500e-6, MaxDrift: 200e-6, Clocks: 3}
}

func newScale(t testing.TB, mode Mode, id engine.NodeID) *Scale {
	t.Helper()
	s, err := New(testConfig(mode, id), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// answer is the reference's info for a query, as a node receives it.
func answer(t *testing.T, ref *Scale, q Message, local int64) Message {
	t.Helper()
	r, err := ref.Answer(q, local)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (sg segment) info() Message {
	return Message{Type: MsgInfo, From: 1, Mode: ModeMeanDrift, At: sg.At, Offset: sg.A, Slope: sg.M, SlopeErr: sg.MErr, Prev: sg.Prev}
}

// TestMeanDriftChain: the reference's segments are continuous, a node that
// follows the chain computes the same served time as the reference, a late
// reply changes nothing, and a node that missed segments widens its bounds
// rather than serving a wrong time as exact.
func TestMeanDriftChain(t *testing.T) {
	raw, off := 500*sec, 1_700_000_000*sec
	ref := newScale(t, ModeMeanDrift, 1)
	ref.Tick(raw, Inputs{})
	if rd := ref.Ready(); !rd.Sample {
		t.Fatal("the reference did not ask for a CLOCK_REALTIME sample to start its chain")
	}
	ref.Sample(raw, off, 220) // the first segment: rate 1 (nobody reported)
	if len(ref.segs) != 1 || ref.segs[0].A != raw+off || ref.segs[0].M != 1 {
		t.Fatalf("first segment %+v", ref.segs)
	}
	// Reports: +60 and +90 ppm clocks with 1 ppm bounds.
	for _, rep := range []struct {
		id   engine.NodeID
		rate float64
	}{{2, 1 + 60e-6}, {3, 1 + 90e-6}} {
		answer(t, ref, Message{Type: MsgQuery, From: rep.id, Rate: rep.rate, RateErr: 1e-6, After: math.MinInt64}, raw)
	}
	// A report beyond 2*max_drift is refused.
	answer(t, ref, Message{Type: MsgQuery, From: 4, Rate: 1.01, RateErr: 1e-6}, raw)
	if _, ok := ref.reports[4]; ok {
		t.Error("an implausible rate report was kept")
	}
	node := newScale(t, ModeMeanDrift, 2)
	// A node that follows: ask every second, as Tick does.
	asks := 0
	ask := func(n *Scale) {
		after := int64(math.MinInt64)
		if len(n.segs) > 0 {
			after = n.segs[len(n.segs)-1].At
		}
		asks++ // the rate wobbles a little, so that the mean changes
		r := answer(t, ref, Message{Type: MsgQuery, From: 2, Rate: 1 + 60e-6 + float64(asks%2)*1e-9, RateErr: 1e-6, After: after}, raw)
		if err := n.accept(r, raw); err != nil {
			t.Fatal(err)
		}
	}
	var lateReply Message
	for k := range 30 {
		raw += sec
		answer(t, ref, Message{Type: MsgQuery, From: 3, Rate: 1 + 90e-6, RateErr: 1e-6, After: math.MinInt64}, raw)
		ref.Tick(raw, Inputs{})
		ask(node)
		if k == 3 {
			lateReply = ref.segs[0].info()
		}
	}
	if len(ref.segs) < 3 {
		t.Fatalf("%d segments after 30 s", len(ref.segs))
	}
	if want := 1 + 50e-6; math.Abs(ref.mean-want) > 1e-9 {
		t.Errorf("mean %.12f, want %.12f", ref.mean, want)
	}
	for i := 1; i < len(ref.segs); i++ {
		p, s := ref.segs[i-1], ref.segs[i]
		if v, _ := p.at(s.At); v != s.A || s.Prev != p.At {
			t.Errorf("segment %d not continuous: previous gives %d at %d, segment starts at %d", i, v, s.At, s.A)
		}
	}
	// The node and the reference agree to the ns, with no widening, over
	// the node's horizon, including across segment boundaries.
	for g := raw - 20*sec; g < raw+ref.cfg.Lead-sec; g += sec / 3 {
		rv, rext, rok := ref.meanAt(g)
		nv, next, nok := node.meanAt(g)
		if !rok || !nok || rv != nv || rext != 0 || next != 0 {
			t.Fatalf("at %d: reference %d (+-%d, %v), node %d (+-%d, %v)", g, rv, rext, rok, nv, next, nok)
		}
	}
	// Served time never decreases and never jumps at a boundary.
	for _, s := range ref.segs[1:] {
		a, _, _ := ref.meanAt(s.At - 1)
		b, _, _ := ref.meanAt(s.At)
		if b-a < 0 || b-a > 2 {
			t.Errorf("at the segment starting %d: %d then %d", s.At, a, b)
		}
	}
	// A late reply is ignored.
	before := slices.Clone(node.segs)
	if err := node.accept(lateReply, raw); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(before, node.segs) {
		t.Error("a late reply changed the chain")
	}
	// Beyond its horizon the node widens by 4*max_drift per ns.
	g := node.horizon + sec
	if _, ext, _ := node.meanAt(g); ext != int64(math.Ceil(4*node.cfg.MaxDrift*1e9)) {
		t.Errorf("1 s past the horizon: widening %d ns", ext)
	}
	// A node that missed segments (it knew only the first) starts a new
	// chain from what it hears, with its past widened, not taken as exact.
	late := newScale(t, ModeMeanDrift, 3)
	if err := late.accept(ref.segs[0].info(), raw); err != nil {
		t.Fatal(err)
	}
	ask(late)
	if late.first || len(late.segs) != 1 {
		t.Fatalf("after a gap: first=%v segs=%d", late.first, len(late.segs))
	}
	s := late.segs[0]
	if _, ext, _ := late.meanAt(s.At - sec); ext == 0 {
		t.Error("before the first known segment of a broken chain, no widening")
	}
	// Bad replies are refused with a reason, and counted.
	for _, bad := range []Message{
		{Type: MsgInfo, From: 1, Mode: ModeMeanDrift, Slope: 1.5},
		{Type: MsgInfo, From: 1, Mode: ModeMeanDrift, Slope: 1, SlopeErr: 0.5},
		{Type: MsgInfo, From: 1, Mode: ModeReference, Slope: 0},
		{Type: MsgInfo, From: 1, Mode: 7},
		{Type: MsgInfo, From: 3, Mode: ModeMeanDrift, Slope: 1}, // not from the reference
	} {
		if err := node.Step(bad, raw); !errors.Is(err, ErrMessage) {
			t.Errorf("reply %+v: %v, want ErrMessage", bad, err)
		}
	}
	if got := node.Stats().Refused; got != 3 {
		t.Errorf("%d replies counted refused, want the 3 from the reference (one is no info from it)", got)
	}
}

// TestReferenceModel: the reference's line through its samples, its
// bounds, and a step or a slew beyond MaxSlew detected (Stats.Jumps) with
// the line restarted from the new sample.
func TestReferenceModel(t *testing.T) {
	const off0 = 1_700_000_000 * sec
	for _, tt := range []struct {
		name  string
		off   func(k int) int64 // CLOCK_REALTIME - g at sample k (one a second)
		jumps uint64
	}{
		{"still", func(int) int64 { return off0 }, 0},
		{"NTP slews at 30 ppm", func(k int) int64 { return off0 + int64(k)*30_000 }, 0},
		{"the slew changes by 400 ppm", func(k int) int64 { return off0 + int64(max(k-5, 0))*400_000 }, 0},
		{"a step of -20 ms", func(k int) int64 { return off0 - int64(k/6)*20_000_000 }, 1},
		// Every sample of a slew beyond MaxSlew is outside the line restarted
		// with the old slope: samples 6 to 9.
		{"a slew of 600 ppm > MaxSlew", func(k int) int64 { return off0 + int64(max(k-5, 0))*600_000 }, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScale(t, ModeReference, 1)
			g := 100 * sec
			for k := range 10 {
				s.Tick(g, Inputs{})
				if !s.Ready().Sample {
					t.Fatalf("sample %d not asked for", k)
				}
				// Before the sample, the model's bounds hold the truth
				// unless the clock jumped.
				if k >= 2 && tt.jumps == 0 {
					tm := []engine.Time{{Est: g, Earliest: g, Latest: g, Status: engine.StatusSynced}}
					if !s.Apply(tm) {
						t.Fatalf("sample %d: no model", k)
					}
					if truth := g + tt.off(k); truth < tm[0].Earliest || truth > tm[0].Latest {
						t.Fatalf("sample %d: truth %d outside [%d, %d]", k, truth, tm[0].Earliest, tm[0].Latest)
					}
				}
				s.Sample(g, tt.off(k), 200)
				g += sec
			}
			if got := s.Stats().Jumps; got != tt.jumps {
				t.Errorf("%d jumps, want %d", got, tt.jumps)
			}
			if v, ok := s.Map(g - sec); !ok || v != g-sec+tt.off(9) {
				t.Errorf("served at the last sample %d (%v), want %d", v, ok, g-sec+tt.off(9))
			}
		})
	}
}

// TestQueryCycle: a node polls every Poll with one query in flight, a
// reply matching it is accepted and its model served, an unanswered query
// is counted failed at its deadline, and a mode mismatch is refused.
func TestQueryCycle(t *testing.T) {
	ref := newScale(t, ModeReference, 1)
	node := newScale(t, ModeReference, 2)
	g := 1000 * sec
	ref.Tick(g, Inputs{})
	ref.Ready()
	ref.Sample(g, 7e9, 200)
	node.Tick(g, Inputs{Earliest: math.MinInt64})
	if rd := node.Ready(); len(rd.Messages) != 0 || rd.NextTick != g+sec {
		t.Fatalf("first Tick: %+v, want no query and a poll one Poll later", rd)
	}
	g += sec
	ref.Tick(g, Inputs{})
	ref.Ready()
	ref.Sample(g, 7e9+1000, 200)
	node.Tick(g, Inputs{Earliest: g - 100})
	rd := node.Ready()
	if len(rd.Messages) != 1 || rd.Messages[0].Type != MsgQuery || rd.Messages[0].To != 1 {
		t.Fatalf("poll: %+v", rd)
	}
	if err := ref.Step(rd.Messages[0], g); err != nil {
		t.Fatal(err)
	}
	rep := ref.Ready().Messages
	if len(rep) != 1 || rep[0].Type != MsgInfo || rep[0].To != 2 || rep[0].Seq != rd.Messages[0].Seq || rep[0].Mode != ModeReference {
		t.Fatalf("reference's answer %+v", rep)
	}
	if err := node.Step(rep[0], g+50); err != nil {
		t.Fatal(err)
	}
	tm := []engine.Time{{Est: g, Earliest: g - 10, Latest: g + 10, Status: engine.StatusSynced}}
	if !node.Apply(tm) || tm[0].Est != g+7e9+1000 {
		t.Fatalf("served %+v, want %d", tm[0], g+7e9+1000)
	}
	// Unanswered: one query in flight, failed at the deadline (max(Poll, 1 s)).
	// The answer above put the next poll just after the reference's next
	// sample (Poll/20 after it), and every poll after it a Poll later.
	for k := range 3 {
		g += sec + sec/10
		node.Tick(g, Inputs{Earliest: math.MinInt64})
		rd := node.Ready()
		if len(rd.Messages) != 1 {
			t.Fatalf("poll %d: %d queries", k, len(rd.Messages))
		}
	}
	st := node.Stats()
	if st.Polls != 4 || st.PollFails != 2 {
		t.Errorf("polls %d, failures %d; want 4 and 2", st.Polls, st.PollFails)
	}
	// The reference in another mode.
	md := newScale(t, ModeMeanDrift, 1)
	md.Tick(g, Inputs{})
	md.Ready()
	md.Sample(g, 7e9, 200)
	r, _ := md.Answer(Message{Type: MsgQuery, From: 2, After: math.MinInt64}, g)
	if err := node.Step(r, g); !errors.Is(err, ErrMessage) {
		t.Errorf("a mean-drift segment in reference-realtime mode: %v", err)
	}
	// Only the reference answers.
	if _, err := node.Answer(Message{Type: MsgQuery, From: 3}, g); err == nil {
		t.Error("a node answered a query")
	}
}

// TestMessageCheck: every field no sender produces is named.
func TestMessageCheck(t *testing.T) {
	for _, tt := range []struct {
		m    Message
		want string
	}{
		{Message{Type: MsgQuery, Rate: math.NaN()}, "rate"},
		{Message{Type: MsgQuery, Rate: 1, RateErr: -1}, "rate_err"},
		{Message{Type: MsgInfo, Mode: 3}, "mode"},
		{Message{Type: MsgInfo, Slope: math.Inf(1)}, "slope"},
		{Message{Type: MsgInfo, Err: -1}, "err"},
		{Message{Type: MsgInfo, SlopeErr: math.NaN()}, "slope_err"},
		{Message{Type: 9}, "type"},
	} {
		err := tt.m.Check()
		if err == nil || !errors.Is(err, ErrMessage) || !contains(err.Error(), "field "+tt.want+" ") {
			t.Errorf("%+v: %v, want field %s", tt.m, err, tt.want)
		}
	}
	if err := (&Message{Type: MsgInfo, Mode: ModeMeanDrift, Slope: 1}).Check(); err != nil {
		t.Errorf("a good info refused: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestRate: a clock at +80 ppm against global time, bounded by +-1 us at
// every instant, gives a rate within its bound of the truth.
func TestRate(t *testing.T) {
	const drift = 80e-6
	est := func(local int64) engine.Time {
		g := local - int64(float64(local-1e12)*drift/(1+drift))
		return engine.Time{Est: g, Earliest: g - 1000, Latest: g + 1000, Status: engine.StatusSynced}
	}
	r, e, ok := Rate(est, 1e12+200*sec, 0)
	if !ok || math.Abs(r-(1+drift)) > e || e > 1e-7 {
		t.Errorf("rate %.9f +- %.3g (%v), want 1+80e-6 within a bound under 0.1 ppm", r, e, ok)
	}
	if _, _, ok := Rate(func(int64) engine.Time { return engine.Time{} }, 1e12, 0); ok {
		t.Error("a rate from an unsynced engine")
	}
}

// FuzzStepInfo feeds arbitrary infos to a node: Step refuses or keeps them,
// and the served readings never panic and keep Earliest <= Est <= Latest.
func FuzzStepInfo(f *testing.F) {
	f.Add(uint8(2), int64(1e12), int64(1.7e18), 1.00005, 1e-7, int64(0), int64(math.MinInt64), int64(1e12))
	f.Add(uint8(1), int64(1e12), int64(1.7e18), -2e-5, 5e-4, int64(300), int64(0), int64(2e12))
	f.Add(uint8(2), int64(math.MaxInt64), int64(math.MinInt64), 1.0, 0.0, int64(0), int64(5), int64(-1))
	f.Fuzz(func(t *testing.T, mode uint8, at, off int64, slope, slopeErr float64, e, prev, g int64) {
		r := Message{Type: MsgInfo, From: 1, Mode: Mode(mode), At: at, Offset: off, Slope: slope, SlopeErr: slopeErr, Err: e, Prev: prev}
		for _, m := range []Mode{ModeReference, ModeMeanDrift} {
			s := newScale(t, m, 2)
			s.Tick(g, Inputs{Earliest: g})
			s.Ready()
			s.Step(r, g)
			r.At = satAdd(r.At, 1)
			s.Step(r, g) // a second one, after the first
			ts := []engine.Time{{Est: g, Earliest: satAdd(g, -1000), Latest: satAdd(g, 1000), Status: engine.StatusSynced}}
			if s.Apply(ts) && !(ts[0].Earliest <= ts[0].Est && ts[0].Est <= ts[0].Latest) {
				t.Fatalf("%v: reading %+v out of order", m, ts[0])
			}
		}
	})
}

// TestConfigValidate: every field out of range is named; the daemon's
// limits (max_drift_ppm up to 5e5, max_slew_ppm up to 1e5) pass.
func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		f    func(*Config)
		want string
	}{
		{func(c *Config) { c.Mode = ModeNone }, "Mode"},
		{func(c *Config) { c.Poll = 0 }, "Poll"},
		{func(c *Config) { c.Lead = -1 }, "Lead"},
		{func(c *Config) { c.MaxSlew = math.NaN() }, "MaxSlew"},
		{func(c *Config) { c.MaxDrift = 1 }, "MaxDrift"},
		{func(c *Config) { c.ReplyTimeout = -1 }, "ReplyTimeout"},
		{func(c *Config) { c.MaxDrift, c.MaxSlew = 0.5, 0.1 }, ""},
	} {
		c := testConfig(ModeReference, 1)
		tt.f(&c)
		err := c.Validate()
		if tt.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c, err)
			}
			continue
		}
		if err == nil || !contains(err.Error(), "field "+tt.want+" ") {
			t.Errorf("%+v: %v, want field %s", c, err, tt.want)
		}
	}
}

// TestReferenceModelKernelRate: with the kernel's rate known the model
// follows it between samples, SampleEvery apart: its error is the read's
// plus MaxSlew over two intervals, a rate change within MaxSlew between
// samples stays inside, and Ready says Moved when the rate changed.
func TestReferenceModelKernelRate(t *testing.T) {
	cfg := testConfig(ModeReference, 1)
	cfg.SampleEvery = 5e6
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, off, rate := 100*sec, int64(1_700_000_000*sec), 30e-6
	moves := 0
	for k := range 400 {
		if k == 150 {
			rate = -400e-6 // set by the NTP daemon 1 ms after a sample
		}
		s.Tick(g, Inputs{})
		rd := s.Ready()
		if !rd.Sample {
			t.Fatalf("sample %d not asked for", k)
		}
		if k > 0 && rd.NextTick != g+5e6 {
			t.Fatalf("next tick %d after %d, want SampleEvery", rd.NextTick, g)
		}
		if k > 0 {
			tm := []engine.Time{{Est: g, Earliest: g, Latest: g, Status: engine.StatusSynced}}
			if !s.Apply(tm) {
				t.Fatalf("sample %d: no model", k)
			}
			if truth := g + off; truth < tm[0].Earliest || truth > tm[0].Latest {
				t.Fatalf("sample %d: truth %d outside [%d, %d]", k, truth, tm[0].Earliest, tm[0].Latest)
			}
			if w := tm[0].Latest - tm[0].Earliest; w > 2*(5_000+200+2_500)+10 { // + the upstream's growth over 5 ms
				t.Fatalf("sample %d: width %d ns", k, w)
			}
		}
		if err := s.SetUpstream(Upstream{Known: true, Synced: true, Rate: rate, RateKnown: true}); err != nil {
			t.Fatal(err)
		}
		s.Sample(g, off, 200)
		if s.Ready().Moved {
			moves++
		}
		off += int64(rate * 5e6)
		g += 5e6
	}
	if moves != 1 || s.Stats().Jumps != 0 {
		t.Errorf("%d moves, %d jumps; want 1, 0", moves, s.Stats().Jumps)
	}
}

// TestTakeoverRamp: a node that becomes the reference (Retarget) measures
// its CLOCK_REALTIME's slope over spans doubling from SampleEvery to half a
// Poll from its first sample, so that no model it serves carries more
// than the steady state's error (max_slew over a Poll and two reads): the
// slope of two samples 5 ms apart, served for a whole Poll, carried the
// reads' error divided by 5 ms (+400 ppm for 1-us reads). The truth stays
// inside throughout, and a node that follows the new reference polls
// eagerly for one Poll.
func TestTakeoverRamp(t *testing.T) {
	const (
		off0 = 1_700_000_000 * sec
		ms   = int64(time.Millisecond)
		hw   = 1000 // each sample's half-width
	)
	cfg := testConfig(ModeReference, 2)
	cfg.SampleEvery = 5 * ms
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g0 := 100 * sec
	truth := func(g int64) int64 { return off0 + (g-g0)*30/1_000_000 } // CLOCK_REALTIME - g: 30 ppm
	// The old reference's model, 20 us off, its error 100 us.
	if err := s.Step(Message{Type: MsgInfo, From: 1, Mode: ModeReference, At: g0 - 500*ms, Offset: truth(g0-500*ms) + 20_000,
		Err: 100_000, SlopeErr: 500e-6}, g0-400*ms); err != nil {
		t.Fatal(err)
	}
	s.Retarget(2, g0)
	var at []int64
	steady := hw + int64(cfg.MaxSlew*float64(cfg.Poll)) + 2*hw + 20_000 // + the handover's slew
	widest := int64(0)
	for g := g0; g < g0+3*sec; g += ms {
		s.Tick(g, Inputs{})
		if s.Ready().Sample {
			s.Sample(g, truth(g), hw)
			at = append(at, g-g0)
		}
		tm := []engine.Time{{Est: g, Earliest: g, Latest: g, Status: engine.StatusSynced}}
		if len(at) < 2 {
			continue
		}
		if !s.Apply(tm) {
			t.Fatalf("%d ms after the takeover: no model", (g-g0)/ms)
		}
		if v := g + truth(g); v < tm[0].Earliest || v > tm[0].Latest {
			t.Fatalf("%d ms after the takeover: truth %+d ns from the estimate, outside [%+d, %+d]", (g-g0)/ms, v-tm[0].Est,
				tm[0].Earliest-tm[0].Est, tm[0].Latest-tm[0].Est)
		}
		widest = max(widest, tm[0].Est-tm[0].Earliest, tm[0].Latest-tm[0].Est)
	}
	want := []int64{0, 5, 10, 20, 40, 80, 160, 320, 640, 1640, 2640}
	for i := range want {
		want[i] *= ms
	}
	if !slices.Equal(at, want) {
		t.Errorf("samples at %v ns after the takeover, want %v", at, want)
	}
	if widest > steady {
		t.Errorf("served half-width up to %d ns after the takeover, more than a steady model's oldest %d ns", widest, steady)
	}
	t.Logf("samples at %v ns; widest half-width %d ns (a steady model's oldest: %d ns)", at, widest, steady)

	// A node that follows the new reference polls every Poll/8 for a Poll.
	n := newScale(t, ModeReference, 3)
	n.Tick(g0-sec, Inputs{})
	n.Retarget(2, g0)
	polls := 0
	for l := g0; l < g0+cfg.Poll; l += ms {
		n.Tick(l, Inputs{})
		for _, q := range n.Ready().Messages {
			polls++
			if err := n.Step(Message{Type: MsgInfo, From: 2, To: 3, Seq: q.Seq, Mode: ModeReference, At: l, Offset: truth(l), Err: hw, SlopeErr: 500e-6}, l); err != nil {
				t.Fatal(err)
			}
		}
	}
	if polls != eagerPolls {
		t.Errorf("%d polls in the Poll after the change of reference, want %d", polls, eagerPolls)
	}
}

// TestPollAlign: a node polls just after the reference's samples (Poll/20
// after each, in global time, its local clock 7 ms off), so the model it
// holds is never more than a Poll and Poll/20 past its sample; polling at
// its own phase, it held models up to two Polls old.
func TestPollAlign(t *testing.T) {
	const ms = int64(time.Millisecond)
	ref := newScale(t, ModeReference, 1)
	n := newScale(t, ModeReference, 3)
	var samples, polls []int64
	for g := 100*sec + 300*ms; g < 108*sec; g += ms {
		ref.Tick(g, Inputs{})
		if ref.Ready().Sample {
			ref.Sample(g, 1_700_000_000*sec, 200)
			samples = append(samples, g)
		}
		local := g + 7*ms
		n.Tick(local, Inputs{Earliest: g - 10_000})
		for _, q := range n.Ready().Messages {
			polls = append(polls, g)
			if err := n.Step(answer(t, ref, q, g), local); err != nil {
				t.Fatal(err)
			}
		}
	}
	aligned := 0
	for _, p := range polls[2:] {
		i, _ := slices.BinarySearch(samples, p)
		last := samples[i-1]
		if d := p - last; d < sec/20 || d > sec/20+ms+10_000 {
			t.Errorf("poll at %d ms, %d ms after the reference's last sample; want %d ms", (p-100*sec)/ms, d/ms, sec/20/ms)
		} else {
			aligned++
		}
	}
	if aligned < 5 {
		t.Errorf("%d polls aligned of %d: samples at %v, polls at %v", aligned, len(polls), samples, polls)
	}
}
