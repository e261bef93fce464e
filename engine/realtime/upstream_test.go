package realtime

import (
	"errors"
	"math"
	"testing"

	"github.com/gclock/gclock/engine"
)

// TestUpstream: the reference's CLOCK_REALTIME state, read with each
// sample, goes with the model to a node and into the served bounds: an
// unknown upstream serves CLOCK_REALTIME as UTC, a synchronised one widens
// the bounds by its maxerror (plus 500 ppm of growth since it was read) so
// that UTC itself is inside, an unsynchronised one is not served at all,
// and a leap announcement reaches the node.
func TestUpstream(t *testing.T) {
	const off = 1_700_000_000 * sec
	for _, tt := range []struct {
		name string
		up   Upstream
		// utcErr: CLOCK_REALTIME - UTC, which only this test knows
		utcErr int64
		served bool
		widen  int64 // extra half-width at the model's time
	}{
		{"not read", Upstream{}, 0, true, 0},
		{"synced, 5 ms", Upstream{Known: true, Synced: true, MaxErr: 5_000_000, EstErr: 100_000, Stratum: 2, RefID: 0x0a000001}, -4_900_000, true, 5_000_000},
		{"synced, leap insert", Upstream{Known: true, Synced: true, MaxErr: 30_000, Leap: LeapInsert, Stratum: 1, RefID: 0x47505300}, 29_000, true, 30_000},
		{"unsynchronised, 16 s (this VM)", Upstream{Known: true, MaxErr: 16_000_000_000, EstErr: 16_000_000_000}, 3_000_000_000, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ref := newScale(t, ModeReference, 1)
			node := newScale(t, ModeReference, 2)
			g := 1000 * sec
			for k := range 3 {
				ref.Tick(g, Inputs{})
				ref.Ready()
				if err := ref.SetUpstream(tt.up); err != nil {
					t.Fatal(err)
				}
				ref.Sample(g, off+int64(k)*1000, 100)
				if k < 2 {
					g += sec
				}
			}
			r := answer(t, ref, Message{Type: MsgQuery, From: 2, Seq: 1, After: math.MinInt64}, g)
			if r.Up != tt.up {
				t.Fatalf("the answer carries upstream %+v, want %+v", r.Up, tt.up)
			}
			if err := node.Step(r, g); err != nil {
				t.Fatal(err)
			}
			if up, ok := node.Upstream(); !ok || up != tt.up {
				t.Errorf("the node's upstream %+v (%v), want %+v", up, ok, tt.up)
			}
			for _, s := range []*Scale{ref, node} {
				for _, d := range []int64{0, 10 * sec} {
					x := g + d
					tm := []engine.Time{{Est: x, Earliest: x - 50, Latest: x + 50, Status: engine.StatusSynced}}
					ok := s.Apply(tm)
					if ok != tt.served {
						t.Fatalf("+%d s: served %v, want %v", d/sec, ok, tt.served)
					}
					if !ok {
						if up, _ := s.Upstream(); up.Problem() == "" {
							t.Errorf("not served, and Upstream names no problem")
						}
						continue
					}
					// CLOCK_REALTIME keeps the model's line; UTC is it minus the upstream error.
					real := x + off + 2000 + (x-g)/1e6
					utc := real - tt.utcErr
					if utc < tm[0].Earliest || utc > tm[0].Latest {
						t.Errorf("+%d s: UTC %d outside [%d, %d]", d/sec, utc, tm[0].Earliest, tm[0].Latest)
					}
					grow := int64(math.Ceil(UpstreamGrowth * float64(d)))
					if tt.widen > 0 && (real-tm[0].Earliest < tt.widen+grow || tm[0].Latest-real < tt.widen+grow) {
						t.Errorf("+%d s: bounds [%d, %d] around CLOCK_REALTIME %d not widened by %d", d/sec, tm[0].Earliest-real, tm[0].Latest-real, real, tt.widen+grow)
					}
				}
			}
		})
	}
}

// TestUpstreamRefused: an upstream no reader produces is refused by
// SetUpstream (and then served as unsynchronised, never as better) and,
// in a reply, by the node.
func TestUpstreamRefused(t *testing.T) {
	for _, tt := range []struct {
		up   Upstream
		want string
	}{
		{Upstream{MaxErr: 5}, "known"},
		{Upstream{Known: true, Synced: true, MaxErr: -1}, "max_err"},
		{Upstream{Known: true, Synced: true, MaxErr: 1 << 41}, "max_err"},
		{Upstream{Known: true, Synced: true, EstErr: -1}, "est_err"},
		{Upstream{Known: true, Synced: true, Leap: 3}, "leap"},
		{Upstream{Known: true, Synced: true, Stratum: 16}, "stratum"},
		{Upstream{Known: true, Synced: true, RootDelay: -1}, "root_delay"},
		{Upstream{Known: true, Synced: true, RootDisp: -5}, "root_disp"},
	} {
		ref := newScale(t, ModeReference, 1)
		err := ref.SetUpstream(tt.up)
		if err == nil || !contains(err.Error(), "field "+tt.want+" ") {
			t.Errorf("%+v: %v, want field %s", tt.up, err, tt.want)
		}
		g := 10 * sec
		for range 2 {
			ref.Tick(g, Inputs{})
			ref.Ready()
			ref.Sample(g, 5*sec, 100)
			g += sec
		}
		if ref.Apply([]engine.Time{{Est: g, Earliest: g, Latest: g, Status: engine.StatusSynced}}) {
			t.Errorf("%+v: served after a refused upstream", tt.up)
		}
		node := newScale(t, ModeReference, 2)
		m := Message{Type: MsgInfo, From: 1, Mode: ModeReference, At: g, Offset: 5 * sec, Up: tt.up}
		if err := node.Step(m, g); !errors.Is(err, ErrMessage) {
			t.Errorf("%+v: the node took it: %v", tt.up, err)
		}
	}
	// An upstream in a mean-drift segment.
	node := newScale(t, ModeMeanDrift, 2)
	m := Message{Type: MsgInfo, From: 1, Mode: ModeMeanDrift, Slope: 1, Prev: math.MinInt64, Up: Upstream{Known: true, Synced: true}}
	if err := node.Step(m, 0); !errors.Is(err, ErrMessage) {
		t.Errorf("an upstream in a mean-drift segment taken: %v", err)
	}
}
