package measure

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// TestFiguresReadable renders every figure of the package and checks what
// a reviewer would look at first: at least three labelled ticks on every
// axis (Liao's figure 2 had one on its latency axis), every axis labelled,
// titles within the image (the histograms' were cut at its edges), no
// legend left on a panel's data (they are drawn beside it), and the true
// curves drawn. GCLOCK_FIGURES=dir keeps the images there to look at.
func TestFiguresReadable(t *testing.T) {
	dir := os.Getenv("GCLOCK_FIGURES")
	if dir == "" {
		dir = t.TempDir()
	}
	ops, err := Analyze(synthStamps(3, 4, 200, 400, 30_000, 600), identity)
	if err != nil {
		t.Fatal(err)
	}
	lc := DefaultConfig()
	lc.Op, lc.Count, lc.Period, lc.Lead, lc.Sizes, lc.Interleave = OpLatency, 3, 1e6, 20e6, []int{64, 1024, 16384, 65536}, true
	var curves []LatencyCurve
	for i, off := range []int64{300, -500} {
		lat, err := Analyze(runLoopback(t, lc, 2, true, []int64{0, off}, 1000), identity)
		if err != nil {
			t.Fatal(err)
		}
		curves = append(curves, LatencyCurve{Name: fmt.Sprintf("run %d", i), Result: lat, Period: lc.Period})
	}
	build := map[string]func() (*figure, error){
		"deviations.png": func() (*figure, error) { return deviationsFigure(ops, "") },
		"errors.png":     func() (*figure, error) { return errorsFigure(ops, "") },
		"latency.png":    func() (*figure, error) { return latencyFigure(curves[0].Result, "") },
		"liao-fig2.png": func() (*figure, error) {
			return latencyCurvesFigure(curves, 0, "Liao fig. 2 on loopback: latencies measured on host 1 (0->1) in global time", "")
		},
	}
	wantTruths := map[string]int{"latency.png": 2, "liao-fig2.png": 2}
	for name, b := range build {
		t.Run(name, func(t *testing.T) {
			fig, err := b()
			if err != nil {
				t.Fatal(err)
			}
			if err := fig.render(filepath.Join(dir, name), "png"); err != nil {
				t.Fatal(err)
			}
			if fig.truths < wantTruths[name] {
				t.Errorf("%d true curves drawn, want %d", fig.truths, wantTruths[name])
			}
			for i, p := range fig.panels {
				for _, ax := range []struct {
					name string
					a    *plot.Axis
				}{{"x", &p.X}, {"y", &p.Y}} {
					n := 0
					for _, tk := range ax.a.Tick.Marker.Ticks(ax.a.Min, ax.a.Max) {
						if tk.Label != "" {
							n++
						}
					}
					if n < 3 {
						t.Errorf("panel %d, %s axis [%g, %g]: %d labelled ticks, want >= 3", i, ax.name, ax.a.Min, ax.a.Max, n)
					}
					if ax.a.Label.Text == "" {
						t.Errorf("panel %d: %s axis without a label", i, ax.name)
					}
				}
				for _, line := range strings.Split(p.Title.Text, "\n") {
					if w := p.Title.TextStyle.Width(line); w > fig.w {
						t.Errorf("panel %d: title line %q is %.0f pt wide, the image %.0f pt", i, line, w.Points(), fig.w.Points())
					}
				}
				if w := legendWidth(&p.Legend); w > 0 {
					t.Errorf("panel %d: a legend %.0f pt wide drawn on the data", i, w.Points())
				}
			}
		})
	}
}
