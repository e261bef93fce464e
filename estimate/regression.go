package estimate

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/stat"
)

// DefaultDropFrac is Intel's rule: ignore the 10% of exchanges with the
// highest round trip, the ones most likely delayed by a late process.
const DefaultDropFrac = 0.1

// FitLine fits y = f(x) by least squares through the midpoints of samples
// after dropping the fraction dropFrac (floor of it, in [0, 1)) with the
// highest RTT: Intel's linear clock correction between sync sessions. The
// Mapping is anchored at the newest kept midpoint. Regression gives no
// guaranteed bound: W0 is the largest residual plus the smallest RTT/2 of
// the kept samples, SkewErr three standard errors of the slope.
func FitLine(samples []Sample, dropFrac float64) (Mapping, error) {
	if !(dropFrac >= 0 && dropFrac < 1) {
		return Mapping{}, fmt.Errorf("estimate: FitLine: dropFrac = %v: must be in [0, 1)", dropFrac)
	}
	if len(samples) < 2 {
		return Mapping{}, fmt.Errorf("estimate: FitLine: %d samples: need at least 2", len(samples))
	}
	if err := ValidateRound(samples); err != nil {
		return Mapping{}, fmt.Errorf("estimate: FitLine: %w", err)
	}
	kept := append([]Sample(nil), samples...)
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].RTT() < kept[j].RTT() })
	kept = kept[:len(kept)-int(math.Floor(float64(len(kept))*dropFrac))]
	if len(kept) < 2 {
		return Mapping{}, fmt.Errorf("estimate: FitLine: %d samples left after dropping %v: need at least 2", len(kept), dropFrac)
	}
	// Origin: the newest kept midpoint (x0) and the first kept offset (c).
	x0, _ := kept[0].Mid()
	for _, s := range kept {
		x, _ := s.Mid()
		x0 = max(x0, x)
	}
	c := kept[0].Offset()
	xs := make([]float64, len(kept))
	ys := make([]float64, len(kept))
	minRTT := kept[0].RTT()
	distinct := false
	for i, s := range kept {
		x, _ := s.Mid()
		xs[i] = float64(x - x0)
		ys[i] = float64(s.Offset() - c)
		distinct = distinct || xs[i] != xs[0]
	}
	if !distinct {
		return Mapping{}, fmt.Errorf("estimate: FitLine: all %d kept midpoints are at local time %d: the slope is undetermined", len(kept), x0)
	}
	alpha, beta := stat.LinearRegression(xs, ys, nil, false)
	var maxRes, ss, sxx float64
	mx := stat.Mean(xs, nil)
	span := 0.0
	for i := range xs {
		span = math.Max(span, -xs[i]) // xs <= 0: the origin is the newest
		r := ys[i] - (alpha + beta*xs[i])
		maxRes = math.Max(maxRes, math.Abs(r))
		ss += r * r
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	w0 := int64(math.Ceil(maxRes)) + (max(minRTT, 0)+1)/2
	skewErr := 2 * float64(w0) / span // residuals vanish (two points): the bound at the ends over the span
	if n := len(xs); n > 2 && ss > 0 {
		skewErr = 3 * math.Sqrt(ss/float64(n-2)/sxx)
	}
	return Mapping{
		X0:      x0,
		Y0:      x0 + c + int64(math.Round(alpha)),
		Skew:    beta,
		W0:      w0,
		SkewErr: skewErr,
		Valid:   true,
	}, nil
}

// RegressionConfig configures Regression.
type RegressionConfig struct {
	// Rounds is how many recent rounds are fitted (at least 1).
	Rounds int
	// DropFrac is the fraction of the window's exchanges with the highest
	// RTT that is ignored, in [0, 1).
	DropFrac float64
}

// DefaultRegressionConfig fits the last 16 rounds, dropping 10%.
func DefaultRegressionConfig() RegressionConfig {
	return RegressionConfig{Rounds: 16, DropFrac: DefaultDropFrac}
}

// Validate checks c and names the first bad field.
func (c RegressionConfig) Validate() error {
	if c.Rounds < 1 || c.Rounds > 1<<16 {
		return fmt.Errorf("estimate: RegressionConfig.Rounds = %d: must be in [1, 65536]", c.Rounds)
	}
	if !(c.DropFrac >= 0 && c.DropFrac < 1) {
		return fmt.Errorf("estimate: RegressionConfig.DropFrac = %v: must be in [0, 1)", c.DropFrac)
	}
	return nil
}

// Regression is Intel's estimator: a least-squares line through the
// midpoints of the exchanges of the last Rounds rounds, after dropping the
// DropFrac with the highest RTT. Its bounds are NOT guaranteed (Jezequel's
// footnote: regression cannot give 100% confidence intervals); see FitLine.
type Regression struct {
	cfg    RegressionConfig
	rounds [][]Sample // ring of the last cfg.Rounds rounds
	next   int
	m      Mapping
	buf    []Sample
}

// NewRegression validates cfg and returns an empty Regression.
func NewRegression(cfg RegressionConfig) (*Regression, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Regression{cfg: cfg}, nil
}

// Reset forgets every sample.
func (r *Regression) Reset() {
	r.rounds, r.next, r.m = r.rounds[:0], 0, Mapping{}
}

// Mapping returns the current fit; Valid once two rounds are held.
func (r *Regression) Mapping() Mapping { return r.m }

// AddRound adds a round and refits the window. A round whose offsets do not
// fit the window (more than 2^44 ns away) restarts the window and returns a
// wrapped ErrInconsistent.
func (r *Regression) AddRound(round []Sample) error {
	if err := ValidateRound(round); err != nil {
		return fmt.Errorf("estimate: Regression.AddRound: %w", err)
	}
	cp := append([]Sample(nil), round...)
	if len(r.rounds) < r.cfg.Rounds {
		r.rounds = append(r.rounds, cp)
	} else {
		r.rounds[r.next] = cp
		r.next = (r.next + 1) % r.cfg.Rounds
	}
	r.buf = r.buf[:0]
	for _, rd := range r.rounds {
		r.buf = append(r.buf, rd...)
	}
	if ValidateRound(r.buf) != nil {
		r.Reset()
		r.rounds = append(r.rounds, cp)
		r.buf = append(r.buf[:0], cp...)
		r.fit()
		return fmt.Errorf("estimate: Regression.AddRound: round too far from the window: restarted: %w", ErrInconsistent)
	}
	r.fit()
	return nil
}

func (r *Regression) fit() {
	if len(r.rounds) < 2 {
		r.m = Mapping{} // one burst of exchanges cannot give a drift
		return
	}
	m, err := FitLine(r.buf, r.cfg.DropFrac)
	if err != nil {
		r.m = Mapping{}
		return
	}
	r.m = m
}

var _ Estimator = (*Regression)(nil)
