package lab

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/gtime"
)

// TestCheckLoads: the load settings Run and Measure share are checked
// alike, each error naming the setting.
func TestCheckLoads(t *testing.T) {
	gen := []string{"gclock"}
	tests := []struct {
		name     string
		spec     RunSpec
		portRate int64
		err      string
	}{
		{"none", RunSpec{}, 0, ""},
		{"busy", RunSpec{Load: 4, LoadOutside: 2}, 0, ""},
		{"cross", RunSpec{Cross: 0.3, LoadCommand: gen}, 1e9, ""},
		{"flood", RunSpec{Flood: 20000, LoadCommand: gen}, 0, ""},
		{"load high", RunSpec{Load: 65}, 0, "load 65"},
		{"load negative", RunSpec{Load: -1}, 0, "load -1"},
		{"outside high", RunSpec{LoadOutside: 65}, 0, "load outside 65"},
		{"flood high", RunSpec{Flood: 2e6, LoadCommand: gen}, 0, "flood 2000000"},
		{"cross above 1", RunSpec{Cross: 1.5, LoadCommand: gen}, 1e9, "cross traffic 1.5"},
		{"cross without rate", RunSpec{Cross: 0.3, LoadCommand: gen}, 0, "needs a port rate"},
		{"cross without generator", RunSpec{Cross: 0.3}, 1e9, "load generator command"},
		{"flood without generator", RunSpec{Flood: 10}, 0, "load generator command"},
	}
	for _, tc := range tests {
		err := checkLoads(tc.spec, tc.portRate)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

// TestMeasureChecksLoads: Measure refuses a load it cannot run before it
// builds a lab (no root needed).
func TestMeasureChecksLoads(t *testing.T) {
	tests := []struct {
		name string
		edit func(*MeasureSpec)
		err  string
	}{
		{"outside", func(s *MeasureSpec) { s.LoadOutside = 70 }, "lab: measure: load outside 70"},
		{"cross without rate", func(s *MeasureSpec) { s.Cross, s.LoadCommand = 0.3, []string{"gclock"} }, "needs a port rate"},
		{"cross without generator", func(s *MeasureSpec) { s.Cross, s.Lab.PortRate = 0.3, 1e9 }, "load generator command"},
	}
	for _, tc := range tests {
		spec := DefaultMeasureSpec()
		spec.Gclock.Command, spec.Command = []string{"gclock", "daemon"}, []string{"gclock", "measure"}
		tc.edit(&spec)
		_, err := Measure(context.Background(), spec)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

// TestReadPatient: the evaluator reads a busy page again for the same
// instant, counts every busy read, and gives up only after its retries;
// other errors end at once.
func TestReadPatient(t *testing.T) {
	other := errors.New("not a page")
	tests := []struct {
		name     string
		busy     int   // reads that fail with ErrBusy before one succeeds
		fail     error // returned instead of success after the busy reads
		retries  int
		wantBusy uint64
		wantErr  error
	}{
		{"clean", 0, nil, 20, 0, nil},
		{"busy twice", 2, nil, 20, 2, nil},
		{"busy up to the last retry", 20, nil, 20, 20, nil},
		{"busy beyond", 25, nil, 20, 21, gtime.ErrBusy},
		{"other error", 0, other, 20, 0, other},
		{"busy then other error", 3, other, 20, 3, other},
	}
	for _, tc := range tests {
		calls := 0
		at := func(r int64) (gtime.Time, error) {
			calls++
			if r != 42 {
				t.Fatalf("%s: read instant %d, want 42", tc.name, r)
			}
			if calls <= tc.busy {
				return gtime.Time{}, fmt.Errorf("page-h1: %w", gtime.ErrBusy)
			}
			if tc.fail != nil {
				return gtime.Time{}, tc.fail
			}
			return gtime.Time{Est: 7, Status: gtime.StatusSynced}, nil
		}
		got, busy, err := readPatient(at, 42, tc.retries)
		if busy != tc.wantBusy || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("%s: busy %d, err %v; want %d, %v", tc.name, busy, err, tc.wantBusy, tc.wantErr)
		}
		if err == nil && got.Est != 7 {
			t.Errorf("%s: got %+v", tc.name, got)
		}
	}
}

// TestMeasureCap: the daemons outlast a measurement that overran its
// expected time as much as one did under the busy profile at load 20 (7x).
func TestMeasureCap(t *testing.T) {
	for _, expect := range []time.Duration{time.Second, 6200 * time.Millisecond, time.Minute} {
		mc := MeasureConfig{Expect: expect, Margin: 5 * time.Second}
		if c := measureCap(mc); c < 7*expect+mc.Margin {
			t.Errorf("expect %v: the daemons stop after %v, before a 7x overrun", expect, c)
		}
	}
}
