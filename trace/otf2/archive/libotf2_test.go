package archive

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The tests here check the package against libotf2 3.0.2 itself: archives
// libotf2 writes (through its Python binding) are read and compared with
// what the script says it wrote; the same archives rewritten by this
// package are byte for byte what libotf2 wrote, and otf2-print prints an
// archive rewritten with shifted timestamps as the original with those
// shifts. CI installs the tools (ci/deps.sh); elsewhere the tests skip.

const systemPython = "/usr/bin/python3" // the PATH's python3 may lack the otf2 binding

func needLibotf2Python(t *testing.T) {
	t.Helper()
	if err := exec.Command(systemPython, "-c", "import _otf2").Run(); err != nil {
		t.Skipf("%s cannot import _otf2 (ci/deps.sh installs python3-otf2): %v", systemPython, err)
	}
}

func needOtf2Print(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("otf2-print"); err != nil {
		t.Skip("otf2-print not installed (ci/deps.sh installs otf2-tools)")
	}
}

type jsonRecord struct {
	C    string                     `json:"c"`
	Loc  uint64                     `json:"loc"`
	Name string                     `json:"name"`
	T    uint64                     `json:"t"`
	F    map[string]json.RawMessage `json:"f"`
	A    [][3]json.Number           `json:"a"`
}

func jsonValue(raw json.RawMessage) (Value, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return Value{}, err
	}
	return toValue(x)
}

func toNumber(n json.Number) (uint64, error) {
	if u, err := strconv.ParseUint(string(n), 10, 64); err == nil {
		return u, nil
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	return uint64(i), err
}

func toValue(x any) (Value, error) {
	switch v := x.(type) {
	case json.Number:
		u, err := toNumber(v)
		return U(u), err
	case map[string]any:
		if f, ok := v["f"]; ok {
			u, err := toNumber(f.(json.Number))
			return U(u), err
		}
		if s, ok := v["s"]; ok {
			return S(s.(string)), nil
		}
		if m, ok := v["m"].([]any); ok {
			mode, _ := toNumber(m[0].(json.Number))
			mp := &Map{Mode: uint8(mode)}
			for _, it := range m[1].([]any) {
				u, err := toNumber(it.(json.Number))
				if err != nil {
					return Value{}, err
				}
				mp.Items = append(mp.Items, u)
			}
			return Value{Map: mp}, nil
		}
	case []any:
		out := Value{Rows: [][]Value{}}
		for _, row := range v {
			var vals []Value
			for _, y := range row.([]any) {
				val, err := toValue(y)
				if err != nil {
					return Value{}, err
				}
				vals = append(vals, val)
			}
			out.Rows = append(out.Rows, vals)
		}
		return out, nil
	}
	return Value{}, fmt.Errorf("unexpected JSON value %v", x)
}

// fromJSON builds the record the script wrote: its current fields by name,
// the attic ones as libotf2 fills them.
func fromJSON(j jsonRecord) (*Record, Class, error) {
	c := map[string]Class{"g": GlobalDef, "l": LocalDef, "e": Event}[j.C]
	s := Lookup(c, j.Name)
	if s == nil {
		return nil, 0, fmt.Errorf("no %s record %s", c, j.Name)
	}
	var vals []Value
	for _, f := range s.Fields {
		if f.Attic != (Version{}) {
			continue
		}
		raw, ok := j.F[f.Name]
		if !ok {
			return nil, 0, fmt.Errorf("%s: the script gives no %s", j.Name, f.Name)
		}
		v, err := jsonValue(raw)
		if err != nil {
			return nil, 0, fmt.Errorf("%s.%s: %w", j.Name, f.Name, err)
		}
		vals = append(vals, v)
	}
	r, err := NewRecord(c, j.Name, j.T, vals...)
	if err != nil {
		return nil, 0, err
	}
	for _, a := range j.A {
		id, _ := toNumber(a[0])
		typ, _ := toNumber(a[1])
		v, _ := toNumber(a[2])
		r.Attrs = append(r.Attrs, Attr{ID: uint32(id), Type: uint8(typ), Value: v})
	}
	return r, c, nil
}

// libotf2Archive has libotf2 write an archive with n events of the long
// loop per location (several chunks of 256 KiB for n = 12000).
func libotf2Archive(t *testing.T, n int) (string, *written) {
	t.Helper()
	needLibotf2Python(t)
	dir := t.TempDir()
	cmd := exec.Command(systemPython, "testdata/libotf2_write.py", dir, strconv.Itoa(n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("libotf2_write.py: %v\n%s", err, stderr.Bytes())
	}
	var recs []jsonRecord
	if err := json.Unmarshal(out, &recs); err != nil {
		t.Fatal(err)
	}
	want := &written{local: map[uint64][]*Record{}, events: map[uint64][]*Record{}}
	for _, j := range recs {
		r, c, err := fromJSON(j)
		if err != nil {
			t.Fatal(err)
		}
		switch c {
		case GlobalDef:
			want.global = append(want.global, r)
			if j.Name == "Location" {
				want.locs = append(want.locs, r.Uint("self"))
			}
		case LocalDef:
			want.local[j.Loc] = append(want.local[j.Loc], r)
		case Event:
			want.events[j.Loc] = append(want.events[j.Loc], r)
		}
	}
	return dir, want
}

// TestLibotf2 runs the checks against libotf2 on one archive it wrote
// (writing it takes seconds).
func TestLibotf2(t *testing.T) {
	dir, want := libotf2Archive(t, 12000)
	t.Run("Read", func(t *testing.T) { testReadLibotf2(t, dir, want) })
	t.Run("RewriteIsByteIdentical", func(t *testing.T) { testRewriteIdentical(t, dir, want) })
	t.Run("ShiftedRewriteOtf2Print", func(t *testing.T) { testShiftedRewrite(t, dir) })
}

func testReadLibotf2(t *testing.T, dir string, want *written) {
	a, err := Open(filepath.Join(dir, "traces.otf2"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Creator != "libotf2 test ✓" || a.Version != [3]uint8{3, 0, 2} || a.NumLocations != 3 || a.NumGlobalDefs != uint64(len(want.global)) {
		t.Errorf("anchor %+v", a.Anchor)
	}
	if v, ok := a.Property("GCLOCK::ZETA"); !ok || v != "zeit ✓ 時間" {
		t.Errorf("properties %v", a.Properties)
	}
	compare(t, "global definitions", a.Global, want.global)
	if fmt.Sprint(a.Locations) != fmt.Sprint(want.locs) {
		t.Errorf("locations %v, want %v", a.Locations, want.locs)
	}
	for _, loc := range want.locs {
		defs, err := a.LocalDefs(loc)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, fmt.Sprintf("local definitions of %d", loc), defs, want.local[loc])
		ev, err := a.Events(loc)
		if err != nil {
			t.Fatal(err)
		}
		compare(t, fmt.Sprintf("events of %d", loc), ev, want.events[loc])
		if st, err := os.Stat(a.EventsPath(loc)); err != nil || uint64(st.Size()) < 2*a.Anchor.ChunkSizeEvents {
			t.Errorf("event file of %d: %v, %v: want several chunks", loc, st.Size(), err)
		}
	}
}

// rewrite copies an archive with Copy, shifting every timestamp (events,
// ClockOffset and BufferFlush times, the clock properties' offset) by shift.
func rewrite(t *testing.T, src, dir string, shift uint64) {
	t.Helper()
	a, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	err = Copy(a, dir, a.Name, Transform{
		Global: func(r *Record) error {
			if r.Name() == "ClockProperties" {
				return r.Set("globalOffset", U(r.Uint("globalOffset")+shift))
			}
			return nil
		},
		LocalDef: func(loc uint64, r *Record) error {
			if r.Name() == "ClockOffset" {
				return r.Set("time", U(r.Uint("time")+shift))
			}
			return nil
		},
		Event: func(loc uint64, r *Record) error {
			r.Time += shift
			if r.Name() == "BufferFlush" {
				return r.Set("stopTime", U(r.Uint("stopTime")+shift))
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testRewriteIdentical: an archive libotf2 wrote, read and written back
// unchanged, is the same bytes in every file.
func testRewriteIdentical(t *testing.T, src string, want *written) {
	dst := t.TempDir()
	rewrite(t, filepath.Join(src, "traces.otf2"), dst, 0)
	files := []string{"traces.otf2", "traces.def"}
	for _, loc := range want.locs {
		files = append(files, fmt.Sprintf("traces/%d.evt", loc), fmt.Sprintf("traces/%d.def", loc))
	}
	for _, f := range files {
		a, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dst, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			t.Errorf("%s: libotf2 wrote %d bytes, the rewrite %d; first difference at byte %d", f, len(a), len(b), i)
		}
	}
}

var eventLine = regexp.MustCompile(`^([A-Z_0-9]+ +\d+ +)(\d+)(.*)$`)

// testShiftedRewrite: otf2-print shows the rewritten archive as the
// original with every timestamp shifted.
func testShiftedRewrite(t *testing.T, src string) {
	needOtf2Print(t)
	dst := t.TempDir()
	const shift = 1_000_000_007
	rewrite(t, filepath.Join(src, "traces.otf2"), dst, shift)
	orig := otf2Print(t, filepath.Join(src, "traces.otf2"))
	got := otf2Print(t, filepath.Join(dst, "traces.otf2"))
	if len(orig) != len(got) || len(orig) < 30000 {
		t.Fatalf("otf2-print: %d lines of the original, %d of the rewrite", len(orig), len(got))
	}
	stop := regexp.MustCompile(`Stop Time: (\d+)`)
	add := func(s string) string {
		x, _ := strconv.ParseUint(s, 10, 64)
		return strconv.FormatUint(x+shift, 10)
	}
	events := 0
	for i, line := range orig {
		want := line
		if m := eventLine.FindStringSubmatch(line); m != nil {
			want = m[1] + add(m[2]) + m[3]
			want = stop.ReplaceAllStringFunc(want, func(s string) string { return "Stop Time: " + add(s[len("Stop Time: "):]) })
			events++
		}
		if strings.HasPrefix(line, "CLOCK_PROPERTIES") || strings.HasPrefix(line, "CLOCK_OFFSET") {
			continue // offsets shifted, checked below
		}
		if got[i] != want {
			t.Fatalf("line %d:\noriginal %s\nwant     %s\ngot      %s", i, line, want, got[i])
		}
	}
	if events < 3*3*12000 {
		t.Errorf("only %d event lines compared", events)
	}
}

func otf2Print(t *testing.T, anchor string) []string {
	t.Helper()
	out, err := exec.Command("otf2-print", "-A", anchor).CombinedOutput()
	if err != nil {
		t.Fatalf("otf2-print %s: %v\n%s", anchor, err, out)
	}
	return strings.Split(string(out), "\n")
}
