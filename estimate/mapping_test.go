package estimate

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/satmath"
)

// randomMapping returns a mapping and a true line inside its bounds.
func randomMapping(r *rand.Rand, x0 int64) (m Mapping, trueY0 int64, trueSkew float64) {
	m = Mapping{
		X0:      x0,
		Y0:      x0 + r.Int64N(2e9) - 1e9,
		Skew:    (r.Float64()*2 - 1) * 1e-4,
		W0:      r.Int64N(100_000),
		SkewErr: r.Float64() * 1e-5,
		Valid:   true,
	}
	trueY0 = m.Y0 + int64((r.Float64()*2-1)*float64(m.W0))
	trueSkew = m.Skew + (r.Float64()*2-1)*m.SkewErr
	return m, trueY0, trueSkew
}

func lineAt(y0 int64, skew float64, x0, x int64) int64 {
	dx := x - x0
	return y0 + dx + int64(math.Round(skew*float64(dx)))
}

// TestJezequel51ComposeContainsTheTruth: for random source and local
// mappings and true lines inside their bounds, the composed mapping (and
// MapInterval over the exact inner interval) contains the composed truth.
func TestJezequel51ComposeContainsTheTruth(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		base := int64(1e15) + r.Int64N(1e12)
		f, fy0, fs := randomMapping(r, base)
		g, gy0, gs := randomMapping(r, f.Y0+r.Int64N(1e10)-5e9)
		x0 := base + r.Int64N(1e11) - 5e10
		c := Compose(g, f, x0)
		for range 8 {
			x := x0 + r.Int64N(2*int64(time.Hour)) - int64(time.Hour)
			y := lineAt(fy0, fs, f.X0, x)
			z := lineAt(gy0, gs, g.X0, y)
			if _, lo, hi := c.At(x); z < lo || z > hi {
				t.Fatalf("case %d: composed truth %d outside [%d, %d] at dx %d\nf=%+v\ng=%+v\nc=%+v", i, z, lo, hi, x-x0, f, g, c)
			}
			fe, flo, fhi := f.At(x)
			_, glo, ghi, ok := MapInterval(g, fe, flo, fhi)
			if !ok || z < glo || z > ghi {
				t.Fatalf("case %d: MapInterval [%d, %d] ok=%v misses %d", i, glo, ghi, ok, z)
			}
		}
	}
}

func TestReanchorNeverNarrower(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		m, _, _ := randomMapping(r, r.Int64N(1e15))
		m.Wander = r.Float64() * 1e-16
		a := Reanchor(m, m.X0+r.Int64N(1e11)-5e10)
		for range 8 {
			x := m.X0 + r.Int64N(1e12) - 5e11
			e1, lo1, hi1 := m.At(x)
			e2, lo2, hi2 := a.At(x)
			if lo2 > lo1 || hi2 < hi1 || satmath.AbsDiff(e1, e2) > 1 {
				t.Fatalf("reanchored [%d %d] est %d narrower than [%d %d] est %d", lo2, hi2, e2, lo1, hi1, e1)
			}
		}
	}
}

func TestMapIntervalRefusesWhatItCannotBound(t *testing.T) {
	id := Identity(0)
	tests := []struct {
		name   string
		m      Mapping
		lo, hi int64
		ok     bool
	}{
		{"identity", id, -5, 5, true},
		{"invalid mapping", Mapping{}, 0, 1, false},
		{"empty interval", id, 5, -5, false},
		{"beyond the horizon", id, 0, ComposeHorizon + 1, false},
		{"bound growing as fast as time", Mapping{Valid: true, SkewErr: 0.6}, 0, 1, false},
		{"unbounded width", Mapping{Valid: true, W0: MaxWidth}, 0, 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, _, ok := MapInterval(tt.m, tt.lo, tt.lo, tt.hi); ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
		})
	}
}
