package eval

import "testing"

// The synced reads of an instant must share a point; reads that do not
// claim synced never count, whatever their bounds.
func TestAgreement(t *testing.T) {
	syn := func(lo, hi int64) Read { return Read{Earliest: lo, Latest: hi, Status: Synced} }
	tests := []struct {
		name  string
		reads []Read
		ok    bool
		gap   int64
	}{
		{"none", nil, true, 0},
		{"one synced", []Read{syn(0, 10)}, true, 0},
		{"overlap", []Read{syn(0, 10), syn(5, 20), syn(9, 9)}, true, 0},
		{"touching", []Read{syn(0, 10), syn(10, 20)}, true, 0},
		{"disjoint", []Read{syn(0, 10), syn(11, 20)}, false, 1},
		{"two references apart", []Read{syn(100, 103), syn(0, 200), syn(546, 549)}, false, 443},
		{"stale ones ignored", []Read{syn(0, 10), {Earliest: 50, Latest: 60, Status: Stale}, {Earliest: 70, Latest: 80, Status: Degraded}}, true, 0},
	}
	var all Agreement
	for _, tt := range tests {
		var a Agreement
		if got := a.Check(7, tt.reads); got != tt.ok {
			t.Errorf("%s: Check %v, want %v", tt.name, got, tt.ok)
		}
		if a.MaxGap != tt.gap {
			t.Errorf("%s: gap %d, want %d", tt.name, a.MaxGap, tt.gap)
		}
		all.Merge(a)
	}
	if all.Violations != 2 || all.MaxGap != 443 || all.First != 7 || all.Instants != 4 {
		t.Errorf("merged %+v, want 2 violations of 4 instants, gap 443, first at 7", all)
	}
}
