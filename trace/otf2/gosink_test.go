package otf2

import (
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	ar "github.com/gclock/gclock/trace/otf2/archive"
)

// TestGoSinkRecords writes the rich trace with the pure-Go sink and reads
// it back with package archive's reader: every record the translation
// made is in the archive with its fields and attributes, and the
// definitions are those the libotf2 sink writes.
func TestGoSinkRecords(t *testing.T) {
	procs, names, evs, opt := richTrace()
	rs, _, err := run(t, opt, procs, names, evs) // the translation's records
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := writeRich(t, dir)
	a, err := ar.Open(filepath.Join(dir, "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[Kind]bool{}
	byLoc := map[uint64][]Record{}
	for _, r := range rs.recs {
		byLoc[r.Loc] = append(byLoc[r.Loc], r)
		kinds[r.Kind] = true
	}
	if len(kinds) != len(eventRecords) {
		t.Errorf("the trace makes %d of the %d kinds", len(kinds), len(eventRecords))
	}
	if len(a.Locations) != len(w.Defs().Locations) {
		t.Fatalf("%d locations, want %d", len(a.Locations), len(w.Defs().Locations))
	}
	// Each location's local definitions: its ClockOffset records, offset 0
	// at its first and last event, the bound as the deviation.
	ld := map[uint64]LocationDef{}
	for _, l := range w.Defs().Locations {
		ld[l.ID] = l
	}
	var offsets int
	for _, loc := range a.Locations {
		defs, err := a.LocalDefs(loc)
		if err != nil {
			t.Fatal(err)
		}
		l := ld[loc]
		want := l.ClockOffsets()
		if len(defs) != len(want) {
			t.Fatalf("location %d: %d local definitions, want %d clock offsets", loc, len(defs), len(want))
		}
		for i, r := range defs {
			tm, _ := r.Field("time")
			off, _ := r.Field("offset")
			sd, _ := r.Field("standardDeviation")
			if r.Name() != "ClockOffset" || tm.U != want[i].Time || int64(off.U) != 0 || math.Float64frombits(sd.U) != want[i].StdDev {
				t.Errorf("location %d local definition %d: %s, want ClockOffset %+v", loc, i, r.String(), want[i])
			}
		}
		if l.Events > 0 && (len(want) == 0 || want[0].Time != byLoc[loc][0].Time || want[len(want)-1].Time != byLoc[loc][len(byLoc[loc])-1].Time) {
			t.Errorf("location %d: clock offsets %+v not at its first and last event", loc, want)
		}
		offsets += len(want)
	}
	if offsets == 0 {
		t.Error("no ClockOffset records")
	}
	var n int
	for _, loc := range a.Locations {
		got, err := a.Events(loc)
		if err != nil {
			t.Fatal(err)
		}
		want := byLoc[loc]
		if len(got) != len(want) {
			t.Fatalf("location %d: %d events, want %d", loc, len(got), len(want))
		}
		for i, g := range got {
			wr := want[i]
			spec := eventRecords[wr.Kind]
			exp, err := ar.NewRecord(ar.Event, spec.name, wr.Time, spec.fields(&wr)...)
			if err != nil {
				t.Fatal(err)
			}
			attrs := fmt.Sprint([]ar.Attr{{ID: attrLocal, Type: ar.TypeInt64, Value: uint64(wr.Raw)}})
			if wr.HasBound {
				attrs = fmt.Sprint([]ar.Attr{{ID: attrLocal, Type: ar.TypeInt64, Value: uint64(wr.Raw)}, {ID: attrBound, Type: ar.TypeUint64, Value: uint64(wr.Bound)}})
			}
			if wr.HasMsgID {
				attrs = strings.TrimSuffix(attrs, "]") + fmt.Sprint(" ", ar.Attr{ID: attrMsgID, Type: ar.TypeUint64, Value: wr.MsgID}) + "]"
			}
			g := g
			if g.Name() != exp.Name() || g.Time != exp.Time || fmt.Sprint(g.Fields) != fmt.Sprint(exp.Fields) || fmt.Sprint(g.Attrs) != attrs {
				t.Errorf("location %d event %d: %s, want %s attrs %s", loc, i, g.String(), exp.String(), attrs)
			}
			n++
		}
	}
	if int64(n) != w.Stats().Events {
		t.Errorf("read %d events, wrote %d", n, w.Stats().Events)
	}
	// Definitions: the ones the translation reports, each once.
	count := map[string]int{}
	for _, r := range a.Global {
		count[r.Name()]++
	}
	d := w.Defs()
	for name, want := range map[string]int{"Location": len(d.Locations), "LocationGroup": len(d.Procs), "Region": len(d.Regions),
		"Comm": len(d.Comms), "RmaWin": len(d.Windows), "MetricMember": len(d.Metrics), "MetricClass": len(d.Metrics),
		"Attribute": 3, "Paradigm": 2, "ClockProperties": 1, "SystemTreeNode": 1 + len(d.Hosts), "Group": len(d.Comms) + 1} {
		if count[name] != want {
			t.Errorf("%d %s definitions, want %d", count[name], name, want)
		}
	}
	if v, ok := a.Property("GCLOCK::METHOD"); !ok || v != "spline" || a.Creator != "gclock" {
		t.Errorf("properties %v, creator %q", a.Properties, a.Creator)
	}
}

func writeRich(t *testing.T, dir string) *Writer { return writeRichWith(t, dir, CreateGo) }

// writeRichWith writes richTrace in dir through the sink create opens
// (CreateGo, or Create: libotf2 in a -tags otf2 build).
func writeRichWith(t *testing.T, dir string, create func(string, Options) (*Writer, error)) *Writer {
	t.Helper()
	procs, names, evs, opt := richTrace()
	w, err := create(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	w.SetNames(names)
	for _, p := range procs {
		if err := w.SetProcess(p, fmt.Sprintf("rank %d", p), p/2); err != nil {
			t.Fatal(err)
		}
	}
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestGoSinkOTF2Print: otf2-print reads every record of the pure-Go sink's
// archive, and the definitions of the C tracer's names: hosts, MPI_COMM_SELF,
// a communicator MPI_Comm_set_name named, the realtime date, each
// location's mapping.
func TestGoSinkOTF2Print(t *testing.T) {
	bin, err := exec.LookPath("otf2-print")
	if err != nil {
		t.Skip("otf2-print not installed (ci/deps.sh installs otf2-tools)")
	}
	dir := t.TempDir()
	w := writeRich(t, dir)
	out, err := exec.Command(bin, "-A", filepath.Join(dir, "traces.otf2")).CombinedOutput()
	if err != nil {
		t.Fatalf("otf2-print: %v\n%s", err, out)
	}
	s := string(out)
	for k, e := range eventRecords {
		if !strings.Contains(s, "\n"+k.String()+" ") {
			t.Errorf("otf2-print shows no %s (%s)", k, e.name)
		}
	}
	var n int64
	for _, line := range strings.Split(s, "\n") {
		if eventLine.MatchString(line) {
			n++
		}
	}
	if n != w.Stats().Events {
		t.Errorf("otf2-print printed %d events, gclock wrote %d", n, w.Stats().Events)
	}
	for _, want := range []string{`RMA_ATOMIC`, `Type: ACCUMULATE`, `"solve ✓ (UTF-8)"`, `GCLOCK::HOSTS`, `"gclock::bound_ns"`, `Lock: 0, Type: SHARED`, `Communicator: "odd ranks" <2>, Root: 0`,
		`Request: 1`, `Operation: ALLREDUCE, Communicator: "MPI_COMM_WORLD" <0>, Root: NONE, Sent: 4, Received: 4, Request: 2`} {
		if !strings.Contains(s, want) {
			t.Errorf("otf2-print output lacks %q", want)
		}
	}
	g, err := exec.Command(bin, "-G", filepath.Join(dir, "traces.otf2")).CombinedOutput()
	if err != nil {
		t.Fatalf("otf2-print -G: %v\n%s", err, g)
	}
	// Proc 0's first event: raw 1.7e18 - 5e6 + 137, so UTC 1.8e18 + 137, and timestamp
	// Offset is that event's: 2027-01-15 08:00:00.000000137 UTC.
	for _, want := range []string{`Name: "node-a"`, `Name: "node-b"`, `Type: COMM_SELF`, `COMM                                   1  Name: "MPI_COMM_SELF"`,
		`Name: "odd ranks"`, `Date: 2027-01-15 08:00:00.000000137`, `Name: "GCLOCK::FIRST_OFFSET_NS" <`, `Type: INT64, Value: 4999999`} {
		if !strings.Contains(string(g), want) {
			t.Errorf("otf2-print -G output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(s, string(g))
	}
}

// eventLine is an event line of otf2-print: record, location, time.
var eventLine = regexp.MustCompile(`^[A-Z_0-9]+ +\d+ +\d+ `)
