package measure

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// LatencyCurve is one latency measurement drawn as one curve of
// PlotLatencyCurves: a setting's name and its result.
type LatencyCurve struct {
	Name   string
	Result *Result
	// Period is the time between two messages (the latency test's
	// -period): message e left about e*Period after the first.
	Period time.Duration
}

// curveColors are the curves' colours, in order.
var curveColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// PlotLatencyCurves draws several latency measurements of the messages
// from rank `from` to the other rank (Liao's figures 2 and 3: the
// latencies collected on one node, one curve per setting) in three
// panels: the median latency per size measured in global time (log-log:
// 64 KB takes some 20 times 64 B's), each with
// its true median dashed; the error of each size (mean, and the 10th to
// 90th percentile of the signed errors as bars); and every message's
// error over the run's time.
func PlotLatencyCurves(curves []LatencyCurve, from int, title, file string) error {
	ext, err := format(file)
	if err != nil {
		return err
	}
	fig, err := latencyCurvesFigure(curves, from, title, file)
	if err != nil {
		return err
	}
	return fig.render(file, ext)
}

// latencyCurvesFigure builds PlotLatencyCurves's figure.
func latencyCurvesFigure(curves []LatencyCurve, from int, title, file string) (*figure, error) {
	if len(curves) == 0 {
		return nil, fmt.Errorf("measure: plot %s: no curves", file)
	}
	lat, errp, tp := plot.New(), plot.New(), plot.New()
	lat.Title.Text = title
	lat.X.Label.Text = "message size (bytes, log scale)"
	lat.Y.Label.Text = fmt.Sprintf("latency %d->%d (us)", from, 1-from)
	lat.Y.Scale = plot.LogScale{}
	errp.Title.Text = "error of each size against the truth: mean, bars p10-p90"
	errp.X.Label.Text = lat.X.Label.Text
	errp.Y.Label.Text = "estimate - truth (us)"
	tp.Title.Text = "error of every message over the run"
	tp.X.Label.Text = "time since the first message (s)"
	tp.Y.Label.Text = "estimate - truth (us)"
	for _, p := range []*plot.Plot{lat, errp} {
		p.X.Scale = plot.LogScale{}
	}
	var truths []plot.Plotter
	drawn, nonPositive, latPoints, errPoints := 0, 0, 0, 0
	for i, c := range curves {
		if c.Result == nil {
			continue
		}
		col := curveColors[i%len(curveColors)]
		// A little apart, so that the curves' bars do not overlap.
		shift := 1 + 0.05*(float64(i)-float64(len(curves)-1)/2)
		var meas, truth plotter.XYs
		var e errPts
		var msgs plotter.XYs
		for _, pt := range c.Result.Latency {
			if pt.From != from {
				continue
			}
			x := float64(pt.Size)
			meas = append(meas, plotter.XY{X: x * shift, Y: pt.P50Ns / 1e3})
			if pt.Err == nil {
				continue
			}
			truth = append(truth, plotter.XY{X: x * shift, Y: pt.TrueP50 / 1e3})
			var signed []float64
			for _, m := range pt.Messages {
				if !m.HasTruth {
					continue
				}
				d := float64(m.Ns-m.TrueNs) / 1e3
				signed = append(signed, d)
				msgs = append(msgs, plotter.XY{X: float64(m.Exec) * c.Period.Seconds(), Y: d})
			}
			slices.Sort(signed)
			mean := pt.Err.MeanNs / 1e3
			e.XYs = append(e.XYs, plotter.XY{X: x * shift, Y: mean})
			errPoints++
			e.down = append(e.down, math.Max(0, mean-quantile(signed, 0.1)))
			e.up = append(e.up, math.Max(0, quantile(signed, 0.9)-mean))
		}
		if len(meas) == 0 {
			continue
		}
		// The latency panel's axis is logarithmic: a median at or below 0
		// (on loopback, a clock error larger than the latency) has no place
		// on it and is counted in the title instead of failing the plot.
		meas, truth = positive(meas, &nonPositive), positive(truth, &nonPositive)
		drawn++
		latPoints += len(meas)
		if len(meas) > 0 {
			l, pts, err := plotter.NewLinePoints(meas)
			if err != nil {
				return nil, err
			}
			l.Color, pts.Color = col, col
			lat.Add(l, pts)
			lat.Legend.Add(c.Name, l, pts)
		}
		if len(truth) > 0 {
			tl, ts, err := truthLine(truth, col)
			if err != nil {
				return nil, err
			}
			truths = append(truths, tl, ts)
		}
		if len(e.XYs) > 0 {
			el, ep, err := plotter.NewLinePoints(e.XYs)
			if err != nil {
				return nil, err
			}
			el.Color, ep.Color = col, col
			bars, err := plotter.NewYErrorBars(e)
			if err != nil {
				return nil, err
			}
			bars.Color = col
			errp.Add(el, ep, bars)
			errp.Legend.Add(c.Name, el, ep)
		}
		if len(msgs) > 0 {
			sc, err := plotter.NewScatter(msgs)
			if err != nil {
				return nil, err
			}
			sc.Color, sc.Shape, sc.Radius = col, draw.CircleGlyph{}, vg.Points(1.2)
			tp.Add(sc)
			tp.Legend.Add(c.Name, sc)
		}
	}
	if drawn == 0 {
		return nil, fmt.Errorf("measure: plot %s: no messages %d->%d", file, from, 1-from)
	}
	// The truth over the estimates, and the legend's key to the styles.
	lat.Add(truths...)
	grey := color.Gray{Y: 0x30}
	key := &plotter.Line{LineStyle: draw.LineStyle{Color: grey, Width: vg.Points(1)}}
	keyPts := &plotter.Scatter{GlyphStyle: draw.GlyphStyle{Color: grey, Shape: draw.RingGlyph{}, Radius: vg.Points(3)}}
	lat.Legend.Add("solid, dots: global time (median)", key, keyPts)
	if len(truths) > 0 {
		tl, ts, err := truthLine(plotter.XYs{{X: 1, Y: 1}}, grey)
		if err != nil {
			return nil, err
		}
		lat.Legend.Add("dashed, squares: the truth (median)", tl, ts)
	}
	if nonPositive > 0 {
		lat.Title.Text += fmt.Sprintf(" (%d medians <= 0 not drawn on the log axis)", nonPositive)
	}
	// An empty logarithmic axis has no range (gonum/plot panics on it):
	// a panel with nothing to draw gets linear axes.
	for _, p := range []struct {
		p *plot.Plot
		n int
	}{{lat, latPoints}, {errp, errPoints}} {
		if p.n == 0 {
			p.p.X.Scale, p.p.X.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
			p.p.Y.Scale, p.p.Y.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
		}
	}
	for _, p := range []*plot.Plot{lat, errp, tp} {
		p.Add(plotter.NewGrid())
		setTicks(p)
	}
	return &figure{panels: []*plot.Plot{lat, errp, tp}, w: 10 * vg.Inch, h: 12 * vg.Inch, truths: len(truths) / 2}, nil
}

// positive returns the points of xy whose Y is above 0, adding the others'
// count to *dropped.
func positive(xy plotter.XYs, dropped *int) plotter.XYs {
	out := xy[:0:0]
	for _, p := range xy {
		if p.Y > 0 {
			out = append(out, p)
		} else {
			*dropped++
		}
	}
	return out
}
