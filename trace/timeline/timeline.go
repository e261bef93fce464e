package timeline

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/gclock/gclock/internal/quantile"
	"github.com/gclock/gclock/trace/causality"
	"github.com/gclock/gclock/trace/chrome"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/merge"
	"github.com/gclock/gclock/trace/otf2"
	"github.com/gclock/gclock/trace/perfetto"
)

// Input is one trace file, opened once per pass.
type Input struct {
	Name string
	Open func() (io.ReadCloser, error)
}

// Files returns Inputs for file paths.
func Files(paths []string) []Input {
	in := make([]Input, len(paths))
	for i, p := range paths {
		in[i] = Input{Name: p, Open: func() (io.ReadCloser, error) { return os.Open(p) }}
	}
	return in
}

// Options tune Run.
type Options struct {
	Method    correct.Method // correct.Auto if empty
	BestRTT   float64        // correct.Config.BestRTT: keep the lowest-RTT fraction of each session (0: all)
	KeepGoing bool           // skip corrupt chunks, stop at truncations, and say so
	// CLC applies the controlled logical clock after correction, with
	// MinLatency (ns) and Gamma (0: causality.DefaultGamma).
	CLC        bool
	MinLatency int64
	Gamma      float64
	Amortize   float64   // CLC backward amortization window, in jumps (0: off)
	Chrome     io.Writer // Chrome trace-event JSON output, or nil
	Binary     io.Writer // merged binary trace output, or nil
	Perfetto   io.Writer // Perfetto protobuf trace output, or nil
	// OTF2 is the directory of an OTF2 archive to write, or "".
	OTF2 string
	// Truth, if set, holds per process the true global time of every event
	// in file order; Run then reports the error of the corrected timestamps
	// and checks it against the correction's bound where it has one (the
	// inputs must be intact: skipped chunks would misalign the truth).
	Truth map[uint32][]int64
	// KeepErrors keeps every event's error in Report.ErrorSamples (for plots).
	KeepErrors bool
	Log        *slog.Logger
}

// ErrorSample is the error of one corrected event.
type ErrorSample struct {
	Proc  uint32
	Raw   int64 // the local timestamp as recorded, ns
	Truth int64 // true global time, ns
	Err   int64 // corrected - truth, ns
	Bound int64 // the correction's bound on |Err| there (correct.Bounder), -1 if none
}

// ErrStats summarise |corrected - truth| over all events, ns.
type ErrStats struct {
	N             int64
	P50, P99, Max int64
	Mean          float64 // signed mean
	WorstProc     uint32
	// Bounded events had a bound from their correction (correct.Bounder);
	// Beyond of them were farther from the truth than it said, the worst
	// by Excess ns (|error| - bound) on process ExcessProc. MaxBound is the
	// widest bound.
	Bounded, Beyond  int64
	Excess, MaxBound int64
	ExcessProc       uint32
}

// FileInfo describes one input.
type FileInfo struct {
	Name     string
	Meta     format.Meta
	Events   int64
	Sessions int
	Mappings int
	Problems []error
}

// Report is what Run did.
type Report struct {
	Files        []FileInfo
	Choices      []correct.Choice
	Merge        []merge.Stats
	Pairs        []causality.Counts // raw and corrected violations per pair
	Unmatched    int64              // message ends whose other end is missing
	AfterCLC     []causality.Counts // violations after CLC (CLC only)
	Moved        []causality.Moved  // CLC only
	Error        *ErrStats          // corrected vs truth (Truth only)
	ErrorCLC     *ErrStats          // after CLC vs truth (Truth and CLC only)
	ErrorSamples []ErrorSample      // every event's error (KeepErrors only)
	Events       int64
	MergeTime    time.Duration
	UnboundFlows int64       // receives drawn without an arrow (send not seen first)
	OTF2         *otf2.Stats // what the OTF2 export wrote (OTF2 only)
}

// Run corrects, merges and writes the inputs.
func Run(in []Input, opt Options) (*Report, error) {
	if opt.Method == "" {
		opt.Method = correct.Auto
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if len(in) == 0 {
		return nil, errors.New("no input traces")
	}
	rep := &Report{}
	// Pass 1.
	var inputs []correct.Input
	var names []format.Name
	procOf := map[uint32]int{}
	for i, x := range in {
		rc, err := x.Open()
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", x.Name, err)
		}
		s, err := format.Summarize(rc, x.Name, opt.KeepGoing)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if j, dup := procOf[s.Meta.Proc]; dup {
			return nil, fmt.Errorf("%s and %s both record process %d", in[j].Name, x.Name, s.Meta.Proc)
		}
		procOf[s.Meta.Proc] = i
		for _, p := range s.Problems {
			opt.Log.Warn("skipping unreadable part of trace", "err", p)
		}
		inputs = append(inputs, correct.InputOf(s))
		names = append(names, s.Names...)
		rep.Files = append(rep.Files, FileInfo{Name: x.Name, Meta: s.Meta, Events: s.Events,
			Sessions: len(s.Sessions), Mappings: len(s.Mappings), Problems: s.Problems})
	}
	mappers, choices, err := correct.BuildConfig(inputs, correct.Config{Method: opt.Method, BestRTT: opt.BestRTT})
	if err != nil {
		return nil, err
	}
	rep.Choices = choices
	for _, c := range choices {
		opt.Log.Info("correction", "proc", c.Proc, "method", c.Method, "reason", c.Reason, "skew_ppm", c.SkewPPM, "bounded", c.Bounded, "no_bound", c.NoBound)
	}
	bounders := map[uint32]correct.Bounder{}
	for i, f := range rep.Files {
		if b, ok := mappers[i].(correct.Bounder); ok {
			bounders[f.Meta.Proc] = b
		}
	}
	// Pass 2.
	srcs := make([]merge.Source, len(in))
	for i, x := range in {
		rc, err := x.Open()
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", x.Name, err)
		}
		defer rc.Close()
		srcs[i] = merge.Source{Name: x.Name, R: rc, Proc: rep.Files[i].Meta.Proc, Map: mappers[i]}
	}
	start := time.Now()
	m, err := merge.New(srcs, merge.Options{KeepGoing: opt.KeepGoing})
	if err != nil {
		return nil, err
	}
	// Run metadata for the viewers: how each process was corrected.
	var meta [][2]string
	meta = append(meta, [2]string{"generator", "gclock merge"}, [2]string{"method", string(opt.Method)})
	if opt.CLC {
		g := opt.Gamma
		if g == 0 {
			g = causality.DefaultGamma
		}
		meta = append(meta, [2]string{"clc", fmt.Sprintf("min latency %d ns, gamma %g, amortize %g", opt.MinLatency, g, opt.Amortize)})
	}
	for i, c := range choices {
		meta = append(meta, [2]string{fmt.Sprintf("process %d", c.Proc), fmt.Sprintf("%s: %s (%s)", in[i].Name, c.Method, c.Reason)})
	}
	var cw *chrome.Writer
	if opt.Chrome != nil {
		var kv []chrome.KV
		for _, m := range meta {
			kv = append(kv, chrome.KV{Key: m[0], Value: m[1]})
		}
		cw = chrome.NewWriter(opt.Chrome, chrome.Options{Metadata: kv})
		cw.SetNames(names)
		for _, f := range rep.Files {
			name := f.Meta.Name
			if name == "" {
				name = fmt.Sprintf("process %d", f.Meta.Proc)
			}
			cw.SetProcess(f.Meta.Proc, name)
		}
	}
	var pw *perfetto.Writer
	if opt.Perfetto != nil {
		var kv []perfetto.KV
		for _, m := range meta {
			kv = append(kv, perfetto.KV{Key: m[0], Value: m[1]})
		}
		pw = perfetto.NewWriter(opt.Perfetto, perfetto.Options{Metadata: kv})
		pw.SetNames(names)
		for _, f := range rep.Files {
			name := f.Meta.Name
			if name == "" {
				name = fmt.Sprintf("process %d", f.Meta.Proc)
			}
			pw.SetProcess(f.Meta.Proc, name)
		}
	}
	var ow *otf2.Writer
	if opt.OTF2 != "" {
		var kv []otf2.KV
		for _, m := range meta {
			kv = append(kv, otf2.KV{Key: m[0], Value: m[1]})
		}
		bound := func(proc uint32, raw int64) (int64, bool) {
			if b := bounders[proc]; b != nil {
				return b.Bound(raw)
			}
			return 0, false
		}
		if ow, err = otf2.Create(opt.OTF2, otf2.Options{Metadata: kv, Bound: bound}); err != nil {
			return nil, err
		}
		defer ow.Abort() // a no-op after the Close below
		ow.SetNames(names)
		for _, f := range rep.Files {
			name := f.Meta.Name
			if name == "" {
				name = fmt.Sprintf("process %d", f.Meta.Proc)
			}
			if err := ow.SetProcess(f.Meta.Proc, name, f.Meta.Host); err != nil {
				return nil, err
			}
		}
	}
	var bw *format.Writer
	if opt.Binary != nil {
		bw = format.NewWriter(opt.Binary)
		if err := bw.WriteMeta(format.Meta{Flags: format.FlagMerged, Name: "merged", Clock: "global"}); err != nil {
			return nil, err
		}
		if len(names) > 0 {
			if err := bw.WriteNames(names); err != nil {
				return nil, err
			}
		}
	}
	check := causality.NewChecker(0)
	var ev *evaluator
	if opt.Truth != nil {
		for p := range procOf {
			if _, ok := opt.Truth[p]; !ok {
				return nil, fmt.Errorf("no truth for process %d (%s)", p, in[procOf[p]].Name)
			}
		}
		ev = newEvaluator(opt.Truth, bounders)
		ev.keep = opt.KeepErrors
	}
	var all []format.Merged
	buf := make([]format.Merged, 4096)
	for {
		n, rerr := m.Read(buf)
		b := buf[:n]
		rep.Events += int64(n)
		for i := range b {
			check.Observe(&b[i])
		}
		if ev != nil {
			if err := ev.add(b); err != nil {
				return nil, err
			}
		}
		if opt.CLC {
			all = append(all, b...)
		} else if err := emit(b, cw, pw, ow, bw); err != nil {
			return nil, err
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, rerr
		}
	}
	rep.MergeTime = time.Since(start)
	rep.Merge = m.Stats()
	rep.Pairs, rep.Unmatched, _ = check.Result()
	if ev != nil {
		rep.Error = ev.stats()
		rep.ErrorSamples = ev.samples
	}
	if opt.CLC {
		moved, err := causality.CLC(all, causality.CLCOptions{MinLatency: opt.MinLatency, Gamma: opt.Gamma, Amortize: opt.Amortize})
		if err != nil {
			return nil, err
		}
		rep.Moved = moved
		c2 := causality.NewChecker(opt.MinLatency)
		for i := range all {
			c2.Observe(&all[i])
		}
		rep.AfterCLC, _, _ = c2.Result()
		if opt.Truth != nil {
			// CLC re-sorted the stream: match events to truth by the raw
			// timestamps' order within each process, which CLC preserves.
			// CLC moves stamps on purpose: the corrections' bounds are not
			// its, so ErrorCLC counts none.
			ev2 := newEvaluator(opt.Truth, nil)
			if err := ev2.add(all); err != nil {
				return nil, err
			}
			rep.ErrorCLC = ev2.stats()
		}
		for i := 0; i < len(all); i += len(buf) {
			if err := emit(all[i:min(i+len(buf), len(all))], cw, pw, ow, bw); err != nil {
				return nil, err
			}
		}
	}
	if cw != nil {
		if err := cw.Close(); err != nil {
			return nil, err
		}
		rep.UnboundFlows = cw.Unbound
	}
	if pw != nil {
		if err := pw.Close(); err != nil {
			return nil, err
		}
		rep.UnboundFlows = pw.Unbound
	}
	if ow != nil {
		if err := ow.Close(); err != nil {
			return nil, err
		}
		st := ow.Stats()
		rep.OTF2 = &st
	}
	return rep, nil
}

func emit(b []format.Merged, cw *chrome.Writer, pw *perfetto.Writer, ow *otf2.Writer, bw *format.Writer) error {
	if ow != nil {
		for i := range b {
			if err := ow.Write(&b[i]); err != nil {
				return err
			}
		}
	}
	if cw != nil {
		for i := range b {
			if err := cw.Write(&b[i]); err != nil {
				return err
			}
		}
	}
	if pw != nil {
		for i := range b {
			if err := pw.Write(&b[i]); err != nil {
				return err
			}
		}
	}
	if bw != nil && len(b) > 0 {
		if err := bw.WriteMerged(b); err != nil {
			return fmt.Errorf("write merged trace: %w", err)
		}
	}
	return nil
}

// evaluator compares corrected times with the truth, and with the bounds
// of the corrections that have them.
type evaluator struct {
	truth   map[uint32][]int64
	bounds  map[uint32]correct.Bounder
	next    map[uint32]int
	abs     []int64
	sum     float64
	worst   int64
	wproc   uint32
	keep    bool
	samples []ErrorSample
	// bounded, beyond, excess, eproc, maxBound: ErrStats'.
	bounded, beyond, excess, maxBound int64
	eproc                             uint32
}

func newEvaluator(truth map[uint32][]int64, bounds map[uint32]correct.Bounder) *evaluator {
	return &evaluator{truth: truth, bounds: bounds, next: map[uint32]int{}}
}

func (e *evaluator) add(b []format.Merged) error {
	for i := range b {
		p := b[i].Proc
		tr := e.truth[p]
		k := e.next[p]
		if k >= len(tr) {
			return fmt.Errorf("truth: process %d has more events than its truth (%d)", p, len(tr))
		}
		e.next[p]++
		d := b[i].Time - tr[k]
		bound := int64(-1)
		if bd := e.bounds[p]; bd != nil {
			if w, ok := bd.Bound(b[i].Raw); ok {
				bound = w
			}
		}
		if e.keep {
			e.samples = append(e.samples, ErrorSample{Proc: p, Raw: b[i].Raw, Truth: tr[k], Err: d, Bound: bound})
		}
		e.sum += float64(d)
		if d < 0 {
			d = -d
		}
		if bound >= 0 {
			e.bounded++
			e.maxBound = max(e.maxBound, bound)
			if x := d - bound; x > 0 {
				e.beyond++
				if x > e.excess {
					e.excess, e.eproc = x, p
				}
			}
		}
		if d > e.worst {
			e.worst, e.wproc = d, b[i].Proc
		}
		e.abs = append(e.abs, d)
	}
	return nil
}

func (e *evaluator) stats() *ErrStats {
	s := &ErrStats{N: int64(len(e.abs)), Max: e.worst, WorstProc: e.wproc,
		Bounded: e.bounded, Beyond: e.beyond, Excess: e.excess, ExcessProc: e.eproc, MaxBound: e.maxBound}
	if len(e.abs) == 0 {
		return s
	}
	q := quantile.Of(e.abs, 0.50, 0.99)
	s.P50, s.P99 = q[0], q[1]
	s.Mean = e.sum / float64(len(e.abs))
	return s
}
