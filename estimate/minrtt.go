package estimate

import (
	"fmt"
	"math"

	"github.com/gclock/gclock/internal/satmath"
)

// Shortest returns the exchange of round with the smallest RTT (the first
// one on ties) and its index; it returns (Sample{}, -1) for an empty round.
// This is Liao's "update shortest T_net-this-round and corresponding
// T_diff".
func Shortest(round []Sample) (Sample, int) {
	best := -1
	for i, s := range round {
		if best < 0 || s.RTT() < round[best].RTT() {
			best = i
		}
	}
	if best < 0 {
		return Sample{}, -1
	}
	return round[best], best
}

// RepeatRound is Liao's NETWORK_LATENCY_ERROR_THRESH rule: the round must be
// redone once when its shortest RTT exceeds the shortest ever seen by more
// than thresh (ns). A negative shortestEver means none has been seen yet
// (never repeat). It is overflow-safe.
func RepeatRound(shortestThisRound, shortestEver, thresh int64) bool {
	if shortestEver < 0 {
		return false
	}
	limit, ok := satmath.AddChecked(shortestEver, thresh)
	if !ok {
		return thresh < 0 // overflowed downward: every RTT exceeds it
	}
	return shortestThisRound > limit
}

// MinRTTConfig configures MinRTT.
type MinRTTConfig struct {
	// Granularity is added to W0: the clocks' read granularity or jitter
	// (ns) that the RTT/2 bound does not cover.
	Granularity int64
	// Smoothing is the weight of the newest drift measurement in the
	// exponential average of the skew, in (0, 1]; 1 keeps only the newest.
	Smoothing float64
	// SmoothingSpan, if positive, makes Smoothing the weight of a drift
	// measured over SmoothingSpan ns of local time: one measured over dx
	// weighs 1-(1-Smoothing)^(dx/SmoothingSpan), so that the average
	// remembers a fixed time, not a fixed number of rounds. A drift measured
	// between two close rounds is their offsets' noise divided by a short
	// dx: without this, frequent rounds make the skew noisier, the
	// projection worse, and (in Liao's adaptive engine) the rounds more
	// frequent still. 0: every round weighs Smoothing (Liao's rounds of
	// one fixed period).
	SmoothingSpan int64
	// MaxDrift is the |skew| assumed before two rounds have measured it; it
	// is SkewErr until then (e.g. 100e-6).
	MaxDrift float64
}

// DefaultMinRTTConfig: no granularity, smoothing 0.5, 100 ppm before the
// first drift measurement.
func DefaultMinRTTConfig() MinRTTConfig {
	return MinRTTConfig{Smoothing: 0.5, MaxDrift: 100e-6}
}

// Validate checks c and names the first bad field.
func (c MinRTTConfig) Validate() error {
	if c.Granularity < 0 || c.Granularity > maxShift {
		return fmt.Errorf("estimate: MinRTTConfig.Granularity = %d: must be in [0, 2^40]", c.Granularity)
	}
	if !(c.Smoothing > 0 && c.Smoothing <= 1) {
		return fmt.Errorf("estimate: MinRTTConfig.Smoothing = %v: must be in (0, 1]", c.Smoothing)
	}
	if c.SmoothingSpan < 0 {
		return fmt.Errorf("estimate: MinRTTConfig.SmoothingSpan = %d: must be >= 0", c.SmoothingSpan)
	}
	if !(c.MaxDrift >= 0 && c.MaxDrift <= 0.1) {
		return fmt.Errorf("estimate: MinRTTConfig.MaxDrift = %v: must be in [0, 0.1]", c.MaxDrift)
	}
	return nil
}

// MinRTT is Cristian's and Liao et al.'s estimator: per round the exchange
// with the shortest round trip gives the offset at its midpoint, within
// RTT/2 (plus 1 ns for the integer midpoints and the granularity); the skew is the change of offset between
// successive rounds ("calculate drift rate"), exponentially smoothed. W0 is
// a guaranteed bound at X0; SkewErr is an estimate (the two rounds' RTT/2
// over their distance plus the last change of the smoothed skew), not a
// guarantee.
type MinRTT struct {
	cfg      MinRTTConfig
	have     bool
	prevX    int64
	prevOff  int64
	prevW    int64
	skew     float64
	haveSkew bool
	m        Mapping
}

// NewMinRTT validates cfg and returns an empty MinRTT.
func NewMinRTT(cfg MinRTTConfig) (*MinRTT, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &MinRTT{cfg: cfg}, nil
}

// Reset forgets every sample.
func (e *MinRTT) Reset() { *e = MinRTT{cfg: e.cfg} }

// Mapping returns the current estimate.
func (e *MinRTT) Mapping() Mapping { return e.m }

// AddRound keeps the round's shortest exchange. When its interval
// [offset-W0, offset+W0] does not meet the previous mapping's bounds at the
// same local time, the drift has changed: the skew history is dropped and a
// wrapped ErrInconsistent is returned (the round is used).
func (e *MinRTT) AddRound(round []Sample) error {
	if err := ValidateRound(round); err != nil {
		return fmt.Errorf("estimate: MinRTT.AddRound: %w", err)
	}
	s, i := Shortest(round)
	if s.RTT() < 0 {
		return fmt.Errorf("estimate: MinRTT.AddRound: round[%d]: negative RTT %d: %w", i, s.RTT(), ErrBadRound)
	}
	x, y := s.Mid()
	off := y - x
	// ceil(RTT/2), +1 ns for the floored midpoints, + the granularity.
	w := (s.RTT()+1)/2 + 1 + e.cfg.Granularity
	var restart error
	if e.have {
		dx := x - e.prevX
		_, lo, hi := e.m.At(x)
		if y+w < lo || y-w > hi {
			restart = fmt.Errorf("estimate: MinRTT.AddRound: offset %d ns outside the previous bounds: %w", off, ErrInconsistent)
			e.haveSkew = false
		} else if dx > 0 {
			inst := float64(off-e.prevOff) / float64(dx)
			if e.haveSkew {
				e.skew += e.weight(dx) * (inst - e.skew)
			} else {
				e.skew, e.haveSkew = inst, true
			}
		}
	}
	skewErr := e.cfg.MaxDrift
	if e.haveSkew && x > e.prevX {
		skewErr = float64(w+e.prevW)/float64(x-e.prevX) + math.Abs(float64(off-e.prevOff)/float64(x-e.prevX)-e.skew)
	}
	skew := 0.0
	if e.haveSkew {
		skew = e.skew
	}
	e.have, e.prevX, e.prevOff, e.prevW = true, x, off, w
	e.m = Mapping{X0: x, Y0: y, Skew: skew, W0: w, SkewErr: skewErr, Valid: true}
	return restart
}

// weight is the share of a drift measured over dx in the skew's average.
func (e *MinRTT) weight(dx int64) float64 {
	a := e.cfg.Smoothing
	if e.cfg.SmoothingSpan <= 0 || a >= 1 {
		return a
	}
	return -math.Expm1(math.Log1p(-a) * float64(dx) / float64(e.cfg.SmoothingSpan))
}

var _ Estimator = (*MinRTT)(nil)
