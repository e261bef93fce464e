package estimate

import (
	"math"
	"testing"
)

func TestSplineErrors(t *testing.T) {
	tests := []struct {
		name string
		pts  []Point
		want string
	}{
		{"none", nil, "need at least 2"},
		{"one", []Point{{X: 1, Y: 1}}, "need at least 2"},
		{"x not increasing", []Point{{X: 1, Y: 1}, {X: 5, Y: 5}, {X: 5, Y: 9}}, "points[2].X"},
		{"y not increasing", []Point{{X: 1, Y: 1}, {X: 5, Y: 5}, {X: 6, Y: 4}}, "points[2].Y"},
		{"span", []Point{{X: 0, Y: 0}, {X: 1 << 53, Y: 1 << 53}}, "2^52"},
	}
	for _, tc := range tests {
		if _, err := NewSpline(tc.pts); err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

// Intel VT_timesync: the spline goes through every condensed point, is
// monotone, C1 at the joints, and extrapolates linearly along the end
// slopes.
func TestIntel_SplineThroughPointsC1Monotone(t *testing.T) {
	base := int64(1e15)
	pts := []Point{
		{X: base, Y: base + 1000},
		{X: base + 10e9, Y: base + 10e9 + 1000 + 200000}, // 20 ppm
		{X: base + 20e9, Y: base + 20e9 + 1000 + 250000}, // 5 ppm
		{X: base + 35e9, Y: base + 35e9 + 1000 + 100000}, // -10 ppm
		{X: base + 40e9, Y: base + 40e9 + 1000 + 150000}, // 10 ppm
	}
	s, err := NewSpline(pts)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pts {
		if got := s.Map(p.X); got != p.Y {
			t.Errorf("Map(points[%d].X) = %d, want %d", i, got, p.Y)
		}
	}
	prev := s.Map(base - 1e9)
	for x := base - 1e9; x <= base+41e9; x += 1e7 {
		v := s.Map(x)
		if v < prev {
			t.Fatalf("Map not monotone at %d: %d < %d", x, v, prev)
		}
		prev = v
	}
	// C1: the slope just left and right of each inner joint agree.
	for i := 1; i < len(pts)-1; i++ {
		const h = 1e6
		left := float64(s.Map(pts[i].X)-s.Map(pts[i].X-h)) / h
		right := float64(s.Map(pts[i].X+h)-s.Map(pts[i].X)) / h
		if math.Abs(left-right) > 2e-6 {
			t.Errorf("joint %d: slope %g left, %g right", i, left, right)
		}
	}
	// Linear extrapolation along the end slope.
	last := pts[len(pts)-1]
	d1 := s.Map(last.X+1e9) - last.Y
	d2 := s.Map(last.X+2e9) - last.Y
	if dd := d2 - 2*d1; dd < -1 || dd > 1 {
		t.Errorf("extrapolation not linear: %d then %d", d1, d2)
	}
}

// Intel: condense a session by dropping the 10% highest RTT and averaging
// the midpoints.
func TestIntel_Condense(t *testing.T) {
	var round []Sample
	for i := int64(0); i < 10; i++ {
		round = append(round, Sample{SrcSend: 1000 + i*100, LocRecv: 10 + i*100, LocSend: 20 + i*100, SrcRecv: 1030 + i*100})
	}
	round[4].SrcRecv += 1e6 // the one exchange dropped (10% of 10)
	p, err := Condense(round)
	if err != nil {
		t.Fatal(err)
	}
	// Kept: i != 4; mean x mid = 15 + 100*mean(i) with mean(i) = 41/9.
	wantX := int64(math.Round(15 + 100*41.0/9))
	wantY := int64(math.Round(1015 + 100*41.0/9))
	if p.X != wantX || p.Y != wantY || p.W != 10 {
		t.Errorf("Condense = %+v, want X %d Y %d W 10", p, wantX, wantY)
	}
	if _, err := Condense(nil); err == nil {
		t.Error("Condense(nil) accepted")
	}
}

func TestSplineEstimator(t *testing.T) {
	s := NewSplineEstimator()
	w := world{t0: 1e12, off: 1e6, ppb: 15000}
	for i := int64(0); i < 5; i++ {
		tt := w.t0 + i*10e9
		var rd []Sample
		for k := int64(0); k < 10; k++ {
			u := tt + k*100000
			rd = append(rd, Sample{SrcSend: w.y(u), LocRecv: u + 5000, LocSend: u + 6000, SrcRecv: w.y(u + 11000)})
		}
		if err := s.AddRound(rd); err != nil {
			t.Fatal(err)
		}
		if s.Mapping().Valid != (i >= 1) {
			t.Fatalf("round %d: Valid = %v", i, s.Mapping().Valid)
		}
	}
	m := s.Mapping()
	if math.Abs(m.Skew-w.skew()) > 1e-9 {
		t.Errorf("Skew = %g, want %g", m.Skew, w.skew())
	}
	x := m.X0 + 5e9
	if est, lo, hi := m.At(x); lo > w.y(x) || hi < w.y(x) {
		t.Errorf("At(%d) = %d [%d, %d], truth %d", x, est, lo, hi, w.y(x))
	}
	// A round before the last point is rejected.
	if err := s.AddRound([]Sample{{SrcSend: w.y(w.t0), LocRecv: w.t0 + 5000, LocSend: w.t0 + 6000, SrcRecv: w.y(w.t0 + 11000)}}); err == nil {
		t.Error("a round before the last point was accepted")
	}
	s.Reset()
	if s.Mapping().Valid {
		t.Error("valid after Reset")
	}
}
