package causality

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/gclock/gclock/trace/format"
)

// Pair is a sender and a receiver.
type Pair struct{ From, To uint32 }

// Counts are the messages of one pair and how many of them arrive before
// they were sent.
type Counts struct {
	Pair
	Messages  int64 // matched send/receive pairs
	Raw       int64 // violations on raw local timestamps
	Corrected int64 // violations on corrected global timestamps
}

type msgKey struct {
	from, to uint32
	id       uint64
}

type end struct {
	t, raw int64
	send   bool
}

// Checker counts causality violations in a merged stream.
type Checker struct {
	// MinLatency: a receive earlier than send + MinLatency counts as a
	// violation (0: only receives strictly before their send).
	MinLatency int64
	pending    map[msgKey]end
	counts     map[Pair]*Counts
	dup        int64
}

// NewChecker returns an empty checker.
func NewChecker(minLatency int64) *Checker {
	return &Checker{MinLatency: minLatency, pending: map[msgKey]end{}, counts: map[Pair]*Counts{}}
}

// Observe takes the next event; non-message events are ignored.
func (c *Checker) Observe(m *format.Merged) {
	var k msgKey
	switch m.Kind {
	case format.Send:
		k = msgKey{m.Proc, m.Peer, m.ID}
	case format.Recv:
		k = msgKey{m.Peer, m.Proc, m.ID}
	default:
		return
	}
	send := m.Kind == format.Send
	other, ok := c.pending[k]
	if !ok {
		c.pending[k] = end{t: m.Time, raw: m.Raw, send: send}
		return
	}
	if other.send == send {
		c.dup++ // a message id reused before its other end: keep the newest
		c.pending[k] = end{t: m.Time, raw: m.Raw, send: send}
		return
	}
	delete(c.pending, k)
	st, sr, rt, rr := other.t, other.raw, m.Time, m.Raw
	if !send {
		// normal order: other is the send
	} else {
		st, sr, rt, rr = m.Time, m.Raw, other.t, other.raw
	}
	p := Pair{k.from, k.to}
	cnt := c.counts[p]
	if cnt == nil {
		cnt = &Counts{Pair: p}
		c.counts[p] = cnt
	}
	cnt.Messages++
	if rr < sr+c.MinLatency {
		cnt.Raw++
	}
	if rt < st+c.MinLatency {
		cnt.Corrected++
	}
}

// Result returns the counts per pair, sorted by pair, and the number of
// message ends still unmatched (messages whose other end is missing) and of
// reused message ids.
func (c *Checker) Result() (pairs []Counts, unmatched, reused int64) {
	for _, v := range c.counts {
		pairs = append(pairs, *v)
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].From != pairs[j].From {
			return pairs[i].From < pairs[j].From
		}
		return pairs[i].To < pairs[j].To
	})
	return pairs, int64(len(c.pending)), c.dup
}

// Totals sums the counts of all pairs.
func Totals(pairs []Counts) Counts {
	var t Counts
	for _, p := range pairs {
		t.Messages += p.Messages
		t.Raw += p.Raw
		t.Corrected += p.Corrected
	}
	return t
}

// DefaultGamma is CLC's default interval scale after a move. With 1 a
// process moved forward stays moved for the rest of the trace: on the demo
// with a 300-ns minimum latency (docs/traces.md) every process's events
// moved by about 2 us and the median error against the truth went from
// 349 ns to 2539 ns; with 0.99 the shift decays by 1% of each later
// interval, the median stayed 354 ns and the violations still went to 0.
// The price: while a shift decays, local intervals are up to 1% short.
const DefaultGamma = 0.99

// CLCOptions tune the controlled logical clock.
type CLCOptions struct {
	// MinLatency is the smallest time a message takes, ns; a receive is
	// moved to at least send + MinLatency. Must be >= 0.
	MinLatency int64
	// Gamma in (0, 1] scales local intervals after a move: 1 keeps every
	// interval (the shift persists), smaller values let the shift decay.
	// 0 means DefaultGamma.
	Gamma float64
	// Amortize > 0 turns on backward amortization (Becker, Rabenseifner,
	// Wolf): the events in the Amortize*jump ns before a moved receive are
	// moved forward along a linear ramp, so that the jump is spread instead
	// of stretching one interval. Sends are only moved as far as their own
	// receive allows. 0: forward pass only.
	Amortize float64
}

// Moved reports what CLC did to one process.
type Moved struct {
	Proc      uint32
	Events    int64
	Moved     int64 // events whose time changed
	MaxShift  int64 // ns
	MeanShift float64
	Jumps     int64 // receives moved after their send
}

// ErrCycle is returned when the messages form a cycle that no order of
// replay can honour (corrupt message ids).
var ErrCycle = errors.New("message dependencies form a cycle")

// CLC applies the controlled logical clock to ev (a merged trace in global
// time order), changes the Time of moved events in place, re-sorts ev by
// the new times (stable: equal times keep their order), and reports per
// process how far it moved. Raw is untouched.
func CLC(ev []format.Merged, opt CLCOptions) ([]Moved, error) {
	if opt.MinLatency < 0 {
		return nil, fmt.Errorf("clc: MinLatency %d < 0", opt.MinLatency)
	}
	if opt.Gamma == 0 {
		opt.Gamma = DefaultGamma
	}
	if !(opt.Amortize >= 0) || math.IsInf(opt.Amortize, 0) {
		return nil, fmt.Errorf("clc: Amortize %v must be finite and >= 0", opt.Amortize)
	}
	if !(opt.Gamma > 0 && opt.Gamma <= 1) {
		return nil, fmt.Errorf("clc: Gamma %v outside (0, 1]", opt.Gamma)
	}
	procIdx := map[uint32]int{}
	var lists [][]int32
	var procs []uint32
	sends := map[msgKey]int32{}
	for i := range ev {
		p := ev[i].Proc
		j, ok := procIdx[p]
		if !ok {
			j = len(lists)
			procIdx[p] = j
			lists = append(lists, nil)
			procs = append(procs, p)
		}
		lists[j] = append(lists[j], int32(i))
		if ev[i].Kind == format.Send {
			sends[msgKey{p, ev[i].Peer, ev[i].ID}] = int32(i)
		}
	}
	newT := make([]int64, len(ev))
	order := make([]int32, len(ev)) // replay order: a causal order for ties
	recvOf := map[int32]int32{}     // send index -> its receive's index
	type jump struct {
		pos   int   // position of the receive in its process's list
		delta int64 // how far the constraint moved it
	}
	jumps := make([][]jump, len(lists))
	done := make([]bool, len(ev))
	pos := make([]int, len(lists))
	prevOrig := make([]int64, len(lists))
	prevNew := make([]int64, len(lists))
	moved := make([]Moved, len(lists))
	remaining := len(ev)
	for remaining > 0 {
		progress := false
		for j, l := range lists {
			for pos[j] < len(l) {
				i := l[pos[j]]
				e := &ev[i]
				s := int32(-1)
				if e.Kind == format.Recv {
					if si, ok := sends[msgKey{e.Peer, e.Proc, e.ID}]; ok {
						if !done[si] {
							break
						}
						s = si
					}
				}
				t := e.Time
				if pos[j] > 0 {
					step := e.Time - prevOrig[j]
					if opt.Gamma != 1 {
						step = int64(math.Floor(opt.Gamma * float64(step)))
					}
					t = max(t, prevNew[j]+step)
				}
				if s >= 0 {
					recvOf[s] = i
					if t < newT[s]+opt.MinLatency {
						jumps[j] = append(jumps[j], jump{pos: pos[j], delta: newT[s] + opt.MinLatency - t})
						t = newT[s] + opt.MinLatency
						moved[j].Jumps++
					}
				}
				newT[i], done[i] = t, true
				order[i] = int32(len(ev) - remaining)
				prevOrig[j], prevNew[j] = e.Time, t
				pos[j]++
				remaining--
				progress = true
			}
		}
		if !progress {
			return nil, fmt.Errorf("clc: %d events cannot be replayed: %w", remaining, ErrCycle)
		}
	}
	if opt.Amortize > 0 {
		for j, l := range lists {
			for _, jp := range jumps[j] {
				amortize(newT, l, jp.pos, jp.delta, opt, recvOf)
			}
		}
	}
	var sum = make([]float64, len(lists))
	for j, l := range lists {
		m := &moved[j]
		m.Proc = procs[j]
		m.Events = int64(len(l))
		for _, i := range l {
			d := newT[i] - ev[i].Time
			if d != 0 {
				m.Moved++
				sum[j] += float64(d)
				m.MaxShift = max(m.MaxShift, d)
			}
		}
		if m.Events > 0 {
			m.MeanShift = sum[j] / float64(m.Events)
		}
	}
	// Sort by (new time, replay order): a send and its receive at equal
	// times keep send first.
	perm := make([]int32, len(ev))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(a, b int32) int {
		if c := cmp.Compare(newT[a], newT[b]); c != 0 {
			return c
		}
		return cmp.Compare(order[a], order[b])
	})
	out := make([]format.Merged, len(ev))
	for k, i := range perm {
		out[k] = ev[i]
		out[k].Time = newT[i]
	}
	copy(ev, out)
	sort.Slice(moved, func(a, b int) bool { return moved[a].Proc < moved[b].Proc })
	return moved, nil
}

// amortize spreads the jump delta of the receive at l[k] over the events
// before it: an event at time t in the window (t0-A, t0], t0 the time the
// receive had before its jump and A = Amortize*delta, moves forward by
// f*delta*(t-(t0-A))/A. f <= 1 is the largest factor that keeps every send
// in the window at least MinLatency before its receive. The ramp only
// grows with t and stays below delta, so the process's order is kept and
// no interval shrinks.
func amortize(newT []int64, l []int32, k int, delta int64, opt CLCOptions, recvOf map[int32]int32) {
	t0 := newT[l[k]] - delta
	a := opt.Amortize * float64(delta)
	if a < 1 {
		return
	}
	startF := float64(0) // window start relative to t0: -a
	ramp := func(t int64) float64 {
		x := float64(t-t0) + a // in (0, a] inside the window
		if x <= startF {
			return 0
		}
		return float64(delta) * x / a
	}
	first := k
	for first > 0 && float64(t0-newT[l[first-1]]) < a {
		first--
	}
	if first == k {
		return
	}
	f := 1.0
	for q := first; q < k; q++ {
		i := l[q]
		r, ok := recvOf[i]
		if !ok {
			continue
		}
		sh := ramp(newT[i])
		if sh <= 0 {
			continue
		}
		allowed := float64(newT[r] - opt.MinLatency - newT[i])
		f = math.Min(f, math.Max(0, allowed)/sh)
	}
	if f <= 0 {
		return
	}
	for q := first; q < k; q++ {
		i := l[q]
		newT[i] += int64(math.Floor(f * ramp(newT[i])))
	}
}
