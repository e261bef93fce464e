package measure

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	_ "gonum.org/v1/plot/vg/vgimg" // png
	_ "gonum.org/v1/plot/vg/vgsvg" // svg
)

var colors = map[string]color.Color{
	MethodBarrier:         color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	MethodGlobal:          color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	MethodWindow:          color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	MethodGlobalAtBarrier: color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	MethodGlobalRetro:     color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"true":                color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
}

// format returns the image format of a file name (png or svg).
func format(file string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	if ext != "png" && ext != "svg" {
		return "", fmt.Errorf("measure: plot %s: want a .png or .svg file", file)
	}
	return ext, nil
}

// PlotDeviations draws the histograms of seed 003's figures 10-14, one
// panel per method: each node's time to the operation's common end
// (Result.Paper), its deviation from the mean of its execution in percent
// of the operation, with the paper's +-0.04% (PGCCS), +-0.24% (hardware
// barrier) and +-1.8% (MPI_Barrier) marked where they fall inside the
// panel and the share of node times within each in the title; with a
// truth, a last panel shows the true times of (b)'s executions.
func PlotDeviations(r *Result, file string) error {
	ext, err := format(file)
	if err != nil {
		return err
	}
	fig, err := deviationsFigure(r, file)
	if err != nil {
		return err
	}
	return fig.render(file, ext)
}

// deviationsFigure builds PlotDeviations's figure.
func deviationsFigure(r *Result, file string) (*figure, error) {
	fig := &figure{w: 8 * vg.Inch}
	addPanel := func(title, key string, devs []float64) error {
		if len(devs) == 0 {
			return nil
		}
		p := plot.New()
		w := within(devs)
		p.Title.Text = fmt.Sprintf("%s: within +-1.8%%: %.0f%%, +-0.24%%: %.0f%%, +-0.04%%: %.0f%%", title, 100*w[0], 100*w[1], 100*w[2])
		// A few outliers would squeeze the histogram into one bar: draw
		// the values within 1.2 times the p99 of |deviation| and say how
		// many are left out.
		abs := absSorted(devs)
		if lim := 1.2 * quantile(abs, 0.99); lim > 0 && abs[len(abs)-1] > 1.5*lim {
			kept := make([]float64, 0, len(devs))
			for _, d := range devs {
				if math.Abs(d) <= lim {
					kept = append(kept, d)
				}
			}
			p.Title.Text += fmt.Sprintf(" (%d beyond +-%.3f%% not drawn)", len(devs)-len(kept), lim)
			devs = kept
		}
		p.X.Label.Text = "deviation from the mean of the execution (% of the operation); dashed: the paper's +-0.04, 0.24, 1.8%"
		p.Y.Label.Text = "node times (count)"
		h, err := plotter.NewHist(plotter.Values(devs), 40)
		if err != nil {
			return err
		}
		h.FillColor, h.LineStyle.Width = colors[key], 0
		p.Add(h, plotter.NewGrid())
		// The paper's bands that fall inside the drawn range, dashed.
		lo, hi := slices.Min(devs), slices.Max(devs)
		var top float64
		for _, b := range h.Bins {
			top = max(top, b.Weight)
		}
		for _, band := range PaperBands {
			for _, x := range []float64{-band, band} {
				if x < lo || x > hi {
					continue
				}
				l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
				if err != nil {
					return err
				}
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
				l.Color = color.Gray{Y: 0x40}
				p.Add(l)
			}
		}
		setTicks(p)
		fig.panels = append(fig.panels, p)
		return nil
	}
	var truth []float64
	for _, m := range r.Paper {
		if m.Name == MethodGlobal {
			truth = m.TrueDevs
		}
		if err := addPanel(methodTitle[m.Name], m.Name, m.Devs); err != nil {
			return nil, err
		}
	}
	if err := addPanel("true times of (b)'s executions", "true", truth); err != nil {
		return nil, err
	}
	if len(fig.panels) == 0 {
		return nil, fmt.Errorf("measure: plot %s: no executions", file)
	}
	fig.h = vg.Length(len(fig.panels)) * 2.8 * vg.Inch
	return fig, nil
}

// PlotErrors draws the distribution (CDF) of each method's |error| against
// the truth, on a log scale.
func PlotErrors(r *Result, file string) error {
	ext, err := format(file)
	if err != nil {
		return err
	}
	fig, err := errorsFigure(r, file)
	if err != nil {
		return err
	}
	return fig.render(file, ext)
}

// errorsFigure builds PlotErrors's figure.
func errorsFigure(r *Result, file string) (*figure, error) {
	p := plot.New()
	p.Title.Text = "error of each method's time against the true time"
	p.X.Label.Text = "|measured - true| (ns, log scale)"
	p.Y.Label.Text = "fraction of values"
	p.X.Scale = plot.LogScale{}
	drawn := false
	for _, m := range r.Methods {
		var abs []float64
		for _, v := range m.Values {
			if v.HasTruth {
				abs = append(abs, math.Max(1, math.Abs(float64(v.Ns-v.TrueNs))))
			}
		}
		if len(abs) == 0 {
			continue
		}
		drawn = true
		slices.Sort(abs)
		pts := make(plotter.XYs, len(abs))
		for i, a := range abs {
			pts[i] = plotter.XY{X: a, Y: float64(i+1) / float64(len(abs))}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = colors[m.Name], vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(shortTitle[m.Name], l)
	}
	if !drawn {
		return nil, fmt.Errorf("measure: plot %s: no errors (no truth)", file)
	}
	p.Add(plotter.NewGrid())
	setTicks(p)
	return &figure{panels: []*plot.Plot{p}, w: 9 * vg.Inch, h: 4.5 * vg.Inch}, nil
}

// shortTitle names the methods in the error figure's legend.
var shortTitle = map[string]string{
	MethodBarrier:         "(a) barrier-aligned",
	MethodGlobal:          "(b) global time",
	MethodWindow:          "(c) ReproMPI window",
	MethodGlobalAtBarrier: "(b') global, barrier-started",
	MethodGlobalRetro:     "(b*) global, read at the end",
}

// errPts are points with asymmetric vertical error bars.
type errPts struct {
	plotter.XYs
	down, up []float64
}

func (e errPts) YError(i int) (float64, float64) { return e.down[i], e.up[i] }

// PlotLatency draws the one-way latency per message size, each direction's
// median estimate with its median bounds as error bars and, with a truth,
// the true median (the layout of Liao's figure 2), drawn over the
// estimates, dashed with open squares, so that it shows where the two meet.
func PlotLatency(r *Result, file string) error {
	ext, err := format(file)
	if err != nil {
		return err
	}
	fig, err := latencyFigure(r, file)
	if err != nil {
		return err
	}
	return fig.render(file, ext)
}

// latencyFigure builds PlotLatency's figure.
func latencyFigure(r *Result, file string) (*figure, error) {
	if len(r.Latency) == 0 {
		return nil, fmt.Errorf("measure: plot %s: no latency messages", file)
	}
	p := plot.New()
	p.Title.Text = "one-way latency from global timestamps"
	p.X.Label.Text = "message size (bytes, log scale)"
	p.Y.Label.Text = "one-way latency (us)"
	p.X.Scale = plot.LogScale{}
	dirColor := []color.Color{colors[MethodGlobal], colors[MethodBarrier]}
	var truths []plot.Plotter
	for dir := range 2 {
		var e errPts
		var tr plotter.XYs
		for _, pt := range r.Latency {
			if pt.From != dir {
				continue
			}
			// A little apart, so that the two directions' bars do not overlap.
			x := float64(pt.Size) * (1 + 0.06*float64(2*dir-1))
			y := pt.P50Ns / 1e3
			e.XYs = append(e.XYs, plotter.XY{X: x, Y: y})
			e.down = append(e.down, math.Max(0, y-pt.LoP50Ns/1e3))
			e.up = append(e.up, math.Max(0, pt.HiP50Ns/1e3-y))
			if pt.Err != nil {
				tr = append(tr, plotter.XY{X: x, Y: pt.TrueP50 / 1e3})
			}
		}
		if len(e.XYs) == 0 {
			continue
		}
		line, pts, err := plotter.NewLinePoints(e.XYs)
		if err != nil {
			return nil, err
		}
		line.Color, pts.Color = dirColor[dir], dirColor[dir]
		bars, err := plotter.NewYErrorBars(e)
		if err != nil {
			return nil, err
		}
		bars.Color = dirColor[dir]
		p.Add(line, pts, bars)
		p.Legend.Add(fmt.Sprintf("%d->%d estimate (median), bounds", dir, 1-dir), line, pts)
		if len(tr) > 0 {
			l, s, err := truthLine(tr, dirColor[dir])
			if err != nil {
				return nil, err
			}
			truths = append(truths, l, s)
			p.Legend.Add(fmt.Sprintf("%d->%d true (median)", dir, 1-dir), l, s)
		}
	}
	p.Add(plotter.NewGrid())
	p.Add(truths...)
	setTicks(p)
	return &figure{panels: []*plot.Plot{p}, w: 9 * vg.Inch, h: 5 * vg.Inch, truths: len(truths) / 2}, nil
}

// truthLine is a true curve: dashed, with open squares around the
// estimates' dots, so that it stays visible where it lies on them.
func truthLine(xy plotter.XYs, c color.Color) (*plotter.Line, *plotter.Scatter, error) {
	l, s, err := plotter.NewLinePoints(xy)
	if err != nil {
		return nil, nil, err
	}
	l.Color, l.Width, l.Dashes = c, vg.Points(1.5), []vg.Length{vg.Points(5), vg.Points(3)}
	s.Color, s.Shape, s.Radius = c, openBox{}, vg.Points(4.5)
	return l, s, nil
}

// openBox is an unfilled square glyph.
type openBox struct{}

// DrawGlyph implements draw.GlyphDrawer.
func (openBox) DrawGlyph(c *draw.Canvas, sty draw.GlyphStyle, pt vg.Point) {
	c.SetLineStyle(draw.LineStyle{Color: sty.Color, Width: vg.Points(1.2)})
	r := sty.Radius
	var p vg.Path
	p.Move(vg.Point{X: pt.X - r, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y - r})
	p.Line(vg.Point{X: pt.X + r, Y: pt.Y + r})
	p.Line(vg.Point{X: pt.X - r, Y: pt.Y + r})
	p.Close()
	c.Stroke(p)
}
