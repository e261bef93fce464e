package tracegen

import (
	"bytes"
	"errors"
	"testing"
)

func TestTruthRoundTrip(t *testing.T) {
	tests := [][]int64{nil, {0}, {-5, 1 << 62, 7}}
	for _, tc := range tests {
		var b bytes.Buffer
		if err := WriteTruth(&b, 9, tc); err != nil {
			t.Fatal(err)
		}
		p, got, err := ReadTruth(bytes.NewReader(b.Bytes()), "t")
		if err != nil || p != 9 || len(got) != len(tc) {
			t.Fatalf("%v: %d %v %v", tc, p, got, err)
		}
		for i := range tc {
			if got[i] != tc[i] {
				t.Fatalf("%v: got %v", tc, got)
			}
		}
		// Every cut and every flipped byte is an error.
		data := b.Bytes()
		for n := 0; n < len(data); n++ {
			if _, _, err := ReadTruth(bytes.NewReader(data[:n]), "t"); !errors.Is(err, ErrBadTruth) {
				t.Fatalf("cut at %d: %v", n, err)
			}
			d := bytes.Clone(data)
			d[n] ^= 1
			if _, _, err := ReadTruth(bytes.NewReader(d), "t"); !errors.Is(err, ErrBadTruth) {
				t.Fatalf("flip at %d: %v", n, err)
			}
		}
	}
}

func FuzzReadTruth(f *testing.F) {
	var b bytes.Buffer
	_ = WriteTruth(&b, 1, []int64{1, 2, 3})
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = ReadTruth(bytes.NewReader(data), "fuzz")
	})
}
