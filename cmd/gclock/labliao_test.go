package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestLiaoArgs: liao-fig2's defaults are DefaultLiaoFigSpec's (six sizes,
// 80 messages 25 ms apart, a 20-s warm-up, the loaded curves at gclock lab
// bench --profile busy's load), the flags override them, and bad values
// are refused before any lab is built.
func TestLiaoArgs(t *testing.T) {
	for _, tc := range []struct {
		args            []string
		sizes           string
		count           int
		warmup, step    time.Duration
		busy, busyOut   int
		fig3            bool
		from, errSubstr string
	}{
		{nil, "64,256,1024,4096,16384,65536", 80, 20 * time.Second, 22 * time.Second, 4, 2, false, "", ""},
		{[]string{"-fig3", "-step-in", "5s", "-warmup", "30s"}, "64,256,1024,4096,16384,65536", 80, 30 * time.Second, 35 * time.Second, 4, 2, true, "", ""},
		{[]string{"-sizes", "64,1024", "-latency-count", "10", "-load", "2", "-load-outside", "0"}, "64,1024", 10, 20 * time.Second, 22 * time.Second, 2, 0, false, "", ""},
		{[]string{"-profile", "busy", "-load", "1"}, "64,256,1024,4096,16384,65536", 80, 20 * time.Second, 22 * time.Second, 4, 2, false, "", ""},
		{[]string{"-from", "runs"}, "", 0, 0, 0, 0, 0, false, "runs", ""},
		{[]string{"-step-in", "0s"}, "", 0, 0, 0, 0, 0, false, "", "--step-in"},
		{[]string{"-load", "-1"}, "", 0, 0, 0, 0, 0, false, "", "--load -1"},
		{[]string{"extra"}, "", 0, 0, 0, 0, 0, false, "", "unexpected argument"},
	} {
		a, err := parseLiaoArgs(tc.args, io.Discard)
		if tc.errSubstr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errSubstr) {
				t.Errorf("%v: err %v, want one with %q", tc.args, err, tc.errSubstr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if tc.from != "" {
			if a.from != tc.from {
				t.Errorf("%v: from %q", tc.args, a.from)
			}
			continue
		}
		b := a.spec.Base
		if b.Sizes != tc.sizes || b.LatencyCount != tc.count || b.LatencyPeriod != 25*time.Millisecond || b.Gclock.Warmup != tc.warmup ||
			a.spec.StepAfter != tc.step || a.spec.BusyLoad != tc.busy || a.spec.BusyOutside != tc.busyOut || a.spec.Fig3 != tc.fig3 {
			t.Errorf("%v: sizes %s, count %d, period %v, warm-up %v, step after %v, busy %d+%d, fig3 %v", tc.args, b.Sizes, b.LatencyCount,
				b.LatencyPeriod, b.Gclock.Warmup, a.spec.StepAfter, a.spec.BusyLoad, a.spec.BusyOutside, a.spec.Fig3)
		}
	}
}
