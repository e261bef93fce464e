package daemoncmd

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestQuietHandler(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	h := newQuietHandler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), func() time.Time { return now })
	log := slog.New(h).With("node", 2)
	for i := range 20 {
		log.Warn("probe failed", "i", i)
		log.Info("other", "i", i)
		log.Debug("debug line", "i", i)
		now = now.Add(time.Second)
	}
	count := func(s string) int { return strings.Count(buf.String(), s) }
	if n := count(`msg="probe failed"`); n != QuietBurst {
		t.Errorf("%d 'probe failed' lines in 20 s, want %d:\n%s", n, QuietBurst, buf.String())
	}
	if n := count(`msg=other`); n != QuietBurst {
		t.Errorf("%d 'other' lines, want %d (each message its own count)", n, QuietBurst)
	}
	if n := count(`msg="debug line"`); n != 20 {
		t.Errorf("%d debug lines, want all 20 (asked for with -v)", n)
	}
	if n := count(`repeats="further repeats`); n != 2 {
		t.Errorf("%d lines announce the hold, want 2:\n%s", n, buf.String())
	}
	// The same message about other peers: counted apart.
	buf.Reset()
	for c := range 8 {
		log.Warn("child not answering", "child", c, "round", 1)
		log.Warn("child not answering", "child", c, "round", 2)
	}
	if n := count("child not answering"); n != 16 {
		t.Errorf("%d lines about 8 children (2 each), want 16", n)
	}
	// After the window, the next line says how many were held back.
	now = now.Add(QuietWindow)
	buf.Reset()
	log.Warn("probe failed", "i", 99)
	if !strings.Contains(buf.String(), "i=99 repeats_not_logged=15") || !strings.Contains(buf.String(), "node=2") {
		t.Errorf("after the window: %q", buf.String())
	}
}
