package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/gtime"
)

func TestNow(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "page")
	w, err := gtime.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	runJSON := func() nowReport {
		t.Helper()
		var out, errb bytes.Buffer
		if err := runNow([]string{"-page", path, "-json"}, &out, &errb); err != nil {
			t.Fatalf("gclock now: %v (%s)", err, errb.String())
		}
		var rep nowReport
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("bad JSON %q: %v", out.String(), err)
		}
		return rep
	}
	rep := runJSON()
	if rep.Status != "unsynced" || rep.EarliestNs != nil || rep.DaemonPID != os.Getpid() || !rep.DaemonAlive {
		t.Errorf("fresh page: %+v", rep)
	}
	local := gtime.RawNow()
	err = w.Publish(gtime.Update{
		Local:   local,
		Mapping: estimate.Mapping{X0: local, Y0: local + int64(time.Hour), W0: 1500, SkewErr: 1e-7, Valid: true},
		Status:  gtime.StatusSynced, StaleAfter: time.Minute, MaxDrift: 1e-4, MaxSlewRate: 5e-4,
		Node: 3, Reference: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	rep = runJSON()
	if rep.Status != "synced" || rep.EarliestNs == nil || *rep.EarliestNs > rep.EstNs || *rep.LatestNs < rep.EstNs ||
		*rep.WidthNs < 3000 || *rep.WidthNs > 3000+2*int64(time.Millisecond) || rep.Timescale != "reference" ||
		rep.Node != 3 || rep.Reference != 2 {
		t.Errorf("synced page: %+v", rep)
	}
	if d := rep.EstNs - local - int64(time.Hour); d < 0 || d > int64(time.Minute) {
		t.Errorf("estimate %d is not about local+1h (%d)", rep.EstNs, local+int64(time.Hour))
	}
	var out bytes.Buffer
	if err := runNow([]string{"-page", path}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"global time", "earliest", "latest", "width", "status       synced", "reference    node 2 (this daemon: node 3)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
	w.Close()
	if rep = runJSON(); rep.Status != "no-daemon" || rep.DaemonPID != 0 {
		t.Errorf("closed page: %+v", rep)
	}
	err = runNow([]string{"-page", filepath.Join(dir, "missing")}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "missing") || !strings.Contains(err.Error(), "hint") {
		t.Errorf("missing page: err = %v", err)
	}
	if err := runNow([]string{"extra"}, &out, &out); err == nil {
		t.Error("stray argument accepted")
	}
}
