package netmodel

import (
	"math"
	"math/rand/v2"
)

// MaxDelay caps one drawn delay (a pareto tail can be huge) so that truth
// times never overflow; a message this late is as good as lost to any
// engine.
const MaxDelay = int64(60e9)

// Tail distributions of a Spec, by the names its YAML uses.
const (
	TailExponential = "exponential"
	TailLognormal   = "lognormal"
	TailPareto      = "pareto"
)

// lomax draws the package's one pareto (see the package documentation): a
// pareto shifted to start at 0, shape alpha (> 1), mean m.
func lomax(r *rand.Rand, m, alpha float64) float64 {
	xm := m * (alpha - 1)
	u := 1 - r.Float64() // (0, 1]
	return xm * (math.Pow(u, -1/alpha) - 1)
}

// lognormal draws a lognormal variable of mean m whose underlying normal
// has standard deviation sigma.
func lognormal(r *rand.Rand, m, sigma float64) float64 {
	mu := math.Log(m) - sigma*sigma/2
	return math.Exp(mu + sigma*r.NormFloat64())
}

// clampDelay turns a drawn delay in ns into an int64 in [0, MaxDelay],
// truncating (NaN counts as 0).
func clampDelay(x float64) int64 {
	if !(x > 0) {
		return 0
	}
	if !(x < float64(MaxDelay)) {
		return MaxDelay
	}
	return int64(x)
}

// TailSpec is the random part of a Spec's one-way delay, added to the
// link's minimum.
type TailSpec struct {
	// Dist is exponential, lognormal or pareto.
	Dist string `yaml:"dist" json:"dist"`
	// Mean of the tail (all three distributions are parameterised by their
	// mean, so that a load phase scales the mean).
	Mean Duration `yaml:"mean" json:"mean"`
	// Sigma is the lognormal's shape (of the underlying normal).
	Sigma float64 `yaml:"sigma" json:"sigma,omitempty"`
	// Alpha is the pareto's shape (> 1 for a finite mean).
	Alpha float64 `yaml:"alpha" json:"alpha,omitempty"`
}

// Draw draws one tail of mean mean ns (the spec's Mean scaled by a load),
// in ns, in [0, MaxDelay].
func (t TailSpec) Draw(r *rand.Rand, mean float64) int64 {
	if mean <= 0 {
		return 0
	}
	var x float64
	switch t.Dist {
	case TailLognormal:
		x = lognormal(r, mean, t.Sigma)
	case TailPareto:
		x = lomax(r, mean, t.Alpha)
	default:
		x = mean * r.ExpFloat64()
	}
	return clampDelay(x)
}
