package estimate

import (
	"flag"
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var figures = flag.String("figures", "", "write docs figures (PNG) and the accuracy table (Markdown) to this directory")

// TestFigures regenerates the figures and the table of docs/estimators.md:
//
//	go test ./estimate -run TestFigures -figures $PWD/docs/figures
func TestFigures(t *testing.T) {
	if *figures == "" {
		t.Skip("-figures not set")
	}
	if err := os.MkdirAll(*figures, 0o755); err != nil {
		t.Fatal(err)
	}
	figBounds(t)
	figSkewWidth(t)
	tableAccuracy(t)
}

func savePlot(t *testing.T, p *plot.Plot, name string) {
	t.Helper()
	if err := p.Save(16*vg.Centimeter, 9*vg.Centimeter, filepath.Join(*figures, name)); err != nil {
		t.Fatal(err)
	}
}

// figBounds: one run, exponential delays, 50 ppm, a round of 3 exchanges
// per second: the hull's bounds and each estimator's error at the newest
// exchange, relative to the truth.
func figBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	w := world{t0: 1e15, off: 2e9, ppb: 50000}
	m := delayModel{"exp", 5000, 5000, expo(20000)}
	h := mustHull(t, HullConfig{Window: 256})
	reg, _ := NewRegression(DefaultRegressionConfig())
	mr, _ := NewMinRTT(DefaultMinRTTConfig())
	var lo, hi, eh, ec, er, em plotter.XYs
	for i, rd := range w.rounds(r, m, w.t0, 1e9, 120, 3) {
		for _, e := range []Estimator{h, reg, mr} {
			if err := e.AddRound(rd); err != nil {
				t.Fatal(err)
			}
		}
		x := rd[2].LocSend + 500e6 // half a period after the round
		truth := w.y(x)
		sec := float64(i)
		if i < 2 {
			continue // one round gives no skew: bounds of +-ms, off the scale
		}
		if l, u, ok := h.Bounds(x); ok {
			lo = append(lo, plotter.XY{X: sec, Y: float64(l-truth) / 1e3})
			hi = append(hi, plotter.XY{X: sec, Y: float64(u-truth) / 1e3})
			est, _ := h.Estimate(x)
			eh = append(eh, plotter.XY{X: sec, Y: float64(est-truth) / 1e3})
		}
		if c, _, ok := h.Center(x); ok {
			ec = append(ec, plotter.XY{X: sec, Y: float64(c-truth) / 1e3})
		}
		if mp := reg.Mapping(); mp.Valid {
			est, _, _ := mp.At(x)
			er = append(er, plotter.XY{X: sec, Y: float64(est-truth) / 1e3})
		}
		if mp := mr.Mapping(); mp.Valid {
			est, _, _ := mp.At(x)
			em = append(em, plotter.XY{X: sec, Y: float64(est-truth) / 1e3})
		}
	}
	p := plot.New()
	p.Title.Text = "Estimate - truth, 0.5 s after each round (exp. delays, 50 ppm)"
	p.X.Label.Text = "round (1 per second)"
	p.Y.Label.Text = "us"
	for _, s := range []struct {
		name string
		xy   plotter.XYs
		i    int
	}{{"hull lower bound", lo, 0}, {"hull upper bound", hi, 0}, {"hull estimate", eh, 1}, {"hull center", ec, 4}, {"regression", er, 2}, {"minrtt", em, 3}} {
		l, err := plotter.NewLine(s.xy)
		if err != nil {
			t.Fatal(err)
		}
		l.Color = plotColors[s.i]
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = -60, 60 // after Add, which rescales
	savePlot(t, p, "estimators_error.png")
}

var plotColors = []color.Color{color.RGBA{R: 200, A: 255}, color.RGBA{B: 200, A: 255}, color.RGBA{G: 150, A: 255}, color.RGBA{R: 200, G: 120, A: 255}, color.RGBA{R: 150, B: 150, A: 255}}

// figSkewWidth: the hull's skew half-width against the acquisition time dT,
// with the paper's 2 mu / dT.
func figSkewWidth(t *testing.T) {
	const mu = 5000
	m := delayModel{"exp", mu, mu, expo(1000)}
	var meas, paper plotter.XYs
	for _, dT := range []int64{125e6, 250e6, 500e6, 1e9, 2e9, 4e9, 8e9, 16e9} {
		var sum float64
		for seed := uint64(0); seed < 10; seed++ {
			r := rand.New(rand.NewPCG(seed, 44))
			w := randomWorld(r)
			h := mustHull(t, HullConfig{Window: 8192})
			for _, rd := range w.rounds(r, m, w.t0, 10e6, int(dT/10e6)+1, 3) {
				if err := h.AddRound(rd); err != nil {
					t.Fatal(err)
				}
			}
			lo, hi, _ := h.SkewBounds()
			sum += (hi - lo) / 2
		}
		meas = append(meas, plotter.XY{X: float64(dT) / 1e9, Y: sum / 10 * 1e6})
		paper = append(paper, plotter.XY{X: float64(dT) / 1e9, Y: 2 * mu / float64(dT) * 1e6})
	}
	p := plot.New()
	p.Title.Text = "Hull skew half-width vs acquisition time (mu = 5 us)"
	p.X.Label.Text = "dT (s)"
	p.Y.Label.Text = "half-width (ppm)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	lm, _ := plotter.NewLine(meas)
	lp, _ := plotter.NewLine(paper)
	lp.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(lm, lp)
	p.Legend.Add("measured (mean of 10 seeds)", lm)
	p.Legend.Add("2 mu / dT (Jezequel 4.3)", lp)
	p.Legend.Top = true
	savePlot(t, p, "hull_skew_width.png")
}

// tableAccuracy: mean |error| 0.5 s after the last of 20 rounds (one per
// second), 200 seeds per delay model, and how often the hull's bounds held.
func tableAccuracy(t *testing.T) {
	var b strings.Builder
	b.WriteString("| delays | hull | center | regression | minrtt | single exchange | hull mean half-width | truth inside hull bounds |\n|---|---|---|---|---|---|---|---|\n")
	for _, m := range models {
		var sh, sc, sr, sm, ss, sw float64
		inside := 0
		const seeds = 200
		for seed := uint64(0); seed < seeds; seed++ {
			r := rand.New(rand.NewPCG(seed, 99))
			w := randomWorld(r)
			h := mustHull(t, HullConfig{Window: 256})
			reg, _ := NewRegression(DefaultRegressionConfig())
			mr, _ := NewMinRTT(DefaultMinRTTConfig())
			rounds := w.rounds(r, m, w.t0, 1e9, 20, 3)
			for _, rd := range rounds {
				for _, e := range []Estimator{h, reg, mr} {
					if err := e.AddRound(rd); err != nil {
						t.Fatal(err)
					}
				}
			}
			last := rounds[len(rounds)-1]
			x := last[2].LocSend + 500e6
			truth := float64(w.y(x))
			est, _ := h.Estimate(x)
			sh += math.Abs(float64(est) - truth)
			c, _, _ := h.Center(x)
			sc += math.Abs(float64(c) - truth)
			lo, hi, _ := h.Bounds(x)
			sw += float64(hi-lo) / 2
			if float64(lo) <= truth && truth <= float64(hi) {
				inside++
			}
			e1, _, _ := reg.Mapping().At(x)
			sr += math.Abs(float64(e1) - truth)
			e2, _, _ := mr.Mapping().At(x)
			sm += math.Abs(float64(e2) - truth)
			// single exchange: the last exchange's offset, no drift
			ss += math.Abs(float64(x+last[2].Offset()) - truth)
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %d/%d |\n", m.name, sh/seeds/1e3, sc/seeds/1e3, sr/seeds/1e3, sm/seeds/1e3, ss/seeds/1e3, sw/seeds/1e3, inside, seeds)
	}
	if err := os.WriteFile(filepath.Join(*figures, "estimators_accuracy.md"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}
