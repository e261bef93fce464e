package estimate

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// refHull is the lower hull of pts (sorted by x) built from scratch.
func refHull(pts []pt) []pt {
	var h []pt
	for _, p := range pts {
		h = pushHull(h, p)
	}
	return h
}

// spanSample is one exchange around local time x with a jittered offset.
func spanSample(r *rand.Rand, x int64) Sample {
	off := int64(500) + r.Int64N(40)
	s := Sample{SrcSend: x + off - 20 - r.Int64N(100), LocRecv: x, LocSend: x + 10 + r.Int64N(20)}
	s.SrcRecv = s.LocSend + off + 20 + r.Int64N(100)
	return s
}

// MaxSpan drops exactly the points older than newest - MaxSpan (each set
// keeps at least one), the queue of two monotone chains gives the hull a
// rebuild from scratch gives, and the bounds are the brute force's over the
// held points, with the wander widening of the held span.
func TestHullMaxSpanMatchesBruteForce(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		r := rand.New(rand.NewPCG(seed, 77))
		span := 2000 + r.Int64N(12000)
		window := 1 << 16 // the time limit alone decides which points are held
		if seed%4 == 3 {
			window = 4 + r.IntN(20) // both limits at once
		}
		wander := 0.0
		if seed%2 == 1 {
			wander = 1e-9 // large: the span's widening is a few ns here
		}
		shift := r.Int64N(50) - 10
		h := mustHull(t, HullConfig{Window: window, Shift: shift, MaxWander: wander, MaxSpan: span})
		var all []Sample // since the last restart
		cut := int64(math.MinInt64)
		base := int64(1e15)
		for i := 0; i < 400; i++ {
			x := base + int64(i)*700 + r.Int64N(2000) - 1000 // out of order sometimes
			if r.IntN(10) == 0 && len(all) > 0 {
				x = all[len(all)-1].LocRecv // equal x
			}
			if r.IntN(50) == 0 {
				span = 2000 + r.Int64N(12000)
				h.SetMaxSpan(span)
			}
			s := spanSample(r, x)
			all = append(all, s)
			err := h.AddRound([]Sample{s})
			if errors.Is(err, ErrInconsistent) {
				all = all[len(all)-1:]
				cut = math.MinInt64
			} else if err != nil {
				t.Fatalf("seed %d: AddRound: %v", seed, err)
			}
			// A point once dropped stays dropped: the cut is the highest
			// newest - MaxSpan so far.
			newest := int64(math.MinInt64)
			for _, a := range all {
				newest = max(newest, a.LocSend, a.LocRecv)
			}
			cut = max(cut, newest-span)
			for _, c := range []*chain{&h.up, &h.low} {
				if !slices.IsSortedFunc(c.pts, func(a, b pt) int { return int(a.x - b.x) }) {
					t.Fatalf("seed %d sample %d: points not sorted", seed, i)
				}
				if want := refHull(c.pts); !slices.Equal(c.hull, want) {
					t.Fatalf("seed %d sample %d: hull %v, rebuilt from scratch %v", seed, i, c.hull, want)
				}
				if len(c.pts) > 1 && c.pts[0].x < h.newest-span {
					t.Fatalf("seed %d sample %d: oldest point %d before the cut %d", seed, i, c.pts[0].x, h.newest-span)
				}
			}
			if window == 1<<16 {
				// The held UP points are exactly the samples since the
				// restart that are not older than the cut.
				var want []int64
				for _, a := range all {
					if a.LocSend >= cut {
						want = append(want, a.LocSend-h.x0)
					}
				}
				slices.Sort(want)
				if len(want) == 0 { // kept one: the newest UP point
					want = []int64{h.up.pts[0].x}
				}
				var got []int64
				for _, p := range h.up.pts {
					got = append(got, p.x)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d sample %d: held UP x %v, want %v", seed, i, got, want)
				}
			}
			if i%17 != 0 {
				continue
			}
			ups := append([]pt(nil), h.up.pts...)
			var lows []pt
			for _, p := range h.low.pts {
				lows = append(lows, pt{p.x, -p.d})
			}
			sp := float64(h.newest - min(ups[0].x, lows[0].x))
			sigma := shift + int64(math.Ceil(wander*sp*sp/2))
			q := base + int64(i)*700 + r.Int64N(4000) - 3000
			_, _, blo, bhi, bok := bruteBounds(ups, lows, sigma, q-h.x0)
			lo, hi, ok := h.Bounds(q)
			if bok != ok {
				t.Fatalf("seed %d sample %d: Bounds ok = %v, brute force %v", seed, i, ok, bok)
			}
			if !ok {
				continue
			}
			dx := float64(q - h.x0 - h.newest)
			w := int64(math.Ceil(wander * dx * dx / 2))
			if want := ratFloor(blo) + q + h.c - w; lo != want {
				t.Fatalf("seed %d sample %d q %d: lo = %d, brute force %d", seed, i, q, lo, want)
			}
			if want := ratCeil(bhi) + q + h.c + w; hi != want {
				t.Fatalf("seed %d sample %d q %d: hi = %d, brute force %d", seed, i, q, hi, want)
			}
		}
	}
}

// wanderWorld is a source whose skew changes linearly: the offset is
// quadratic in local time (the local clock is the truth).
type wanderWorld struct {
	world
	wander float64 // d skew / dx, per ns
}

func (w wanderWorld) y(x int64) int64 {
	dx := float64(x - w.t0)
	return w.world.y(x) + int64(math.Floor(w.wander*dx*dx/2))
}

func (w wanderWorld) round(r *rand.Rand, m delayModel, t0 int64) []Sample {
	var rd []Sample
	for k := int64(0); k < 3; k++ {
		tt := t0 + k*300000
		d1, d2 := m.min1+int64(m.excess(r)), m.min2+int64(m.excess(r))
		rd = append(rd, Sample{SrcSend: w.y(tt), LocRecv: tt + d1, LocSend: tt + d1 + 1000, SrcRecv: w.y(tt + d1 + 1000 + d2)})
	}
	return rd
}

// The reason for MaxSpan: with wander the whole window's widening
// MaxWander*span^2/2 grows without end, while a span limited near
// sqrt(delta/MaxWander) keeps the bounds tight; both contain the truth.
func TestHullMaxSpanKeepsWanderBoundsTight(t *testing.T) {
	const wander = 1e-17 // 0.01 ppm per second
	w := wanderWorld{world{t0: 1e12, off: 5e6, ppb: 20000}, wander}
	m := models[0] // 5 us minimum delay each way, exponential tail
	full := mustHull(t, HullConfig{Window: 1024, Shift: 1, MaxWander: wander})
	// delta ~ 5 us: sqrt(2 delta / MaxWander) ~ 32 s; a round every 4 s.
	limited := mustHull(t, HullConfig{Window: 1024, Shift: 1, MaxWander: wander, MaxSpan: 40e9})
	r := rand.New(rand.NewPCG(3, 3))
	var wFull, wLim int64
	for i := 0; i < 900; i++ { // one hour
		rd := w.round(r, m, w.t0+int64(i)*4e9)
		for _, h := range []*Hull{full, limited} {
			if err := h.AddRound(rd); err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
			for _, x := range []int64{rd[2].LocSend, rd[2].LocSend + 4e9} {
				lo, hi, ok := h.Bounds(x)
				if !ok || lo > w.y(x) || hi < w.y(x) {
					t.Fatalf("round %d (MaxSpan %d): Bounds(%d) = [%d, %d] %v miss %d", i, h.cfg.MaxSpan, x, lo, hi, ok, w.y(x))
				}
				if mp := h.Mapping(); mp.Valid {
					if _, mlo, mhi := mp.At(x); mlo > w.y(x) || mhi < w.y(x) {
						t.Fatalf("round %d (MaxSpan %d): Mapping.At(%d) misses the truth", i, h.cfg.MaxSpan, x)
					}
				}
			}
		}
		if i == 899 {
			x := rd[2].LocSend + 4e9
			lo, hi, _ := full.Bounds(x)
			wFull = hi - lo
			lo, hi, _ = limited.Bounds(x)
			wLim = hi - lo
		}
	}
	t.Logf("bound width 4 s after the last round of an hour: whole window %d ns (%d samples), MaxSpan 40 s %d ns (%d samples)",
		wFull, full.Len(), wLim, limited.Len())
	if wLim*20 > wFull {
		t.Errorf("MaxSpan width %d ns not 20x below the whole window's %d ns", wLim, wFull)
	}
	if limited.Len() > 3*11 {
		t.Errorf("MaxSpan 40 s holds %d samples, want at most 11 rounds of 3", limited.Len())
	}
}

// A span-limited window that never fills its Window still moves its origin
// along: after five hours of a round every 10 s the coordinates stay small
// and nothing restarted.
func TestHullMaxSpanMovesTheOrigin(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	w := randomWorld(r)
	h := mustHull(t, HullConfig{Window: 1024, MaxSpan: 60e9})
	start := w.t0
	for i, rd := range w.rounds(r, models[0], start, 10e9, 1800, 3) {
		if err := h.AddRound(rd); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if i%100 == 0 {
			checkContains(t, h, w, rd[2].LocSend, 5, i)
		}
	}
	if h.newest > 2*rebaseAfter || h.x0-start < 4*3600e9 {
		t.Fatalf("origin %d ns after the start, newest %d ns after the origin: the origin did not follow", h.x0-start, h.newest)
	}
	if h.Len() > 3*7 {
		t.Fatalf("holds %d samples, want at most 7 rounds", h.Len())
	}
}

// Dropping from the front undoes the front's construction: one long run
// with a short span and a huge window never rebuilds more than once per
// held set (measured by the total work of the queue: each point is moved
// to the front once and every pop is undone once).
func TestHullMaxSpanAmortized(t *testing.T) {
	var c chain
	r := rand.New(rand.NewPCG(8, 8))
	moved, popped := 0, 0
	const n, keep = 100000, 500
	for i := 0; i < n; i++ {
		c.add(pt{int64(i), r.Int64N(1000)})
		for len(c.pts) > keep {
			if c.nfront == 0 {
				moved += len(c.pts)
			}
			before := len(c.popped)
			c.dropOldest()
			popped += before - len(c.popped)
		}
		if i%997 == 0 {
			c.merge()
			if want := refHull(c.pts); !slices.Equal(c.hull, want) {
				t.Fatalf("point %d: hull differs from a rebuild", i)
			}
		}
	}
	if moved > n || popped > n {
		t.Fatalf("moved %d points to the front and restored %d pops for %d points: not amortized O(1)", moved, popped, n)
	}
	if cap(c.pts) > 4*keep {
		t.Fatalf("points buffer grew to %d for %d held", cap(c.pts), keep)
	}
}
