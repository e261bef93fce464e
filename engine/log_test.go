package engine

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestDeadChildLoggedOnce: a child that never answers is logged when it
// stops answering and when it answers again, not at every abandoned round
// (a dead peer used to print a line every round, forever).
func TestDeadChildLoggedOnce(t *testing.T) {
	c := testConfig(0, nil, []NodeID{1})
	c.MaxProbeRetries = 2
	var buf bytes.Buffer
	n, err := NewWithEstimators(c, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), fakeEstimators)
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string) int { return strings.Count(buf.String(), s) }
	n.Tick(0)
	rd := n.Ready()
	// abandon ticks through rounds until k more are abandoned.
	abandon := func(k int) {
		t.Helper()
		want := n.Snapshot().Children[0].Abandoned + uint64(k)
		for i := 0; n.Snapshot().Children[0].Abandoned < want; i++ {
			if i > 100*k {
				t.Fatalf("no round abandoned after %d ticks: %+v", i, n.Snapshot().Children[0])
			}
			n.Tick(rd.NextTick)
			rd = n.Ready()
		}
	}
	abandon(5)
	if got := count("child not answering"); got != 1 {
		t.Fatalf("%d 'child not answering' lines after 5 abandoned rounds, want 1:\n%s", got, buf.String())
	}
	if strings.Contains(buf.String(), "still not answering") {
		t.Fatalf("debug line at info level:\n%s", buf.String())
	}
	// The child comes back: answer the next round's probes.
	var now int64
	for len(rd.Messages) == 0 || rd.Messages[0].Type != MsgProbe {
		now = rd.NextTick
		n.Tick(now)
		rd = n.Ready()
	}
	answer(t, n, rd, now, []int64{10_000})
	if got := count("child answering again"); got != 1 {
		t.Fatalf("%d 'child answering again' lines, want 1:\n%s", got, buf.String())
	}
	rd = n.Ready()
	if rd.NextTick == 0 {
		rd.NextTick = now + int64(c.InitialGlobalPeriod)
	}
	// Dead again: one more line for the new episode.
	abandon(3)
	if got := count("child not answering"); got != 2 {
		t.Fatalf("%d 'child not answering' lines after a second silence, want 2:\n%s", got, buf.String())
	}
	if lines := strings.Count(buf.String(), "\n"); lines > 4 {
		t.Errorf("%d log lines for two silences of one child:\n%s", lines, buf.String())
	}
}
