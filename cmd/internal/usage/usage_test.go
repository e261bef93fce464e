package usage

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

// TestAlias: an old flag name sets the new flag and says once that it is
// deprecated; the new name says nothing; both names on one line, the last
// wins as for one flag given twice.
func TestAlias(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
		warn bool
	}{
		{nil, true, false},
		{[]string{"-sched-fifo=false"}, false, false},
		{[]string{"-realtime=false"}, false, true},
		{[]string{"--realtime=false"}, false, true},
		{[]string{"-realtime=false", "-sched-fifo"}, true, true},
	} {
		fs := flag.NewFlagSet("gclock lab", flag.ContinueOnError)
		var out bytes.Buffer
		fs.SetOutput(&out)
		var v bool
		fs.BoolVar(&v, "sched-fifo", true, "run the switch thread under SCHED_FIFO")
		Alias(fs, "realtime", "sched-fifo")
		if err := Parse(fs, tt.args); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if v != tt.want {
			t.Errorf("%q: sched-fifo %v, want %v", tt.args, v, tt.want)
		}
		warned := strings.Contains(out.String(), "gclock lab: -realtime is deprecated, use -sched-fifo")
		if warned != tt.warn || strings.Count(out.String(), "\n") > 1 {
			t.Errorf("%q: output %q, want a deprecation line: %v", tt.args, out.String(), tt.warn)
		}
	}
}

// TestAliasOfNothing: an alias of a flag that does not exist is a
// programming error, caught at once.
func TestAliasOfNothing(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Alias of an undefined flag did not panic")
		}
	}()
	Alias(flag.NewFlagSet("x", flag.ContinueOnError), "old", "missing")
}
