package netmodel

import (
	"errors"
	"math"
	"math/rand/v2"

	"github.com/gclock/gclock/internal/conf"
)

// Duration is the house's YAML duration (conf.Duration): a time span in
// nanoseconds, written as a Go duration string ("10ms", "1h30m").
type Duration = conf.Duration

// Spec is the model of every directed link of a simulated network (a
// scenario's `links:` section).
type Spec struct {
	// MinDelay is the shortest one-way delay. Each directed link gets
	// MinDelay plus a uniform draw in [0, Asymmetry], so the two directions
	// of a link differ by up to Asymmetry.
	MinDelay  Duration `yaml:"min_delay" json:"min_delay"`
	Asymmetry Duration `yaml:"asymmetry" json:"asymmetry"`
	Tail      TailSpec `yaml:"tail" json:"tail"`
	Loss      float64  `yaml:"loss" json:"loss"`
	Duplicate float64  `yaml:"duplicate" json:"duplicate"`
	// Reorder is the share of messages held back by ReorderDelay (extra), so
	// that later messages overtake them.
	Reorder      float64  `yaml:"reorder" json:"reorder"`
	ReorderDelay Duration `yaml:"reorder_delay" json:"reorder_delay"`
	// Model, if set, is a link in gclock lab's syntax (ParseLink: e.g.
	// "normal:100us:10us" or "pareto:100us:10us/normal:100us:10us"),
	// drawn instead of MinDelay, Asymmetry and Tail: its forward model for
	// a message from a lower- to a higher-numbered node (from the reference
	// outwards in a star), its reverse model the other way. A load phase
	// scales its jitter as it scales a tail. Loss, duplication and
	// reordering stay the spec's own fields; MinDelay, Asymmetry and Tail
	// are cleared by Validate.
	Model string `yaml:"model" json:"model,omitempty"`

	link *Link // Model parsed by Validate
}

// Validate checks the spec; every error names the field, under field (the
// spec's path in its file, such as "links").
func (s *Spec) Validate(field string) error {
	var errs conf.Errors
	bad := errs.Under(field)
	if s.MinDelay < 0 || s.Asymmetry < 0 || s.ReorderDelay < 0 {
		bad("min_delay", "delays must be >= 0")
	}
	s.link = nil
	if s.Model != "" {
		s.validateModel(bad)
	} else {
		s.validateTail(bad)
	}
	for _, p := range []struct {
		f string
		v float64
	}{{"loss", s.Loss}, {"duplicate", s.Duplicate}, {"reorder", s.Reorder}} {
		if !finiteIn(p.v, 0, 1) {
			bad(p.f, "probability %v out of range [0, 1]", p.v)
		}
	}
	if s.Loss >= 1 {
		bad("loss", "1 would cut every link for the whole run")
	}
	return errors.Join(errs...)
}

// validateModel parses Model (see Spec.Model).
func (s *Spec) validateModel(bad func(field, format string, args ...any)) {
	l, err := ParseLink(s.Model)
	switch {
	case err != nil:
		bad("model", "%v", err)
	case l.Direct:
		bad("model", "direct is a lab wiring, not a delay model")
	case l.Forward.Loss+l.Forward.Dup+l.Forward.Reorder+l.Reverse.Loss+l.Reverse.Dup+l.Reverse.Reorder > 0:
		bad("model", "%q: loss, dup and reorder are the links section's own fields here (loss, duplicate, reorder)", s.Model)
	default:
		// The model replaces the floor-and-tail fields (a scenario's
		// defaults fill them): cleared, so that the run's JSON shows what
		// was drawn.
		s.link, s.MinDelay, s.Asymmetry, s.Tail = &l, 0, 0, TailSpec{}
	}
}

// validateTail checks the tail of a spec without a Model.
func (s *Spec) validateTail(bad func(field, format string, args ...any)) {
	switch s.Tail.Dist {
	case TailExponential:
	case TailLognormal:
		if !finiteIn(s.Tail.Sigma, 0.01, 5) {
			bad("tail.sigma", "%v out of range [0.01, 5]", s.Tail.Sigma)
		}
	case TailPareto:
		if !finiteIn(s.Tail.Alpha, 1.01, 100) {
			bad("tail.alpha", "%v out of range (1, 100] (the mean must be finite)", s.Tail.Alpha)
		}
	default:
		bad("tail.dist", "unknown distribution %q (exponential, lognormal, pareto)", s.Tail.Dist)
	}
	if s.Tail.Mean < 0 {
		bad("tail.mean", "must be >= 0")
	}
}

func finiteIn(v, lo, hi float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= lo && v <= hi
}

// Load is what the load of the moment makes of a Spec: its tails' means
// scaled, its probabilities replaced. Spec.Load is the idle load.
type Load struct {
	TailScale float64
	Loss      float64
	Duplicate float64
	Reorder   float64
}

// Load returns the spec's own load: tails at their mean, its probabilities.
func (s *Spec) Load() Load {
	return Load{TailScale: 1, Loss: s.Loss, Duplicate: s.Duplicate, Reorder: s.Reorder}
}

// mix64 is splitmix64's finaliser: a fixed hash used to give every directed
// link its own minimum delay independent of the order of events.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Net draws one-way delays for every directed link of a Spec. It holds no
// state per link: a link's fixed minimum delay is a hash of Seed and its
// ends, so a full mesh costs no memory per link.
type Net struct {
	Spec Spec
	Seed uint64
}

// MinDelay is the fixed minimum one-way delay of the link from -> to, ns.
func (m *Net) MinDelay(from, to int) int64 {
	d := int64(m.Spec.MinDelay)
	if a := int64(m.Spec.Asymmetry); a > 0 {
		h := mix64(m.Seed ^ mix64(uint64(from)<<32|uint64(uint32(to))))
		d += int64(h % uint64(a+1))
	}
	return d
}

// Transmit draws what happens to one message sent on from -> to under load
// l: it returns buf[:0] extended by the delay in ns of each copy to deliver
// (none when lost, two when duplicated), each in [0, MaxDelay].
func (m *Net) Transmit(r *rand.Rand, from, to int, l Load, buf []int64) []int64 {
	buf = buf[:0]
	copies := fate(r, l.Loss, l.Duplicate)
	if copies == 0 {
		return buf
	}
	base := m.MinDelay(from, to)
	mean := float64(m.Spec.Tail.Mean) * l.TailScale
	var model Model
	if lk := m.Spec.link; lk != nil {
		model = lk.Forward
		if from > to {
			model = lk.Reverse
		}
		model = model.Loaded(l.TailScale)
	}
	for range copies {
		var d int64
		if m.Spec.link != nil {
			d = model.Sample(r)
		} else {
			d = base + m.Spec.Tail.Draw(r, mean)
		}
		if l.Reorder > 0 && r.Float64() < l.Reorder {
			d += int64(m.Spec.ReorderDelay)
		}
		buf = append(buf, min(d, MaxDelay))
	}
	return buf
}

// fate draws how many copies of a message arrive: 0 (lost with probability
// loss), 2 (duplicated with probability dup among those not lost) or 1.
func fate(r *rand.Rand, loss, dup float64) int {
	if loss > 0 && r.Float64() < loss {
		return 0
	}
	if dup > 0 && r.Float64() < dup {
		return 2
	}
	return 1
}
