package lab

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseFault(t *testing.T) {
	f, err := ParseFault("kill:1:20s:3s")
	if err != nil || f != (Fault{At: 20 * time.Second, Host: 1, Kind: faultKill, For: 3 * time.Second}) {
		t.Fatalf("ParseFault: %+v, %v", f, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"kill:1:20s", "KIND:HOST:AT:FOR"},
		{"melt:1:20s:3s", "kind"},
		{"stop:x:20s:3s", "host"},
		{"stop:-1:20s:3s", "host"},
		{"stop:1:0s:3s", "at"},
		{"partition:1:2s:-3s", "for"},
		{"partition:1:2s:3", "for"},
	} {
		if _, err := ParseFault(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseFault(%q): %v, want an error naming %q", tc.in, err, tc.want)
		}
	}
}

func FuzzParseFault(f *testing.F) {
	f.Add("kill:1:20s:3s")
	f.Add("partition:3:1h:1ns")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseFault(s)
		if err == nil && (p.At <= 0 || p.For <= 0 || p.Host < 0) {
			t.Fatalf("ParseFault(%q) accepted %+v", s, p)
		}
	})
}

func TestFaultValidate(t *testing.T) {
	d := 60 * time.Second
	for _, tc := range []struct {
		f    Fault
		want string
	}{
		{Fault{At: time.Second, Host: 1, Kind: faultKill, For: time.Second}, ""},
		{Fault{At: time.Second, Host: 4, Kind: faultKill, For: time.Second}, "host"},
		{Fault{At: time.Second, Host: 1, Kind: "x", For: time.Second}, "kind"},
		{Fault{At: 59 * time.Second, Host: 1, Kind: faultStop, For: time.Second}, "duration"},
	} {
		err := tc.f.validate(0, 4, d)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v: %v, want %q", tc.f, err, tc.want)
		}
	}
}

// TestFaultResults condenses a made-up series: host 1 loses synced during
// a kill from 10 s to 13 s and is synced again at 14 s; one read has the
// truth outside.
func TestFaultResults(t *testing.T) {
	f := Fault{At: 10 * time.Second, Host: 1, Kind: faultKill, For: 3 * time.Second}
	s := func(at time.Duration, lo, hi int64, synced bool) SeriesPoint {
		return SeriesPoint{AtNs: int64(at), Host: 1, ErrNs: (lo + hi) / 2, LoNs: lo, HiNs: hi, Synced: synced}
	}
	series := []SeriesPoint{
		s(9*time.Second, -10, 10, true), // before: not counted
		s(10*time.Second, -10, 10, true),
		s(11*time.Second, -100, 300, false),
		s(12*time.Second, 5, 300, false), // outside
		s(13*time.Second, math.MinInt64, math.MaxInt64, false),
		s(14*time.Second, -20, 20, true),
		s(40*time.Second, -20, 20, false), // after the window
	}
	rs := faultResults(series, []Fault{f}, 2, time.Minute)
	if len(rs) != 2 {
		t.Fatalf("%d results, want one per host", len(rs))
	}
	r := rs[1]
	if r.Reads != 5 || r.Inside != 4 || r.Synced != 2 || r.SyncedInside != 2 || r.Unsynced != 1 ||
		r.MaxErrNs != 152 || r.MaxSyncedErrNs != 0 || r.MaxHalfWidthNs != 200 || !r.LostSynced || r.BackToSyncedS != 1 {
		t.Errorf("host 1: %+v", r)
	}
	if rs[0].Reads != 0 || rs[0].BackToSyncedS != 0 {
		t.Errorf("host 0 (no reads): %+v", rs[0])
	}
}
