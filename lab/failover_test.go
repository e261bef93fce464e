package lab

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestFailoverPause is issue 17's split brain in the lab: three daemons
// with reference failover (order h0, h1, h2, failover_after 2 s); the
// reference is SIGSTOPped for 10 s and continued. Host 1 must take over
// within failover_after plus one query timeout, host 0 must come back as a
// follower, never as a second reference of any term, and no two pages may
// ever say synced with disjoint bounds (the check needs no truth). Before
// terms, host 0 served as reference again for good. Root only (network
// namespaces); about 40 s.
func TestFailoverPause(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 38-s lab")
	}
	l, gc := gclockLab(t, 3)
	gc.Duration, gc.Warmup = 38*time.Second, 10*time.Second
	gc.FailoverAfter = 2 * time.Second
	gc.Trace = true // the series: which synced reads came after the takeover
	gc.Faults = []Fault{{At: 14 * time.Second, Host: 0, Kind: faultStop, For: 10 * time.Second}}
	res, err := l.RunGclock(context.Background(), gc)
	if err != nil {
		t.Fatalf("RunGclock: %v", err)
	}
	fo, a := res.Failover, res.Agreement
	t.Logf("agreement %+v; synced reads outside %d (unjudged %d, scale redefinitions %d); failover %+v", a, res.SyncedOutside,
		res.SyncedUnjudged, res.ScaleRedefinitions, *fo)
	for _, n := range res.Nodes {
		t.Logf("host %d: %d reads, coverage %.5f, statuses %v, longest not synced %.2f s", n.ID, n.Evaluations, n.BoundCoverage, n.StatusShare, n.LongestNotSyncedS)
	}
	if a.Violations != 0 || a.Instants == 0 {
		t.Errorf("%d of %d instants with disjoint synced pages (gap up to %d ns), want 0", a.Violations, a.Instants, a.MaxGap)
	}
	// The truth: every read judged against the scale of the term it
	// claims (host 0's clock, then the line host 1 froze at the takeover
	// and publishes), so the reads after the takeover count too.
	if res.SyncedOutside != 0 || res.SyncedUnjudged != 0 || res.ScaleRedefinitions != 0 {
		t.Errorf("%d synced reads with the truth outside, %d not judged (no scale for their term), %d scale redefinitions: want 0",
			res.SyncedOutside, res.SyncedUnjudged, res.ScaleRedefinitions)
	}
	var after int // synced reads of host 2 after the takeover, judged against host 1's line
	for _, p := range res.Series {
		if p.Host == 2 && p.Synced && time.Duration(p.AtNs) > gc.Faults[0].At+gc.FailoverAfter+time.Second {
			after++
		}
	}
	if after == 0 {
		t.Error("host 2: no synced read after the takeover")
	}
	if fo.MaxReferencesPerTerm != 1 || fo.Terms < 1 {
		t.Errorf("references per term %v (at most %d), last term %d: want one per term and a new term", fo.ReferencesPerTerm, fo.MaxReferencesPerTerm, fo.Terms)
	}
	if len(fo.Takeovers) != 1 {
		t.Fatalf("takeovers %+v, want the pause of h0", fo.Takeovers)
	}
	tk := fo.Takeovers[0]
	// The lab sees a takeover at its next scrape of every host.
	limit := fo.LimitS + 2*scrapeEvery.Seconds()
	if tk.To != 1 || tk.Seconds < 0 || tk.Seconds > limit {
		t.Errorf("takeover %+v: want h1 within %.2f s (failover_after + one query timeout + two scrapes)", tk, limit)
	}
	if ref := fo.ReferencesPerTerm[fo.Terms]; len(ref) != 1 || ref[0] == 0 {
		t.Errorf("the last term %d's reference %v, want h1 (h0 must follow after its resume)", fo.Terms, ref)
	}
}

// The random schedules: one fault at a time after the warm-up, each
// within the run and followed by a quiet gap, the same for one seed.
func TestRandomFaults(t *testing.T) {
	tests := []struct {
		seed     uint64
		hosts    int
		duration time.Duration
	}{
		{1, 3, 3 * time.Minute},
		{2, 5, 10 * time.Minute},
		{3, 4, 40 * time.Second},
	}
	for _, tt := range tests {
		fs := randomFaults(tt.seed, tt.hosts, 10*time.Second, tt.duration)
		if len(fs) == 0 {
			t.Errorf("seed %d: no fault in %v", tt.seed, tt.duration)
		}
		again := randomFaults(tt.seed, tt.hosts, 10*time.Second, tt.duration)
		var prevEnd time.Duration
		for i, f := range fs {
			if err := f.validate(i, tt.hosts, tt.duration); err != nil {
				t.Errorf("seed %d: %v", tt.seed, err)
			}
			if f.At < 10*time.Second || f.At < prevEnd+8*time.Second && i > 0 {
				t.Errorf("seed %d: fault %d (%v) overlaps the warm-up or the previous fault's gap", tt.seed, i, f)
			}
			if again[i] != f {
				t.Errorf("seed %d: fault %d differs between two draws", tt.seed, i)
			}
			prevEnd = f.end()
		}
	}
	if _, err := ParseFaults("random:x", 3, 10*time.Second, time.Minute); err == nil || !strings.Contains(err.Error(), "seed") {
		t.Errorf("random:x: %v, want an error naming the seed", err)
	}
	if _, err := ParseFaults("chaos:1", 3, 10*time.Second, time.Minute); err == nil {
		t.Error("chaos:1 accepted")
	}
	if _, err := ParseFaults("random:1", 3, 10*time.Second, 12*time.Second); err == nil {
		t.Error("a run with no room for a fault accepted")
	}
	if f, err := ParseFault("partition-in:0:30s:8s"); err != nil || f.Kind != faultPartitionIn {
		t.Errorf("partition-in: %+v, %v", f, err)
	}
}

// parseRef reads the reference and term from a daemon's metrics.
func TestParseRef(t *testing.T) {
	const text = `# TYPE gclock_reference_id gauge
gclock_reference_id{node="2"} 3
# TYPE gclock_reference_term gauge
gclock_reference_term{node="2"} 5
`
	ref, term, err := parseRef(strings.NewReader(text))
	if err != nil || ref != 3 || term != 5 {
		t.Errorf("parseRef: %d, %d, %v; want 3, 5", ref, term, err)
	}
	if _, _, err := parseRef(strings.NewReader("# TYPE gclock_reference_id gauge\ngclock_reference_id 3\n")); err == nil {
		t.Error("no term: accepted")
	}
}
