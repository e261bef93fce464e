package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/measure"
	"go.yaml.in/yaml/v3"
)

// TestLiaoDaemonConfig: both configurations are valid daemon configs as
// the lab writes them; the adaptive one may move its period between 1 s
// and 8 s, the non-adaptive one keeps 8 s; everything else is the lab's.
func TestLiaoDaemonConfig(t *testing.T) {
	lab := LabDaemonConfig()
	for _, tc := range []struct {
		adaptive           bool
		initial, min, maxP time.Duration
	}{
		{true, time.Second, time.Second, 8 * time.Second},
		{false, 8 * time.Second, 8 * time.Second, 8 * time.Second},
	} {
		c := liaoDaemonConfig(tc.adaptive)
		s := c.Sync
		if s.Adaptive != tc.adaptive || time.Duration(s.InitialGlobalPeriod) != tc.initial ||
			time.Duration(s.MinGlobalPeriod) != tc.min || time.Duration(s.MaxGlobalPeriod) != tc.maxP {
			t.Errorf("adaptive %v: adaptive %v, periods %v / %v..%v; want %v..%v from %v", tc.adaptive, s.Adaptive,
				s.InitialGlobalPeriod, s.MinGlobalPeriod, s.MaxGlobalPeriod, tc.min, tc.maxP, tc.initial)
		}
		if s.Estimator != lab.Sync.Estimator || s.PingsPerRound != lab.Sync.PingsPerRound || !c.Auth.Insecure {
			t.Errorf("adaptive %v: not the lab's configuration otherwise: %+v", tc.adaptive, s)
		}
		// As RunGclock checks each host's configuration.
		c.Node.ID = 2
		c.Peers = []daemon.Peer{{ID: 1, Address: "10.9.0.1:3190"}, {ID: 2, Address: "10.9.0.2:3190"}}
		c.Reference.Order = []uint32{1}
		b, err := yaml.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := daemon.Parse(b); err != nil {
			t.Errorf("adaptive %v: %v", tc.adaptive, err)
		}
	}
	if math.Abs(liaoDriftPPM-3.814697265625) > 1e-12 {
		t.Errorf("liaoDriftPPM %v, want 1/2^18 = 3.814697265625 ppm", liaoDriftPPM)
	}
}

// latencyStamps makes the stamps of n messages each way of each size:
// true latency 100 us + size ns, host 1's global time off by errNs.
func latencyStamps(sizes []int, n int, errNs int64) []measure.Stamp {
	var ss []measure.Stamp
	at := func(raw, off int64) gtime.Time {
		return gtime.Time{Est: raw + off, Earliest: raw + off - 5000, Latest: raw + off + 5000, Status: gtime.StatusSynced}
	}
	e := 0
	for k := range n {
		for _, sz := range sizes {
			for from := range 2 {
				tx := int64(1e9 + e*int(time.Millisecond))
				rx := tx + 100_000 + int64(sz)
				off := []int64{0, errNs}
				ss = append(ss,
					measure.Stamp{Exec: e, Mode: measure.ModeLatency, Rank: from, Event: measure.EventTx, Peer: 1 - from, Size: sz, Raw: tx, Local: tx, Global: at(tx, off[from]), Retro: at(tx, off[from])},
					measure.Stamp{Exec: e, Mode: measure.ModeLatency, Rank: 1 - from, Event: measure.EventRx, Peer: from, Size: sz, Raw: rx, Local: rx, Global: at(rx, off[1-from]), Retro: at(rx, off[1-from])})
				e++
			}
		}
		_ = k
	}
	return ss
}

// TestLiaoFigReport: the tables and the figure of four curves whose host
// 1 is off by known amounts: each curve's error 0->1 is that amount, 1->0
// its opposite, the truth inside the bounds (+-5 us) when the error is
// smaller than 10 us.
func TestLiaoFigReport(t *testing.T) {
	f := fourLiaoCurves(t)
	var b bytes.Buffer
	if err := f.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| idle, non-adaptive |", "| loaded, adaptive |",
		"| 200 ns / 200 ns / 200 ns | +200 ns / -200 ns | 100.00% of 30 |",
		"| 20.00 us / 20.00 us / 20.00 us | +20.00 us / -20.00 us | 0.00% of 30 |",
		"| idle, adaptive | 1024 B | 5 | 100.72 us / 101.02 us | -300 ns / 300 ns | +300 ns / 300 ns |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if err := f.Plot(filepath.Join(t.TempDir(), "fig.svg")); err != nil {
		t.Fatal(err)
	}
}

// fourLiaoCurves is a figure of the four settings analysed from stamps
// whose host 1 is off by 200 ns, -300 ns, 2 us and 20 us.
func fourLiaoCurves(t *testing.T) LiaoFig {
	t.Helper()
	sizes := []int{64, 1024, 65536}
	f := LiaoFig{Spec: DefaultLiaoFigSpec(DefaultMeasureSpec())}
	errs := []int64{200, -300, 2000, 20000}
	for i, st := range liaoSettings() {
		res, err := measure.Analyze(latencyStamps(sizes, 5, errs[i]), func(raw int64) int64 { return raw })
		if err != nil {
			t.Fatal(err)
		}
		f.Curves = append(f.Curves, LiaoCurve{Setting: st, Report: MeasureReport{Spec: f.Spec.Base, Result: res}})
	}
	return f
}

// TestLiaoFigJSON: the figure encodes as JSON (gclock lab measure
// liao-fig2 -json, after the whole measurement), a per-host Tweak set
// or not, and the curves come back.
func TestLiaoFigJSON(t *testing.T) {
	f := fourLiaoCurves(t)
	f.Spec.Base.Gclock.Tweak = func(int, *daemon.Config) {}
	for i := range f.Curves {
		f.Curves[i].Report.Spec.Gclock.Tweak = f.Spec.Base.Gclock.Tweak
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Curves []struct {
			Setting LiaoSetting
		}
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Curves) != 4 || back.Curves[3].Setting != liaoSettings()[3] {
		t.Errorf("curves back from JSON: %+v, want the four settings", back.Curves)
	}
}

// TestLiaoFigKeepAndLoad: a curve kept (its stamps, the reference's
// configuration, its settings) is read back by LoadLiaoFig with the same
// analysis against the truth rebuilt from the kept configuration.
func TestLiaoFigKeepAndLoad(t *testing.T) {
	run := t.TempDir()
	mdir, gdir := filepath.Join(run, "measure"), filepath.Join(run, "gclock")
	for _, d := range []string{mdir, gdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The reference on an emulated clock: the truth is its ideal reading.
	ref := LabDaemonConfig()
	ref.Node.ID = 1
	ref.Peers = []daemon.Peer{{ID: 1, Address: "10.9.0.1:3190"}, {ID: 2, Address: "10.9.0.2:3190"}}
	ref.Reference.Order = []uint32{1}
	ref.Clock = daemon.ClockConfig{Source: daemon.ClockEmulated, Emulated: daemon.EmulatedClockConfig{Offset: daemon.Duration(3 * time.Millisecond), DriftPPM: 10, OriginRaw: 1}}
	b, err := yaml.Marshal(&ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gdir, "h0.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	truth, err := referenceTruth(filepath.Join(gdir, "h0.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ss := latencyStamps([]int{64, 4096}, 4, 500)
	for r := range 2 {
		var mine []measure.Stamp
		for _, s := range ss {
			if s.Rank == r {
				mine = append(mine, s)
			}
		}
		var buf bytes.Buffer
		if err := measure.WriteStamps(&buf, mine); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mdir, fmt.Sprintf("stamps-r%d.csv", r)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := measure.Analyze(ss, truth)
	if err != nil {
		t.Fatal(err)
	}
	spec := DefaultLiaoFigSpec(DefaultMeasureSpec())
	spec.Fig3 = true
	st := LiaoSetting{Loaded: true, Adaptive: false}
	c := LiaoCurve{Setting: st, Start: time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC), LoadAvg: [2]float64{1.5, 2.5},
		Report: MeasureReport{Spec: spec.Base, Result: res, Run: MeasureResult{Dir: mdir}}}
	c.Report.Run.Gclock.Summary.ErrorP50Ns = 123
	f := LiaoFig{Spec: spec, Curves: []LiaoCurve{c}}
	keep := t.TempDir()
	if err := f.keep(keep, c); err != nil {
		t.Fatal(err)
	}
	got, err := LoadLiaoFig(keep)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Curves) != 1 || got.Curves[0].Setting != st || !got.Spec.Fig3 || got.Spec.StepAfter != spec.StepAfter ||
		got.Curves[0].Report.Run.Gclock.Summary.ErrorP50Ns != 123 || got.Curves[0].LoadAvg != c.LoadAvg {
		t.Fatalf("loaded %+v", got)
	}
	var want, have bytes.Buffer
	if err := f.WriteMarkdown(&want); err != nil {
		t.Fatal(err)
	}
	if err := got.WriteMarkdown(&have); err != nil {
		t.Fatal(err)
	}
	if want.String() != have.String() {
		t.Errorf("the figure read back differs:\n%s\nwant\n%s", have.String(), want.String())
	}
	if _, err := LoadLiaoFig(t.TempDir()); err == nil {
		t.Error("an empty directory was read as a figure")
	}
}
