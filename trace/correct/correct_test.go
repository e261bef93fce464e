package correct

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/trace/format"
)

// session builds n exchanges around local time x for a local clock whose
// global time is g(x), with one-way delays 1000 + U(0, jitter) ns.
func session(rng *rand.Rand, idx uint32, x int64, n int, jitter int64, g func(int64) int64) format.Session {
	s := format.Session{Index: idx, Kind: format.SessionDemand}
	for i := range n {
		l1 := x + int64(i)*10000
		d1, d2 := 1000+rng.Int64N(jitter+1), 1000+rng.Int64N(jitter+1)
		l4 := l1 + d1 + 500 + d2
		s.Samples = append(s.Samples, estimate.Sample{LocSend: l1, SrcRecv: g(l1 + d1), SrcSend: g(l1 + d1 + 500), LocRecv: l4})
	}
	return s
}

func TestMethods(t *testing.T) {
	const sec = int64(1e9)
	line := func(x int64) int64 { return 5_000_000 + x + x/50_000 } // +5 ms, +20 ppm
	bent := func(x int64) int64 {                                   // +20 ppm, then +40 ppm after 2 s
		if x < 2*sec {
			return line(x)
		}
		return line(x) + (x-2*sec)/50_000
	}
	tests := []struct {
		name     string
		g        func(int64) int64
		sessions []int64 // local times of sessions
		maps     bool
		method   Method
		want     Method
		tol      int64 // ns over the whole span
	}{
		{"auto two sessions linear", line, []int64{0, 4 * sec}, false, Auto, Linear, 50},
		{"auto five sessions spline", bent, []int64{0, sec, 2 * sec, 3 * sec, 4 * sec}, false, Auto, Spline, 2000},
		{"auto one session offset", func(x int64) int64 { return x + 777 }, []int64{0}, false, Auto, Offset, 10},
		{"auto daemon first", line, []int64{0, 4 * sec}, true, Auto, Daemon, 5},
		{"linear forced on five", line, []int64{0, sec, 2 * sec, 3 * sec, 4 * sec}, false, Linear, Linear, 50},
		{"spline forced on two", line, []int64{0, 4 * sec}, false, Spline, Spline, 50},
		{"none forced", line, []int64{0, 4 * sec}, false, None, None, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 1))
			in := Input{Meta: format.Meta{Proc: 3, Name: "p3"}}
			for i, x := range tc.sessions {
				in.Sessions = append(in.Sessions, session(rng, uint32(i), x, 40, 0, tc.g))
			}
			if tc.maps {
				for x := int64(0); x < 5*sec; x += sec / 2 {
					in.Mappings = append(in.Mappings, format.DaemonMapping{From: x,
						Mapping: estimate.Mapping{X0: x, Y0: tc.g(x), Skew: 20e-6, Valid: true}})
				}
			}
			ms, cs, err := Build([]Input{in}, tc.method)
			if err != nil {
				t.Fatal(err)
			}
			if cs[0].Method != tc.want {
				t.Fatalf("method %s (%s), want %s", cs[0].Method, cs[0].Reason, tc.want)
			}
			if tc.want == None {
				if ms[0].Global(123) != 123 {
					t.Fatal("none is not the identity")
				}
				return
			}
			var worst int64
			last := int64(-1 << 62)
			for x := int64(0); x <= 4*sec; x += sec / 64 {
				got := ms[0].Global(x)
				if got < last {
					t.Fatalf("not monotone at %d", x)
				}
				last = got
				worst = max(worst, abs(got-tc.g(x)))
			}
			if worst > tc.tol {
				t.Fatalf("worst error %d ns, want <= %d", worst, tc.tol)
			}
		})
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestSyncedHostAndReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	g := func(x int64) int64 { return x + 1_000_000 }
	host := Input{Meta: format.Meta{Proc: 1, Host: 7}, Sessions: []format.Session{session(rng, 0, 0, 20, 100, g), session(rng, 1, 1e9, 20, 100, g)}}
	shared := Input{Meta: format.Meta{Proc: 2, Host: 7, Flags: format.FlagSyncedHost}}
	ref := Input{Meta: format.Meta{Proc: 0, Host: 0, Flags: format.FlagReference}}
	alone := Input{Meta: format.Meta{Proc: 3, Host: 9}}
	ms, cs, err := Build([]Input{ref, host, shared, alone}, Auto)
	if err != nil {
		t.Fatal(err)
	}
	if cs[0].Method != None || cs[0].Reason != "reference clock" {
		t.Errorf("reference: %+v", cs[0])
	}
	if cs[2].Method != Linear || cs[2].SharedOf != 1 {
		t.Errorf("synced host: %+v", cs[2])
	}
	if d := ms[2].Global(5e8) - g(5e8); abs(d) > 100 {
		t.Errorf("synced host error %d", d)
	}
	if cs[3].Method != None || !strings.Contains(cs[3].Reason, "NO SYNC DATA") {
		t.Errorf("no data must be loud: %+v", cs[3])
	}
	// Forcing a method the data cannot give names the process.
	_, _, err = Build([]Input{alone}, Linear)
	if err == nil || !strings.Contains(err.Error(), "process 3") {
		t.Errorf("forced linear without sessions: %v", err)
	}
	if _, _, err := Build([]Input{alone}, Daemon); err == nil {
		t.Error("forced daemon without mappings accepted")
	}
	if _, err := ParseMethod("cubic"); err == nil {
		t.Error("bad method accepted")
	}
}

func TestDaemonMapperPieces(t *testing.T) {
	d, err := NewDaemonMapper([]format.DaemonMapping{
		{From: 1000, Mapping: estimate.Mapping{X0: 1000, Y0: 5000, Valid: true}},
		{From: 0, Mapping: estimate.Mapping{X0: 0, Y0: 4000, Valid: true}},
		{From: 500, Mapping: estimate.Mapping{X0: 500, Y0: 0, Valid: false}}, // ignored
		{From: 2000, Mapping: estimate.Mapping{X0: 2000, Y0: 6100, Skew: 1e-3, Valid: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ x, want int64 }{
		{-100, 3900}, {0, 4000}, {999, 4999}, {1000, 5000}, {1999, 5999}, {2000, 6100}, {3000, 7101}, {10, 4010},
		{2500, 6601}, // skew 1e-3 over 500 ns: 0.5 rounds away from zero
	}
	for _, tc := range tests {
		if got := d.Global(tc.x); got != tc.want {
			t.Errorf("Global(%d) = %d, want %d", tc.x, got, tc.want)
		}
	}
	if _, err := NewDaemonMapper(nil); err == nil {
		t.Error("no mappings accepted")
	}
	if _, err := NewDaemonMapper([]format.DaemonMapping{{Mapping: estimate.Mapping{Skew: -1, Valid: true}}}); err == nil {
		t.Error("skew -1 accepted")
	}
}

func TestBadSessionIsError(t *testing.T) {
	bad := format.Session{Samples: []estimate.Sample{{LocSend: 10, LocRecv: 5, SrcRecv: 1, SrcSend: 0}}}
	in := Input{Meta: format.Meta{Proc: 4}, Sessions: []format.Session{bad, bad}}
	_, _, err := Build([]Input{in}, Linear)
	if err == nil || !strings.Contains(err.Error(), "process 4") {
		t.Fatalf("corrupt samples: %v", err)
	}
	if errors.Unwrap(err) == nil {
		t.Fatal("error not wrapped")
	}
}

// With asymmetric delay noise, keeping the lowest-RTT exchanges brings the
// spline closer to the truth.
func TestBestRTT(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	g := func(x int64) int64 { return x + 3_000_000 + x/100_000 } // +10 ppm
	var in Input
	in.Meta.Proc = 2
	for i := range 5 {
		s := format.Session{Index: uint32(i)}
		for j := range 50 {
			l1 := int64(i)*1e9 + int64(j)*20000
			d1, d2 := 2000+int64(rng.ExpFloat64()*3000), 2000+int64(rng.ExpFloat64()*3000)
			s.Samples = append(s.Samples, estimate.Sample{LocSend: l1, SrcRecv: g(l1 + d1), SrcSend: g(l1 + d1), LocRecv: l1 + d1 + d2})
		}
		in.Sessions = append(in.Sessions, s)
	}
	worst := func(best float64) int64 {
		ms, cs, err := BuildConfig([]Input{in}, Config{Method: Spline, BestRTT: best})
		if err != nil {
			t.Fatal(err)
		}
		if cs[0].Samples != countSamples(in.Sessions) && best == 0 {
			t.Fatalf("all exchanges: %d counted", cs[0].Samples)
		}
		var w int64
		for x := int64(0); x <= 4e9; x += 1e7 {
			w = max(w, abs(ms[0].Global(x)-g(x)))
		}
		return w
	}
	all, best := worst(0), worst(0.25)
	t.Logf("worst error: %d ns with every exchange, %d ns with the best 25%%", all, best)
	if best >= all {
		t.Fatalf("best-RTT filtering did not help: %d >= %d ns", best, all)
	}
	if _, _, err := BuildConfig([]Input{in}, Config{BestRTT: 1.5}); err == nil {
		t.Fatal("BestRTT 1.5 accepted")
	}
}

// TestSessionReference: a process without sessions of its own that others
// synced against (the C/MPI tracer's rank 0, flagged neither reference nor
// anything else, on the same host id as the others) is the timescale of the
// session-based methods and borrows no one's sessions; with daemon mappings
// it follows them under auto and daemon; daemon without mappings wraps
// ErrNoSyncData.
func TestSessionReference(t *testing.T) {
	const sec = int64(1e9)
	line := func(x int64) int64 { return 5_000_000 + x + x/50_000 }
	rng := rand.New(rand.NewPCG(2, 2))
	other := Input{Meta: format.Meta{Proc: 1, Host: 7, Flags: format.FlagSyncedHost, Name: "rank 1"}}
	for i, x := range []int64{0, 2 * sec, 4 * sec} {
		s := session(rng, uint32(i), x, 20, 0, line)
		s.Ref = 0
		other.Sessions = append(other.Sessions, s)
	}
	maps := []format.DaemonMapping{{From: 0, Mapping: estimate.Mapping{X0: 0, Y0: 42, Valid: true}}}
	tests := []struct {
		name    string
		method  Method
		maps    bool
		want0   Method
		want1   Method
		wantErr bool
	}{
		{"auto no daemon", Auto, false, None, Spline, false},
		{"linear", Linear, false, None, Linear, false},
		{"spline", Spline, false, None, Spline, false},
		{"offset", Offset, false, None, Offset, false},
		{"auto with mappings", Auto, true, Daemon, Spline, false},
		{"daemon without mappings", Daemon, false, "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rank0 := Input{Meta: format.Meta{Proc: 0, Host: 7, Flags: format.FlagSyncedHost, Name: "rank 0"}}
			if tc.maps {
				rank0.Mappings = maps
			}
			ms, cs, err := Build([]Input{rank0, other}, tc.method)
			if tc.wantErr {
				if !errors.Is(err, ErrNoSyncData) {
					t.Fatalf("err %v, want one wrapping ErrNoSyncData", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cs[0].Method != tc.want0 || cs[1].Method != tc.want1 {
				t.Fatalf("methods %s (%s), %s (%s); want %s, %s", cs[0].Method, cs[0].Reason, cs[1].Method, cs[1].Reason, tc.want0, tc.want1)
			}
			if cs[0].SharedOf != -1 {
				t.Errorf("rank 0 borrowed the sessions of process %d", cs[0].SharedOf)
			}
			if tc.want0 == None {
				if g := ms[0].Global(123); g != 123 {
					t.Errorf("rank 0: Global(123) = %d, want the identity", g)
				}
				if !strings.Contains(cs[0].Reason, "reference of the sync sessions of 1 processes") {
					t.Errorf("rank 0's reason %q", cs[0].Reason)
				}
			}
		})
	}
}

// exchange is one ping-pong as libgclockmpi's sync session records it: the
// reference sends (SrcSend), the process receives at local time l and
// replies at once, the reference receives (SrcRecv); fwd and back are the
// one-way delays in local ns. A reference descheduled between stamping and
// sending stretches fwd alone, and the midpoint is off by (fwd - back)/2.
func exchange(g func(int64) int64, l, fwd, back int64) estimate.Sample {
	return estimate.Sample{SrcSend: g(l - fwd), LocRecv: l, LocSend: l, SrcRecv: g(l + back)}
}

// TestSessionBoundExtrapolated is TestTraceSyncNoDaemon's failure under
// load (mpi/sync_test.go), without MPI: the start session of the last rank
// served ran 750 ms after its MPI_Init enter (the ranks before it were
// served first), the sessions were 45-70 ms apart, and exchanges stretched
// one way by a descheduled process tilted the fitted rate. Between the
// sessions the corrections stay within half the longest round trip; at the
// enter they extrapolated 3-15 times beyond it, which no bound said. Every
// session-based correction reports a bound (SessionMapper) that holds
// at every local time, inside the sessions and outside, and exchanges that
// fit no single rate leave it without one.
func TestSessionBoundExtrapolated(t *testing.T) {
	const ms = int64(1e6)
	line := func(x int64) int64 { return 5_000_000_007 + x + x/33_333 } // +5 s, +30 ppm
	// +30 ppm, then +330 ppm after 850 ms: a rate that changed.
	bent := func(x int64) int64 {
		if x < 850*ms {
			return line(x)
		}
		return line(x) + (x-850*ms)*3/10_000
	}
	// One session at local time x of two exchanges 50 us apart, the
	// descheduled one first: its midpoint is off by skew ns, the other's
	// delays are symmetric (1 us each way).
	sess := func(g func(int64) int64, idx uint32, x, skew int64) format.Session {
		fwd, back := int64(1000), int64(1000)
		if skew > 0 {
			fwd += 2 * skew
		} else {
			back -= 2 * skew
		}
		return format.Session{Index: idx, Kind: format.SessionDemand, Samples: []estimate.Sample{
			exchange(g, x, fwd, back), exchange(g, x+50_000, 1000, 1000)}}
	}
	// The sessions of the failing run (proc 3): start, two on demand, end.
	at := []int64{750 * ms, 820 * ms, 880 * ms, 930 * ms}
	skews := []int64{-1800, 0, 1700, 0}
	tests := []struct {
		name     string
		g        func(int64) int64
		method   Method
		sessions int
		bounded  bool
		past     bool // the error at local 0 (the MPI_Init enter) exceeds half the longest round trip
	}{
		{"linear", line, Linear, 4, true, true},
		{"spline", line, Spline, 4, true, true},
		{"auto", line, Auto, 4, true, true},
		{"linear two sessions", line, Linear, 2, true, true},
		{"offset", line, Offset, 1, true, true},
		{"rate changed: no bound", bent, Spline, 4, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Meta: format.Meta{Proc: 3, Name: "rank 3"}}
			var claim int64 // the old claim: half the longest round trip
			for i := range tc.sessions {
				s := sess(tc.g, uint32(i), at[i], skews[i])
				for _, x := range s.Samples {
					claim = max(claim, (x.RTT()+1)/2)
				}
				in.Sessions = append(in.Sessions, s)
			}
			mps, cs, err := Build([]Input{in}, tc.method)
			if err != nil {
				t.Fatal(err)
			}
			b, isBounder := mps[0].(Bounder)
			if !isBounder {
				t.Fatalf("%s correction (%T) reports no bound", cs[0].Method, mps[0])
			}
			if cs[0].Bounded != tc.bounded {
				t.Fatalf("Choice.Bounded %v (no bound: %q), want %v", cs[0].Bounded, cs[0].NoBound, tc.bounded)
			}
			if e := abs(mps[0].Global(0) - tc.g(0)); tc.past != (e > claim) {
				t.Errorf("at the enter, 750 ms before the first session: error %d ns, half the longest round trip %d ns: want beyond it %v", e, claim, tc.past)
			}
			if !tc.bounded {
				if _, ok := b.Bound(0); ok || !strings.Contains(cs[0].NoBound, "no single rate") {
					t.Errorf("bound reported (%v) for exchanges that fit no single rate; NoBound %q", ok, cs[0].NoBound)
				}
				return
			}
			var widest int64
			for _, x := range []int64{0, 300 * ms, 749 * ms, at[0], 780 * ms, at[1], 850 * ms, at[2], 900 * ms, at[3], at[3] + 5*ms, 2000 * ms} {
				w, ok := b.Bound(x)
				if !ok {
					t.Fatalf("no bound at local %d", x)
				}
				if e := abs(mps[0].Global(x) - tc.g(x)); e > w {
					t.Errorf("local %d ms: corrected %d ns from the truth, beyond the bound of %d ns", x/ms, e, w)
				}
				widest = max(widest, w)
			}
			// Inside a session the bound is the exchanges' (about the
			// longest round trip at most), not the extrapolation's.
			if w, _ := b.Bound(at[0]); w > 2*claim {
				t.Errorf("bound %d ns at a session, want <= %d (the longest round trip)", w, 2*claim)
			}
			t.Logf("%s: half the longest round trip %d ns; error at the enter %d ns, bound there %d ns; widest %d ns", tc.name, claim, abs(mps[0].Global(0)-tc.g(0)), must(b.Bound(0)), widest)
		})
	}
}

func must(w int64, ok bool) int64 {
	if !ok {
		return -1
	}
	return w
}
