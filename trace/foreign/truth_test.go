package foreign

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// The truth the generator (testdata/scorep_like.py, python3-otf2, not
// gclock's writer) writes beside its archive; the code under test never
// reads it.
type truthFile struct {
	Procs     int `json:"procs"`
	Reference int `json:"reference"`
	Locations []struct {
		Global  []int64 `json:"global_ns"`
		Local   []int64 `json:"local_ns"`
		Offsets []struct {
			Local      int64 `json:"local"`
			Offset     int64 `json:"offset"`
			TrueOffset int64 `json:"true_offset"`
		} `json:"clock_offsets"`
	} `json:"locations"`
	Messages []struct {
		From    int   `json:"from"`
		To      int   `json:"to"`
		SendG   int64 `json:"send_g"`
		RecvG   int64 `json:"recv_g"`
		SendIdx int   `json:"send_idx"`
		RecvIdx int   `json:"recv_idx"`
	} `json:"messages"`
}

const python = "/usr/bin/python3"

// needPythonOTF2 skips the test without /usr/bin/python3 and its otf2
// module (Debian python3-otf2; ci/deps.sh installs it).
func needPythonOTF2(t testing.TB) {
	t.Helper()
	if err := exec.Command(python, "-c", "import otf2").Run(); err != nil {
		t.Skipf("skipped: %s cannot import otf2 (install python3-otf2): %v", python, err)
	}
}

// generate writes a Score-P-like archive into a new directory and returns
// the directory and its truth.
func generate(t testing.TB, args ...string) (string, *truthFile) {
	t.Helper()
	needPythonOTF2(t)
	dir := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(python, append([]string{filepath.Join("testdata", "scorep_like.py"), "-out", dir}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "truth.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tr truthFile
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	return dir, &tr
}

// modelOf builds the model from what the archive holds (local times,
// offset records, which events are a message's ends): no truth in it.
func modelOf(tr *truthFile) *Trace {
	m := &Trace{}
	for i, l := range tr.Locations {
		loc := Location{Name: fmt.Sprintf("rank %d", i), Times: slices.Clone(l.Local)}
		for _, o := range l.Offsets {
			loc.Offsets = append(loc.Offsets, OffsetRecord{Local: o.Local, Offset: o.Offset, StdDev: 1000})
		}
		m.Locs = append(m.Locs, loc)
	}
	for _, x := range tr.Messages {
		m.Msgs = append(m.Msgs, Message{From: x.From, To: x.To, Send: x.SendIdx, Recv: x.RecvIdx})
	}
	return m
}

// errStats are |estimate - truth| over the events of the non-reference
// locations, ns.
type errStats struct {
	N             int
	P50, P99, Max int64
}

func (e errStats) String() string {
	return fmt.Sprintf("p50 %d ns, p99 %d ns, max %d ns over %d events", e.P50, e.P99, e.Max, e.N)
}

func statsOf(v []int64) errStats {
	if len(v) == 0 {
		return errStats{}
	}
	slices.Sort(v)
	return errStats{N: len(v), P50: v[len(v)/2], P99: v[len(v)*99/100], Max: v[len(v)-1]}
}

// evaluate compares per-location global times with the truth.
func evaluate(tr *truthFile, global func(loc, ev int) int64) errStats {
	var v []int64
	for i, l := range tr.Locations {
		if i == tr.Reference {
			continue
		}
		for e, g := range l.Global {
			d := global(i, e) - g
			v = append(v, max(d, -d))
		}
	}
	return statsOf(v)
}

// bound is, per event of a non-reference location, the half-width of the
// interval its clock offset is confined to by the messages of its
// correction window: a receive is after its send, so a message q -> p of
// true latency L allows shifting p's times by u_p with u_q - u_p <= L, and
// with the reference fixed, p can shift anywhere in [-D(p, ref), D(ref, p)]
// (D the shortest paths over those constraints, here Floyd-Warshall)
// without making any message of the window acausal. No method that does not
// know the latencies can promise better than half that interval. It
// assumes drift inside a window known, so it is optimistic. Events in
// windows where the location is not bounded both ways are left out.
func bound(tr *truthFile, window int64) (errStats, map[[2]int]int64) {
	t0 := tr.Locations[tr.Reference].Global[0]
	n := len(tr.Locations)
	byWin := map[int][]int{}
	for k, m := range tr.Messages {
		w := int((m.SendG - t0) / window)
		byWin[w] = append(byWin[w], k)
	}
	half := map[[2]int]int64{} // (location, window) -> half-width
	inf := int64(math.MaxInt64 / 4)
	for w, ks := range byWin {
		d := make([][]int64, n)
		for i := range d {
			d[i] = make([]int64, n)
			for j := range d[i] {
				if i != j {
					d[i][j] = inf
				}
			}
		}
		for _, k := range ks {
			m := tr.Messages[k]
			d[m.From][m.To] = min(d[m.From][m.To], m.RecvG-m.SendG)
		}
		for k := range n {
			for i := range n {
				for j := range n {
					d[i][j] = min(d[i][j], d[i][k]+d[k][j])
				}
			}
		}
		r := tr.Reference
		for p := range n {
			if p != r && d[r][p] < inf && d[p][r] < inf {
				half[[2]int{p, w}] = (d[r][p] + d[p][r]) / 2
			}
		}
	}
	var v []int64
	for i, l := range tr.Locations {
		if i == tr.Reference {
			continue
		}
		for _, g := range l.Global {
			if h, ok := half[[2]int{i, int((g - t0) / window)}]; ok {
				v = append(v, h)
			}
		}
	}
	return statsOf(v), half
}
