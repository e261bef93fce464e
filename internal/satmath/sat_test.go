package satmath

import (
	"math"
	"math/big"
	"testing"
)

const (
	maxI = math.MaxInt64
	minI = math.MinInt64
)

// clampBig returns v clamped to the int64 range.
func clampBig(v *big.Int) int64 {
	switch {
	case v.Cmp(big.NewInt(maxI)) > 0:
		return maxI
	case v.Cmp(big.NewInt(minI)) < 0:
		return minI
	}
	return v.Int64()
}

func fitsBig(v *big.Int) bool { return v.IsInt64() }

func TestSaturating(t *testing.T) {
	tests := []struct {
		name       string
		f          func(a, b int64) int64
		a, b, want int64
	}{
		{"Add small", Add, 2, 3, 5},
		{"Add negative", Add, -2, -3, -5},
		{"Add to max", Add, maxI - 1, 1, maxI},
		{"Add past max", Add, maxI, 1, maxI},
		{"Add past min", Add, minI, -1, minI},
		{"Add max+min", Add, maxI, minI, -1},
		{"Add zero at min", Add, minI, 0, minI},
		{"Sub small", Sub, 2, 3, -1},
		{"Sub past max", Sub, maxI, -1, maxI},
		{"Sub min from 0", Sub, 0, minI, maxI},
		{"Sub min from -1", Sub, -1, minI, maxI},
		{"Sub past min", Sub, minI, 1, minI},
		{"Sub max from min", Sub, minI, maxI, minI},
		{"Sub max from -1", Sub, -1, maxI, minI},
		{"AbsDiff", AbsDiff, 3, 10, 7},
		{"AbsDiff reversed", AbsDiff, 10, 3, 7},
		{"AbsDiff ends", AbsDiff, minI, maxI, maxI},
		{"AbsDiff ends reversed", AbsDiff, maxI, minI, maxI},
		{"AbsDiff just fits", AbsDiff, maxI, 0, maxI},
	}
	for _, tt := range tests {
		if got := tt.f(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: (%d, %d) = %d, want %d", tt.name, tt.a, tt.b, got, tt.want)
		}
	}
}

func TestUnary(t *testing.T) {
	tests := []struct {
		a, neg, abs int64
	}{
		{0, 0, 0},
		{5, -5, 5},
		{-5, 5, 5},
		{maxI, -maxI, maxI},
		{minI, maxI, maxI},
		{minI + 1, maxI, maxI},
	}
	for _, tt := range tests {
		if got := Neg(tt.a); got != tt.neg {
			t.Errorf("Neg(%d) = %d, want %d", tt.a, got, tt.neg)
		}
		if got := Abs(tt.a); got != tt.abs {
			t.Errorf("Abs(%d) = %d, want %d", tt.a, got, tt.abs)
		}
	}
}

func TestChecked(t *testing.T) {
	tests := []struct {
		name   string
		f      func(a, b int64) (int64, bool)
		a, b   int64
		want   int64
		wantOK bool
	}{
		{"AddChecked", AddChecked, 2, 3, 5, true},
		{"AddChecked max", AddChecked, maxI - 1, 1, maxI, true},
		{"AddChecked over", AddChecked, maxI, 1, 0, false},
		{"AddChecked under", AddChecked, minI, -1, 0, false},
		{"SubChecked", SubChecked, 2, 3, -1, true},
		{"SubChecked min", SubChecked, minI + 1, 1, minI, true},
		{"SubChecked under", SubChecked, minI, 1, 0, false},
		{"SubChecked over", SubChecked, 0, minI, 0, false},
		{"SubChecked -1 - min", SubChecked, -1, minI, maxI, true},
	}
	for _, tt := range tests {
		got, ok := tt.f(tt.a, tt.b)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s(%d, %d) = %d, %v, want %d, %v", tt.name, tt.a, tt.b, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestFromFloat(t *testing.T) {
	tests := []struct {
		f    float64
		want int64
	}{
		{0, 0},
		{1.9, 1},
		{-1.9, -1},
		{math.NaN(), 0},
		{math.Inf(1), maxI},
		{math.Inf(-1), minI},
		{9.3e18, maxI},
		{-9.3e18, minI},
		{math.MaxInt64, maxI}, // 2^63 as a float
		{math.MinInt64, minI},
		{1 << 62, 1 << 62},
	}
	for _, tt := range tests {
		if got := FromFloat(tt.f); got != tt.want {
			t.Errorf("FromFloat(%g) = %d, want %d", tt.f, got, tt.want)
		}
	}
}

// FuzzScalar checks every scalar function against math/big.
func FuzzScalar(f *testing.F) {
	for _, v := range [][2]int64{{0, 0}, {maxI, 1}, {minI, -1}, {minI, maxI}, {-1, minI}, {maxI, minI}, {3, -7}} {
		f.Add(v[0], v[1])
	}
	f.Fuzz(func(t *testing.T, a, b int64) {
		ba, bb := big.NewInt(a), big.NewInt(b)
		sum := new(big.Int).Add(ba, bb)
		diff := new(big.Int).Sub(ba, bb)
		if got, want := Add(a, b), clampBig(sum); got != want {
			t.Errorf("Add(%d, %d) = %d, want %d", a, b, got, want)
		}
		if got, want := Sub(a, b), clampBig(diff); got != want {
			t.Errorf("Sub(%d, %d) = %d, want %d", a, b, got, want)
		}
		if got, want := AbsDiff(a, b), clampBig(new(big.Int).Abs(diff)); got != want {
			t.Errorf("AbsDiff(%d, %d) = %d, want %d", a, b, got, want)
		}
		if got, want := Neg(a), clampBig(new(big.Int).Neg(ba)); got != want {
			t.Errorf("Neg(%d) = %d, want %d", a, got, want)
		}
		if got, want := Abs(a), clampBig(new(big.Int).Abs(ba)); got != want {
			t.Errorf("Abs(%d) = %d, want %d", a, got, want)
		}
		if got, ok := AddChecked(a, b); ok != fitsBig(sum) || (ok && got != sum.Int64()) || (!ok && got != 0) {
			t.Errorf("AddChecked(%d, %d) = %d, %v; exact %v", a, b, got, ok, sum)
		}
		if got, ok := SubChecked(a, b); ok != fitsBig(diff) || (ok && got != diff.Int64()) || (!ok && got != 0) {
			t.Errorf("SubChecked(%d, %d) = %d, %v; exact %v", a, b, got, ok, diff)
		}
	})
}
