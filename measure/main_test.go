package measure

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSizes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"64-65536", DefaultSizes(), ""},
		{"64,1024, 9000", []int{64, 1024, 9000}, ""},
		{"100-100", []int{100}, ""},
		{"1-9223372036854775807", nil, "HI <= 65536"},
		{"0-64", nil, "1 <= LO"},
		{"64-32", nil, "LO <= HI"},
		{"64,x", nil, `"x" is not a number`},
		{"70000", nil, "1..65536"},
		{"", nil, "not a number"},
	} {
		got, err := ParseSizes(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSizes(%q): %v, want an error with %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseSizes(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func FuzzParseSizes(f *testing.F) {
	for _, s := range []string{"64-65536", "1,2,3", "1-9223372036854775807", "-", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSizes(s)
		if err != nil {
			return
		}
		for _, v := range got {
			if v < 1 || v > 2*maxChunk {
				t.Fatalf("ParseSizes(%q) gave size %d", s, v)
			}
		}
	})
}

func TestParsePeers(t *testing.T) {
	if p, err := parsePeers("10.0.0.1:3200, [::1]:9"); err != nil || len(p) != 2 {
		t.Errorf("%v %v", p, err)
	}
	for _, bad := range []string{"", "10.0.0.1", "a:b", "10.0.0.1:3200,"} {
		if _, err := parsePeers(bad); err == nil || !strings.Contains(err.Error(), "-peers") {
			t.Errorf("parsePeers(%q): %v, want an error naming -peers", bad, err)
		}
	}
}
