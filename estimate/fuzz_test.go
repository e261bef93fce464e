package estimate

import (
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzHull feeds arbitrary rounds: the hull must never panic or hang, and
// whenever a round is accepted (or restarted the window) its bounds are
// ordered and contain the Mapping's estimate at X0.
func FuzzHull(f *testing.F) {
	f.Add([]byte{}, int64(0), uint8(16))
	f.Add(make([]byte, 64), int64(5), uint8(2))
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x20"), int64(-3), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, shift int64, window uint8) {
		// window's high bits choose a time limit: none, or 2^10..2^16 ns.
		span := int64(0)
		if k := window >> 5; k > 0 {
			span = 1 << (9 + k)
		}
		h, err := NewHull(HullConfig{Window: int(window), Shift: shift, MaxWander: float64(window%4) * 1e-18, MaxSpan: span})
		if err != nil {
			return
		}
		// Each sample: a base (8 bytes) then three small deltas (2 bytes
		// each), so both wild and realistic values appear.
		var round []Sample
		for len(data) >= 15 {
			base := int64(binary.LittleEndian.Uint64(data))
			if data[14]&1 == 0 {
				base %= 1 << 40
			}
			d := func(i int) int64 { return int64(int16(binary.LittleEndian.Uint16(data[8+2*i:]))) }
			s := Sample{SrcSend: base, LocRecv: base + d(0), LocSend: base + d(0) + d(1), SrcRecv: base + d(2)}
			round = append(round, s)
			end := data[14]&6 != 0
			data = data[15:]
			if !end && len(data) >= 15 {
				continue
			}
			err := h.AddRound(round)
			round = round[:0]
			if err != nil && !errors.Is(err, ErrInconsistent) {
				continue
			}
			for _, x := range []int64{s.LocRecv, s.LocSend, s.LocSend + 1e9, s.LocRecv - 1e9} {
				if lo, hi, ok := h.Bounds(x); ok && lo > hi {
					t.Fatalf("Bounds(%d) = [%d, %d]: lo > hi", x, lo, hi)
				}
			}
			if m := h.Mapping(); m.Valid {
				if m.W0 < 0 || m.SkewErr < 0 {
					t.Fatalf("Mapping %+v: negative width", m)
				}
				if lo, hi, ok := h.Bounds(m.X0); ok && (m.Y0 < lo || m.Y0 > hi) {
					t.Fatalf("Mapping.Y0 %d outside Bounds(X0) [%d, %d]", m.Y0, lo, hi)
				}
			}
			if lo, hi, ok := h.SkewBounds(); ok && lo > hi {
				t.Fatalf("SkewBounds [%g, %g]", lo, hi)
			}
		}
	})
}

// FuzzFitLineSpline: the other decoders of samples never panic.
func FuzzFitLineSpline(f *testing.F) {
	f.Add(make([]byte, 64))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ss []Sample
		for len(data) >= 8 {
			base := int64(binary.LittleEndian.Uint32(data))
			ss = append(ss, Sample{SrcSend: base, LocRecv: base + int64(int8(data[4])), LocSend: base + int64(data[5]), SrcRecv: base + int64(int8(data[6]))*int64(data[7])})
			data = data[8:]
		}
		_, _ = FitLine(ss, 0.1)
		if p, err := Condense(ss); err == nil {
			_ = p
		}
		sp := NewSplineEstimator()
		for i := 0; i+3 <= len(ss); i += 3 {
			_ = sp.AddRound(ss[i : i+3])
			sp.Mapping()
			sp.Map(ss[i].LocRecv)
		}
		e, _ := NewMinRTT(DefaultMinRTTConfig())
		rg, _ := NewRegression(DefaultRegressionConfig())
		for i := 0; i+3 <= len(ss); i += 3 {
			_ = e.AddRound(ss[i : i+3])
			_ = rg.AddRound(ss[i : i+3])
			e.Mapping().At(ss[i].LocSend)
			rg.Mapping().At(ss[i].LocSend)
		}
	})
}
