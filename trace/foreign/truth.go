package foreign

import (
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/gclock/gclock/internal/quantile"
)

// Truth is what the test generator (testdata/scorep_like.py, python3-otf2,
// not gclock's writer) writes beside its archive (truth.json): the true
// global time of every event. It is for evaluation (tests, gclock trace
// correct -truth); Correct never sees it.
type Truth struct {
	Procs     int `json:"procs"`
	Reference int `json:"reference"`
	Locations []struct {
		Global  []int64 `json:"global_ns"`
		Local   []int64 `json:"local_ns"`
		Offsets []struct {
			Local      int64 `json:"local"`
			Offset     int64 `json:"offset"`
			TrueOffset int64 `json:"true_offset"`
		} `json:"clock_offsets"`
	} `json:"locations"`
	Messages []struct {
		From    int   `json:"from"`
		To      int   `json:"to"`
		SendG   int64 `json:"send_g"`
		RecvG   int64 `json:"recv_g"`
		SendIdx int   `json:"send_idx"`
		RecvIdx int   `json:"recv_idx"`
	} `json:"messages"`
}

// ReadTruth reads a truth.json.
func ReadTruth(path string) (*Truth, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tr Truth
	if err := json.Unmarshal(b, &tr); err != nil {
		return nil, fmt.Errorf("truth %s: %w", path, err)
	}
	if len(tr.Locations) == 0 || tr.Reference < 0 || tr.Reference >= len(tr.Locations) || len(tr.Locations[tr.Reference].Global) == 0 {
		return nil, fmt.Errorf("truth %s: no locations, or reference %d without events", path, tr.Reference)
	}
	return &tr, nil
}

// ErrorStats are |estimate - truth| over the events of the non-reference
// locations, ns.
type ErrorStats struct {
	N             int
	P50, P99, Max int64
}

func (e ErrorStats) String() string {
	return fmt.Sprintf("p50 %d ns, p99 %d ns, max %d ns over %d events", e.P50, e.P99, e.Max, e.N)
}

func statsOf(v []int64) ErrorStats {
	if len(v) == 0 {
		return ErrorStats{}
	}
	q := quantile.Of(v, 0.5, 0.99, 1)
	return ErrorStats{N: len(v), P50: q[0], P99: q[1], Max: q[2]}
}

// Evaluate compares per-location global times (global(loc, event)) with
// the truth; the model's locations must be the truth's, in order.
func Evaluate(tr *Truth, global func(loc, ev int) int64) ErrorStats {
	var v []int64
	for i, l := range tr.Locations {
		if i == tr.Reference {
			continue
		}
		for e, g := range l.Global {
			d := global(i, e) - g
			v = append(v, max(d, -d))
		}
	}
	return statsOf(v)
}

// Bound is, per event of a non-reference location, the half-width of the
// interval its clock offset is confined to by the messages of its
// correction window: a receive is after its send, so a message q -> p of
// true latency L allows shifting p's times by u_p with u_q - u_p <= L, and
// with the reference fixed, p can shift anywhere in [-D(p, ref), D(ref, p)]
// (D the shortest paths over those constraints, here Floyd-Warshall)
// without making any message of the window acausal. No method that does not
// know the latencies can promise better than half that interval. It
// assumes drift inside a window known, so it is optimistic. Events in
// windows where the location is not bounded both ways are left out.
func Bound(tr *Truth, window int64) (ErrorStats, map[[2]int]int64) {
	t0 := tr.Locations[tr.Reference].Global[0]
	n := len(tr.Locations)
	byWin := map[int][]int{}
	for k, m := range tr.Messages {
		w := int((m.SendG - t0) / window)
		byWin[w] = append(byWin[w], k)
	}
	half := map[[2]int]int64{} // (location, window) -> half-width
	inf := int64(math.MaxInt64 / 4)
	for w, ks := range byWin {
		d := make([][]int64, n)
		for i := range d {
			d[i] = make([]int64, n)
			for j := range d[i] {
				if i != j {
					d[i][j] = inf
				}
			}
		}
		for _, k := range ks {
			m := tr.Messages[k]
			d[m.From][m.To] = min(d[m.From][m.To], m.RecvG-m.SendG)
		}
		for k := range n {
			for i := range n {
				for j := range n {
					d[i][j] = min(d[i][j], d[i][k]+d[k][j])
				}
			}
		}
		r := tr.Reference
		for p := range n {
			if p != r && d[r][p] < inf && d[p][r] < inf {
				half[[2]int{p, w}] = (d[r][p] + d[p][r]) / 2
			}
		}
	}
	var v []int64
	for i, l := range tr.Locations {
		if i == tr.Reference {
			continue
		}
		for _, g := range l.Global {
			if h, ok := half[[2]int{i, int((g - t0) / window)}]; ok {
				v = append(v, h)
			}
		}
	}
	return statsOf(v), half
}
