package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestShortAndFprint(t *testing.T) {
	for _, tc := range []struct {
		in    Info
		short string
		lines []string
	}{
		{Info{Version: "v1.2.3", Revision: "0123456789abcdef0123", GoVersion: "go1.26.0", Module: "github.com/gclock/gclock", Platform: "linux/amd64", Time: "2026-11-25T10:00:00Z"},
			"v1.2.3 (0123456789ab, go1.26.0)",
			[]string{"gclock version v1.2.3", "  module    github.com/gclock/gclock", "  revision  0123456789abcdef0123", "  time      2026-11-25T10:00:00Z", "  go        go1.26.0 linux/amd64"}},
		{Info{Version: "(devel)", Revision: "abc", Modified: true, GoVersion: "go1.26.0"},
			"(devel) (abc+modified, go1.26.0)",
			[]string{"  revision  abc (with uncommitted changes)", "  module    -"}},
		{Info{Version: "(devel)", GoVersion: "go1.26.0"},
			"(devel) (revision unknown, go1.26.0)",
			[]string{"  revision  unknown (not recorded"}},
	} {
		if got := tc.in.Short(); got != tc.short {
			t.Errorf("Short() = %q, want %q", got, tc.short)
		}
		var b strings.Builder
		tc.in.Fprint(&b, "gclock")
		for _, l := range tc.lines {
			if !strings.Contains(b.String(), l) {
				t.Errorf("Fprint lacks %q:\n%s", l, b.String())
			}
		}
	}
}

func TestRead(t *testing.T) {
	in := Read()
	if in.GoVersion != runtime.Version() || in.Platform != runtime.GOOS+"/"+runtime.GOARCH || in.Version == "" {
		t.Errorf("Read() = %+v", in)
	}
}
