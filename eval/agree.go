package eval

import "math"

// Agreement is the check that needs no truth: at every instant, the
// bounds of all reads that claim synced on one time scale must share a
// point, since they all hold the one true time. Two references serving
// their own scales (a split brain), or a node promising bounds that do not
// hold, show up here without knowing which read is wrong. Reads that do
// not claim synced are not promises and are left out.
//
// Call Check once per instant with that instant's reads of one scale. The
// zero value is ready to use.
type Agreement struct {
	// Instants counts the instants checked with at least two synced reads.
	Instants uint64 `json:"instants"`
	// Violations counts the instants whose synced reads shared no point.
	Violations uint64 `json:"violations"`
	// MaxGap is the largest gap between the highest Earliest and the
	// lowest Latest at a violation, ns (0: none).
	MaxGap int64 `json:"max_gap_ns"`
	// First is the At of the first violation (0: none).
	First int64 `json:"first_at,omitempty"`
}

// Check counts the synced reads of one instant and reports whether they
// share a point (true when fewer than two claim synced).
func (a *Agreement) Check(at int64, reads []Read) bool {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	n := 0
	for _, r := range reads {
		if r.Status != Synced {
			continue
		}
		n++
		lo = max(lo, r.Earliest)
		hi = min(hi, r.Latest)
	}
	if n < 2 {
		return true
	}
	a.Instants++
	if lo <= hi {
		return true
	}
	if a.Violations == 0 {
		a.First = at
	}
	a.Violations++
	a.MaxGap = max(a.MaxGap, lo-hi)
	return false
}

// Merge adds b's counts to a (runs or scales reported together).
func (a *Agreement) Merge(b Agreement) {
	if b.Violations > 0 && (a.Violations == 0 || b.First < a.First) {
		a.First = b.First
	}
	a.Instants += b.Instants
	a.Violations += b.Violations
	a.MaxGap = max(a.MaxGap, b.MaxGap)
}
