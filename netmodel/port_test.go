package netmodel

import (
	"errors"
	"testing"
)

func TestWireBytes(t *testing.T) {
	tests := []struct {
		name                  string
		frame, hdr, seg, want int
	}{
		{"runt padded to 60", 42, 0, 0, 60 + 24},
		{"probe", 90, 0, 0, 114},
		{"full frame", 1514, 0, 0, 1538},
		{"GSO 3 full segments", 66 + 3*1448, 66, 1448, 3 * (66 + 1448 + 24)},
		{"GSO 2 full and a short one", 66 + 2*1448 + 10, 66, 1448, 2*1538 + (76 + 24)},
		{"GSO payload within one segment", 66 + 100, 66, 1448, 166 + 24},
		{"no segment size", 9000, 66, 0, 9024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SegmentedWireBytes(tt.frame, tt.hdr, tt.seg); got != tt.want {
				t.Fatalf("SegmentedWireBytes(%d, %d, %d) = %d, want %d", tt.frame, tt.hdr, tt.seg, got, tt.want)
			}
		})
	}
}

func TestSerialisationNs(t *testing.T) {
	tests := []struct {
		bytes int
		rate  int64
		want  int64
	}{
		{1538, 1e9, 12304},      // a full frame at 1 Gbit/s: 12.304 us
		{114, 1e9, 912},         // a probe
		{1538, 10e9, 1231},      // 1230.4 rounded up
		{84, 100e6, 6720},       // minimum frame at 100 Mbit/s
		{1538, 0, 0},            // no port model
		{0, 1e9, 0},             // nothing to send
		{1, 3e9, 3},             // 2.67 rounded up
		{64 << 10, 1e9, 524288}, // 64 KiB
	}
	for _, tt := range tests {
		if got := SerialisationNs(tt.bytes, tt.rate); got != tt.want {
			t.Errorf("SerialisationNs(%d, %d) = %d, want %d", tt.bytes, tt.rate, got, tt.want)
		}
	}
}

// TestPortFIFO: a probe that becomes ready behind N bulk frames waits for
// all of them, N*size*8/rate, then its own serialisation; frames ready
// after the line went idle do not wait.
func TestPortFIFO(t *testing.T) {
	const rate = 1e9
	bulk := WireBytes(1514) // 12304 ns each
	probe := WireBytes(90)  // 912 ns
	serBulk, serProbe := SerialisationNs(bulk, rate), SerialisationNs(probe, rate)
	tests := []struct {
		name     string
		n        int   // bulk frames ready at t=0
		probeAt  int64 // probe ready
		wantWait int64
	}{
		{"idle port", 0, 1000, 0},
		{"behind 1", 1, 0, serBulk},
		{"behind 10", 10, 0, 10 * serBulk},
		{"behind 10, half the first sent", 10, serBulk / 2, 10*serBulk - serBulk/2},
		{"after the burst", 10, 10 * serBulk, 0},
		{"long after the burst", 10, 1e9, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Port{RateBps: rate}
			var last int64
			for i := range tt.n {
				d, w := p.Enqueue(0, bulk)
				if want := int64(i+1) * serBulk; d != want || w != int64(i)*serBulk {
					t.Fatalf("bulk frame %d: depart %d wait %d, want %d and %d", i, d, w, want, int64(i)*serBulk)
				}
				last = d
			}
			if got := p.Backlog(tt.probeAt); got != max(0, last-tt.probeAt) {
				t.Fatalf("Backlog(%d) = %d, want %d", tt.probeAt, got, max(0, last-tt.probeAt))
			}
			d, w := p.Enqueue(tt.probeAt, probe)
			if w != tt.wantWait {
				t.Fatalf("probe waited %d ns, want %d", w, tt.wantWait)
			}
			if want := tt.probeAt + tt.wantWait + serProbe; d != want {
				t.Fatalf("probe departs at %d, want %d", d, want)
			}
			if got, want := p.BusyNs(), int64(tt.n)*serBulk+serProbe; got != want {
				t.Fatalf("BusyNs = %d, want %d", got, want)
			}
			if p.Frames() != int64(tt.n+1) || p.Bytes() != int64(tt.n*bulk+probe) {
				t.Fatalf("Frames %d Bytes %d, want %d and %d", p.Frames(), p.Bytes(), tt.n+1, tt.n*bulk+probe)
			}
		})
	}
}

// TestPortUtilisation: frames offered at a share of the line rate keep the
// line busy that share of the time and never queue behind each other.
func TestPortUtilisation(t *testing.T) {
	for _, share := range []float64{0.3, 0.7} {
		p := Port{RateBps: 1e9}
		ser := SerialisationNs(WireBytes(1514), p.RateBps)
		gap := int64(float64(ser) / share)
		const n = 1000
		for i := range n {
			if _, w := p.Enqueue(int64(i)*gap, WireBytes(1514)); w != 0 {
				t.Fatalf("share %v: frame %d waited %d ns on a line below its rate", share, i, w)
			}
		}
		u := float64(p.BusyNs()) / float64(n*gap)
		if u < share-0.01 || u > share+0.01 {
			t.Fatalf("share %v: utilisation %.3f", share, u)
		}
	}
}

func TestPortNoRate(t *testing.T) {
	var p Port
	if d, w := p.Enqueue(123, 1538); d != 123 || w != 0 {
		t.Fatalf("no rate: depart %d wait %d, want 123 and 0", d, w)
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"1G", 1e9}, {"1Gbit/s", 1e9}, {"2.5G", 2.5e9}, {"100M", 100e6}, {"100Mbps", 100e6},
		{"10000000", 10e6}, {" 10k ", 10e3}, {"0", 0}, {"off", 0}, {"400G", 400e9},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if err == nil {
			if again, err := ParseRate(FormatRate(got)); err != nil || again != got {
				t.Errorf("round trip of %q via %q: %d, %v", tt.in, FormatRate(got), again, err)
			}
		}
	}
	for _, bad := range []string{"", "G", "fast", "-1G", "1T", "500G", "10", "NaN", "1e400"} {
		if _, err := ParseRate(bad); !errors.Is(err, ErrRateSyntax) {
			t.Errorf("ParseRate(%q): err %v, want ErrRateSyntax", bad, err)
		}
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"1G", "100Mbit/s", "2.5G", "0", "off", "10k", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		if err != nil {
			return
		}
		if v != 0 && (v < 1e3 || v > MaxRateBps) {
			t.Fatalf("ParseRate(%q) = %d: out of range", s, v)
		}
		if again, err := ParseRate(FormatRate(v)); err != nil || again != v {
			t.Fatalf("round trip of %q (%d) via %q: %d, %v", s, v, FormatRate(v), again, err)
		}
	})
}
