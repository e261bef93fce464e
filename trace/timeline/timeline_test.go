package timeline

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/chromecheck"
	"github.com/gclock/gclock/internal/perfettocheck"
	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/tracegen"
)

func demo(t *testing.T, cfg tracegen.Config) ([][]byte, tracegen.Truth) {
	t.Helper()
	bufs := make([]*bytes.Buffer, cfg.Procs)
	truth, err := tracegen.Generate(cfg, func(p int) (io.Writer, error) {
		bufs[p] = &bytes.Buffer{}
		return bufs[p], nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(bufs))
	for i, b := range bufs {
		out[i] = b.Bytes()
	}
	return out, truth
}

func inputs(files [][]byte) []Input {
	in := make([]Input, len(files))
	for i, f := range files {
		in[i] = Input{Name: "proc" + string(rune('0'+i)), Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f)), nil }}
	}
	return in
}

func smallConfig() tracegen.Config {
	cfg := tracegen.DefaultConfig()
	cfg.Procs, cfg.Duration = 5, 500*time.Millisecond
	return cfg
}

// TestProofSmall is the proof on a small run: for each mapping the
// error of every corrected timestamp against the truth stays within what
// the run's noise allows, and no message is received before it was sent
// after correction (and after CLC).
func TestProofSmall(t *testing.T) {
	cfg := smallConfig()
	files, truth := demo(t, cfg)
	tests := []struct {
		method Method
		p99    int64 // ns
	}{
		// Midpoint noise: one-way delays 2 us + Exp(3 us) with 5% tails of
		// Exp(50 us); 50 exchanges per session.
		{correct.Linear, 2000},
		{correct.Spline, 3000},
		// The synthetic daemon's offsets are off by at most 100 ns, its
		// skew by 0.05 ppm over 100 ms periods (5 ns), plus 20 ns jitter.
		{correct.Daemon, 130},
	}
	for _, tc := range tests {
		t.Run(string(tc.method), func(t *testing.T) {
			rep, err := Run(inputs(files), Options{Method: tc.method, Truth: truth, CLC: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range rep.Choices {
				if c.Proc != 0 && c.Method != tc.method {
					t.Errorf("process %d got %s", c.Proc, c.Method)
				}
			}
			e := rep.Error
			if e.N != rep.Events || e.N == 0 {
				t.Fatalf("%d errors for %d events", e.N, rep.Events)
			}
			if e.P99 > tc.p99 {
				t.Errorf("p99 error %d ns, want <= %d (p50 %d, max %d)", e.P99, tc.p99, e.P50, e.Max)
			}
			// The session-based corrections bound every event they correct,
			// and hold their bounds (tracegen's clocks keep one rate). The
			// synthetic daemon's mappings claim W0 = DaemonErrNs without its
			// skew error or the read jitter: not checked here.
			t.Logf("%d of %d events bounded (widest %d ns), %d beyond (worst by %d ns, process %d)", e.Bounded, e.N, e.MaxBound, e.Beyond, e.Excess, e.ExcessProc)
			if tc.method != correct.Daemon && (e.Beyond != 0 || e.Bounded == 0) {
				t.Errorf("%d of %d events bounded, %d beyond their correction's bound, the worst by %d ns (process %d)", e.Bounded, e.N, e.Beyond, e.Excess, e.ExcessProc)
			}
			tot := causality.Totals(rep.Pairs)
			if tot.Raw == 0 {
				t.Error("raw timestamps show no violation: the test proves nothing")
			}
			if tot.Corrected != 0 {
				t.Errorf("%d violations after correction", tot.Corrected)
			}
			if a := causality.Totals(rep.AfterCLC); a.Corrected != 0 || a.Messages != tot.Messages {
				t.Errorf("after CLC: %+v", a)
			}
			if rep.Unmatched != 0 {
				t.Errorf("%d unmatched message ends", rep.Unmatched)
			}
		})
	}
}

// The uncorrected merge is wrong by the clock offsets (ms): the evaluator
// must see it, or it measures nothing.
func TestNoneIsFarOff(t *testing.T) {
	files, truth := demo(t, smallConfig())
	rep, err := Run(inputs(files), Options{Method: correct.None, Truth: truth})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Error.P50 < 100_000 {
		t.Fatalf("uncorrected p50 error %d ns: the clocks should be ms apart", rep.Error.P50)
	}
	if causality.Totals(rep.Pairs).Corrected == 0 {
		t.Fatal("uncorrected merge shows no violation")
	}
}

// CLC repairs what a bad correction leaves: forced offset-only correction
// with large drift leaves violations, CLC removes them and says how far it
// moved each process.
func TestCLCRepairs(t *testing.T) {
	cfg := smallConfig()
	cfg.DriftPPM, cfg.WanderPPM = 200, 0
	files, truth := demo(t, cfg)
	rep, err := Run(inputs(files), Options{Method: correct.Offset, Truth: truth, CLC: true, MinLatency: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if causality.Totals(rep.Pairs).Corrected == 0 {
		t.Fatal("offset-only correction left no violation: no test")
	}
	if a := causality.Totals(rep.AfterCLC); a.Corrected != 0 {
		t.Fatalf("%d violations after CLC", a.Corrected)
	}
	var moved int64
	for _, m := range rep.Moved {
		moved += m.Moved
	}
	if moved == 0 || rep.ErrorCLC == nil {
		t.Fatalf("CLC report empty: %+v", rep.Moved)
	}
}

func TestOutputs(t *testing.T) {
	files, _ := demo(t, smallConfig())
	var js, bin, pft bytes.Buffer
	rep, err := Run(inputs(files), Options{Chrome: &js, Binary: &bin, Perfetto: &pft})
	if err != nil {
		t.Fatal(err)
	}
	cr, err := chromecheck.Validate(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if cr.Processes != 5 || int64(cr.Flows) != causality.Totals(rep.Pairs).Messages || rep.UnboundFlows != 0 {
		t.Errorf("chrome: %d processes, %d flows, %d unbound; %d messages", cr.Processes, cr.Flows, rep.UnboundFlows, causality.Totals(rep.Pairs).Messages)
	}
	if cr.Metadata["generator"] != "gclock merge" || cr.Metadata["process 1"] == nil {
		t.Errorf("chrome metadata %v", cr.Metadata)
	}
	pt, err := perfettocheck.Decode(pft.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := pt.Events[0].Arg("process 1"); a.String == "" {
		t.Errorf("perfetto run metadata %+v", pt.Events[0].Annotations)
	}
	var flows, ends int64
	for _, e := range pt.Events {
		flows += int64(len(e.Flows))
		ends += int64(len(e.Terminating))
	}
	if int64(len(pt.Events)) != rep.Events+1 || ends != causality.Totals(rep.Pairs).Messages || flows < ends {
		t.Errorf("perfetto: %d events for %d, %d flows started, %d ended; %d messages", len(pt.Events), rep.Events, flows, ends, causality.Totals(rep.Pairs).Messages)
	}
	if pft.Len()*3 > js.Len() {
		t.Errorf("perfetto trace of %d bytes, JSON %d: want less than a third", pft.Len(), js.Len())
	}
	s, err := format.Summarize(bytes.NewReader(bin.Bytes()), "merged", false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Merged != rep.Events || s.Meta.Flags&format.FlagMerged == 0 || len(s.Names) == 0 {
		t.Errorf("binary: %d records for %d events, meta %+v", s.Merged, rep.Events, s.Meta)
	}
}

func TestCorruptInput(t *testing.T) {
	files, _ := demo(t, smallConfig())
	bad := bytes.Clone(files[2])
	off := len(bad) / 2
	bad[off] ^= 0xff
	files[2] = bad
	_, err := Run(inputs(files), Options{})
	var ce *format.CorruptError
	if !errors.As(err, &ce) || ce.File != "proc2" {
		t.Fatalf("corrupt file: %v", err)
	}
	rep, err := Run(inputs(files), Options{KeepGoing: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files[2].Problems) == 0 || len(rep.Merge[2].Problems) == 0 {
		t.Fatal("keep-going did not report the corrupt chunk")
	}
	// Truncated: the merge goes on with the complete chunks.
	files[2] = files[2][:off]
	rep, err = Run(inputs(files), Options{KeepGoing: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Merge[2].Events == 0 || !errors.Is(rep.Merge[2].Problems[len(rep.Merge[2].Problems)-1], format.ErrTruncated) {
		t.Fatalf("truncated: %+v", rep.Merge[2])
	}
}

func TestDuplicateProc(t *testing.T) {
	files, _ := demo(t, smallConfig())
	if _, err := Run(inputs([][]byte{files[1], files[1]}), Options{}); err == nil {
		t.Fatal("two files of one process accepted")
	}
}

type Method = correct.Method

// TestCLCDefaultGammaKeepsTheTruth: with a minimum latency larger than the
// correction's error CLC has receives to move. With gamma 1 every move
// persists and drags each process away from the truth; the default gamma
// (0.99) lets the shift decay, so the error stays about the corrected
// one, and both leave no violation (docs/traces.md, demo3).
func TestCLCDefaultGammaKeepsTheTruth(t *testing.T) {
	cfg := smallConfig()
	cfg.LatencyMin, cfg.WanderPPM = 300*time.Nanosecond, 0.2
	files, truth := demo(t, cfg)
	p50 := map[float64]int64{}
	for _, g := range []float64{0, 1} {
		rep, err := Run(inputs(files), Options{Method: correct.Linear, Truth: truth, CLC: true, MinLatency: 300, Gamma: g})
		if err != nil {
			t.Fatal(err)
		}
		if causality.Totals(rep.Pairs).Corrected == 0 {
			t.Fatal("no violation after correction: CLC has nothing to do and the test cannot tell the gammas apart")
		}
		if after := causality.Totals(rep.AfterCLC).Corrected; after != 0 {
			t.Errorf("gamma %g: %d violations after CLC", g, after)
		}
		p50[g] = rep.ErrorCLC.P50
		if g == 0 && rep.ErrorCLC.P50 > rep.Error.P50+rep.Error.P50/10+20 {
			t.Errorf("default gamma: median error %d ns after CLC, %d ns before: CLC moved the trace away from the truth", rep.ErrorCLC.P50, rep.Error.P50)
		}
	}
	if p50[1] < 2*p50[0] {
		t.Errorf("gamma 1: median error %d ns after CLC, default %d ns; want gamma 1 clearly worse (the reason for the default)", p50[1], p50[0])
	}
}

// fixedBound bounds every event of a process by w ns (none if w < 0).
type fixedBound int64

func (f fixedBound) Bound(int64) (int64, bool) { return int64(f), f >= 0 }

// TestEvaluatorBounds: the evaluator counts the events with a bound and
// those farther from the truth than it, with the worst excess.
func TestEvaluatorBounds(t *testing.T) {
	tests := []struct {
		name                            string
		bound                           fixedBound
		errs                            []int64
		bounded, beyond, excess, widest int64
	}{
		{"within", 5, []int64{0, 5, -5, 3}, 4, 0, 0, 5},
		{"beyond both ways", 5, []int64{6, -9, 2}, 3, 2, 4, 5},
		{"no bound", -1, []int64{100, -100}, 0, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			truth := map[uint32][]int64{1: nil}
			var evs []format.Merged
			for i, d := range tc.errs {
				tr := int64(1000 * (i + 1))
				truth[1] = append(truth[1], tr)
				evs = append(evs, format.Merged{Event: format.Event{Time: tr + d}, Raw: tr - 7, Proc: 1})
			}
			ev := newEvaluator(truth, map[uint32]correct.Bounder{1: tc.bound})
			ev.keep = true
			if err := ev.add(evs); err != nil {
				t.Fatal(err)
			}
			s := ev.stats()
			if s.Bounded != tc.bounded || s.Beyond != tc.beyond || s.Excess != tc.excess || s.MaxBound != tc.widest {
				t.Errorf("bounded %d, beyond %d, excess %d, widest %d; want %d, %d, %d, %d", s.Bounded, s.Beyond, s.Excess, s.MaxBound, tc.bounded, tc.beyond, tc.excess, tc.widest)
			}
			for i, e := range ev.samples {
				if e.Raw != evs[i].Raw || e.Bound != max(int64(tc.bound), -1) {
					t.Errorf("sample %d: raw %d, bound %d; want %d, %d", i, e.Raw, e.Bound, evs[i].Raw, tc.bound)
				}
			}
		})
	}
}
