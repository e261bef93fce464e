package chrome

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gclock/gclock/internal/chromecheck"
	"github.com/gclock/gclock/trace/format"
)

// synth builds a well-formed merged stream: procs processes with two tracks
// each, nested regions, counters, instants and messages, in global order.
func synth(seed uint64, procs, steps int) []format.Merged {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []format.Merged
	depth := map[[2]uint32]int{}
	t := int64(1_000_000_123)
	type inflight struct {
		from, to uint32
		id       uint64
		due      int64
	}
	var fl []inflight
	var id uint64
	for range steps {
		t += 1 + rng.Int64N(1500)
		// deliver due messages first
		for i := 0; i < len(fl); {
			if fl[i].due <= t {
				out = append(out, format.Merged{Event: format.Event{Time: fl[i].due, Kind: format.Recv, Peer: fl[i].from, ID: fl[i].id, Value: 8}, Raw: fl[i].due - 77, Proc: fl[i].to})
				fl = append(fl[:i], fl[i+1:]...)
				continue
			}
			i++
		}
		p := uint32(rng.IntN(procs))
		tr := uint16(rng.IntN(2))
		k := [2]uint32{p, uint32(tr)}
		e := format.Merged{Event: format.Event{Time: t, Track: tr}, Raw: t - 500, Proc: p}
		switch r := rng.IntN(6); {
		case r == 0 || (r == 1 && depth[k] == 0):
			e.Kind, e.ID = format.Enter, uint64(1+depth[k])
			depth[k]++
		case r == 1:
			depth[k]--
			e.Kind, e.ID = format.Leave, uint64(1+depth[k])
		case r == 2:
			e.Kind, e.ID, e.Value = format.Counter, 9, rng.Int64N(100)
		case r == 3:
			e.Kind, e.ID = format.Instant, 5
		default:
			q := uint32(rng.IntN(procs))
			id++
			e.Kind, e.Peer, e.ID, e.Value = format.Send, q, id, 8
			fl = append(fl, inflight{p, q, id, t + 1 + rng.Int64N(3000)})
		}
		out = append(out, e)
	}
	for _, f := range fl {
		out = append(out, format.Merged{Event: format.Event{Time: f.due, Kind: format.Recv, Peer: f.from, ID: f.id}, Raw: f.due, Proc: f.to})
	}
	for k, d := range depth {
		for ; d > 0; d-- {
			out = append(out, format.Merged{Event: format.Event{Time: t + 1e6, Kind: format.Leave, ID: uint64(d), Track: uint16(k[1])}, Proc: k[0]})
		}
	}
	// stable sort by time keeps per-track order
	sortMerged(out)
	return out
}

func sortMerged(m []format.Merged) {
	// insertion-friendly: mostly sorted
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && m[j].Time < m[j-1].Time; j-- {
			m[j], m[j-1] = m[j-1], m[j]
		}
	}
}

func write(t *testing.T, ev []format.Merged) []byte {
	t.Helper()
	var b bytes.Buffer
	w := NewWriter(&b, Options{})
	w.SetNames([]format.Name{{Proc: 0, ID: 1, Name: `outer "quoted" \ region`}, {Proc: 1, ID: 5, Name: "tick\x01\xff"}})
	w.SetProcess(0, "rank 0")
	for i := range ev {
		if err := w.Write(&ev[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestEveryEventValid writes a synthetic merged trace and checks every
// event against the format's rules, and that each timestamp survives to
// the nanosecond.
func TestEveryEventValid(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		ev := synth(seed, 4, 3000)
		out := write(t, ev)
		rep, err := chromecheck.Validate(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if rep.Processes != 4 {
			t.Errorf("seed %d: %d processes, want 4", seed, rep.Processes)
		}
		var sends, want []int64
		for _, e := range ev {
			if e.Kind == format.Send {
				sends = append(sends, e.Time)
			}
			want = append(want, e.Time-ev[0].Time)
			if e.Kind == format.Send || e.Kind == format.Recv {
				want = append(want, e.Time-ev[0].Time) // the X slice and its flow event
			}
		}
		if rep.Flows != len(sends) {
			t.Errorf("seed %d: %d flows, want %d", seed, rep.Flows, len(sends))
		}
		if len(rep.TimesNs) != len(want) {
			t.Fatalf("seed %d: %d timed events, want %d", seed, len(rep.TimesNs), len(want))
		}
		for i := range want {
			if rep.TimesNs[i] != want[i] {
				t.Fatalf("seed %d: event %d at %d ns, want %d (sub-microsecond lost?)", seed, i, rep.TimesNs[i], want[i])
			}
		}
	}
}

func TestAppendMicros(t *testing.T) {
	tests := []struct {
		ns   int64
		want string
	}{
		{0, "0.000"}, {1, "0.001"}, {999, "0.999"}, {1000, "1.000"}, {1234567, "1234.567"},
		{-1, "-0.001"}, {-1500, "-1.500"}, {1<<63 - 1, "9223372036854775.807"}, {-1 << 63, "-9223372036854775.808"},
	}
	for _, tc := range tests {
		if got := string(AppendMicros(nil, tc.ns)); got != tc.want {
			t.Errorf("AppendMicros(%d) = %s, want %s", tc.ns, got, tc.want)
		}
		if tc.ns != -1<<63 {
			if back, err := chromecheck.ParseMicros(tc.want); err != nil || back != tc.ns {
				t.Errorf("chromecheck.ParseMicros(%s) = %d, %v", tc.want, back, err)
			}
		}
	}
}

func TestValidateRejects(t *testing.T) {
	m := func(s string) string { return `{"traceEvents":[` + s + `]}` }
	x := `{"ph":"X","name":"send","cat":"msg","pid":1,"tid":0,"ts":1.000,"dur":0}`
	x2 := `{"ph":"X","name":"recv","cat":"msg","pid":2,"tid":0,"ts":2.000,"dur":0}`
	s1 := `{"ph":"s","name":"msg","cat":"msg","id":1,"pid":1,"tid":0,"ts":1.000}`
	f1 := `{"ph":"f","name":"msg","cat":"msg","id":1,"pid":2,"tid":0,"ts":2.000,"bp":"e"}`
	tests := []struct {
		name, doc, want string
	}{
		{"not json", `{`, "decode"},
		{"no array", `{}`, "no traceEvents"},
		{"no phase", m(`{"name":"a","pid":1,"tid":0,"ts":1}`), "no ph"},
		{"bad phase", m(`{"ph":"Q","name":"a","pid":1,"tid":0,"ts":1}`), "unknown phase"},
		{"no pid", m(`{"ph":"i","name":"a","tid":0,"ts":1}`), "pid"},
		{"four decimals", m(`{"ph":"i","name":"a","pid":1,"tid":0,"ts":1.0001}`), "decimals"},
		{"exponent", m(`{"ph":"i","name":"a","pid":1,"tid":0,"ts":1e3}`), "plain decimal"},
		{"E without B", m(`{"ph":"E","pid":1,"tid":0,"ts":1}`), "without an open B"},
		{"E wrong name", m(`{"ph":"B","name":"a","pid":1,"tid":0,"ts":1},{"ph":"E","name":"b","pid":1,"tid":0,"ts":2}`), "closes"},
		{"B never closed", m(`{"ph":"B","name":"a","pid":1,"tid":0,"ts":1}`), "never closed"},
		{"time backwards", m(`{"ph":"i","name":"a","pid":1,"tid":0,"ts":2},{"ph":"i","name":"a","pid":1,"tid":0,"ts":1}`), "before the track"},
		{"negative dur", m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":-1}`), "negative dur"},
		{"counter text", m(`{"ph":"C","name":"c","pid":1,"tid":0,"ts":1,"args":{"v":"x"}}`), "not a number"},
		{"instant scope", m(`{"ph":"i","name":"a","pid":1,"tid":0,"ts":1,"s":"q"}`), "scope"},
		{"bad metadata", m(`{"ph":"M","name":"colour","pid":1,"tid":0,"args":{}}`), "unknown metadata"},
		{"cat not string", m(`{"ph":"i","name":"a","cat":5,"pid":1,"tid":0,"ts":1}`), "not a string"},
		// Top level.
		{"otherData", `{"traceEvents":[],"otherData":{"origin_ns":"5"}}`, "otherData"},
		{"displayTimeUnit", `{"displayTimeUnit":"ns","traceEvents":[]}`, "displayTimeUnit"},
		{"unknown top-level key", `{"traceEvents":[],"stackFrames":{}}`, `top-level key "stackFrames"`},
		{"traceEvents not array", `{"traceEvents":{}}`, "decode traceEvents"},
		{"metadata not object", `{"traceEvents":[],"metadata":[1]}`, "not an object"},
		// Flows: binding.
		{"flow unbound", m(s1), "no slice on the track"},
		{"flow slice without cat", m(`{"ph":"X","name":"send","pid":1,"tid":0,"ts":1.000,"dur":0},` + s1), `cat ""`},
		{"flow slice other cat", m(`{"ph":"X","name":"send","cat":"io","pid":1,"tid":0,"ts":1.000,"dur":0},` + s1), `cat "io"`},
		{"flow slice other ts", m(`{"ph":"X","name":"send","cat":"msg","pid":1,"tid":0,"ts":0.999,"dur":1},` + s1), "has ts 999 ns"},
		{"flow after another slice", m(x + `,{"ph":"i","name":"tick","pid":1,"tid":0,"ts":1.000},` + s1), "binds to no slice"},
		{"flow end without bp", m(x + `,` + s1 + `,` + x2 + `,{"ph":"f","name":"msg","cat":"msg","id":1,"pid":2,"tid":0,"ts":2.000}`), "without \"bp\""},
		{"flow bp next slice", m(x + `,` + s1 + `,` + x2 + `,{"ph":"f","name":"msg","cat":"msg","id":1,"pid":2,"tid":0,"ts":2.000,"bp":"n"}`), "flow bp"},
		// Flows: ids.
		{"flow no cat", m(x + `,{"ph":"s","name":"msg","id":1,"pid":1,"tid":0,"ts":1}`), "without a cat"},
		{"flow no name", m(x + `,{"ph":"s","name":"","cat":"msg","id":1,"pid":1,"tid":0,"ts":1}`), "without a name"},
		{"flow no id", m(x + `,{"ph":"s","name":"msg","cat":"msg","pid":1,"tid":0,"ts":1}`), "without an id"},
		{"flow id2 only", m(x + `,{"ph":"s","name":"msg","cat":"msg","id2":{"local":"1"},"pid":1,"tid":0,"ts":1}`), "id2"},
		{"flow id not hex", m(x + `,{"ph":"s","name":"msg","cat":"msg","id":"5>6:1","pid":1,"tid":0,"ts":1}`), "flow_invalid_id"},
		{"flow id negative", m(x + `,{"ph":"s","name":"msg","cat":"msg","id":-1,"pid":1,"tid":0,"ts":1}`), "not an integer"},
		{"flow id fraction", m(x + `,{"ph":"s","name":"msg","cat":"msg","id":1.5,"pid":1,"tid":0,"ts":1}`), "not an integer"},
		{"flow id above 2^53", m(x + `,{"ph":"s","name":"msg","cat":"msg","id":9007199254740993,"pid":1,"tid":0,"ts":1}`), "not an integer"},
		{"flow id hex above 2^53", m(x + `,{"ph":"s","name":"msg","cat":"msg","id":"20000000000001","pid":1,"tid":0,"ts":1}`), "above 2^53"},
		{"flow id bool", m(x + `,{"ph":"s","name":"msg","cat":"msg","id":true,"pid":1,"tid":0,"ts":1}`), "neither"},
		{"flow id reused", m(x + `,` + s1 + `,` + x2 + `,` + f1 + `,` + strings.ReplaceAll(x, "1.000", "3.000") + `,` + strings.ReplaceAll(s1, "1.000", "3.000")), "started again"},
		{"flow id reused as hex", m(x + `,` + s1 + `,` + x2 + `,` + f1 + `,` + strings.ReplaceAll(x, "1.000", "3.000") + `,` + strings.ReplaceAll(strings.ReplaceAll(s1, "1.000", "3.000"), `"id":1`, `"id":"01"`)), "started again"},
		{"flow end without start", m(x2 + `,` + f1), "without a start"},
		{"flow never finished", m(x + `,` + s1), "never finished"},
		// Flows v2.
		{"v2 no direction", m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":0,"bind_id":7}`), "flow_without_direction"},
		{"v2 direction without id", m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":0,"flow_out":true}`), "without bind_id"},
		{"v2 id not hex", m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":0,"bind_id":"7g","flow_out":true}`), "flow_invalid_id"},
		{"flow id minus", m(x + `,{"ph":"s","name":"msg","cat":"msg","id":"-1","pid":1,"tid":0,"ts":1}`), "strtoull"},
		{"flow id blank", m(x + `,{"ph":"s","name":"msg","cat":"msg","id":" 1","pid":1,"tid":0,"ts":1}`), "strtoull"},
		{"v2 flow_out not bool", m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":0,"bind_id":7,"flow_out":1}`), "booleans"},
		{"v2 in without out", m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":0,"bind_id":7,"flow_in":true}`), "without a start"},
		{"v2 never in", m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":0,"bind_id":7,"flow_out":true}`), "never flow in"},
		{"v2 started twice", m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":0,"bind_id":7,"flow_out":true},{"ph":"X","name":"a","pid":1,"tid":0,"ts":2,"dur":0,"bind_id":7,"flow_out":true}`), "started again"},
		{"v2 on an instant", m(`{"ph":"i","name":"a","pid":1,"tid":0,"ts":1,"s":"t","bind_id":7,"flow_out":true}`), "B and X slices only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := chromecheck.Validate(strings.NewReader(tc.doc))
			if !errors.Is(err, chromecheck.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	// The same pieces, well formed, pass: the rules above reject what they
	// name and nothing else.
	rep, err := chromecheck.Validate(strings.NewReader(`{"traceEvents":[` + x + `,` + s1 + `,` + x2 + `,` + f1 + `],"metadata":{"origin_ns":"5"}}`))
	if err != nil || rep.Flows != 1 || rep.Metadata["origin_ns"] != "5" {
		t.Fatalf("well-formed flow: %v %+v", err, rep)
	}
	rep, err = chromecheck.Validate(strings.NewReader(m(`{"ph":"X","name":"a","pid":1,"tid":0,"ts":1,"dur":0,"bind_id":"0x1f","flow_out":true},` +
		`{"ph":"B","name":"b","pid":2,"tid":0,"ts":2,"bind_id":31,"flow_in":true,"flow_out":true},{"ph":"E","pid":2,"tid":0,"ts":3},` +
		`{"ph":"X","name":"c","pid":3,"tid":0,"ts":4,"dur":1,"bind_id":31,"flow_in":true}`)))
	if err != nil || rep.FlowsV2 != 1 || rep.Flows != 0 {
		t.Fatalf("well-formed v2 flow: %v %+v", err, rep)
	}
}

// legacyOutput is the shape of what this package wrote before issue 12
// (string flow ids "from>to:msg", X slices without cat, displayTimeUnit,
// otherData): Validate must reject it.
const legacyOutput = `{"displayTimeUnit":"ns","traceEvents":[
{"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"rank 0"}},
{"ph":"X","name":"send","pid":0,"tid":0,"ts":0.000,"dur":0,"args":{"to":1,"msg":1,"bytes":8,"local_ns":5}},
{"ph":"s","name":"msg","pid":0,"tid":0,"ts":0.000,"cat":"msg","id":"0>1:1"},
{"ph":"X","name":"recv","pid":1,"tid":0,"ts":2.500,"dur":0,"args":{"from":0,"msg":1,"bytes":8,"local_ns":9}},
{"ph":"f","name":"msg","pid":1,"tid":0,"ts":2.500,"cat":"msg","id":"0>1:1","bp":"e"}
],"otherData":{"origin_ns":"1000"}}
`

func TestValidateRejectsLegacyOutput(t *testing.T) {
	_, err := chromecheck.Validate(strings.NewReader(legacyOutput))
	if !errors.Is(err, chromecheck.ErrInvalid) {
		t.Fatalf("legacy output accepted: %v", err)
	}
	// Each of its four faults is caught on its own, in the order Validate
	// checks them, and with all four mended the same events pass.
	noOther := strings.Replace(legacyOutput, `"otherData"`, `"metadata"`, 1)
	noUnit := strings.Replace(noOther, `"displayTimeUnit":"ns",`, "", 1)
	numericID := strings.ReplaceAll(noUnit, `"0>1:1"`, `1`)
	withCat := strings.ReplaceAll(numericID, `"dur":0,`, `"dur":0,"cat":"msg",`)
	for _, tc := range []struct{ doc, want string }{
		{legacyOutput, "otherData"},
		{noOther, "displayTimeUnit"},
		{noUnit, "flow_invalid_id"},
		{numericID, "binds to no slice"},
	} {
		if _, err := chromecheck.Validate(strings.NewReader(tc.doc)); !errors.Is(err, chromecheck.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	rep, err := chromecheck.Validate(strings.NewReader(withCat))
	if err != nil || rep.Flows != 1 || rep.Metadata["origin_ns"] != "1000" {
		t.Fatalf("mended legacy output: %v %+v", err, rep)
	}
}

func TestUnboundRecvNoFlow(t *testing.T) {
	ev := []format.Merged{{Event: format.Event{Time: 5, Kind: format.Recv, Peer: 1, ID: 3}, Proc: 0}}
	var b bytes.Buffer
	w := NewWriter(&b, Options{})
	_ = w.Write(&ev[0])
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Unbound != 1 {
		t.Fatalf("unbound %d, want 1", w.Unbound)
	}
	if _, err := chromecheck.Validate(&b); err != nil {
		t.Fatal(err)
	}
}

func FuzzValidate(f *testing.F) {
	f.Add([]byte(`{"traceEvents":[{"ph":"B","name":"a","pid":1,"tid":0,"ts":1.5},{"ph":"E","pid":1,"tid":0,"ts":2}]}`))
	f.Add([]byte(`{"traceEvents":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = chromecheck.Validate(bytes.NewReader(data))
	})
}

// FuzzWriter: whatever the events, the output is valid JSON.
func FuzzWriter(f *testing.F) {
	f.Add(int64(5), uint8(1), uint64(1), uint32(2), "name")
	f.Fuzz(func(t *testing.T, tm int64, kind uint8, id uint64, peer uint32, name string) {
		var b bytes.Buffer
		w := NewWriter(&b, Options{})
		w.SetNames([]format.Name{{Proc: peer, ID: id, Name: name}})
		w.SetProcess(peer, name)
		m := format.Merged{Event: format.Event{Time: tm, Kind: format.Kind(kind%6 + 1), ID: id, Peer: peer}, Proc: peer, Raw: tm}
		_ = w.Write(&m)
		_ = w.Close()
		if !json.Valid(b.Bytes()) {
			t.Fatalf("invalid JSON: %s", b.Bytes())
		}
	})
}

// FuzzParseMicros: any string parses or errors; every int64 round-trips.
func FuzzParseMicros(f *testing.F) {
	f.Add("12.345", int64(12345))
	f.Add("-0.001", int64(-1))
	f.Fuzz(func(t *testing.T, s string, ns int64) {
		_, _ = chromecheck.ParseMicros(s)
		if ns == -1<<63 {
			return
		}
		if back, err := chromecheck.ParseMicros(string(AppendMicros(nil, ns))); err != nil || back != ns {
			t.Fatalf("%d -> %s -> %d, %v", ns, AppendMicros(nil, ns), back, err)
		}
	})
}

// BenchmarkWrite measures the JSON writer per event.
func BenchmarkWrite(b *testing.B) {
	ev := synth(1, 8, 100000)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		w := NewWriter(io.Discard, Options{})
		for i := range ev {
			if err := w.Write(&ev[i]); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		n += len(ev)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
}
