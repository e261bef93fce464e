package engine

import (
	"testing"
	"time"
)

// An initial period below MinGlobalPeriod is a convergence ramp: the
// period doubles every SuccessThresh rounds whether the rounds drew error
// reports or not, is never halved on the way, and once at or past
// MinGlobalPeriod follows Liao's rules with halvings floored there. Driven
// through Tick and Step.
func TestInitialPeriodBelowMin(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	c.InitialGlobalPeriod = 100e6
	c.MinGlobalPeriod = 500e6
	c.MaxGlobalPeriod = 1600e6
	c.SuccessThresh = 1
	c.ErrorThresh = 0.5
	if err := c.Validate(); err != nil {
		t.Fatalf("initial period below the minimum refused: %v", err)
	}
	n := newNode(t, c)
	n.Tick(0)
	rd := n.Ready()
	now := int64(0)
	// The period in force once round i is answered (and reported): a
	// report halves at once, and round i's verdict counts when round i+1
	// starts. On the ramp reports neither halve the period nor stop the
	// doubling (100, 200, 400, 800 ms); past the minimum a quiet round
	// doubles it (1600 ms, halved at once by that round's report to 800),
	// reports halve it to 500 ms and never below, and quiet rounds double
	// it again.
	steps := []struct {
		report bool
		want   time.Duration
	}{
		{true, 100 * time.Millisecond},
		{true, 200 * time.Millisecond},
		{true, 400 * time.Millisecond},
		{false, 800 * time.Millisecond},
		{true, 800 * time.Millisecond},
		{true, 500 * time.Millisecond},
		{true, 500 * time.Millisecond},
		{false, 500 * time.Millisecond},
		{false, 1000 * time.Millisecond},
	}
	for i, st := range steps {
		td, _, end := answer(t, n, rd, now, []int64{10_000}) // rd is the next round's, from Tick below
		if st.report {
			n.Step(Message{Type: MsgErrReport, From: 1, To: 0, Round: td.Round, Err: 100}, end+5000)
			n.Ready()
		}
		if got := n.children[0].period; got != int64(st.want) {
			t.Fatalf("round %d: period %v, want %v", i, time.Duration(got), st.want)
		}
		// The next round starts one period after this one ended.
		now = end + n.children[0].period
		n.Tick(now)
		rd = n.Ready()
	}
	c.InitialGlobalPeriod = c.MaxGlobalPeriod + 1
	if c.Validate() == nil {
		t.Error("initial period above the maximum accepted")
	}
}
