package perfetto

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/gclock/gclock/internal/perfettocheck"
	pb "github.com/gclock/gclock/internal/perfettopb"
)

// TestProtocDecodes decodes the writer's output with protoc, a protobuf
// parser that is not this package's, against testdata/trace_subset.proto
// (Perfetto's names, numbers and types for the fields gclock writes): no
// field may come out unknown (a wrong number or wire type does), and the
// counts of packets, events, descriptors and flow ids must be the writer's.
func TestProtocDecodes(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not found: apt-get install protobuf-compiler (ci/deps.sh installs it)")
	}
	ev := synth(3, 4, 3000)
	data, _ := write(t, ev, Options{Metadata: []KV{{"method", "linear"}}})
	tr, err := perfettocheck.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("protoc", "--proto_path=testdata", "--decode=perfetto.protos.Trace", "trace_subset.proto")
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("protoc --decode: %v\n%s", err, stderr.Bytes())
	}
	text := string(out)
	if m := regexp.MustCompile(`(?m)^\s*[0-9]+[: {].*$`).FindAllString(text, 5); len(m) > 0 {
		t.Fatalf("protoc found fields the schema does not declare (wrong number or wire type): %q", m)
	}
	var flows, terms int
	for _, e := range tr.Events {
		flows += len(e.Flows)
		terms += len(e.Terminating)
	}
	count := func(re string) int { return len(regexp.MustCompile(`(?m)^\s*`+re).FindAllStringIndex(text, -1)) }
	checks := []struct {
		what      string
		got, want int
	}{
		{"packets", count(`packet \{`), tr.Packets},
		{"track events", count(`track_event \{`), len(tr.Events)},
		{"track descriptors", count(`track_descriptor \{`), len(tr.Tracks)},
		{"flow_ids", count(`flow_ids: `), flows},
		{"terminating_flow_ids", count(`terminating_flow_ids: `), terms},
		{"slice begins", count(`type: TYPE_SLICE_BEGIN`), countType(tr, pb.TypeSliceBegin)},
		{"counters", count(`counter_value: `), countType(tr, pb.TypeCounter)},
	}
	for _, c := range checks {
		if c.got != c.want || c.want == 0 {
			t.Errorf("protoc decoded %d %s, Decode %d", c.got, c.what, c.want)
		}
	}
	if !strings.Contains(text, `string_value: "linear"`) {
		t.Error("protoc does not see the run metadata")
	}
}

func countType(tr *perfettocheck.Trace, typ int) int {
	n := 0
	for _, e := range tr.Events {
		if e.Type == typ {
			n++
		}
	}
	return n
}
