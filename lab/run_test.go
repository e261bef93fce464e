package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/lab/netlab"
)

// TestRun runs a short `gclock lab` run through the library: the switch
// validated, three daemons evaluated, the report filled as --json prints it.
func TestRun(t *testing.T) {
	cfg := parallelLab(t, 3)
	cfg.SchedFIFO = false // as before (DefaultConfig's)
	gc := DefaultGclockConfig()
	gc.Command, gc.Env = []string{os.Args[0]}, []string{daemonEnv + "=1"}
	gc.Duration, gc.Warmup = 14*time.Second, 7*time.Second
	pc := DefaultPeerConfig()
	pc.Duration, pc.Warmup = gc.Duration, gc.Warmup
	vc := netlab.DefaultValidateConfig()
	vc.Probes = 200
	var progress bytes.Buffer
	rep, err := Run(context.Background(), RunSpec{Lab: cfg, Gclock: gc, Peer: pc, Validate: &vc, Load: 1, Progress: &progress})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Hosts != 3 || rep.Link != cfg.Link.String() || rep.Clocks != "emulated" || rep.Wander == nil || rep.Load != 1 {
		t.Errorf("report head %+v", rep)
	}
	if rep.DurationNs != gc.Duration.Nanoseconds() || rep.WarmupNs != gc.Warmup.Nanoseconds() {
		t.Errorf("duration %d, warmup %d ns", rep.DurationNs, rep.WarmupNs)
	}
	if len(rep.Validation) == 0 || len(rep.Switch) == 0 {
		t.Errorf("%d validated directions, %d switch directions: want both", len(rep.Validation), len(rep.Switch))
	}
	if len(rep.Nodes) != 3 || rep.Summary.Evaluations == 0 || len(rep.Truth) != 3 {
		t.Errorf("%d nodes, %d evaluations, %d clocks", len(rep.Nodes), rep.Summary.Evaluations, len(rep.Truth))
	}
	if len(rep.Gclock.Nodes) != 3 || rep.Compare != nil || rep.Peers != nil {
		t.Errorf("gclock result %d nodes; compare %v, peers %v without peers", len(rep.Gclock.Nodes), rep.Compare, rep.Peers)
	}
	if !strings.Contains(progress.String(), "running gclock daemons for 14s with 1 busy loops") {
		t.Errorf("progress %q", progress.String())
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"switch_sched_fifo"`)) || bytes.Contains(b, []byte(`"Gclock"`)) || bytes.Contains(b, []byte(`"Peers"`)) {
		t.Errorf("JSON keys: %s", b[:min(len(b), 400)])
	}
	if _, err := Run(context.Background(), RunSpec{Lab: cfg, Gclock: gc, Peer: pc, Load: 65}); err == nil || !strings.Contains(err.Error(), "load 65") {
		t.Errorf("load 65: %v", err)
	}
}

// TestMeasure runs a short `gclock lab measure latency` through the library:
// a report with its latency check and the Markdown header.
func TestMeasure(t *testing.T) {
	cfg := parallelLab(t, 4)
	spec := DefaultMeasureSpec()
	spec.Lab.RunDir, spec.Lab.Concurrent = cfg.RunDir, true
	spec.Gclock.Command, spec.Gclock.Env = []string{os.Args[0]}, []string{daemonEnv + "=1"}
	spec.Gclock.Warmup = 8 * time.Second
	spec.Command, spec.Env = []string{os.Args[0]}, []string{measureEnv + "=1"}
	spec.Latency, spec.Sizes, spec.LatencyCount = true, "64,1024", 10
	r, err := Measure(context.Background(), spec)
	if err != nil {
		t.Fatalf("Measure: %v", err)
	}
	if r.Result == nil || len(r.Run.Stamps) == 0 || len(r.Switch) == 0 || !r.Spec.Latency {
		t.Fatalf("report: result %v, %d stamps, %d switch directions", r.Result != nil, len(r.Run.Stamps), len(r.Switch))
	}
	if c := r.Checks(); len(c) != 1 {
		t.Errorf("checks %+v, want the latency check", c)
	}
	var b bytes.Buffer
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Lab: link pareto:100us:50us, emulated clocks", "one-way messages between hosts 0 and 1, sizes 64,1024, 10 per size", "The switch over the run:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, b.String())
		}
	}
	for _, bad := range []func(*MeasureSpec){
		func(s *MeasureSpec) { s.Link = "bogus" },
		func(s *MeasureSpec) { s.Load = -1 },
		func(s *MeasureSpec) { s.Latency, s.Op = false, "cmd" },
		func(s *MeasureSpec) { s.Sizes = "x" },
	} {
		s := spec
		bad(&s)
		if _, err := Measure(context.Background(), s); err == nil || !strings.Contains(err.Error(), "lab: measure") {
			t.Errorf("bad spec %+v: %v, want an error from lab: measure", s, err)
		}
	}
}
