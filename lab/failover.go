package lab

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Failover in the lab (GclockConfig.FailoverAfter): every daemon runs the
// reference election; the lab scrapes each running daemon's reference and
// term (gclock_reference_id, gclock_reference_term) every scrapeEvery and
// measures, for every fault that hits the reference, how long the others
// took to follow another node, against failover_after plus one query
// timeout (docs/daemon.md, "Failover").

// scrapeEvery is how often the lab asks the daemons for their reference.
const scrapeEvery = 250 * time.Millisecond

// Takeover is one fault that hit the reference.
type Takeover struct {
	Fault Fault `json:"fault"`
	// From is the host that was the reference at the fault's start; To
	// the one every other running host followed after (-1: none).
	From int `json:"from"`
	To   int `json:"to"`
	// Seconds is the time from the fault's start to the first scrape at
	// which every other running host followed To (-1: not within
	// FaultWindow after the fault's end).
	Seconds float64 `json:"seconds"`
}

// FailoverFigures are a run's elections.
type FailoverFigures struct {
	AfterS float64 `json:"failover_after_s"`
	// LimitS is failover_after plus one query timeout: how long a
	// takeover may take after the reference stops, is killed or cut off
	// (a reference that only stops hearing keeps sending for another
	// failover_after before it goes quiet).
	LimitS float64 `json:"limit_s"`
	// Terms is the highest term any daemon reported.
	Terms uint32 `json:"terms"`
	// ReferencesPerTerm lists, per term, the hosts that said they were its
	// reference; MaxReferencesPerTerm is the most in one term (must be 1).
	ReferencesPerTerm    map[uint32][]int `json:"references_per_term"`
	MaxReferencesPerTerm int              `json:"max_references_per_term"`
	Takeovers            []Takeover       `json:"takeovers,omitempty"`
}

// hostRef is one scrape of a daemon.
type hostRef struct {
	ok        bool
	ref, term uint32
}

// elections follows the daemons' references through a run.
type elections struct {
	gc      GclockConfig
	n       int
	next    time.Duration
	cur     []hostRef
	refs    map[uint32]map[int]bool
	seen    []bool // by fault: its start was looked at
	pending []int  // indexes into takeovers still open
	out     []Takeover
	maxTerm uint32
}

func newElections(gc GclockConfig, n int) *elections {
	return &elections{gc: gc, n: n, cur: make([]hostRef, n), refs: map[uint32]map[int]bool{}, seen: make([]bool, len(gc.Faults))}
}

// queryTimeout is engine.Member's: how long a status query waits.
func queryTimeout(after time.Duration) time.Duration {
	return min(max(after/4, 20*time.Millisecond), time.Second)
}

// reference is the host most of the last scrapes name as the
// reference (-1: none).
func (e *elections) reference() int {
	count := map[uint32]int{}
	for _, h := range e.cur {
		if h.ok {
			count[h.ref]++
		}
	}
	best, bestN := -1, 0
	for ref, c := range count {
		if c > bestN {
			best, bestN = int(ref)-1, c
		}
	}
	return best
}

// watch scrapes the running daemons when due (at: run time) and updates
// the takeovers.
func (e *elections) watch(dir string, at time.Duration, fr *faultRunner) {
	if at < e.next {
		return
	}
	e.next = at + scrapeEvery
	for k, f := range e.gc.Faults {
		if e.seen[k] || at < f.At {
			continue
		}
		e.seen[k] = true
		if ref := e.reference(); ref == f.Host {
			e.out = append(e.out, Takeover{Fault: f, From: ref, To: -1, Seconds: -1})
			e.pending = append(e.pending, len(e.out)-1)
		}
	}
	for i := range e.n {
		e.cur[i] = hostRef{}
		if fr.down[i] || fr.stopped[i] {
			continue // a stopped daemon cannot answer
		}
		ref, term, err := scrapeRef(filepath.Join(dir, fmt.Sprintf("metrics-h%d.sock", i)))
		if err != nil {
			continue
		}
		e.cur[i] = hostRef{ok: true, ref: ref, term: term}
		e.maxTerm = max(e.maxTerm, term)
		if int(ref) == i+1 {
			if e.refs[term] == nil {
				e.refs[term] = map[int]bool{}
			}
			e.refs[term][i] = true
		}
	}
	e.pending = slices.DeleteFunc(e.pending, func(k int) bool {
		t := &e.out[k]
		if at > t.Fault.end()+FaultWindow {
			return true
		}
		to := -2
		for i, h := range e.cur {
			if i == t.From || !h.ok {
				continue
			}
			if int(h.ref)-1 == t.From || (to != -2 && int(h.ref)-1 != to) {
				return false
			}
			to = int(h.ref) - 1
		}
		if to < 0 {
			return false
		}
		t.To, t.Seconds = to, (at - t.Fault.At).Seconds()
		return true
	})
}

// figures sums up the elections.
func (e *elections) figures() *FailoverFigures {
	f := &FailoverFigures{AfterS: e.gc.FailoverAfter.Seconds(),
		LimitS: (e.gc.FailoverAfter + queryTimeout(e.gc.FailoverAfter)).Seconds(),
		Terms:  e.maxTerm, ReferencesPerTerm: map[uint32][]int{}, Takeovers: e.out}
	for t, hosts := range e.refs {
		for h := range hosts {
			f.ReferencesPerTerm[t] = append(f.ReferencesPerTerm[t], h)
		}
		slices.Sort(f.ReferencesPerTerm[t])
		f.MaxReferencesPerTerm = max(f.MaxReferencesPerTerm, len(hosts))
	}
	return f
}

// scrapeRef reads a daemon's reference and term from its metrics.
func scrapeRef(sock string) (ref, term uint32, err error) {
	c := http.Client{Timeout: 300 * time.Millisecond, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	resp, err := c.Get("http://gclock/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	return parseRef(resp.Body)
}

// parseRef takes gclock_reference_id and gclock_reference_term from a
// daemon's metrics.
func parseRef(r io.Reader) (ref, term uint32, err error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return 0, 0, fmt.Errorf("metrics: %w", err)
	}
	get := func(name string) (uint32, error) {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) == 0 {
			return 0, fmt.Errorf("metrics: no %s", name)
		}
		return uint32(f.GetMetric()[0].GetGauge().GetValue()), nil
	}
	if ref, err = get("gclock_reference_id"); err != nil {
		return 0, 0, err
	}
	if term, err = get("gclock_reference_term"); err != nil {
		return 0, 0, err
	}
	return ref, term, nil
}
