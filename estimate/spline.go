package estimate

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/interp"

	"github.com/gclock/gclock/internal/satmath"
)

// maxSplineSpan bounds the x and y extent of a Spline (2^52 ns, about 52
// days) so that relative values stay exact in float64.
const maxSplineSpan = 1 << 52

// maxSplinePoints is how many condensed points a Spline used as an
// Estimator keeps (the oldest are dropped): one per sync session, so 1024
// covers any realistic trace.
const maxSplinePoints = 1024

// Point is one condensed sync session: local time X and source time Y, ns,
// with W the half-width of its uncertainty (the mean RTT/2 of the kept
// exchanges).
type Point struct {
	X, Y int64
	W    int64
}

// Condense turns one sync session into one point (Intel VT_timesync): drop
// the 10% of exchanges with the highest RTT, then average the midpoints of
// the rest, exactly in int64 relative to the first kept midpoint.
func Condense(round []Sample) (Point, error) {
	if err := ValidateRound(round); err != nil {
		return Point{}, fmt.Errorf("estimate: Condense: %w", err)
	}
	kept := append([]Sample(nil), round...)
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].RTT() < kept[j].RTT() })
	kept = kept[:len(kept)-int(math.Floor(float64(len(kept))*DefaultDropFrac))]
	bx, by := kept[0].Mid()
	var sx, sy, sr int64 // |each term| <= 2^45, at most 2^17 terms before overflow risk
	n := int64(len(kept))
	if n > 1<<17 {
		return Point{}, fmt.Errorf("estimate: Condense: %d samples: at most 2^17: %w", n, ErrBadRound)
	}
	for _, s := range kept {
		x, y := s.Mid()
		sx += x - bx
		sy += y - by
		sr += max(s.RTT(), 0)
	}
	return Point{
		X: bx + int64(math.Round(float64(sx)/float64(n))),
		Y: by + int64(math.Round(float64(sy)/float64(n))),
		W: (sr/n + 1) / 2,
	}, nil
}

// Spline is Intel's piecewise correction through condensed points: a C1
// monotone piecewise cubic (Fritsch-Butland) through the points, with
// linear extrapolation along the end slopes outside them. It is also an
// Estimator: AddRound condenses the round into one more point.
type Spline struct {
	pts    []Point
	fb     interp.FritschButland
	slope0 float64 // dy/dx at the first point
	slope1 float64 // dy/dx at the last point
	ok     bool
}

// NewSpline fits a spline through points (at least 2, X and Y strictly
// increasing, extent at most 2^52 ns).
func NewSpline(points []Point) (*Spline, error) {
	s := &Spline{}
	if err := s.fit(append([]Point(nil), points...)); err != nil {
		return nil, err
	}
	return s, nil
}

// NewSplineEstimator returns an empty Spline to be fed with AddRound; it is
// valid from its second round on.
func NewSplineEstimator() *Spline { return &Spline{} }

func checkPoints(points []Point) error {
	if len(points) < 2 {
		return fmt.Errorf("estimate: spline: %d points: need at least 2", len(points))
	}
	for i := 1; i < len(points); i++ {
		if points[i].X <= points[i-1].X {
			return fmt.Errorf("estimate: spline: points[%d].X = %d: not after points[%d].X = %d", i, points[i].X, i-1, points[i-1].X)
		}
		if points[i].Y <= points[i-1].Y {
			return fmt.Errorf("estimate: spline: points[%d].Y = %d: not after points[%d].Y = %d", i, points[i].Y, i-1, points[i-1].Y)
		}
	}
	dx, ok1 := satmath.SubChecked(points[len(points)-1].X, points[0].X)
	dy, ok2 := satmath.SubChecked(points[len(points)-1].Y, points[0].Y)
	if !ok1 || !ok2 || dx > maxSplineSpan || dy > maxSplineSpan {
		return fmt.Errorf("estimate: spline: points span more than 2^52 ns")
	}
	return nil
}

func (s *Spline) fit(points []Point) error {
	if err := checkPoints(points); err != nil {
		return err
	}
	xs := make([]float64, len(points))
	ys := make([]float64, len(points))
	for i, p := range points {
		xs[i] = float64(p.X - points[0].X)
		ys[i] = float64(p.Y - points[0].Y)
	}
	if err := s.fb.Fit(xs, ys); err != nil {
		return fmt.Errorf("estimate: spline: %w", err)
	}
	s.pts = points
	s.slope0 = s.fb.PredictDerivative(xs[0])
	s.slope1 = s.fb.PredictDerivative(xs[len(xs)-1])
	s.ok = true
	return nil
}

// Points returns the spline's points.
func (s *Spline) Points() []Point { return append([]Point(nil), s.pts...) }

// Map returns the source time at local time x: the spline between the
// points, the end tangents outside them. It returns x for an empty Spline.
func (s *Spline) Map(x int64) int64 {
	if !s.ok {
		return x
	}
	first, last := s.pts[0], s.pts[len(s.pts)-1]
	switch {
	case x < first.X:
		return first.Y - int64(math.Round(s.slope0*float64(first.X-x)))
	case x > last.X:
		return last.Y + int64(math.Round(s.slope1*float64(x-last.X)))
	}
	return first.Y + int64(math.Round(s.fb.Predict(float64(x-first.X))))
}

// AddRound condenses round into one point and refits. A round whose point
// is not after the last one in both X and Y is rejected.
func (s *Spline) AddRound(round []Sample) error {
	p, err := Condense(round)
	if err != nil {
		return fmt.Errorf("estimate: Spline.AddRound: %w", err)
	}
	pts := append(append([]Point(nil), s.pts...), p)
	if len(pts) > maxSplinePoints {
		pts = pts[len(pts)-maxSplinePoints:]
	}
	if len(pts) < 2 {
		s.pts = pts
		return nil
	}
	if err := checkPoints(pts); err != nil {
		return fmt.Errorf("estimate: Spline.AddRound: %w", err)
	}
	return s.fit(pts)
}

// Mapping returns the tangent at the last point: Y0 its Y, Skew the end
// slope minus 1, W0 its half-width (mean RTT/2) and SkewErr the two last
// points' half-widths over their distance. None of it is guaranteed.
func (s *Spline) Mapping() Mapping {
	if !s.ok {
		return Mapping{}
	}
	n := len(s.pts)
	a, b := s.pts[n-2], s.pts[n-1]
	return Mapping{
		X0:      b.X,
		Y0:      b.Y,
		Skew:    s.slope1 - 1,
		W0:      b.W,
		SkewErr: float64(a.W+b.W) / float64(b.X-a.X),
		Valid:   true,
	}
}

// Reset forgets every point.
func (s *Spline) Reset() { *s = Spline{} }

var _ Estimator = (*Spline)(nil)
