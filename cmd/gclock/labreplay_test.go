package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabReplay(t *testing.T) {
	dir := t.TempDir()
	// Two sources' worth of exchanges on one clock, the forward floor 1 us
	// above the backward one: the estimate sits about 0.5 us low.
	var b strings.Builder
	b.WriteString("source,src_send_ns,loc_recv_ns,loc_send_ns,src_recv_ns,rtt_ns\n")
	t0 := int64(5e12)
	for r := range 20 {
		for i := range 10 {
			s := t0 + int64(r)*1e9 + int64(i)*400e3
			f, back := int64(72000+(i*7919)%9000), int64(71000+(i*104729)%9000)
			b.WriteString(fmt.Sprintf("1,%d,%d,%d,%d,%d\n", s, s+f, s+f+40000, s+f+40000+back, f+back))
		}
	}
	good := filepath.Join(dir, "m.csv")
	if err := os.WriteFile(good, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := runLabReplay([]string{"-json", "-warmup", "2s", good}, &out, &errb); err != nil {
		t.Fatalf("%v (%s)", err, errb.String())
	}
	var rows []labReplayRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("bad JSON %q: %v", out.String(), err)
	}
	if len(rows) != 2 || rows[1].File != "all" || rows[0].Exchanges != 200 || rows[0].Rounds != 20 || rows[0].Evaluations == 0 {
		t.Fatalf("rows %+v", rows)
	}
	if rows[0].BiasNs > -300 || rows[0].BiasNs < -700 {
		t.Errorf("bias %.0f ns, want about -500 (half the 1 us floor asymmetry)", rows[0].BiasNs)
	}
	// With the limit: every row names a best textbook estimator, whose
	// median is that of the same evaluations (it sees the same asymmetry:
	// about 0.5 us).
	out.Reset()
	if err := runLabReplay([]string{"-json", "-limit", "-warmup", "2s", good}, &out, &errb); err != nil {
		t.Fatalf("-limit: %v (%s)", err, errb.String())
	}
	rows = nil
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("bad JSON %q: %v", out.String(), err)
	}
	if rows[0].LimitName == "" || rows[0].LimitNs < 200 || rows[0].LimitNs > 800 {
		t.Errorf("-limit: %s %.0f ns, want a textbook estimator near 500 ns", rows[0].LimitName, rows[0].LimitNs)
	}
	out.Reset()
	if err := runLabReplay([]string{"-limit", "-warmup", "2s", good}, &out, &errb); err != nil || !strings.Contains(out.String(), "best textbook") {
		t.Errorf("-limit table: %v\n%s", err, out.String())
	}
	bad := filepath.Join(dir, "bad.csv")
	if err := os.WriteFile(bad, []byte(b.String()[:200]), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runLabReplay([]string{bad}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "bad.csv: line") {
		t.Errorf("truncated file: %v", err)
	}
	if err := runLabReplay(nil, &out, &errb); err == nil {
		t.Error("no error without a file")
	}
}
