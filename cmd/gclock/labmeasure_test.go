package main

import (
	"flag"
	"io"
	"math"
	"strings"
	"testing"
)

// TestLabMeasureLoadFlags: gclock lab measure takes the bench's load
// settings, a profile applied over the flags as the bench applies it.
func TestLabMeasureLoadFlags(t *testing.T) {
	tests := []struct {
		args      []string
		load, out int
		cross     float64
		portRate  int64
		err       string
	}{
		{nil, 0, 0, 0, 0, ""},
		{[]string{"-profile", "quiet", "-load", "1"}, 1, 0, 0, 0, ""},
		{[]string{"-profile", "busy"}, 4, 2, 0, 0, ""},
		{[]string{"-profile", "busy", "-load", "1", "-load-outside", "7"}, 4, 2, 0, 0, ""}, // the profile wins, as in the bench
		{[]string{"-profile", "cross30"}, 0, 0, 0.3, 1e9, ""},
		{[]string{"-load", "4", "-load-outside", "2", "-cross", "70%", "-port-rate", "100M"}, 4, 2, 0.7, 1e8, ""},
		{[]string{"-load-outside", "3"}, 0, 3, 0, 0, ""},
		{[]string{"-profile", "busy,quiet"}, 0, 0, 0, 0, "want one profile"},
		{[]string{"-profile", "idle"}, 0, 0, 0, 0, "unknown"},
		{[]string{"-load-outside", "65"}, 0, 0, 0, 0, "--load-outside 65"},
		{[]string{"-load", "-1"}, 0, 0, 0, 0, "--load -1"},
		{[]string{"-cross", "150%"}, 0, 0, 0, 0, "--cross"},
		{[]string{"-port-rate", "fast"}, 0, 0, 0, 0, "--port-rate"},
	}
	for _, tc := range tests {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f labMeasureFlags
		f.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		spec, err := f.spec(io.Discard)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want one with %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if spec.Load != tc.load || spec.LoadOutside != tc.out || math.Abs(spec.Cross-tc.cross) > 1e-9 || spec.Lab.PortRate != tc.portRate {
			t.Errorf("%v: load %d, outside %d, cross %v, port rate %d; want %d, %d, %v, %d", tc.args,
				spec.Load, spec.LoadOutside, spec.Cross, spec.Lab.PortRate, tc.load, tc.out, tc.cross, tc.portRate)
		}
		if len(spec.LoadCommand) == 0 {
			t.Errorf("%v: no load generator command (cross traffic needs it)", tc.args)
		}
	}
}
