// Package plot draws trace figures: how far corrected timestamps are from
// the truth, per correction method (gclock trace demo -plots).
package plot

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	gonum "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/gclock/gclock/trace/timeline"
)

var methodColors = []color.Color{
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// CorrectionErrors draws, per correction method (names[i] for
// samples[i]), the distribution of |corrected - truth| over every event (a
// CDF, trace_error_cdf.png) and process proc's error over the run
// (trace_error_time.png) into dir, and returns the two files' paths.
func CorrectionErrors(dir string, names []string, samples [][]timeline.ErrorSample, proc uint32) ([]string, error) {
	if len(names) != len(samples) {
		return nil, fmt.Errorf("plot: %d names for %d methods", len(names), len(samples))
	}
	cdf := gonum.New()
	cdf.Title.Text = "trace correction: |corrected - truth| over every event"
	cdf.X.Label.Text = "|error| (ns, log scale)"
	cdf.Y.Label.Text = "fraction of events"
	cdf.X.Scale = gonum.LogScale{}
	cdf.X.Tick.Marker = gonum.LogTicks{Prec: -1}
	cdf.Legend.Top, cdf.Legend.Left = true, true
	ts := gonum.New()
	ts.Title.Text = fmt.Sprintf("error of process %d's corrected timestamps over the run", proc)
	ts.X.Label.Text = "true time since the first event (s)"
	ts.Y.Label.Text = "corrected - truth (ns)"
	ts.Legend.Top = true
	// Plot times relative to the earliest truth: no absolute ns in float64.
	var origin int64
	first := true
	for _, s := range samples {
		for _, e := range s {
			if first || e.Truth < origin {
				origin, first = e.Truth, false
			}
		}
	}
	for i, s := range samples {
		abs := make([]float64, 0, len(s))
		var pts plotter.XYs
		for _, e := range s {
			abs = append(abs, math.Max(1, math.Abs(float64(e.Err))))
			if e.Proc == proc {
				pts = append(pts, plotter.XY{X: float64(e.Truth-origin) / 1e9, Y: float64(e.Err)})
			}
		}
		if len(abs) == 0 {
			continue
		}
		slices.Sort(abs)
		// At most 2000 points per curve.
		step := max(1, len(abs)/2000)
		var c plotter.XYs
		for k := 0; k < len(abs); k += step {
			c = append(c, plotter.XY{X: abs[k], Y: float64(k+1) / float64(len(abs))})
		}
		c = append(c, plotter.XY{X: abs[len(abs)-1], Y: 1})
		l, err := plotter.NewLine(c)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = methodColors[i%len(methodColors)], vg.Points(1.5)
		cdf.Add(l)
		cdf.Legend.Add(names[i], l)
		stepT := max(1, len(pts)/3000)
		var sub plotter.XYs
		for k := 0; k < len(pts); k += stepT {
			sub = append(sub, pts[k])
		}
		sc, err := plotter.NewScatter(sub)
		if err != nil {
			return nil, err
		}
		sc.Color, sc.Radius = methodColors[i%len(methodColors)], vg.Points(1)
		ts.Add(sc)
		ts.Legend.Add(names[i], sc)
	}
	ts.Add(plotter.NewGrid())
	cdf.Add(plotter.NewGrid())
	files := []string{filepath.Join(dir, "trace_error_cdf.png"), filepath.Join(dir, "trace_error_time.png")}
	if err := cdf.Save(8*vg.Inch, 4.5*vg.Inch, files[0]); err != nil {
		return nil, fmt.Errorf("plot %s: %w", files[0], err)
	}
	if err := ts.Save(8*vg.Inch, 4.5*vg.Inch, files[1]); err != nil {
		return nil, fmt.Errorf("plot %s: %w", files[1], err)
	}
	return files, nil
}
