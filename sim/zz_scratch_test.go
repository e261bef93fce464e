package sim

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
)

var msgCount = map[int]int{}
var watch = func() int { w, _ := strconv.Atoi(os.Getenv("NODE")); if w == 0 { w = 1 }; return w }()
var probesTo = map[int]int{}

type spyNode struct {
	*engine.Node
	id  int
	log *[]string
	clk func() int64
}

func (s *spyNode) Ready() engine.Ready {
	r := s.Node.Ready()
	for _, m := range r.Messages {
		msgCount[int(m.Type)]++
		if m.Type == engine.MsgProbe { probesTo[int(m.To)]++ }
	}
	for _, e := range r.Events {
		switch e.Kind {
		case engine.EvPeriodChange, engine.EvErrReport, engine.EvGlobalResync, engine.EvEstimatorRestart:
			if (s.id == 0 && int(e.Peer) == watch) || s.id == watch {
				*s.log = append(*s.log, fmt.Sprintf("%8.2fs n%d k%d peer%d v=%.3g", float64(e.Local-Origin)/1e9, s.id, e.Kind, e.Peer, e.Value))
			}
		}
	}
	return r
}

func TestZZScratch(t *testing.T) {
	name := os.Getenv("SC")
	if name == "" {
		t.Skip()
	}
	sc, err := Shipped(name)
	if err != nil {
		t.Fatal(err)
	}
	ad, _ := strconv.ParseBool(os.Getenv("AD"))
	sc.Engine.Adaptive = ad
	sc.Engine.DiscountDelay = os.Getenv("DD") == "1"
	if d := os.Getenv("DUR"); d != "" {
		dd, _ := time.ParseDuration(d)
		sc.Duration = Duration(dd)
	}
	if p := os.Getenv("PER"); p != "" {
		d, _ := time.ParseDuration(p)
		sc.Engine.InitialGlobalPeriod, sc.Engine.MaxGlobalPeriod = Duration(d), Duration(d)
		if sc.Engine.MinGlobalPeriod > Duration(d) { sc.Engine.MinGlobalPeriod = Duration(d) }
	}
	if e := os.Getenv("EST"); e != "" {
		sc.Engine.Estimator = e
	}
	if e := os.Getenv("LD"); e != "" {
		sc.Engine.LargeDriftPPM, _ = strconv.ParseFloat(e, 64)
	}
	if os.Getenv("CD") == "1" {
		sc.Engine.ContinuousDrift = true
	}
	var log []string
	var r *runner
	_ = r
	now := int64(0)
	opt := Options{NewNode: func(cfg engine.Config, l *slog.Logger) (Node, error) {
		n, err := engine.New(cfg, l)
		if err != nil {
			return nil, err
		}
		return &spyNode{Node: n, id: int(cfg.ID), log: &log, clk: func() int64 { return now }}, nil
	}}
	_ = now
	res, err := Run(context.Background(), sc, opt)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range log {
		fmt.Println(l)
	}
	s := res.Summary
	fmt.Println("msgs by type", msgCount, "probes to", probesTo)
	fmt.Printf("err %.0f std %.0f cov %v width %.0f msgs %.2f\n", s.ErrorMeanNs, s.ErrorStdNs, s.BoundCoverage, s.BoundWidthMeanNs, s.MessagesPerNodePerS)
}

func TestZZFig3Trace(t *testing.T) {
	name := os.Getenv("F3")
	if name == "" {
		t.Skip()
	}
	sc, _ := Shipped(name)
	sc.Eval.PlotNodes = []int{1}
	sc.Engine.DiscountDelay = os.Getenv("DD") == "1"
	for _, ad := range []bool{false, true} {
		s := sc
		s.Engine.Adaptive = ad
		res, err := Run(context.Background(), s, Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		pts := res.Trace.Points[0]
		fmt.Printf("adaptive=%v before %.0f", ad, stretch(pts, 60, 180).MeanAbs)
		for _, w := range [][2]float64{{0, 10}, {10, 20}, {20, 30}, {30, 60}, {60, 300}} {
			st := stretch(pts, 180+w[0], 180+w[1])
			fmt.Printf(" | [%v,%v) %.0f max %d", w[0], w[1], st.MeanAbs, st.MaxAbs)
		}
		fmt.Printf(" msgs %.2f\n", res.Summary.MessagesPerNodePerS)
	}
}

func TestZZScore(t *testing.T) {
	if os.Getenv("SCORE") == "" {
		t.Skip()
	}
	dd := os.Getenv("DD") == "1"
	var row []string
	for _, name := range []string{"liao-table1-idle", "liao-table1-loaded"} {
		sc, _ := Shipped(name)
		sc.Engine.DiscountDelay = dd
		var s [2]Summary
		for j, ad := range []bool{false, true} {
			x := sc
			x.Engine.Adaptive = ad
			res, err := Run(context.Background(), x, Options{})
			if err != nil {
				t.Fatal(err)
			}
			s[j] = res.Summary
		}
		row = append(row, fmt.Sprintf("%s: err %.2f/%.2f us (x%.2f) msgs %.2f/%.2f (x%.2f) cov %v/%v", name[12:], s[0].ErrorMeanNs/1e3, s[1].ErrorMeanNs/1e3,
			s[0].ErrorMeanNs/s[1].ErrorMeanNs, s[0].MessagesPerNodePerS, s[1].MessagesPerNodePerS, s[1].MessagesPerNodePerS/s[0].MessagesPerNodePerS, s[0].BoundCoverage, s[1].BoundCoverage))
	}
	for _, name := range []string{"liao-fig3", "liao-fig3-loaded"} {
		sc, _ := Shipped(name)
		sc.Eval.PlotNodes = []int{1}
		sc.Engine.DiscountDelay = dd
		out := name + ":"
		for _, ad := range []bool{false, true} {
			x := sc
			x.Engine.Adaptive = ad
			res, err := Run(context.Background(), x, Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			pts := res.Trace.Points[0]
			b := stretch(pts, 60, 180).MeanAbs
			// settle: last time after the step with |err| > max(2us, 4*before)
			th := max(3000, 4*b)
			settle := 0.0
			for _, p := range pts {
				if p.T >= 180 && float64(absSat(p.Err)) > th {
					settle = p.T - 180
				}
			}
			out += fmt.Sprintf(" ad=%v [10,40) %.2f before %.2f after30 %.2f after %.2f settle %.1fs msgs %.2f;", ad, stretch(pts, 190, 220).MeanAbs/1e3, b/1e3, stretch(pts, 180, 210).MeanAbs/1e3, stretch(pts, 180, 1e9).MeanAbs/1e3, settle, res.Summary.MessagesPerNodePerS)
		}
		row = append(row, out)
	}
	for _, r := range row {
		fmt.Println(r)
	}
}
