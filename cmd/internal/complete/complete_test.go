package complete

import (
	"bytes"
	"flag"
	"reflect"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Bool("q", false, "quiet")
	fs.String("topology", "", "override the topology: star, tree, ring")
	fs.String("clock", "", "override clock.source (raw, emulated)")
	fs.String("format", "", "`text|json`")
	fs.Int("nodes", 0, "how many nodes")
	var b bytes.Buffer
	fs.SetOutput(&b)
	fs.PrintDefaults()
	got := map[string][]string{}
	for _, f := range Flags(b.String()) {
		got[f.Name] = f.Values
	}
	want := map[string][]string{"q": nil, "topology": {"star", "tree", "ring"}, "clock": {"raw", "emulated"},
		"format": {"text", "json"}, "nodes": nil}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flags %v, want %v\n%s", got, want, b.String())
	}
}

func TestFlagsOnly(t *testing.T) {
	flags := []Flag{{Name: "v", Usage: "debug"}, {Name: "clock", Usage: "x", Values: []string{"raw", "emulated"}}}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var b bytes.Buffer
		if err := FlagsOnly(&b, sh, "gclockd", flags, []string{"version"}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "clock") || !strings.Contains(b.String(), "gclockd") {
			t.Errorf("%s: %s", sh, b.String())
		}
	}
	if err := FlagsOnly(&bytes.Buffer{}, "tcsh", "gclockd", flags, nil); err == nil {
		t.Error("tcsh accepted")
	}
}
