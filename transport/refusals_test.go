package transport

import (
	"testing"
	"time"

	"github.com/gclock/gclock/wire"
)

// TestRefusalsRateLimited: one warning per op a minute, the ones held back
// counted in the next.
func TestRefusalsRateLimited(t *testing.T) {
	var r refusals
	t0 := time.Unix(1000, 0)
	type step struct {
		op   wire.Op
		at   time.Duration
		warn bool
		held int
	}
	for i, s := range []step{
		{wire.OpStatusQuery, 0, true, 0},
		{wire.OpStatusQuery, time.Second, false, 0},
		{wire.OpStatusQuery, 30 * time.Second, false, 0},
		{wire.OpProbe, 31 * time.Second, true, 0}, // another op: its own budget
		{wire.OpStatusQuery, 59 * time.Second, false, 0},
		{wire.OpStatusQuery, 60 * time.Second, true, 3},
		{wire.OpStatusQuery, 61 * time.Second, false, 0},
		{wire.OpStatusQuery, 10 * time.Minute, true, 1},
	} {
		warn, held := r.warn(s.op, t0.Add(s.at))
		if warn != s.warn || held != s.held {
			t.Errorf("step %d (%v at %v): warn %v held %d, want %v %d", i, s.op, s.at, warn, held, s.warn, s.held)
		}
	}
}
