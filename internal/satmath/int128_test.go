package satmath

import (
	"math"
	"math/big"
	"testing"
)

// toBig returns x as a big.Int.
func (x Int128) toBig() *big.Int {
	v := new(big.Int).Lsh(big.NewInt(x.hi), 64)
	return v.Add(v, new(big.Int).SetUint64(x.lo))
}

// floorDivBig returns floor(v/d) and the remainder in [0, d) for d > 0.
func floorDivBig(v *big.Int, d int64) (q, r *big.Int) {
	return new(big.Int).DivMod(v, big.NewInt(d), new(big.Int)) // Euclidean = floor for d > 0
}

func ceilDivBig(v *big.Int, d int64) *big.Int {
	q, r := floorDivBig(v, d)
	if r.Sign() != 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func TestInt128(t *testing.T) {
	tests := []struct {
		name        string
		x           Int128
		d           int64
		floor, ceil int64
	}{
		{"7/2", Mul(7, 1), 2, 3, 4},
		{"-7/2", Mul(-7, 1), 2, -4, -3},
		{"exact", Mul(6, 1), 3, 2, 2},
		{"negative exact", Mul(-6, 1), 3, -2, -2},
		{"zero", Int128{}, 5, 0, 0},
		{"max*max/max", Mul(maxI, maxI), maxI, maxI, maxI},
		{"min*min/1 saturates", Mul(minI, minI), 1, maxI, maxI},
		{"min*max/1 saturates", Mul(minI, maxI), 1, minI, minI},
		{"min/1", From64(minI), 1, minI, minI},
		{"(min*2)/2", Mul(minI, 2), 2, minI, minI},
		{"(max*2+1)/2", Mul(maxI, 2).Add(From64(1)), 2, maxI, maxI},
		{"(max*2+2)/2 saturates", Mul(maxI, 2).Add(From64(2)), 2, maxI, maxI},
		{"(min*2-1)/2", Mul(minI, 2).Sub(From64(1)), 2, minI, minI},
		{"(min*2+1)/2", Mul(minI, 2).Add(From64(1)), 2, minI, minI + 1},
		// A quotient of exactly -MaxInt64 is not a saturated one.
		{"-(max*max)/max", Mul(maxI, maxI).Neg(), maxI, -maxI, -maxI},
		// ceil of (2^65-1)/2 is 2^64, which must saturate, not wrap to 0.
		{"(2^65-1)/2", Mul(minI, -4).Sub(From64(1)), 2, maxI, maxI},
	}
	for _, tt := range tests {
		if got := tt.x.DivFloor(tt.d); got != tt.floor {
			t.Errorf("%s: DivFloor = %d, want %d", tt.name, got, tt.floor)
		}
		if got := tt.x.DivCeil(tt.d); got != tt.ceil {
			t.Errorf("%s: DivCeil = %d, want %d", tt.name, got, tt.ceil)
		}
	}
	if Mul(3, 4).Cmp(Mul(2, 6)) != 0 || Mul(-3, 4).Cmp(Mul(2, 6)) != -1 || Mul(minI, minI).Cmp(Mul(maxI, maxI)) != 1 {
		t.Error("Cmp")
	}
	if Mul(-1, 1).Sign() != -1 || (Int128{}).Sign() != 0 || Mul(1, 1).Sign() != 1 {
		t.Error("Sign")
	}
	if got := Mul(minI, minI).Float(); got != math.Ldexp(1, 126) {
		t.Errorf("Float(2^126) = %g", got)
	}
	if got := Mul(minI, 3).Float(); got != -3*math.Ldexp(1, 63) {
		t.Errorf("Float(-3*2^63) = %g", got)
	}
}

// FuzzInt128 checks Mul, Add, Sub, Neg, Cmp, Sign, DivFloor, DivCeil and
// Float against math/big on sums of two products, the hull's use.
func FuzzInt128(f *testing.F) {
	f.Add(int64(3), int64(-5), int64(7), int64(11), int64(2))
	f.Add(int64(minI), int64(minI), int64(maxI), int64(minI), int64(1))
	f.Add(int64(maxI), int64(maxI), int64(0), int64(0), int64(maxI))
	f.Add(int64(minI), int64(2), int64(-1), int64(1), int64(2))
	f.Fuzz(func(t *testing.T, a, b, c, e, d int64) {
		d = positive(d)
		p, q := Mul(a, b), Mul(c, e)
		bp := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		bq := new(big.Int).Mul(big.NewInt(c), big.NewInt(e))
		if p.toBig().Cmp(bp) != 0 {
			t.Fatalf("Mul(%d, %d) = %v, want %v", a, b, p.toBig(), bp)
		}
		for _, tc := range []struct {
			name string
			x    Int128
			want *big.Int
		}{
			{"a*b+c*e", p.Add(q), new(big.Int).Add(bp, bq)},
			{"a*b-c*e", p.Sub(q), new(big.Int).Sub(bp, bq)},
			{"-(a*b)", p.Neg(), new(big.Int).Neg(bp)},
			{"a*b+e", p.Add(From64(e)), new(big.Int).Add(bp, big.NewInt(e))},
		} {
			if tc.want.BitLen() >= 127 { // outside the documented range
				continue
			}
			if tc.x.toBig().Cmp(tc.want) != 0 {
				t.Fatalf("%s = %v, want %v", tc.name, tc.x.toBig(), tc.want)
			}
			if tc.x.Sign() != tc.want.Sign() {
				t.Fatalf("%s: Sign = %d, want %d", tc.name, tc.x.Sign(), tc.want.Sign())
			}
			fl, _ := floorDivBig(tc.want, d)
			if got, want := tc.x.DivFloor(d), clampBig(fl); got != want {
				t.Fatalf("%s: DivFloor(%d) = %d, want %d", tc.name, d, got, want)
			}
			if got, want := tc.x.DivCeil(d), clampBig(ceilDivBig(tc.want, d)); got != want {
				t.Fatalf("%s: DivCeil(%d) = %d, want %d", tc.name, d, got, want)
			}
			want, _ := new(big.Float).SetInt(tc.want).Float64()
			if got := tc.x.Float(); math.Abs(got-want) > math.Abs(want)*0x1p-52 {
				t.Fatalf("%s: Float = %g, want %g", tc.name, got, want)
			}
		}
		if got, want := p.Cmp(q), bp.Cmp(bq); got != want {
			t.Fatalf("Cmp(%d*%d, %d*%d) = %d, want %d", a, b, c, e, got, want)
		}
	})
}

func TestMulAddFloorDiv(t *testing.T) {
	const unit = 1_000_000_000_000_000_000
	tests := []struct {
		a, b, add, d int64
		q, r         int64
	}{
		{7, 3, 0, 2, 10, 1},
		{-7, 3, 0, 2, -11, 1},
		{-7, 3, 1, 2, -10, 0},
		{7, -3, 1, 2, -10, 0},
		{0, -3, 1, 2, 0, 1},
		{-1, 1, 5, 10, 0, 4},
		{-2, 3, 6, 10, 0, 0},
		{1e15, 1e12, 0, unit, 1e9, 0},
		{-1e15, 12e12, unit - 1, unit, -12e9, unit - 1},
		{minI, 1, 0, 1, minI, 0},
	}
	for _, tt := range tests {
		q, r := MulAddFloorDiv(tt.a, tt.b, tt.add, tt.d)
		if q != tt.q || r != tt.r {
			t.Errorf("MulAddFloorDiv(%d, %d, %d, %d) = %d, %d, want %d, %d", tt.a, tt.b, tt.add, tt.d, q, r, tt.q, tt.r)
		}
	}
}

// FuzzMulAddFloorDiv checks MulAddFloorDiv against math/big wherever its
// preconditions hold.
func FuzzMulAddFloorDiv(f *testing.F) {
	f.Add(int64(1<<62), int64(-12e12), int64(5), int64(1e18))
	f.Add(int64(minI), int64(1), int64(0), int64(1))
	f.Add(int64(-3), int64(3), int64(8), int64(9))
	f.Fuzz(func(t *testing.T, a, b, add, d int64) {
		d = positive(d)
		if add < 0 {
			add = -(add + 1)
		}
		add %= d
		v := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		v.Add(v, big.NewInt(add))
		wq, wr := floorDivBig(v, d)
		if !wq.IsInt64() {
			return // outside the documented range
		}
		q, r := MulAddFloorDiv(a, b, add, d)
		if q != wq.Int64() || r != wr.Int64() {
			t.Fatalf("MulAddFloorDiv(%d, %d, %d, %d) = %d, %d, want %v, %v", a, b, add, d, q, r, wq, wr)
		}
	})
}

// positive maps any int64 onto a divisor in [1, MaxInt64].
func positive(d int64) int64 {
	if d < 0 {
		d = -(d + 1)
	}
	return max(d, 1)
}
