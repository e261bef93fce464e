package main

import (
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// capture runs gclock sim with args and returns its stdout and error.
func capture(t *testing.T, args ...string) (string, error) {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = f
	runErr := runSim(args)
	os.Stdout = old
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return string(b), runErr
}

func TestSimJSONWithOverrides(t *testing.T) {
	// Flags before and after the scenario name.
	out, err := capture(t, "-q", "--nodes", "5", "default", "--duration", "1m", "--json", "--estimator", "hull", "--adaptive=false")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Scenario struct {
			Nodes  int `json:"nodes"`
			Engine struct {
				Estimator string `json:"estimator"`
				Adaptive  bool   `json:"adaptive"`
			} `json:"engine"`
		} `json:"scenario"`
		// Numbers and, since status shares, one map (status -> share of reads).
		Summary map[string]json.RawMessage   `json:"summary"`
		Nodes   []map[string]json.RawMessage `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if res.Scenario.Nodes != 5 || len(res.Nodes) != 5 || res.Scenario.Engine.Estimator != "hull" || res.Scenario.Engine.Adaptive {
		t.Errorf("overrides not applied: %+v, %d node rows", res.Scenario, len(res.Nodes))
	}
	num := map[string]float64{}
	for _, k := range []string{"error_mean_ns", "error_std_ns", "error_p50_ns", "error_p99_ns", "error_max_ns",
		"bound_coverage", "bound_width_mean_ns", "messages_per_node_per_s"} {
		raw, ok := res.Summary[k]
		if !ok {
			t.Errorf("summary lacks %s", k)
			continue
		}
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Errorf("summary %s = %s: not a number: %v", k, raw, err)
		}
		num[k] = v
	}
	if num["bound_coverage"] != 1 {
		t.Errorf("coverage %v, want 1", num["bound_coverage"])
	}
	var shares map[string]float64
	if err := json.Unmarshal(res.Summary["status_share"], &shares); err != nil {
		t.Fatalf("summary status_share = %s: %v", res.Summary["status_share"], err)
	}
	sum := 0.0
	for _, v := range shares {
		sum += v
	}
	if math.Abs(sum-1) > 1e-9 || shares["synced"] <= 0 {
		t.Errorf("status shares %v: want a positive synced share and a sum of 1", shares)
	}
}

func TestSimTableAndPlot(t *testing.T) {
	png := filepath.Join(t.TempDir(), "e.png")
	out, err := capture(t, "-q", "--duration", "1m", "--plot", png)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "scenario default: 16 nodes") || !strings.Contains(out, "coverage") {
		t.Errorf("table missing its header:\n%s", out)
	}
	st, err := os.Stat(png)
	if err != nil || st.Size() < 1000 {
		t.Errorf("plot %s not written (%v)", png, err)
	}
}

func TestSimErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("nodes: 4\nlinks:\n  tail:\n    meen: 2us\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{bad}, []string{"bad.yaml", "links.tail.meen", "line 4"}},
		{[]string{"--topology", "torus"}, []string{"topology.kind", "torus"}},
		{[]string{"--nodes", "1"}, []string{"nodes"}},
		{[]string{"no-such-scenario"}, []string{"no-such-scenario", "neither a file nor a shipped scenario"}},
		{[]string{filepath.Join(dir, "missing.yaml")}, []string{"missing.yaml"}},
		{[]string{"--report", "nope"}, []string{"no report"}},
		{[]string{"a", "b"}, []string{"one scenario at most"}},
		{[]string{"-q", "--duration", "1m", "--plot", filepath.Join(dir, "x.gif")}, []string{".png or .svg"}},
	} {
		_, err := capture(t, tc.args...)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not mention %q", tc.args, err, w)
			}
		}
	}
}

func TestSimList(t *testing.T) {
	out, err := capture(t, "--list")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"default", "liao-table1-idle", "liao-fig3", "jezequel-fps-t40", "intel-drift-change", "scale-tree"} {
		if !strings.Contains(out, n) {
			t.Errorf("--list lacks %s:\n%s", n, out)
		}
	}
}
