package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/daemon"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/conf"
	"github.com/gclock/gclock/lab"
	"go.yaml.in/yaml/v3"
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

// TestLabReplayEmulated: beside the daemons' configs of a run on emulated
// clocks (h<i>.yaml, as gclock lab writes them), the replay is judged
// against those clocks rebuilt; without the source's config it refuses,
// naming what is missing, instead of judging against the wrong truth.
func TestLabReplayEmulated(t *testing.T) {
	dir := t.TempDir()
	const origin = int64(5e12)
	clk := func(off time.Duration, drift float64, seed int64) clock.EmulatedConfig {
		return clock.EmulatedConfig{Offset: conf.Duration(off), DriftPPM: drift, Seed: seed, OriginRaw: origin,
			WanderPPM: 0.005, WanderStep: conf.Duration(time.Second)}
	}
	clocks := []clock.EmulatedConfig{clk(3*time.Millisecond, -9, 1), clk(-2*time.Millisecond, 21, 2)}
	peers := []daemon.Peer{{ID: 1, Address: "10.77.0.1:3190"}, {ID: 2, Address: "10.77.0.2:3190"}}
	for i, c := range clocks {
		cfg := lab.LabDaemonConfig()
		cfg.Node = daemon.NodeConfig{ID: uint32(i + 1)}
		cfg.Peers, cfg.Reference.Order, cfg.Auth.Insecure = peers, []uint32{1}, true
		cfg.Clock = daemon.ClockConfig{Source: daemon.ClockEmulated, Emulated: c}
		b, err := yaml.Marshal(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := daemon.Parse(b); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("h%d.yaml", i)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, _ := clocks[0].New()
	host, _ := clocks[1].New()
	var b strings.Builder
	b.WriteString("source,src_send_ns,loc_recv_ns,loc_send_ns,src_recv_ns,rtt_ns\n")
	for r := range 20 {
		for i := range 30 {
			t1 := origin + int64(r)*1e9 + int64(i)*400e3
			t2 := t1 + int64(72000+(i*7919)%2000)
			t3 := t2 + 40000
			t4 := t3 + int64(72000+(i*104729)%2000)
			s := estimate.Sample{SrcSend: src.Ideal(t3), LocRecv: host.Ideal(t4), LocSend: host.Ideal(t1), SrcRecv: src.Ideal(t2)}
			b.WriteString(fmt.Sprintf("1,%d,%d,%d,%d,%d\n", s.SrcSend, s.LocRecv, s.LocSend, s.SrcRecv, s.RTT()))
		}
	}
	path := filepath.Join(dir, "measurements-h1.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := runLabReplay([]string{"-json", "-limit", "-warmup", "2s", path}, &out, &errb); err != nil {
		t.Fatalf("%v (%s)", err, errb.String())
	}
	var rows []labReplayRow
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("bad JSON %q: %v", out.String(), err)
	}
	// The clocks are 5 ms and 30 ppm apart: judged as raw clocks the
	// error would be milliseconds.
	if rows[0].Truth != "emulated" || rows[0].Evaluations == 0 || rows[0].P50Ns > 1000 || rows[0].OracleNs <= 0 {
		t.Errorf("emulated clocks: %+v; want the emulated truth, a median under 1 us and an oracle", rows[0])
	}
	if err := os.Remove(filepath.Join(dir, "h0.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := runLabReplay([]string{path}, &out, &errb); err == nil || !strings.Contains(err.Error(), "node.id 1") {
		t.Errorf("without the source's config: %v", err)
	}
}
