package chrome

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/internal/chromecheck"
)

// traceEngine is the npm package of Chrome DevTools' trace engine (the
// Performance panel's importer, FlowsHandler included) and the version the
// test pins: its API is not stable.
const traceEngine = "@paulirish/trace_engine@0.0.65"

// engineDir is where ci/deps.sh installs it (npm install --prefix).
const engineDir = "/opt/gclock/trace-engine"

// devtoolsEngine returns a directory whose node_modules holds the DevTools
// trace engine: $GCLOCK_TRACE_ENGINE, engineDir, or a fresh npm install in
// the user's cache directory. It skips only when node is missing or npm
// cannot install the package (no registry).
func devtoolsEngine(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node not found: the DevTools import check needs node >= 18 (ci/deps.sh installs nodejs and npm)")
	}
	has := func(dir string) bool {
		_, err := os.Stat(filepath.Join(dir, "node_modules/@paulirish/trace_engine/models/trace/trace.js"))
		return err == nil
	}
	for _, dir := range []string{os.Getenv("GCLOCK_TRACE_ENGINE"), engineDir} {
		if dir != "" && has(dir) {
			return dir
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "gclock-trace-engine")
	if has(dir) {
		return dir
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm not found: cannot install " + traceEngine + " for the DevTools import check (ci/deps.sh installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "npm", "install", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error", traceEngine).CombinedOutput()
	if err != nil || !has(dir) {
		t.Skipf("npm could not install %s into %s (registry unreachable?): %v\n%s", traceEngine, dir, err, out)
	}
	return dir
}

type devtoolsResult struct {
	Flows  int `json:"flows"`
	Arrows int `json:"arrows"`
	Events int `json:"events"`
}

// devtoolsFlows imports doc with DevTools' trace engine and returns what its
// FlowsHandler built.
func devtoolsFlows(t *testing.T, dir string, doc []byte) devtoolsResult {
	t.Helper()
	f := filepath.Join(t.TempDir(), "trace.json")
	if err := os.WriteFile(f, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("testdata/devtools_flows.mjs")
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("node", script, dir, f)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node devtools_flows.mjs: %v\n%s", err, stderr.Bytes())
	}
	var r devtoolsResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("devtools_flows.mjs printed %q: %v", out, err)
	}
	return r
}

// TestDevToolsImportsEveryFlow hands the writer's output to the importer of
// a real viewer, Chrome DevTools' Performance panel, and counts the arrows it
// builds: one per message. The legacy output (string ids, X slices without
// cat) is the control: the same importer builds none from it, and one once
// its faults are mended.
func TestDevToolsImportsEveryFlow(t *testing.T) {
	dir := devtoolsEngine(t)
	for seed := uint64(1); seed <= 2; seed++ {
		out := write(t, synth(seed, 4, 3000))
		rep, err := chromecheck.Validate(bytes.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		want := rep.Flows - rep.FlowsSameTs
		if want < 500 {
			t.Fatalf("seed %d: only %d flows to check", seed, want)
		}
		got := devtoolsFlows(t, dir, out)
		if got.Flows != want || got.Arrows != want {
			t.Errorf("seed %d: DevTools built %d flows with %d arrows, want %d (Validate: %d flows, %d with start and end at one ts)",
				seed, got.Flows, got.Arrows, want, rep.Flows, rep.FlowsSameTs)
		}
		if got.Events != rep.Events {
			t.Errorf("seed %d: DevTools read %d events, Validate %d", seed, got.Events, rep.Events)
		}
	}
	legacy := devtoolsFlows(t, dir, []byte(legacyOutput))
	if legacy.Flows != 0 {
		t.Errorf("legacy output: DevTools built %d flows, want 0 (its X slices have no cat)", legacy.Flows)
	}
	mended := strings.ReplaceAll(legacyOutput, `"dur":0,`, `"dur":0,"cat":"msg",`)
	if got := devtoolsFlows(t, dir, []byte(mended)); got.Flows != 1 {
		t.Errorf("legacy output with cat on its slices: DevTools built %d flows, want 1", got.Flows)
	}
}
