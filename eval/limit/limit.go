// Package limit computes what a node's exchanges allowed (issue 28): the
// evaluator feeds every round a node's estimator was given to a set of
// textbook estimators, each over the newest few rounds, and judges every
// one against the truth at the same instants as the estimator under test.
// The best of them for that node, chosen with hindsight, is the node's
// reference error: no estimator that reads only these exchanges is
// promised to do better, and the distance to it is what an estimator
// leaves on the table. The textbook estimators read only the samples; the
// truth is the evaluator's. The simulator (sim.Options.Limit) and `gclock
// lab replay --limit` use it.
//
//	t := limit.New()
//	t.AddRound(round)        // every round the node's estimator got
//	t.Judge(local, truth)    // at every evaluation: local time, true source time
//	r := t.Result()          // every estimator's median and p99, the best
package limit

import (
	"math"
	"slices"
	"strconv"

	"github.com/gclock/gclock/estimate"
)

// limitSpans are the windows of the textbook estimators, in rounds.
var limitSpans = []int{3, 10}

// Textbook estimators: each turns a window of exchanges into a line of
// the offset y - x against the local time x.
var limitKinds = []struct {
	Name string
	fit  func(w []estimate.Sample, x0 int64) (a, b float64, ok bool)
}{
	{"mean", fitMean},            // least squares through every exchange's midpoint offset
	{"trim10", fitTrimmed},       // Intel's: the 10% slowest round trips dropped, then least squares
	{"minrtt", fitMinRTTRounds},  // Cristian per round (its fastest exchange), a line through the rounds
	{"median", fitMedian},        // the least-squares slope, the median offset about it
	{"floor1", fitEachWayFloor1}, // Paxson's: the fastest 1% each way, matched
}

// Names lists the textbook estimators as "kind/span" in the order of
// Result.Medians.
func Names() []string {
	var out []string
	for _, k := range limitKinds {
		for _, s := range limitSpans {
			out = append(out, k.Name+"/"+strconv.Itoa(s))
		}
	}
	return out
}

// Result is one node's limit: every textbook estimator's median and p99
// |error| over its evaluations (Names order; NaN: never had a line), and
// the best median.
type Result struct {
	Node    int       `json:"node"`
	Medians []float64 `json:"medians_ns"`
	P99s    []float64 `json:"p99s_ns"`
	// Best is the smallest median (ns) and BestName its estimator.
	Best     float64 `json:"best_ns"`
	BestName string  `json:"best"`
	// Oracle and OracleP99 are the median and p99 |error| (ns) of the
	// Kalman filter told the clocks' true wander (oracle.go); 0 when the
	// tracker has no oracle (New) or it never had a line.
	Oracle    float64 `json:"oracle_ns,omitempty"`
	OracleP99 float64 `json:"oracle_p99_ns,omitempty"`
}

// Tracker holds one node's received rounds and the textbook lines.
type Tracker struct {
	rounds [][]estimate.Sample
	x0     int64     // the lines' origin: the newest round's first local send
	a, b   []float64 // per line (the textbook estimators', then the oracle's): offset at x0 and slope
	ok     []bool
	errs   [][]float64
	oracle *oracle // nil: none; else its line is the last of a, b
}

// textbook is the number of textbook lines (Names), the first of a, b.
var textbook = len(limitKinds) * len(limitSpans)

// newTracker returns an empty Tracker with room for lines lines.
func newTracker(lines int) *Tracker {
	return &Tracker{a: make([]float64, lines), b: make([]float64, lines), ok: make([]bool, lines), errs: make([][]float64, lines)}
}

// New returns an empty Tracker.
func New() *Tracker { return newTracker(textbook) }

// NewWithOracle returns an empty Tracker that also runs the oracle
// (oracle.go) told wander: the variance per second of the random walk of
// the frequency difference between the node's clock and its source's, in
// (ns/ns)^2 per second (two clocks each wandering by w ppm per sqrt(s):
// 2 (w 1e-6)^2; 0 for clocks that do not wander). Only an evaluator knows
// it.
func NewWithOracle(wander float64) *Tracker {
	t := newTracker(textbook + 1)
	t.oracle = &oracle{q: max(0, wander)}
	return t
}

// AddRound takes a round the node's estimator was given and refits.
func (t *Tracker) AddRound(round []estimate.Sample) {
	if len(round) == 0 {
		return
	}
	t.rounds = append(t.rounds, slices.Clone(round))
	if maxSpan := slices.Max(limitSpans); len(t.rounds) > maxSpan {
		t.rounds = t.rounds[len(t.rounds)-maxSpan:]
	}
	t.x0 = round[0].LocSend
	i := 0
	for _, k := range limitKinds {
		for _, s := range limitSpans {
			from := max(0, len(t.rounds)-s)
			var w []estimate.Sample
			for _, r := range t.rounds[from:] {
				w = append(w, r...)
			}
			t.a[i], t.b[i], t.ok[i] = k.fit(w, t.x0)
			i++
		}
	}
	if t.oracle != nil {
		t.oracle.add(round)
		t.a[i], t.b[i], t.ok[i] = t.oracle.line(t.x0)
	}
}

// Judge records every line's |error| at local time local against truth,
// the source's true time then.
func (t *Tracker) Judge(local, truth int64) {
	dx := float64(local - t.x0)
	for i := range t.a {
		if !t.ok[i] {
			continue
		}
		est := local + int64(math.Round(t.a[i]+t.b[i]*dx))
		t.errs[i] = append(t.errs[i], math.Abs(float64(est-truth)))
	}
}

// Result is the node's limit so far (node labels it).
func (t *Tracker) Result(node int) Result {
	names := Names()
	nl := Result{Node: node, Best: math.NaN()}
	for i, e := range t.errs[:textbook] {
		med, p99 := medianP99(e)
		nl.Medians, nl.P99s = append(nl.Medians, med), append(nl.P99s, p99)
		if !math.IsNaN(med) && (math.IsNaN(nl.Best) || med < nl.Best) {
			nl.Best, nl.BestName = med, names[i]
		}
	}
	if t.oracle != nil && len(t.errs[textbook]) > 0 {
		nl.Oracle, nl.OracleP99 = medianP99(t.errs[textbook])
	}
	return nl
}

// medianP99 sorts e and returns its median and 99th percentile (NaN when
// empty).
func medianP99(e []float64) (med, p99 float64) {
	if len(e) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(e)
	return e[len(e)/2], e[min(len(e)-1, len(e)*99/100)]
}

// mid is an exchange's local midpoint relative to x0 and its midpoint
// offset y - x (ns, float64 of small differences).
func mid(s estimate.Sample, x0 int64) (x, off float64) {
	lx, _ := s.Mid()
	return float64(lx - x0), float64(s.Offset())
}

// lineFit is least squares of ys on xs; with one distinct x, the mean.
func lineFit(xs, ys []float64) (a, b float64, ok bool) {
	n := float64(len(xs))
	if n == 0 {
		return 0, 0, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx > 0 {
		b = sxy / sxx
	}
	return my - b*mx, b, true
}

func fitMean(w []estimate.Sample, x0 int64) (float64, float64, bool) {
	xs, ys := make([]float64, len(w)), make([]float64, len(w))
	for i, s := range w {
		xs[i], ys[i] = mid(s, x0)
	}
	return lineFit(xs, ys)
}

func fitTrimmed(w []estimate.Sample, x0 int64) (float64, float64, bool) {
	if len(w) == 0 {
		return 0, 0, false
	}
	rtts := make([]int64, len(w))
	for i, s := range w {
		rtts[i] = s.RTT()
	}
	slices.Sort(rtts)
	lim := rtts[(len(rtts)*9)/10]
	var xs, ys []float64
	for _, s := range w {
		if s.RTT() <= lim {
			x, y := mid(s, x0)
			xs, ys = append(xs, x), append(ys, y)
		}
	}
	return lineFit(xs, ys)
}

func fitMinRTTRounds(w []estimate.Sample, x0 int64) (float64, float64, bool) {
	// The window is whole rounds; a round is a run of samples whose local
	// sends are within 2 s of its first (rounds are seconds apart).
	var xs, ys []float64
	for i := 0; i < len(w); {
		j, best := i, i
		for j < len(w) && w[j].LocSend-w[i].LocSend < 2e9 {
			if w[j].RTT() < w[best].RTT() {
				best = j
			}
			j++
		}
		x, y := mid(w[best], x0)
		xs, ys = append(xs, x), append(ys, y)
		i = j
	}
	return lineFit(xs, ys)
}

func fitMedian(w []estimate.Sample, x0 int64) (float64, float64, bool) {
	a, b, ok := fitMean(w, x0)
	if !ok {
		return 0, 0, false
	}
	r := make([]float64, len(w))
	for i, s := range w {
		x, y := mid(s, x0)
		r[i] = y - (a + b*x)
	}
	slices.Sort(r)
	return a + r[len(r)/2], b, true
}

// fitEachWayFloor1 matches each direction's fastest 1% about the mean
// line's slope: the offset moves by half the difference of the two
// directions' 1% quantiles.
func fitEachWayFloor1(w []estimate.Sample, x0 int64) (float64, float64, bool) {
	a, b, ok := fitMean(w, x0)
	if !ok {
		return 0, 0, false
	}
	up, down := make([]float64, len(w)), make([]float64, len(w))
	for i, s := range w {
		// One way: source receive minus local send, the line taken out;
		// the other: line minus (source send minus local receive).
		xu := float64(s.LocSend - x0)
		up[i] = float64(s.SrcRecv-s.LocSend) - (a + b*xu)
		xd := float64(s.LocRecv - x0)
		down[i] = (a + b*xd) - float64(s.SrcSend-s.LocRecv)
	}
	slices.Sort(up)
	slices.Sort(down)
	k := len(w) / 100
	return a + (up[k]-down[k])/2, b, true
}
