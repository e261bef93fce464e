package bench

import (
	"slices"
	"strings"
	"testing"

	"github.com/gclock/gclock/lab"
	"github.com/gclock/gclock/lab/netlab"
	"github.com/gclock/gclock/netmodel"
)

func TestParseProfiles(t *testing.T) {
	tests := []struct {
		in    string
		names []string
		err   string
	}{
		{"quiet", []string{"quiet"}, ""},
		{"quiet,busy,cross30,cross70", []string{"quiet", "busy", "cross30", "cross70"}, ""},
		{" busy , cross100", []string{"busy", "cross100"}, ""},
		{"", nil, "no profile"},
		{"loud", nil, "unknown"},
		{"cross0", nil, "1..100"},
		{"cross101", nil, "1..100"},
		{"crossx", nil, "crossNN"},
		{"busy,busy", nil, "twice"},
	}
	for _, tc := range tests {
		ps, err := ParseProfiles(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseProfiles(%q): err %v, want one with %q", tc.in, err, tc.err)
			}
			continue
		}
		var names []string
		for _, p := range ps {
			names = append(names, p.Name)
		}
		if err != nil || !slices.Equal(names, tc.names) {
			t.Errorf("ParseProfiles(%q) = %v, %v; want %v", tc.in, names, err, tc.names)
		}
	}
	// What each profile changes, on top of the flags as given.
	ps, _ := ParseProfiles("quiet,busy,cross30")
	for _, tc := range []struct {
		p                 Profile
		load, outside     int
		cross             float64
		portRate          int64
		medianNs, hostMed float64
	}{
		{ps[0], 2, 0, 0, 0, 300, 0},
		{ps[1], 4, 2, 0, 0, 500, 1000},
		{ps[2], 2, 0, 0.3, 1e9, 500, 1000},
	} {
		r := tc.p.Apply(lab.RunSpec{Load: 2})
		if r.Load != tc.load || r.LoadOutside != tc.outside || r.Cross != tc.cross || r.Lab.PortRate != tc.portRate {
			t.Errorf("%s: load %d outside %d cross %g port rate %d, want %d %d %g %d", tc.p.Name, r.Load, r.LoadOutside, r.Cross, r.Lab.PortRate,
				tc.load, tc.outside, tc.cross, tc.portRate)
		}
		if tc.p.Targets.MedianNs != tc.medianNs || tc.p.Targets.HostMedianNs != tc.hostMed {
			t.Errorf("%s: targets %+v", tc.p.Name, tc.p.Targets)
		}
	}
	// A cross profile keeps a port rate given; a link class sets the link.
	if r := ps[2].Apply(lab.RunSpec{Lab: netlab.Config{PortRate: 10e9}}); r.Lab.PortRate != 10e9 {
		t.Errorf("cross30 over a 10 Gbit/s port rate: %d", r.Lab.PortRate)
	}
	ls, err := ParseProfiles("links")
	if err != nil || len(ls) != len(netmodel.Matrix()) {
		t.Fatalf("links: %d profiles, %v; want %d", len(ls), err, len(netmodel.Matrix()))
	}
	for i, c := range netmodel.Matrix() {
		want, _ := netmodel.ParseLink(c.Link)
		if r := ls[i].Apply(lab.RunSpec{}); ls[i].Name != "link-"+c.Name || r.Lab.Link.String() != want.String() || ls[i].Targets.ChronyRatio != 3 {
			t.Errorf("%s: link %s, targets %+v; want link-%s on %s", ls[i].Name, r.Lab.Link, ls[i].Targets, c.Name, want)
		}
	}
}
