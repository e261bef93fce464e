package netmodel

import (
	"math/rand/v2"
	"testing"
)

// TestMatrixParses: every class of the link matrix is a valid link whose
// mean one-way delay each way is near the lab's 100 us, and the floor
// classes have a floor.
func TestMatrixParses(t *testing.T) {
	for _, c := range Matrix() {
		l, err := ParseLink(c.Link)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		for dir, m := range map[string]Model{"forward": l.Forward, "reverse": l.Reverse} {
			r := rand.New(rand.NewPCG(1, 2))
			var sum float64
			const n = 20000
			for range n {
				sum += float64(m.Sample(r))
			}
			if mean := sum / n; mean < 90e3 || mean > 125e3 {
				t.Errorf("%s %s: mean delay %.1f us, want about 100", c.Name, dir, mean/1e3)
			}
			if c.Floor && m.Floor() == 0 {
				t.Errorf("%s %s: a floor class without a floor", c.Name, dir)
			}
		}
		if got, ok := MatrixClass(c.Name); !ok || got != c {
			t.Errorf("MatrixClass(%q) = %v, %v", c.Name, got, ok)
		}
	}
	if _, ok := MatrixClass("nosuch"); ok {
		t.Error("MatrixClass found a class that is not there")
	}
}
