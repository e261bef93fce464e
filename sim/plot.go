package sim

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gclock/gclock/engine"
)

// PlotFile draws the run's trace (Options.Trace must have been set) into
// file, PNG or SVG by its extension: one panel per plotted node with the
// error of Est, the guaranteed bounds [Earliest, Latest] relative to the
// truth, and the node's global resyncs marked along the bottom, like the
// papers' figures.
func PlotFile(res *Result, file string) error {
	var w writerToCanvas
	var err error
	if res.Trace == nil || len(res.Trace.Nodes) == 0 {
		return fmt.Errorf("no trace to plot (run with Options.Trace)")
	}
	rows := len(res.Trace.Nodes)
	wid, hei := 10*vg.Inch, vg.Length(rows)*3*vg.Inch
	switch strings.ToLower(filepath.Ext(file)) {
	case ".png":
		c := vgimg.New(wid, hei)
		w = writerToCanvas{c, vgimg.PngCanvas{Canvas: c}}
	case ".svg":
		c := vgsvg.New(wid, hei)
		w = writerToCanvas{c, c}
	default:
		return fmt.Errorf("plot file %s: want a .png or .svg name", file)
	}
	plots, err := tracePlots(res)
	if err != nil {
		return err
	}
	dc := draw.New(w.canvas)
	tiles := draw.Tiles{Rows: rows, Cols: 1, PadTop: 2, PadBottom: 2, PadLeft: 2, PadRight: 2, PadY: 8}
	cs := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(cs[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("plot file: %w", err)
	}
	if _, err := w.wt.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing plot %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing plot %s: %w", file, err)
	}
	return nil
}

type writerToCanvas struct {
	canvas vg.CanvasSizer
	wt     io.WriterTo
}

func tracePlots(res *Result) ([][]*plot.Plot, error) {
	tr := res.Trace
	out := make([][]*plot.Plot, len(tr.Nodes))
	for i, node := range tr.Nodes {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: node %d (estimator %s, adaptive %v)", res.Scenario.Name, node,
			res.Scenario.Engine.Estimator, res.Scenario.Engine.Adaptive)
		p.X.Label.Text = "time (s)"
		p.Y.Label.Text = "vs truth (us)"
		var est, lo, hi plotter.XYs
		var mags []float64
		for _, pt := range tr.Points[i] {
			if pt.Status == engine.StatusUnsynced {
				continue
			}
			est = append(est, plotter.XY{X: pt.T, Y: float64(pt.Err) / 1e3})
			lo = append(lo, plotter.XY{X: pt.T, Y: float64(pt.Lo) / 1e3})
			hi = append(hi, plotter.XY{X: pt.T, Y: float64(pt.Hi) / 1e3})
			mags = append(mags, math.Abs(float64(pt.Lo)/1e3), math.Abs(float64(pt.Hi)/1e3), math.Abs(float64(pt.Err)/1e3))
		}
		// Bounds can be enormous right after a start or while stale: scale
		// the axis to the 98th percentile of the magnitudes, clipping the rest.
		lim := 1.0
		if len(mags) > 0 {
			slices.Sort(mags)
			lim = max(mags[int(0.98*float64(len(mags)-1))]*1.2, 1e-3)
		}
		clip := func(xy plotter.XYs) plotter.XYs {
			for k := range xy {
				xy[k].Y = max(-lim, min(lim, xy[k].Y))
			}
			return xy
		}
		if len(est) > 0 {
			le, err := plotter.NewLine(clip(est))
			if err != nil {
				return nil, fmt.Errorf("plot node %d: %w", node, err)
			}
			le.Color = color.RGBA{R: 200, A: 255}
			ll, _ := plotter.NewLine(clip(lo))
			lh, _ := plotter.NewLine(clip(hi))
			for _, l := range []*plotter.Line{ll, lh} {
				l.Color = color.RGBA{B: 200, A: 255}
				l.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
			}
			p.Add(plotter.NewGrid(), ll, lh, le)
			p.Legend.Add("Est - truth", le)
			p.Legend.Add("bounds", ll)
		}
		var ev plotter.XYs
		for _, e := range tr.Events[i] {
			if e.Kind == engine.EvGlobalResync {
				ev = append(ev, plotter.XY{X: e.T, Y: -lim})
			}
		}
		if len(ev) > 0 {
			sc, err := plotter.NewScatter(ev)
			if err != nil {
				return nil, fmt.Errorf("plot node %d events: %w", node, err)
			}
			sc.GlyphStyle.Shape = draw.TriangleGlyph{}
			sc.GlyphStyle.Radius = vg.Points(2)
			sc.GlyphStyle.Color = color.RGBA{G: 140, A: 255}
			p.Add(sc)
			p.Legend.Add("global resync", sc)
		}
		p.Y.Min, p.Y.Max = -lim, lim
		p.Legend.Top = true
		out[i] = []*plot.Plot{p}
	}
	return out, nil
}
