package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/measure"
)

func TestMeasureReport(t *testing.T) {
	dir := t.TempDir()
	g := func(est int64) gtime.Time {
		return gtime.Time{Est: est, Earliest: est - 100, Latest: est + 100, Status: gtime.StatusSynced}
	}
	for rank := range 2 {
		var ss []measure.Stamp
		for k := range 3 {
			base := int64(k) * 1_000_000
			skew := int64(rank) * 400 // rank 1 leaves the barrier 400 ns later
			ss = append(ss,
				measure.Stamp{Exec: k, Mode: measure.ModeBarrier, Rank: rank, Event: measure.EventStart, Peer: -1, Raw: base + skew, Local: base + skew, Global: g(base + skew)},
				measure.Stamp{Exec: k, Mode: measure.ModeBarrier, Rank: rank, Event: measure.EventEnd, Peer: -1, Raw: base + 10_000, Local: base + 10_000, Global: g(base + 10_000)},
				measure.Stamp{Exec: k, Mode: measure.ModeScheduled, Rank: rank, Event: measure.EventStart, Peer: -1, Raw: base + 500_000, Local: base + 500_000, Global: g(base + 500_000), Target: base + 500_000},
				measure.Stamp{Exec: k, Mode: measure.ModeScheduled, Rank: rank, Event: measure.EventEnd, Peer: -1, Raw: base + 510_000, Local: base + 510_000, Global: g(base + 510_000)})
		}
		if err := measure.WriteStampFile(filepath.Join(dir, "stamps-r"+string(rune('0'+rank))+".csv"), ss); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	plot := filepath.Join(dir, "dev.svg")
	if err := runMeasureReport([]string{"-plot", plot, filepath.Join(dir, "stamps-r0.csv"), filepath.Join(dir, "stamps-r1.csv")}, &out); err != nil {
		t.Fatal(err)
	}
	// Barrier: 10000 and 9600 ns, mean 9800: +-2.041%. Global: equal ends.
	for _, want := range []string{"Executions: 3 scheduled, 3 barrier-started on 2 nodes", "+-2.041%", "+-0.000%", "+-1.8%"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if st, err := os.Stat(plot); err != nil || st.Size() == 0 {
		t.Errorf("plot: %v", err)
	}
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("exec,mode,rank,event,peer,size,raw_ns,local_ns,global_ns,earliest_ns,latest_ns,status,target_ns,retro_ns,retro_earliest_ns,retro_latest_ns,retro_status\n1,2,3\n"), 0o644)
	err := runMeasureReport([]string{bad}, &out)
	if err == nil || !strings.Contains(err.Error(), "bad.csv line 2") {
		t.Errorf("bad file: %v, want an error naming bad.csv line 2", err)
	}
	if err := runMeasureReport(nil, &out); err == nil {
		t.Error("no files: no error")
	}
}
