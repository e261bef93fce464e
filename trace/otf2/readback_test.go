package otf2_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/otf2"
	"github.com/gclock/gclock/trace/timeline"
	"github.com/gclock/gclock/trace/tracegen"
)

// locStat is what a reader saw of one location.
type locStat struct {
	N     int64  `json:"n"`
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
}

type sendAt struct {
	Loc   uint64 `json:"loc"`
	Time  uint64 `json:"time"`
	MsgID uint64 `json:"msgid"`
}

// demoArchive writes the demo trace (gclock trace demo's configuration,
// shortened), merges it with CLC into an OTF2 archive and a binary merged
// trace, and returns the archive's anchor file and the merged events.
func demoArchive(t *testing.T) (string, []format.Merged, *timeline.Report) {
	t.Helper()
	if !otf2.Available {
		t.Fatal("otf2.Available is false")
	}
	dir := t.TempDir()
	cfg := tracegen.DefaultConfig()
	cfg.Duration = 300 * time.Millisecond
	var paths []string
	var files []*os.File
	_, err := tracegen.Generate(cfg, func(p int) (io.Writer, error) {
		path := filepath.Join(dir, fmt.Sprintf("proc-%02d.gct", p))
		f, err := os.Create(path)
		paths, files = append(paths, path), append(files, f)
		return f, err
	}, nil)
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	var bin bytes.Buffer
	arch := filepath.Join(dir, "otf2")
	rep, err := timeline.Run(timeline.Files(paths), timeline.Options{Method: correct.Auto, CLC: true, Binary: &bin, OTF2: arch})
	if err != nil {
		t.Fatal(err)
	}
	r := format.NewReader(&bin, "merged")
	var merged []format.Merged
	for {
		c, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.Kind == format.KindMerged {
			b, err := format.DecodeMerged(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			merged = append(merged, b...)
		}
	}
	return filepath.Join(arch, "traces.otf2"), merged, rep
}

// expected derives, independently of the writer, what the archive must
// hold: per location the number of records and the first and last
// timestamps, and the first sends with their message ids.
func expected(merged []format.Merged) (map[uint64]locStat, []sendAt) {
	var origin int64
	if len(merged) > 0 && merged[0].Time < 0 {
		origin = merged[0].Time
	}
	locs := map[uint64]locStat{}
	var sends []sendAt
	for _, m := range merged {
		n := int64(1)
		switch m.Kind {
		case format.Instant:
			n = 2
		case format.Send, format.Recv:
			if m.ID>>63 != 0 {
				continue
			}
		}
		id := uint64(m.Proc)<<16 | uint64(m.Track)
		t := uint64(m.Time - origin)
		s := locs[id]
		if s.N == 0 {
			s.First = t
		}
		s.N += n
		s.Last = t
		locs[id] = s
		if m.Kind == format.Send && len(sends) < 20 {
			sends = append(sends, sendAt{id, t, m.ID})
		}
	}
	return locs, sends
}

func compare(t *testing.T, who string, got, want map[uint64]locStat) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d locations, want %d", who, len(got), len(want))
	}
	for id, w := range want {
		if g := got[id]; g != w {
			t.Errorf("%s: location %d: %+v, want %+v", who, id, g, w)
		}
	}
}

func TestOTF2PrintReadsEveryRecord(t *testing.T) {
	bin, err := exec.LookPath("otf2-print")
	if err != nil {
		t.Skip("otf2-print not installed (ci/deps.sh installs otf2-tools): the OTF2 read-back is not checked")
	}
	anchor, merged, rep := demoArchive(t)
	want, sends := expected(merged)
	out, err := exec.Command(bin, anchor).Output()
	if err != nil {
		t.Fatalf("otf2-print %s: %v", anchor, err)
	}
	line := regexp.MustCompile(`^([A-Z_]+)\s+(\d+)\s+(\d+)\s+(.*)$`)
	got := map[uint64]locStat{}
	var total int64
	var gotSends []sendAt
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var pendingSend *sendAt
	for sc.Scan() {
		s := sc.Text()
		if pendingSend != nil && strings.Contains(s, "ADDITIONAL ATTRIBUTES") {
			if m := regexp.MustCompile(`"gclock::message_id" <\d+>; UINT64; (\d+)`).FindStringSubmatch(s); m != nil {
				pendingSend.MsgID, _ = strconv.ParseUint(m[1], 10, 64)
			}
			gotSends = append(gotSends, *pendingSend)
			pendingSend = nil
			continue
		}
		m := line.FindStringSubmatch(s)
		if m == nil {
			continue
		}
		loc, _ := strconv.ParseUint(m[2], 10, 64)
		ts, _ := strconv.ParseUint(m[3], 10, 64)
		x := got[loc]
		if x.N == 0 {
			x.First = ts
		}
		x.N++
		x.Last = ts
		got[loc] = x
		total++
		if m[1] == "MPI_SEND" && len(gotSends) < len(sends) {
			pendingSend = &sendAt{Loc: loc, Time: ts}
		}
	}
	if total != rep.OTF2.Events || total == 0 {
		t.Errorf("otf2-print printed %d events, gclock wrote %d", total, rep.OTF2.Events)
	}
	compare(t, "otf2-print", got, want)
	// otf2-print lists events of all locations merged by time; ties may
	// come in either order, so compare the sends as a set.
	wantSet := map[sendAt]bool{}
	for _, s := range sends {
		wantSet[s] = true
	}
	for _, s := range gotSends[:min(len(gotSends), len(sends)-5)] {
		if !wantSet[s] {
			t.Errorf("otf2-print: send %+v is not one gclock wrote among the first sends %+v", s, sends)
		}
	}
	t.Logf("otf2-print read %d events on %d locations", total, len(got))
}

const pyReader = `
import json, sys, otf2
locs, sends = {}, []
with otf2.reader.open(sys.argv[1]) as tr:
    cp = tr.definitions.clock_properties
    for loc, ev in tr.events:
        s = locs.setdefault(str(loc._ref), {"n": 0, "first": ev.time, "last": 0})
        s["n"] += 1
        s["last"] = ev.time
        if type(ev).__name__ == "MpiSend" and len(sends) < 20:
            mid = [v for a, v in ev.attributes.items() if a.name == "gclock::message_id"][0]
            sends.append({"loc": loc._ref, "time": ev.time, "msgid": mid})
json.dump({"locs": locs, "sends": sends, "resolution": cp.timer_resolution, "offset": cp.global_offset, "length": cp.trace_length}, sys.stdout)
`

// python finds a python3 that imports otf2 (python3-otf2 installs into the
// system's python, which may not be the first python3 on PATH).
func python(t *testing.T) string {
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import otf2").Run() == nil {
			return path
		}
	}
	t.Skip("no python3 with the otf2 module (ci/deps.sh installs python3-otf2): the Python read-back is not checked")
	return ""
}

func TestPythonOTF2ReadsEveryRecord(t *testing.T) {
	py := python(t)
	anchor, merged, rep := demoArchive(t)
	want, sends := expected(merged)
	cmd := exec.Command(py, "-c", pyReader, anchor)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3-otf2 reading %s: %v\n%s", anchor, err, stderr.String())
	}
	var res struct {
		Locs                       map[string]locStat
		Sends                      []sendAt
		Resolution, Offset, Length uint64
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("python output: %v\n%s", err, out)
	}
	got := map[uint64]locStat{}
	var total int64
	var minT, maxT uint64 = ^uint64(0), 0
	for k, v := range res.Locs {
		id, _ := strconv.ParseUint(k, 10, 64)
		got[id] = v
		total += v.N
		minT, maxT = min(minT, v.First), max(maxT, v.Last)
	}
	compare(t, "python3-otf2", got, want)
	if total != rep.OTF2.Events {
		t.Errorf("python3-otf2 read %d events, gclock wrote %d", total, rep.OTF2.Events)
	}
	if res.Resolution != 1e9 || res.Offset != minT || res.Length != maxT-minT {
		t.Errorf("clock properties: resolution %d offset %d length %d, want 1e9, %d, %d", res.Resolution, res.Offset, res.Length, minT, maxT-minT)
	}
	// Per location, events come in file order: the first sends of each
	// location must be gclock's, in order.
	byLoc := map[uint64][]sendAt{}
	for _, s := range sends {
		byLoc[s.Loc] = append(byLoc[s.Loc], s)
	}
	seen := map[uint64]int{}
	for _, s := range res.Sends {
		w := byLoc[s.Loc]
		if k := seen[s.Loc]; k < len(w) {
			if s != w[k] {
				t.Errorf("python3-otf2: send %d of location %d is %+v, gclock wrote %+v", k, s.Loc, s, w[k])
			}
			seen[s.Loc]++
		}
	}
	t.Logf("python3-otf2 read %d events on %d locations", total, len(got))
}

// TestMPIRecordsReadBack writes an MPI-shaped trace (a collective with the C
// tracer's dependency messages, a tagged message, an instant, a counter and
// a second thread) and reads it back with otf2-print.
func TestMPIRecordsReadBack(t *testing.T) {
	bin, err := exec.LookPath("otf2-print")
	if err != nil {
		t.Skip("otf2-print not installed (ci/deps.sh installs otf2-tools): the OTF2 read-back is not checked")
	}
	dir := t.TempDir()
	w, err := otf2.Create(dir, otf2.Options{Metadata: []otf2.KV{{Key: "method", Value: "spline"}}})
	if err != nil {
		t.Fatal(err)
	}
	var names []format.Name
	for p := uint32(0); p < 2; p++ {
		names = append(names, format.Name{Proc: p, ID: 1, Name: "MPI_Allreduce"}, format.Name{Proc: p, ID: 2, Name: "MPI_Send"},
			format.Name{Proc: p, ID: 3, Name: "checkpoint"}, format.Name{Proc: p, ID: 4, Name: "queue depth"})
		if err := w.SetProcess(p, fmt.Sprintf("rank %d", p), 0); err != nil {
			t.Fatal(err)
		}
	}
	w.SetNames(names)
	e := func(tm int64, p uint32, k format.Kind, id uint64, peer uint32, v int64, track uint16) format.Merged {
		return format.Merged{Event: format.Event{Time: tm, Kind: k, ID: id, Peer: peer, Value: v, Track: track}, Raw: tm - 7, Proc: p}
	}
	evs := []format.Merged{
		e(1000, 0, format.Enter, 1, 0, 0, 0), e(1010, 1, format.Enter, 1, 0, 0, 0),
		e(1010, 0, format.Send, 1<<63|1<<32|5, 1, 0, 0), e(1020, 1, format.Recv, 1<<63|1<<32|5, 0, 0, 0),
		e(1100, 0, format.Leave, 1, 0, 0, 0), e(1110, 1, format.Leave, 1, 0, 0, 0),
		e(1200, 0, format.Enter, 2, 0, 0, 0), e(1210, 0, format.Send, 42<<32, 1, 4096, 0), e(1220, 0, format.Leave, 2, 0, 0, 0),
		e(1300, 1, format.Recv, 42<<32, 0, 4096, 0), e(1400, 1, format.Instant, 3, 0, 0, 1), e(1500, 0, format.Counter, 4, 0, 17, 0),
	}
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-A", filepath.Join(dir, "traces.otf2")).CombinedOutput()
	if err != nil {
		t.Fatalf("otf2-print: %v\n%s", err, out)
	}
	s := string(out)
	for _, want := range []string{
		`MPI_COLLECTIVE_BEGIN                           0                 1000`,
		`Operation: ALLREDUCE, Communicator: "MPI_COMM_WORLD"`,
		`MPI_SEND                                       0                 1210  Receiver: 1 ("rank 1" <65536>), Communicator: "MPI_COMM_WORLD" <0>, Tag: 42, Length: 4096`,
		`MPI_RECV                                   65536                 1300  Sender: 0`,
		`ENTER                                      65537                 1400  Region: "checkpoint"`,
		`METRIC                                         0                 1500`,
		`GCLOCK::METHOD`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("otf2-print output lacks %q", want)
		}
	}
	if n := strings.Count(s, "\nMPI_SEND "); n != 1 {
		t.Errorf("%d MPI_SEND records, want 1 (the collective's dependency is no message)", n)
	}
	if t.Failed() {
		t.Log(s)
	}
}
