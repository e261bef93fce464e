package lab

import (
	"context"
	"strings"
	"testing"
	"time"
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

// TestMeasureCap: the daemons outlast a measurement that overran its
// expected time as much as one did under the busy profile at load 20 (7x).
func TestMeasureCap(t *testing.T) {
	for _, expect := range []time.Duration{time.Second, 6200 * time.Millisecond, time.Minute} {
		mc := measureConfig{Expect: expect, Margin: 5 * time.Second}
		if c := measureCap(mc); c < 7*expect+mc.Margin {
			t.Errorf("expect %v: the daemons stop after %v, before a 7x overrun", expect, c)
		}
	}
}
