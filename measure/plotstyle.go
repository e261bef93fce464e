package measure

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// figure is one image: panels stacked in a column, each panel's legend in a
// column right of the panels, where it covers no data.
type figure struct {
	panels []*plot.Plot
	w, h   vg.Length
	// truths counts the true curves drawn over the estimates.
	truths int
}

// figurePad is the margin around the image and between panels and legends.
const figurePad = 2 * vg.Millimeter

// render draws the figure into file (png or svg). It moves each panel's
// legend out of the panel into the legend column, breaks titles wider than
// the image into lines, and leaves the panels so changed.
func (f *figure) render(file, ext string) error {
	legends := make([]plot.Legend, len(f.panels))
	var legendW vg.Length
	for i, p := range f.panels {
		legends[i] = p.Legend
		if w := legendWidth(&legends[i]); w > 0 {
			legendW = max(legendW, w+2*figurePad)
		}
		p.Legend = plot.NewLegend()
	}
	c, err := draw.NewFormattedCanvas(f.w, f.h, ext)
	if err != nil {
		return fmt.Errorf("measure: plot %s: %w", file, err)
	}
	dc := draw.New(c)
	panelsC := draw.Crop(dc, 0, -legendW, 0, 0)
	for _, p := range f.panels {
		wrapTitle(p, panelsC.Size().X-2*figurePad)
	}
	rows := make([][]*plot.Plot, len(f.panels))
	for i, p := range f.panels {
		rows[i] = []*plot.Plot{p}
	}
	t := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: figurePad, PadBottom: figurePad, PadLeft: figurePad, PadRight: figurePad}
	canvases := plot.Align(rows, t, panelsC)
	for i, p := range f.panels {
		pc := canvases[i][0]
		p.Draw(pc)
		if legendW == 0 {
			continue
		}
		data := p.DataCanvas(pc)
		strip := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: pc.Max.X + figurePad, Y: data.Min.Y},
			Max: vg.Point{X: dc.Max.X - figurePad, Y: data.Max.Y},
		}}
		l := legends[i]
		l.Top, l.Left, l.XOffs, l.YOffs, l.Padding = true, true, 0, 0, vg.Points(2)
		l.Draw(strip)
	}
	out, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("measure: plot: %w", err)
	}
	if _, err := c.WriteTo(out); err != nil {
		out.Close()
		return fmt.Errorf("measure: plot %s: %w", file, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("measure: plot %s: %w", file, err)
	}
	return nil
}

// legendWidth is the width of a legend's entries (0 without entries).
func legendWidth(l *plot.Legend) vg.Length {
	big := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: 100 * vg.Inch, Y: 100 * vg.Inch}}}
	r := l.Rectangle(big)
	if r.Size().Y <= 0 {
		return 0
	}
	return r.Size().X
}

// wrapTitle breaks a title wider than width into lines at spaces.
func wrapTitle(p *plot.Plot, width vg.Length) {
	sty := p.Title.TextStyle
	var lines []string
	for _, para := range strings.Split(p.Title.Text, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			if line != "" && sty.Width(line+" "+w) > width {
				lines = append(lines, line)
				line = w
				continue
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		lines = append(lines, line)
	}
	p.Title.Text = strings.Join(lines, "\n")
}

// logTicks are the ticks of a logarithmic axis: every 1..9 x 10^k, labelled
// at 1, 2 and 5 x 10^k over up to four decades and at the powers of ten
// over more; an axis within a decade has all its ticks labelled.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return plot.LogTicks{}.Ticks(math.Max(lo, 1e-9), math.Max(hi, 1e-9))
	}
	e0, e1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	var ts []plot.Tick
	labelled := 0
	for e := e0; e <= e1; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, float64(e))
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (e1-e0 <= 4 && (m == 2 || m == 5)) {
				t.Label = tickLabel(v)
				labelled++
			}
			ts = append(ts, t)
		}
	}
	if labelled < 3 {
		for i := range ts {
			ts[i].Label = tickLabel(ts[i].Value)
		}
	}
	return ts
}

// linTicks are the ticks of a linear axis: 3 to 9 labelled ones at 1, 2 or
// 5 x 10^k apart, with unlabelled ones between.
type linTicks struct{}

// Ticks implements plot.Ticker.
func (linTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return []plot.Tick{{Value: lo, Label: tickLabel(lo)}}
	}
	raw := (hi - lo) / 8
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	prec := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	var ts []plot.Tick
	minor := step / 2
	for i := math.Ceil(lo/minor - 1e-9); i*minor <= hi+minor*1e-9; i++ {
		v := i * minor
		if math.Abs(v) < minor*1e-6 {
			v = 0
		}
		t := plot.Tick{Value: v}
		if math.Mod(math.Abs(i), 2) == 0 {
			t.Label = strconv.FormatFloat(v, 'f', prec, 64)
		}
		ts = append(ts, t)
	}
	return ts
}

// tickLabel is a tick's number: plain up to 10^5, as 2e5 beyond, as 2e-4
// below 10^-3.
func tickLabel(v float64) string {
	a := math.Abs(v)
	if a == 0 || (a < 1e5 && a >= 1e-3) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	e := int(math.Floor(math.Log10(a) + 1e-9))
	m := v / math.Pow(10, float64(e))
	return strconv.FormatFloat(math.Round(m*100)/100, 'f', -1, 64) + "e" + strconv.Itoa(e)
}

// setTicks gives a panel's axes the ticks above: logTicks on a log scale,
// linTicks on a linear one.
func setTicks(p *plot.Plot) {
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		if _, ok := a.Scale.(plot.LogScale); ok {
			a.Tick.Marker = logTicks{}
		} else {
			a.Tick.Marker = linTicks{}
		}
	}
}
