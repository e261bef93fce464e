package daemon

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/internal/quantile"
)

func measurementsCSV(ms []Measurement) string {
	var b strings.Builder
	b.WriteString(measurementsHeader)
	for _, m := range ms {
		for i, v := range []int64{int64(m.Source), m.SrcSend, m.LocRecv, m.LocSend, m.SrcRecv, m.RTT()} {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(v, 10))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// synthetic makes rounds of exchanges between two clocks that are the same
// (a raw lab run): one-way delays 71 us plus exponential tails, forward and
// backward with the given extra floor.
func synthetic(rounds, per int, fwdExtra, backExtra int64, seed uint64) []Measurement {
	rng := rand.New(rand.NewPCG(seed, 7))
	var ms []Measurement
	t := int64(1e12)
	for range rounds {
		for range per {
			f := 71000 + fwdExtra + int64(rng.ExpFloat64()*20000)
			b := 71000 + backExtra + int64(rng.ExpFloat64()*20000)
			hold := int64(30000 + rng.IntN(30000))
			s := estimate.Sample{SrcSend: t, LocRecv: t + f, LocSend: t + f + hold, SrcRecv: t + f + hold + b}
			ms = append(ms, Measurement{Source: 1, Sample: s})
			t = s.SrcRecv + 50000
		}
		t += 1e9
	}
	return ms
}

func TestReadMeasurementsRoundTrip(t *testing.T) {
	ms := synthetic(3, 5, 0, 0, 1)
	got, err := ReadMeasurements(strings.NewReader(measurementsCSV(ms)), "m.csv")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ms) {
		t.Fatalf("%d measurements, want %d", len(got), len(ms))
	}
	for i := range ms {
		if got[i] != ms[i] {
			t.Errorf("measurement %d = %+v, want %+v", i, got[i], ms[i])
		}
	}
}

func TestReadMeasurementsErrors(t *testing.T) {
	h := measurementsHeader
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", []string{"m.csv", "empty file"}},
		{"header", "a,b\n1,2\n", []string{"m.csv", "line 1", "header"}},
		{"fields", h + "1,2,3\n", []string{"line 2", "3 fields, want 6"}},
		{"not a number", h + "1,2,x3,4,5,0\n", []string{"line 2", "column loc_recv_ns", `"x3"`}},
		{"rtt", h + "1,0,10,20,40,99\n", []string{"line 2", "column rtt_ns", "99", "30"}},
		{"source", h + "-1,0,10,20,40,30\n", []string{"line 2", "column source"}},
		{"truncated", h + "1,0,10,20,40,30\n1,0,10", []string{"line 3", "truncated"}},
		{"overflow", h + "1,9223372036854775808,10,20,40,30\n", []string{"line 2", "column src_send_ns"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadMeasurements(strings.NewReader(tt.in), "m.csv")
			if err == nil {
				t.Fatalf("no error for %q", tt.in)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// On a symmetric link the replayed centre line finds the true offset (0)
// closely; a floor 2 us higher forward biases it by about -1 us, as half
// an asymmetry must.
func TestReplay(t *testing.T) {
	rc := DefaultReplayConfig()
	rc.Warmup = 5e9
	median := func(v []int64) float64 {
		s := append([]int64(nil), v...)
		for i := range s {
			if s[i] < 0 {
				s[i] = -s[i]
			}
		}
		q := quantile.Of(s, 0.5)
		return float64(q[0])
	}
	sym, err := Replay(synthetic(40, 30, 0, 0, 2), rc)
	if err != nil {
		t.Fatal(err)
	}
	if sym.Rounds != 40 || sym.Exchanges != 1200 || sym.Evaluations < 3000 {
		t.Fatalf("symmetric: %d rounds, %d exchanges, %d evaluations", sym.Rounds, sym.Exchanges, sym.Evaluations)
	}
	if m := median(sym.Errors); m > 300 {
		t.Errorf("symmetric link: median |error| %.0f ns, want < 300", m)
	}
	asym, err := Replay(synthetic(40, 30, 2000, 0, 2), rc)
	if err != nil {
		t.Fatal(err)
	}
	var mean float64
	for _, e := range asym.Errors {
		mean += float64(e)
	}
	mean /= float64(len(asym.Errors))
	if mean > -700 || mean < -1300 {
		t.Errorf("2 us slower forward: mean error %.0f ns, want about -1000", mean)
	}
	// A truth that says the source runs 5 us ahead: the same symmetric
	// exchanges are now judged 5 us off, so the errors are against
	// ReplayConfig.Truth, not the local time.
	ahead := rc
	ahead.Truth = func(x int64) (int64, bool) { return x + 5000, true }
	if res, err := Replay(synthetic(40, 30, 0, 0, 2), ahead); err != nil || math.Abs(median(res.Errors)-5000) > 300 {
		t.Errorf("a truth 5 us ahead: median |error| %.0f ns (%v), want about 5000", median(res.Errors), err)
	}
	// Evaluations whose truth is unknown are left out.
	some := rc
	some.Truth = func(x int64) (int64, bool) { return x, x%2 == 0 }
	if res, err := Replay(synthetic(40, 30, 0, 0, 2), some); err != nil || res.Evaluations == 0 || res.Evaluations >= sym.Evaluations {
		t.Errorf("half the truth unknown: %d evaluations of %d (%v)", res.Evaluations, sym.Evaluations, err)
	}
	for _, w := range []float64{-1, math.NaN(), math.Inf(1)} {
		bad := rc
		bad.Wander = w
		if _, err := Replay(synthetic(2, 3, 0, 0, 3), bad); err == nil || !strings.Contains(err.Error(), "wander") {
			t.Errorf("wander %v: %v", w, err)
		}
	}
	if _, err := Replay(nil, rc); err == nil {
		t.Error("no error for no measurements")
	}
	two := synthetic(2, 3, 0, 0, 3)
	two[4].Source = 2
	if _, err := Replay(two, rc); err == nil || !strings.Contains(err.Error(), "source 2") {
		t.Errorf("two sources: %v", err)
	}
}

func FuzzReadMeasurements(f *testing.F) {
	f.Add([]byte(measurementsCSV(synthetic(1, 3, 0, 0, 1))))
	f.Add([]byte(measurementsHeader + "1,2,3\n"))
	f.Add([]byte(strings.TrimSuffix(measurementsHeader, "\n") + "\r\n1,0,10,20,40,30\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ReadMeasurements(bytes.NewReader(b), "fuzz")
		if err != nil {
			return
		}
		// What parses writes back to the same measurements.
		again, err := ReadMeasurements(strings.NewReader(measurementsCSV(ms)), "again")
		if err != nil || len(again) != len(ms) {
			t.Fatalf("round trip of %d measurements: %d, %v", len(ms), len(again), err)
		}
		for i := range ms {
			if again[i] != ms[i] {
				t.Fatalf("measurement %d: %+v then %+v", i, ms[i], again[i])
			}
		}
	})
}

// TestMeasurementsLogReadBack: what the daemon's log.measurements writer
// writes, ReadMeasurements reads back exchange for exchange.
func TestMeasurementsLogReadBack(t *testing.T) {
	path := t.TempDir() + "/m.csv"
	w, err := newMeasurementsLog(path)
	if err != nil {
		t.Fatal(err)
	}
	in := []estimate.Sample{{SrcSend: 10, LocRecv: 1e12 + 60, LocSend: 1e12 + 90, SrcRecv: 150}, {SrcSend: -5, LocRecv: 7, LocSend: 9, SrcRecv: 40}}
	w.write(3, in[:1])
	w.write(4, in[1:])
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := ReadMeasurements(bytes.NewReader(b), path)
	if err != nil {
		t.Fatalf("ReadMeasurements of the daemon's own log: %v\n%s", err, b)
	}
	want := []Measurement{{Source: 3, Sample: in[0]}, {Source: 4, Sample: in[1]}}
	if len(ms) != len(want) || ms[0] != want[0] || ms[1] != want[1] {
		t.Fatalf("read back %+v, want %+v", ms, want)
	}
}
