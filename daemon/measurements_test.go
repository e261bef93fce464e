package daemon

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gclock/gclock/estimate"
)

// The measurements log holds every sample it was given, in order, with the
// columns its header names; values near the int64 limits survive.
func TestMeasurementsLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.csv")
	l, err := newMeasurementsLog(path)
	if err != nil {
		t.Fatal(err)
	}
	big := int64(1) << 62
	in := [][]estimate.Sample{
		{{SrcSend: 100, LocRecv: 250, LocSend: 300, SrcRecv: 480}},
		{{SrcSend: big, LocRecv: big + 7, LocSend: big + 9, SrcRecv: big + 20}, {SrcSend: -5, LocRecv: 1, LocSend: 2, SrcRecv: 9}},
	}
	l.write(3, in[0])
	l.write(4, in[1])
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rows), 4; got != want {
		t.Fatalf("%d rows, want %d (header and 3 samples)", got, want)
	}
	if rows[0][0] != "source" || len(rows[0]) != 6 {
		t.Fatalf("header %v", rows[0])
	}
	want := []struct {
		src int
		s   estimate.Sample
	}{{3, in[0][0]}, {4, in[1][0]}, {4, in[1][1]}}
	for i, w := range want {
		r := rows[i+1]
		v := make([]int64, 6)
		for j := range r {
			if v[j], err = strconv.ParseInt(r[j], 10, 64); err != nil {
				t.Fatalf("row %d col %d: %v", i+1, j, err)
			}
		}
		got := estimate.Sample{SrcSend: v[1], LocRecv: v[2], LocSend: v[3], SrcRecv: v[4]}
		if int(v[0]) != w.src || got != w.s || v[5] != w.s.RTT() {
			t.Errorf("row %d = %v, want source %d %+v rtt %d", i+1, r, w.src, w.s, w.s.RTT())
		}
	}
}

func TestMeasurementsLogBadPath(t *testing.T) {
	if _, err := newMeasurementsLog(filepath.Join(t.TempDir(), "no", "such", "dir", "m.csv")); err == nil {
		t.Fatal("no error for a file in a missing directory")
	}
}
