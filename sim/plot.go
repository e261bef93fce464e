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
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gclock/gclock/engine"
)

// PlotFile draws the run's trace (Options.Trace must have been set) into
// file, PNG or SVG by its extension: per plotted node, a panel with the
// error of Est and the node's global resyncs marked along the bottom, like
// the papers' figures, and a panel with the guaranteed bounds [Earliest,
// Latest] relative to the truth.
func PlotFile(res *Result, file string) error {
	var w writerToCanvas
	var err error
	if res.Trace == nil || len(res.Trace.Nodes) == 0 {
		return fmt.Errorf("no trace to plot (run with Options.Trace)")
	}
	rows := 2 * len(res.Trace.Nodes)
	wid, hei := 10*vg.Inch, vg.Length(rows)*2*vg.Inch
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

// robustLimit is the 98th percentile of v times 1.2: the axis limit that
// shows the bulk of a series while clipping its rare huge values (bounds
// right after a start, or while stale).
func robustLimit(v []float64) float64 {
	if len(v) == 0 {
		return 1
	}
	slices.Sort(v)
	return max(v[int(0.98*float64(len(v)-1))]*1.2, 1e-3)
}

// clipXY clips xy to [-lim, lim] and returns the points it moved, drawn
// at the edge they crossed, with the largest magnitude among them: a plot
// marks them instead of passing them off as values at the limit.
func clipXY(xy plotter.XYs, lim float64) (plotter.XYs, plotter.XYs, float64) {
	var beyond plotter.XYs
	worst := 0.0
	for k := range xy {
		if y := xy[k].Y; y > lim || y < -lim {
			worst = max(worst, math.Abs(y))
			xy[k].Y = max(-lim, min(lim, y))
			beyond = append(beyond, xy[k])
		}
	}
	return xy, beyond, worst
}

// markBeyond adds the clipped points of a panel as crosses on its edge,
// with their count and largest value in the legend.
func markBeyond(p *plot.Plot, beyond plotter.XYs, worst float64) error {
	if len(beyond) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(beyond)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Shape = draw.CrossGlyph{}
	sc.GlyphStyle.Radius = vg.Points(2.5)
	sc.GlyphStyle.Color = color.Black
	p.Add(sc)
	p.Legend.Add(fmt.Sprintf("off the axis, on its edge: %d, max %.3g us", len(beyond), worst), sc)
	return nil
}

// markPhases draws a dashed vertical line where each phase after the
// first starts, so that a change of load or loss is seen where it acts.
func markPhases(p *plot.Plot, sc *Scenario, lim float64) error {
	first := true
	for _, ph := range sc.Phases {
		t := time.Duration(ph.Start).Seconds()
		if t <= 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: t, Y: -lim}, {X: t, Y: lim}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 110}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		if first {
			p.Legend.Add("phase change", l)
			first = false
		}
	}
	return nil
}

// tracePlots draws two panels per plotted node: the error of Est with the
// global resyncs marked, then the bounds (they are usually orders of
// magnitude wider than the error, so they get their own scale).
func tracePlots(res *Result) ([][]*plot.Plot, error) {
	tr := res.Trace
	out := make([][]*plot.Plot, 0, 2*len(tr.Nodes))
	for i, node := range tr.Nodes {
		pe, pb := plot.New(), plot.New()
		which := ""
		if others := res.Scenario.Nodes - 1; len(tr.Nodes) < others {
			which = fmt.Sprintf(" [%d of the %d nodes drawn; eval.plot_nodes picks them]", len(tr.Nodes), others)
		}
		pe.Title.Text = fmt.Sprintf("%s: node %d, Est - truth (estimator %s, adaptive %v)%s", res.Scenario.Name, node,
			res.Scenario.Engine.Estimator, res.Scenario.Engine.Adaptive, which)
		pb.Title.Text = fmt.Sprintf("%s: node %d, bounds [Earliest, Latest] - truth%s", res.Scenario.Name, node, which)
		for _, p := range []*plot.Plot{pe, pb} {
			p.X.Label.Text = "time (s)"
			p.Y.Label.Text = "us"
			p.Add(plotter.NewGrid())
			p.Legend.Top = true
		}
		var est, lo, hi plotter.XYs
		var emag, bmag []float64
		for _, pt := range tr.Points[i] {
			if pt.Status == engine.StatusUnsynced {
				continue
			}
			est = append(est, plotter.XY{X: pt.T, Y: float64(pt.Err) / 1e3})
			lo = append(lo, plotter.XY{X: pt.T, Y: float64(pt.Lo) / 1e3})
			hi = append(hi, plotter.XY{X: pt.T, Y: float64(pt.Hi) / 1e3})
			emag = append(emag, math.Abs(float64(pt.Err)/1e3))
			bmag = append(bmag, math.Abs(float64(pt.Lo)/1e3), math.Abs(float64(pt.Hi)/1e3))
		}
		elim, blim := robustLimit(emag), robustLimit(bmag)
		if len(est) > 0 {
			est, eOut, eWorst := clipXY(est, elim)
			lo, loOut, loWorst := clipXY(lo, blim)
			hi, hiOut, hiWorst := clipXY(hi, blim)
			le, err := plotter.NewLine(est)
			if err != nil {
				return nil, fmt.Errorf("plot node %d: %w", node, err)
			}
			le.Color = color.RGBA{R: 200, A: 255}
			pe.Add(le)
			pe.Legend.Add("Est - truth", le)
			ll, err := plotter.NewLine(lo)
			if err != nil {
				return nil, fmt.Errorf("plot node %d: %w", node, err)
			}
			lh, err := plotter.NewLine(hi)
			if err != nil {
				return nil, fmt.Errorf("plot node %d: %w", node, err)
			}
			for _, l := range []*plotter.Line{ll, lh} {
				l.Color = color.RGBA{B: 200, A: 255}
			}
			pb.Add(ll, lh)
			pb.Legend.Add("Earliest, Latest", ll)
			if err := markBeyond(pe, eOut, eWorst); err != nil {
				return nil, fmt.Errorf("plot node %d: %w", node, err)
			}
			if err := markBeyond(pb, append(loOut, hiOut...), max(loWorst, hiWorst)); err != nil {
				return nil, fmt.Errorf("plot node %d: %w", node, err)
			}
		}
		if err := markPhases(pe, &res.Scenario, elim); err != nil {
			return nil, fmt.Errorf("plot node %d: %w", node, err)
		}
		if err := markPhases(pb, &res.Scenario, blim); err != nil {
			return nil, fmt.Errorf("plot node %d: %w", node, err)
		}
		var ev plotter.XYs
		for _, e := range tr.Events[i] {
			if e.Kind == engine.EvGlobalResync {
				ev = append(ev, plotter.XY{X: e.T, Y: -elim})
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
			pe.Add(sc)
			pe.Legend.Add("global resync", sc)
		}
		pe.Y.Min, pe.Y.Max = -elim, elim
		pb.Y.Min, pb.Y.Max = -blim, blim
		out = append(out, []*plot.Plot{pe}, []*plot.Plot{pb})
	}
	return out, nil
}
