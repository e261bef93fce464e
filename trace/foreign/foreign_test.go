package foreign

import (
	"testing"
)

// TestCorrectDriftSteps: clocks with offsets, drifts, two drift steps each
// and wander, corrected from the offset records and the messages, judged
// against the generator's truth.
func TestCorrectDriftSteps(t *testing.T) {
	for _, seed := range []string{"1", "2", "3"} {
		t.Run("seed"+seed, func(t *testing.T) {
			_, tr := generate(t, "-procs", "6", "-seconds", "20", "-interval-ms", "4", "-seed", seed)
			m := modelOf(tr)
			res, err := Correct(m, Options{Reference: -1})
			if err != nil {
				t.Fatal(err)
			}
			if res.Reference != tr.Reference {
				t.Errorf("reference %d, want %d (the location whose offsets are all 0)", res.Reference, tr.Reference)
			}
			lin := evaluate(tr, func(i, e int) int64 { return Linear(m.Locs[i].Offsets, m.Locs[i].Times[e]) })
			got := evaluate(tr, func(i, e int) int64 { return res.Global[i][e] })
			b := bound(tr, res.Window)
			t.Logf("window %v ms; Score-P linear: %v", float64(res.Window)/1e6, lin)
			t.Logf("gclock corrected: %v", got)
			t.Logf("bound (half the window the fastest message each way leaves): %v", b)
			t.Logf("receives before sends: raw %d, linear %d, corrected %d of %d", res.Causality.Raw, res.Causality.Linear, res.Causality.Corrected, res.Messages)
			for _, l := range res.Locs {
				t.Logf("  %s: %s, %d knots, max adj %d ns, clamped %d", l.Name, l.Method, l.Knots, l.MaxAdj, l.Clamped)
			}
		})
	}
}
