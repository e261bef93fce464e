package sim

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/estimate"
)

func hullEst(cfg engine.Config) (estimate.Estimator, estimate.Estimator, error) {
	mk := func() (estimate.Estimator, error) {
		return estimate.NewHull(estimate.HullConfig{Window: cfg.Window, Shift: int64(cfg.Granularity), MaxWander: cfg.MaxWander})
	}
	a, err := mk()
	if err != nil {
		return nil, nil, err
	}
	b, err := mk()
	return a, b, err
}

func TestPreviewEngine(t *testing.T) {
	if os.Getenv("PREVIEW") == "" {
		t.Skip()
	}
	sc, err := Shipped(os.Getenv("PREVIEW"))
	if err != nil {
		t.Fatal(err)
	}
	if d := os.Getenv("DUR"); d != "" && os.Getenv("NODES") == "" {
		dd, _ := time.ParseDuration(d)
		sc.Duration = Duration(dd)
		sc.Eval.Warmup = min(sc.Eval.Warmup, sc.Duration/4)
	}
	if os.Getenv("NODES") != "" {
		fmt.Sscan(os.Getenv("NODES"), &sc.Nodes)
		sc.Topology.Kind = "tree"
		sc.Topology.Fanout = 8
		d, _ := time.ParseDuration(os.Getenv("DUR"))
		sc.Duration = Duration(d)
		sc.Eval.Interval = Duration(time.Second)
		sc.Eval.Warmup = sc.Duration / 10
		sc.Phases = nil
		sc.Engine.ContinuousDrift = os.Getenv("CONT") != ""
	}
	opt := Options{NewNode: func(cfg engine.Config, l *slog.Logger) (Node, error) {
		return engine.NewWithEstimators(cfg, l, hullEst)
	}, Progress: os.Stderr, Trace: true}
	res, err := Run(context.Background(), sc, opt)
	if err != nil {
		t.Fatal(err)
	}
	WriteTable(os.Stdout, res)
	if f := os.Getenv("PLOT"); f != "" {
		if err := PlotFile(res, f); err != nil {
			t.Fatal(err)
		}
	}
}
