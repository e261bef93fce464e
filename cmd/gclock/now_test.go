package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
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
	// runJSON runs gclock now -json; only a synced page succeeds (exit 0),
	// any other prints the reading and fails naming the status.
	runJSON := func(extra ...string) nowReport {
		t.Helper()
		var out, errb bytes.Buffer
		err := runNow(append([]string{"-page", path, "-json"}, extra...), &out, &errb)
		var rep nowReport
		if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
			t.Fatalf("bad JSON %q: %v (%v %s)", out.String(), jerr, err, errb.String())
		}
		if synced := rep.Status == "synced"; synced != (err == nil) {
			t.Fatalf("gclock now: status %s, err %v: want an error exactly when not synced", rep.Status, err)
		}
		if err != nil && !strings.Contains(err.Error(), "status "+rep.Status+", not synced") {
			t.Fatalf("gclock now: err %v does not name the status %s", err, rep.Status)
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
	num := func(p *string) int64 { // the ns fields are decimal strings (beyond 2^53)
		if p == nil {
			t.Fatalf("a bound is null on a synced page: %+v", rep)
		}
		n, err := strconv.ParseInt(*p, 10, 64)
		if err != nil {
			t.Fatalf("ns field %q: %v", *p, err)
		}
		return n
	}
	est := num(&rep.EstNs)
	if rep.Status != "synced" || rep.EarliestNs == nil || num(rep.EarliestNs) > est || num(rep.LatestNs) < est ||
		*rep.WidthNs < 3000 || *rep.WidthNs > 3000+2*int64(time.Millisecond) || rep.Timescale != "reference" ||
		rep.Node != 3 || rep.Reference != 2 {
		t.Errorf("synced page: %+v", rep)
	}
	if d := est - local - int64(time.Hour); d < 0 || d > int64(time.Minute) {
		t.Errorf("estimate %d is not about local+1h (%d)", est, local+int64(time.Hour))
	}
	if want := formatGlobal(est, gtime.TimescaleReference); rep.Est != want {
		t.Errorf("est %q, want %q (est_ns %s)", rep.Est, want, rep.EstNs)
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
	// -max-width: a synced reading wider than asked is not good.
	if err := runNow([]string{"-page", path, "-max-width", "1us"}, &out, &out); err == nil || !strings.Contains(err.Error(), "above -max-width 1µs") {
		t.Errorf("-max-width 1us on a 3 us wide page: err %v", err)
	}
	if err := runNow([]string{"-page", path, "-max-width", "1ms"}, &out, &out); err != nil {
		t.Errorf("-max-width 1ms on a 3 us wide page: %v", err)
	}
	if _, err := user.Lookup("nobody"); err == nil {
		if err := runNow([]string{"-page", path, "-owner", "nobody"}, &out, &out); err != nil {
			t.Errorf("-owner nobody: %v", err)
		}
	}
	// Degraded and stale pages are not synced.
	for _, c := range []struct {
		status     gtime.Status
		staleAfter time.Duration
		want       string
	}{
		{gtime.StatusDegraded, time.Minute, "degraded"},
		{gtime.StatusSynced, time.Nanosecond, "stale"}, // older than its limit when read
		{gtime.StatusStale, time.Minute, "stale"},
		{gtime.StatusSynced, time.Minute, "synced"},
	} {
		local := gtime.RawNow()
		err = w.Publish(gtime.Update{
			Local:   local,
			Mapping: estimate.Mapping{X0: local, Y0: local + int64(time.Hour), W0: 1500, SkewErr: 1e-7, Valid: true},
			Status:  c.status, StaleAfter: c.staleAfter, MaxDrift: 1e-4, MaxSlewRate: 5e-4,
		})
		if err != nil {
			t.Fatal(err)
		}
		if rep = runJSON(); rep.Status != c.want {
			t.Errorf("published %v: read %s, want %s", c.status, rep.Status, c.want)
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
	for _, args := range [][]string{{"extra"}, {"-timeout", "0"}, {"-interval", "-1s"}, {"-max-width", "-1ns"}, {"-owner", "no-such-user-gclock"}} {
		if err := runNow(args, &out, &out); err == nil {
			t.Errorf("gclock now %v accepted", args)
		}
	}
}

// TestNowCheck: -check waits for a page that does not exist yet to read
// synced, and gives up after -timeout on one that never does.
func TestNowCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page")
	var w *gtime.Writer
	made := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		var err error
		if w, err = gtime.NewWriter(path); err != nil {
			made <- err
			return
		}
		time.Sleep(300 * time.Millisecond) // unsynced meanwhile
		local := gtime.RawNow()
		made <- w.Publish(gtime.Update{
			Local:   local,
			Mapping: estimate.Mapping{X0: local, Y0: local, W0: 1500, Valid: true},
			Status:  gtime.StatusSynced, StaleAfter: time.Minute, MaxDrift: 1e-4, MaxSlewRate: 5e-4,
		})
	}()
	var out bytes.Buffer
	start := time.Now()
	err := runNow([]string{"-page", path, "-check", "-timeout", "20s", "-interval", "20ms", "-max-width", "1ms"}, &out, &out)
	if err != nil {
		t.Fatalf("-check: %v\n%s", err, out.String())
	}
	if perr := <-made; perr != nil {
		t.Fatal(perr)
	}
	defer w.Close()
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Errorf("-check returned after %v, before the page was synced", d)
	}
	if !strings.Contains(out.String(), "status       synced") {
		t.Errorf("-check printed\n%s", out.String())
	}
	// Never good enough: fails after the timeout, printing the last reading.
	out.Reset()
	start = time.Now()
	err = runNow([]string{"-page", path, "-check", "-timeout", "300ms", "-max-width", "1ns"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "no good reading within -timeout 300ms") || !strings.Contains(err.Error(), "above -max-width") {
		t.Errorf("-check on a page never narrow enough: %v", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 10*time.Second {
		t.Errorf("-check -timeout 300ms took %v", d)
	}
	if !strings.Contains(out.String(), "width") {
		t.Errorf("-check did not print the last reading:\n%s", out.String())
	}
	// A page refused as unsafe fails at once.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad")
	b, _ := os.ReadFile(path)
	must(os.WriteFile(bad, b, 0o666))
	must(os.Chmod(bad, 0o666))
	start = time.Now()
	if err := runNow([]string{"-page", bad, "-check", "-timeout", "5s"}, &out, &out); err == nil || !strings.Contains(err.Error(), "refused") || time.Since(start) > 2*time.Second {
		t.Errorf("-check on a 0666 page: %v after %v, want an immediate refusal", err, time.Since(start))
	}
}

// TestNowUpstreamReason: a UTC page the daemon publishes unsynced because
// the reference's CLOCK_REALTIME is unsynchronised says so, in JSON and in
// text, and gclock now fails on it; a synced page names no reason.
func TestNowUpstreamReason(t *testing.T) {
	path := filepath.Join(t.TempDir(), "page")
	w, err := gtime.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	local := gtime.RawNow()
	for _, tt := range []struct {
		up     bool
		status gtime.Status
		reason string
	}{
		{true, gtime.StatusUnsynced, "upstream-unsynchronised"},
		{false, gtime.StatusUnsynced, ""},
		{false, gtime.StatusSynced, ""},
	} {
		local++
		u := gtime.Update{Local: local, Status: tt.status, StaleAfter: time.Minute, MaxDrift: 1e-4, MaxSlewRate: 5e-4,
			Timescale: gtime.TimescaleRealtime, UpstreamUnsynced: tt.up, Node: 1, Reference: 1}
		if tt.status == gtime.StatusSynced {
			u.Mapping = estimate.Mapping{X0: local, Y0: 1.7e18, W0: 1500, Valid: true}
		}
		if err := w.Publish(u); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		err := runNow([]string{"-page", path, "-json"}, &out, &errb)
		var rep nowReport
		if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
			t.Fatalf("bad JSON %q: %v", out.String(), jerr)
		}
		if rep.Reason != tt.reason || (err == nil) != (tt.status == gtime.StatusSynced) {
			t.Errorf("upstream unsynced %v, %v: reason %q, err %v; want reason %q", tt.up, tt.status, rep.Reason, err, tt.reason)
		}
		out.Reset()
		runNow([]string{"-page", path}, &out, &out)
		if has := strings.Contains(out.String(), "reason       upstream-unsynchronised"); has != (tt.reason != "") {
			t.Errorf("upstream unsynced %v: text output:\n%s", tt.up, out.String())
		}
		// Without UTC there is no date to print, never 1970.
		if noUTC := strings.Contains(out.String(), "none (no UTC yet)"); strings.Contains(out.String(), "1970") || noUTC != (tt.status != gtime.StatusSynced) {
			t.Errorf("upstream unsynced %v, %v: text output:\n%s", tt.up, tt.status, out.String())
		}
	}
}

// TestNowJSONError: with -json, a failure before any reading (no page) is a
// JSON object naming the page and the error, and the command still fails.
func TestNowJSONError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nopage")
	var out, errOut bytes.Buffer
	err := runNow([]string{"-page", path, "-json"}, &out, &errOut)
	if err == nil {
		t.Fatal("gclock now -json on a missing page: no error")
	}
	var rep struct{ Page, Error string }
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", jerr, out.String())
	}
	if rep.Page != path || rep.Error != err.Error() {
		t.Errorf("error object %+v, want page %s and error %q", rep, path, err)
	}
	// A usage error stays a usage error: nothing on stdout.
	out.Reset()
	if err := runNow([]string{"-json", "-timeout", "-1s", "-check"}, &out, &errOut); err == nil || out.Len() != 0 {
		t.Errorf("usage error with -json: err %v, stdout %q", err, out.String())
	}
}
