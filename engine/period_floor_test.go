package engine

import (
	"testing"
	"time"
)

// An initial period below MinGlobalPeriod: the node converges at it, quiet
// rounds double it past MinGlobalPeriod, and error reports then never bring
// it below MinGlobalPeriod again (while still below, it is never halved).
// Driven through Tick and Step; the period is read from the next round's
// start.
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
	// report[i]: whether round i draws an error report. The period in
	// force after round i (the gap from its end to the next round):
	// 100 ms with a report (not halved below the minimum), then quiet
	// rounds double it at the start of the round after: 200, 400, 800,
	// 1600 ms; then reports halve it to 800 and 500 ms, never below.
	steps := []struct {
		report bool
		want   time.Duration
	}{
		{true, 100 * time.Millisecond},
		{false, 100 * time.Millisecond}, // verdict counted when the next round starts
		{false, 200 * time.Millisecond},
		{false, 400 * time.Millisecond},
		{false, 800 * time.Millisecond},
		{false, 1600 * time.Millisecond},
		{true, 800 * time.Millisecond},
		{true, 500 * time.Millisecond},
		{true, 500 * time.Millisecond},
	}
	for i, st := range steps {
		var td Message
		var end int64
		td, rd, end = answer(t, n, rd, now, []int64{10_000})
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
