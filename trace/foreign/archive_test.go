package foreign

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gclock/gclock/trace/otf2/archive"
)

// pyView is what python3-otf2's reader (libotf2) sees in an archive.
type pyView struct {
	Times map[string][]int64 `json:"times"`
	Kinds map[string]int     `json:"kinds"`
	Clock struct {
		Resolution, Offset, Length int64
	} `json:"clock"`
}

func readByPython(t *testing.T, path string) *pyView {
	t.Helper()
	out, err := exec.Command(python, filepath.Join("testdata", "dump_times.py"), path).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("python3-otf2 reading %s: %v\n%s", path, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var v pyView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return &v
}

// TestArchiveRoundTrip: a Score-P-like archive written by python3-otf2 is
// read into the model (its times, offsets and message pairs are those the
// generator wrote), corrected, written, and read back by this package, by
// libotf2 (python3-otf2's reader) and by otf2-print, which all see the
// corrected times; the corrected times are judged against the truth.
func TestArchiveRoundTrip(t *testing.T) {
	dir, tr := generate(t, "-procs", "5", "-seconds", "6", "-interval-ms", "3", "-seed", "7")
	in := filepath.Join(dir, "traces.otf2")
	ar, err := ReadArchive(in)
	if err != nil {
		t.Fatal(err)
	}
	if ar.Resolution != 1e9 || len(ar.Trace.Locs) != tr.Procs || ar.Unmatched != 0 || len(ar.Trace.Msgs) != len(tr.Messages) {
		t.Fatalf("read %d locations, %d messages (%d unmatched), resolution %d; the generator wrote %d, %d",
			len(ar.Trace.Locs), len(ar.Trace.Msgs), ar.Unmatched, ar.Resolution, tr.Procs, len(tr.Messages))
	}
	// the model is what the generator wrote: local times, offsets, pairs
	want := map[Message]bool{}
	for _, m := range tr.Messages {
		want[Message{From: m.From, To: m.To, Send: m.SendIdx, Recv: m.RecvIdx}] = true
	}
	for _, m := range ar.Trace.Msgs {
		if !want[m] {
			t.Fatalf("message %+v was not sent so", m)
		}
	}
	for i, l := range tr.Locations {
		got := ar.Trace.Locs[i]
		if len(got.Times) != len(l.Local) || len(got.Offsets) != len(l.Offsets) {
			t.Fatalf("location %d: %d events, %d offsets; want %d, %d", i, len(got.Times), len(got.Offsets), len(l.Local), len(l.Offsets))
		}
		for e := range l.Local {
			if got.Times[e] != l.Local[e] {
				t.Fatalf("location %d event %d at %d, want %d", i, e, got.Times[e], l.Local[e])
			}
		}
	}
	// Linear is exactly what libotf2's reader applies
	before := readByPython(t, in)
	for i, id := range ar.LocIDs {
		py := before.Times[strconv.FormatUint(id, 10)]
		for e, x := range ar.Trace.Locs[i].Times {
			if g := Linear(ar.Trace.Locs[i].Offsets, x); py[e] != g {
				t.Fatalf("location %d event %d: libotf2 reads %d, Linear %d", i, e, py[e], g)
			}
		}
	}
	res, err := Correct(ar.Trace, Options{Reference: -1, CLC: true})
	if err != nil {
		t.Fatal(err)
	}
	lin := Evaluate(tr, func(i, e int) int64 { return before.Times[strconv.FormatUint(ar.LocIDs[i], 10)][e] })
	out := t.TempDir()
	rep, err := ar.Write(out, "traces", res)
	if err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(out, "traces.otf2")
	after := readByPython(t, outPath)
	got := Evaluate(tr, func(i, e int) int64 { return after.Times[strconv.FormatUint(ar.LocIDs[i], 10)][e] })
	t.Logf("libotf2 reads the input: %v; the corrected archive: %v", lin, got)
	t.Logf("receives before sends: raw %d, linear %d, corrected %d, after CLC %d of %d", res.Causality.Raw, res.Causality.Linear, res.Causality.Corrected, res.Causality.CLC, res.Messages)
	for i, id := range ar.LocIDs {
		py := after.Times[strconv.FormatUint(id, 10)]
		for e, g := range res.Global[i] {
			if py[e] != g {
				t.Fatalf("location %d event %d: libotf2 reads %d from the corrected archive, want %d", i, e, py[e], g)
			}
		}
	}
	if after.Clock.Offset != rep.Start || after.Clock.Length != rep.End-rep.Start {
		t.Errorf("ClockProperties offset %d length %d, want %d %d", after.Clock.Offset, after.Clock.Length, rep.Start, rep.End-rep.Start)
	}
	if res.Causality.CLC != 0 || res.Causality.Linear == 0 {
		t.Errorf("violations: linear %d (want > 0: the drift steps), after CLC %d (want 0)", res.Causality.Linear, res.Causality.CLC)
	}
	if 2*got.P99 > lin.P99 {
		t.Errorf("corrected %v not 2 times better than the linear interpolation %v", got, lin)
	}
	// read back by this package: same records, new times, offsets 0
	back, err := ReadArchive(outPath)
	if err != nil {
		t.Fatal(err)
	}
	for i := range back.Trace.Locs {
		for _, o := range back.Trace.Locs[i].Offsets {
			if o.Offset != 0 {
				t.Fatalf("location %d: clock offset %d left in the corrected archive", i, o.Offset)
			}
		}
		for e, x := range back.Trace.Locs[i].Times {
			if x != res.Global[i][e] {
				t.Fatalf("location %d event %d: read back %d, want %d", i, e, x, res.Global[i][e])
			}
		}
	}
	if len(back.Trace.Msgs) != len(ar.Trace.Msgs) || back.Unmatched != 0 {
		t.Errorf("read back %d messages (%d unmatched), want %d", len(back.Trace.Msgs), back.Unmatched, len(ar.Trace.Msgs))
	}
	// otf2-print (libotf2's own tool) reads it to the end
	if _, err := exec.LookPath("otf2-print"); err != nil {
		t.Log("otf2-print not installed (Debian otf2-tools): skipped its read-back")
		return
	}
	po, err := exec.Command("otf2-print", outPath).CombinedOutput()
	if err != nil {
		t.Fatalf("otf2-print: %v\n%.2000s", err, po)
	}
	lines := 0
	for _, l := range strings.Split(string(po), "\n") {
		if strings.HasPrefix(l, "ENTER") || strings.HasPrefix(l, "LEAVE") || strings.HasPrefix(l, "MPI_") {
			lines++
		}
	}
	if lines != rep.Events {
		t.Errorf("otf2-print printed %d events, %d written", lines, rep.Events)
	}
}

// TestArchiveBadInput: a truncated archive, a missing location file, a
// location without clock offsets: errors that say what and where.
func TestArchiveBadInput(t *testing.T) {
	dir, _ := generate(t, "-procs", "3", "-seconds", "1", "-interval-ms", "5", "-seed", "2")
	copyDir := func(t *testing.T) string {
		t.Helper()
		d := filepath.Join(t.TempDir(), "a")
		if err := os.CopyFS(d, os.DirFS(dir)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range []struct {
		name string
		mod  func(t *testing.T, d string)
		want []string
	}{
		{"truncated events", func(t *testing.T, d string) {
			p := filepath.Join(d, "traces", "1.evt")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}, []string{"location 1", "1.evt"}},
		{"missing event file", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, "traces", "2.evt"))
		}, []string{"location 2", "event file is missing"}},
		{"no clock offsets", func(t *testing.T, d string) {
			// an empty local definition file: the ClockOffset records gone
			os.Remove(filepath.Join(d, "traces", "1.def"))
		}, []string{"location 1", "no clock offset record"}},
		{"truncated anchor", func(t *testing.T, d string) {
			p := filepath.Join(d, "traces.otf2")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:20], 0o644)
		}, []string{"traces.otf2"}},
		{"truncated global definitions", func(t *testing.T, d string) {
			p := filepath.Join(d, "traces.def")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/3], 0o644)
		}, []string{"traces.def"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := copyDir(t)
			c.mod(t, d)
			ar, err := ReadArchive(filepath.Join(d, "traces.otf2"))
			if err == nil {
				_, err = Correct(ar.Trace, Options{Reference: -1})
				if err != nil {
					err = errors.New(ar.Path + ": " + err.Error())
				}
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
			var fe *archive.FormatError
			t.Logf("%v (format error: %v)", err, errors.As(err, &fe))
		})
	}
}

// TestThreadsShareTheirProcess: threads without messages (OpenMP threads
// of a rank) read their process's clock and get its refinement, not just
// the linear interpolation.
func TestThreadsShareTheirProcess(t *testing.T) {
	dir, tr := generate(t, "-procs", "4", "-seconds", "6", "-interval-ms", "3", "-seed", "8", "-threads", "2")
	ar, err := ReadArchive(filepath.Join(dir, "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Correct(ar.Trace, Options{Reference: -1})
	if err != nil {
		t.Fatal(err)
	}
	// errors of the threads of ranks 1..3 (locations 4.. after the 4
	// masters; rank 0's threads are on the reference clock)
	threads := func(global func(i, e int) int64) ErrorStats {
		var v []int64
		for i := 4 + 2; i < len(tr.Locations); i++ {
			for e, g := range tr.Locations[i].Global {
				d := global(i, e) - g
				v = append(v, max(d, -d))
			}
		}
		return statsOf(v)
	}
	lin := threads(func(i, e int) int64 { return Linear(ar.Trace.Locs[i].Offsets, ar.Trace.Locs[i].Times[e]) })
	got := threads(func(i, e int) int64 { return res.Global[i][e] })
	t.Logf("threads: linear %v, corrected %v", lin, got)
	for i := 4; i < len(res.Locs); i++ {
		if want := (i - 4) / 2; res.Locs[i].Shared != want {
			t.Errorf("location %d (%s) shares %d, want %d (its rank's master thread)", i, res.Locs[i].Name, res.Locs[i].Shared, want)
		}
	}
	if 2*got.P99 > lin.P99 {
		t.Errorf("threads corrected %v, not twice better than linear %v", got, lin)
	}
}

// TestArchiveCommMappingTable: events that name their communicator by a
// location-local id, mapped to the global one by a MappingTable local
// definition (as Score-P writes them), are matched like global ids.
func TestArchiveCommMappingTable(t *testing.T) {
	src, err := archive.Open(filepath.Join("testdata", "tiny", "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := archive.Create(dir, "traces", archive.Options{Creator: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range src.Global {
		if err := w.Global(&src.Global[i]); err != nil {
			t.Fatal(err)
		}
	}
	const local = 7 // location-local id of MPI_COMM_WORLD (global 0)
	for _, loc := range src.Locations {
		mt, err := archive.NewRecord(archive.LocalDef, "MappingTable", 0, archive.U(mappingComm), archive.Value{Map: &archive.Map{Mode: 1, Items: []uint64{local, 0}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.LocalDef(loc, mt); err != nil {
			t.Fatal(err)
		}
		defs, err := src.LocalDefs(loc)
		if err != nil {
			t.Fatal(err)
		}
		for i := range defs {
			if err := w.LocalDef(loc, &defs[i]); err != nil {
				t.Fatal(err)
			}
		}
		err = src.EachEvent(loc, func(r *archive.Record) error {
			if n := r.Name(); n == "MpiSend" || n == "MpiRecv" {
				if err := r.Set("communicator", archive.U(local)); err != nil {
					return err
				}
			}
			return w.Event(loc, r)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want, err := ReadArchive(filepath.Join("testdata", "tiny", "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadArchive(filepath.Join(dir, "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Trace.Msgs) == 0 || len(got.Trace.Msgs) != len(want.Trace.Msgs) || got.Unmatched != 0 {
		t.Fatalf("%d messages (%d unmatched) through the mapping table, %d without", len(got.Trace.Msgs), got.Unmatched, len(want.Trace.Msgs))
	}
	for i := range got.Trace.Msgs {
		if got.Trace.Msgs[i] != want.Trace.Msgs[i] {
			t.Fatalf("message %d: %+v, want %+v", i, got.Trace.Msgs[i], want.Trace.Msgs[i])
		}
	}
	// without the table the local id names no communicator: an error
	// naming the location and the event
	bad := filepath.Join(t.TempDir(), "b")
	if err := os.CopyFS(bad, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	def, _ := os.ReadFile(filepath.Join("testdata", "tiny", "traces", "0.def"))
	if err := os.WriteFile(filepath.Join(bad, "traces", "0.def"), def, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadArchive(filepath.Join(bad, "traces.otf2"))
	if err == nil || !strings.Contains(err.Error(), "location 0") || !strings.Contains(err.Error(), "communicator 7 is not defined") {
		t.Errorf("unmapped communicator: %v", err)
	}
}

// TestArchiveTimeEdges: a timestamp beyond int64 is an error naming the
// event; corrected times before the clock's zero are refused by Write.
func TestArchiveTimeEdges(t *testing.T) {
	src, err := archive.Open(filepath.Join("testdata", "tiny", "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	err = archive.Copy(src, dir, "traces", archive.Transform{Event: func(loc uint64, r *archive.Record) error {
		if loc == 1 {
			r.Time += 1 << 63 // every event of location 1 beyond int64
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = ReadArchive(filepath.Join(dir, "traces.otf2"))
	if err == nil || !strings.Contains(err.Error(), "location 1") || !strings.Contains(err.Error(), "beyond int64") {
		t.Errorf("timestamps beyond int64: %v", err)
	}
	ar, err := ReadArchive(filepath.Join("testdata", "tiny", "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Correct(ar.Trace, Options{Reference: -1})
	if err != nil {
		t.Fatal(err)
	}
	res.Global[0][0] = -5
	if _, err := ar.Write(t.TempDir(), "traces", res); err == nil || !strings.Contains(err.Error(), "before the clock's zero") {
		t.Errorf("negative corrected time: %v", err)
	}
	if _, err := ar.Write(filepath.Join("testdata", "tiny"), "traces", res); err == nil || !strings.Contains(err.Error(), "would overwrite") {
		t.Errorf("writing over the input: %v", err)
	}
}
