package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/lab"
)

// TestLabChainFlags: bad flags are refused before the lab (no root needed),
// each naming what is wrong.
func TestLabChainFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sys-wander", "lots"}, "--sys-wander"},
		{[]string{"--sys-wander", "0.1:1:1s"}, "period"},
		{[]string{"--sys-wander", "x:1:5m"}, "random walk"},
		{[]string{"--setting", "no-equals"}, "NAME="},
		{[]string{"--setting", "a=poll 0", "--setting", "a=poll 1"}, "twice"},
		{[]string{"--every", "1ms"}, "refclock every"},
		{[]string{"--sys-drift", "900"}, "drift"},
		{[]string{"extra"}, "unexpected argument"},
	} {
		err := runLabChain(c.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("lab chain %q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

func TestParseSysWander(t *testing.T) {
	w, err := parseSysWander("0.02:1:5m")
	if err != nil || !reflect.DeepEqual(w, lab.Wander{RandomWalkPPM: 0.02, SinePPM: 1, SinePeriod: 5 * time.Minute}) {
		t.Errorf("parseSysWander = %+v, %v", w, err)
	}
	if w, err := parseSysWander("0:0:0s"); err != nil || !reflect.DeepEqual(w, lab.Wander{}) {
		t.Errorf("no wander: %+v, %v", w, err)
	}
	if got := shellJoin([]string{"--every", "1s", "--setting", "a=refid GCLK poll 0;maxslewrate 500", "it's"}); got != `--every 1s --setting 'a=refid GCLK poll 0;maxslewrate 500' 'it'\''s'` {
		t.Errorf("shellJoin = %s", got)
	}
}
