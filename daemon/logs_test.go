package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/internal/memnet"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent daemons' loggers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogsQuiet runs two daemons of a three-node cluster (node 3 never
// starts) with reference failover on, so that both ask each other who the
// reference is at start. At info level no line may repeat: a refused
// status query at start is expected (debug), a dead child is logged once
// when it stops answering, not at every round.
//
// The daemons run on internal/memnet in a testing/synctest bubble: the
// 4 s are fake.
func TestLogsQuiet(t *testing.T) {
	cfgs := memCluster(t, 3)
	var buf lockedBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New(1)
		mn.SetLink(memLink)
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		defer cancel()
		errs := make(chan error, 2)
		for _, c := range cfgs[:2] {
			c.Reference.Order = []uint32{1, 2, 3}
			c.Reference.FailoverAfter = Duration(time.Second)
			go func() { errs <- run(ctx, c, logger, fakeSys(mn, nil)) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
	if t.Failed() {
		return
	}
	out := buf.String()
	if strings.Contains(out, "handler refused") {
		t.Errorf("a refused request logged at info level or above:\n%s", out)
	}
	if n := strings.Count(out, "child not answering"); n != 1 {
		t.Errorf("the dead node 3 logged %d times as not answering by its source, want once:\n%s", n, out)
	}
	// Over 4 s, with a round every 50-100 ms, a line logged per round or
	// per retry would appear dozens of times.
	msg := regexp.MustCompile(`msg="[^"]*"|msg=\S+`)
	seen := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if line == "" {
			continue
		}
		node := regexp.MustCompile(`node=\d+`).FindString(line)
		seen[node+" "+msg.FindString(line)]++
	}
	for k, n := range seen {
		// The status lines carry no node: each daemon may change twice
		// (the reference: stale until a majority acknowledged its
		// heartbeat, then synced; the follower: unsynced, stale until it
		// hears a leased heartbeat, synced).
		limit := 2
		if strings.Contains(k, "status changed") {
			limit = 4
		}
		if n > limit {
			t.Errorf("%q logged %d times in 4 s:\n%s", k, n, out)
		}
	}
	t.Logf("%d lines:\n%s", strings.Count(out, "\n"), out)
}
