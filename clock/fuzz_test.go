package clock

import (
	"encoding/binary"
	"testing"
)

// FuzzEmulated builds clocks from arbitrary parameters and queries them with
// arbitrary times: never a panic or hang; Read never decreases for
// non-decreasing truth; TruthAt inverts Ideal whenever no error was
// recorded.
func FuzzEmulated(f *testing.F) {
	f.Add(int64(0), int64(1000), 12.5, 0.01, int64(1e6), int64(100), int64(50), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(int64(-MaxTime), int64(MaxTime), 1e5, 0.0, int64(0), int64(0), int64(0), make([]byte, 32))
	f.Fuzz(func(t *testing.T, origin, offset int64, ppm, wander float64, step, g, j int64, data []byte) {
		e, err := NewEmulated(EmuParams{Origin: origin, Offset: offset, DriftPPM: ppm, WanderPPM: wander, WanderStep: step, Granularity: g, JitterNs: j, Seed: 1})
		if err != nil {
			return
		}
		tt := origin
		prev := e.Read(tt)
		for len(data) >= 8 {
			d := int64(binary.LittleEndian.Uint64(data)) % (1 << 30)
			data = data[8:]
			if d < 0 {
				d = -d
			}
			tt = min(tt+d, MaxTime)
			v := e.Read(tt)
			if v < prev {
				t.Fatalf("Read(%d) = %d < previous %d", tt, v, prev)
			}
			prev = v
			l := e.Ideal(tt)
			if l > -MaxTime && l < MaxTime && e.Err() == nil {
				tr := e.TruthAt(l)
				if e.Err() == nil && (e.Ideal(tr) < l || tr > tt) {
					t.Fatalf("TruthAt(Ideal(%d)=%d) = %d", tt, l, tr)
				}
			}
		}
	})
}
