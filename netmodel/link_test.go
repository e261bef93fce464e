package netmodel

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseLink(t *testing.T) {
	us := time.Microsecond
	pareto := Model{Delay: 100 * us, Jitter: 50 * us, Dist: DistPareto}
	tests := []struct {
		in   string
		want Link
	}{
		{"direct", Link{Direct: true}},
		{"fixed:100us", Link{Forward: Model{Delay: 100 * us}, Reverse: Model{Delay: 100 * us}}},
		{"none:0s", Link{}},
		{"pareto:100us:50us", Link{Forward: pareto, Reverse: pareto}},
		{" uniform:1ms:200us ", Link{
			Forward: Model{Delay: time.Millisecond, Jitter: 200 * us, Dist: DistUniform},
			Reverse: Model{Delay: time.Millisecond, Jitter: 200 * us, Dist: DistUniform}}},
		{"normal:100us:10us/normal:120us:5us", Link{
			Forward: Model{Delay: 100 * us, Jitter: 10 * us, Dist: DistNormal},
			Reverse: Model{Delay: 120 * us, Jitter: 5 * us, Dist: DistNormal}}},
		{"fixed:100us,loss=1%,dup=0.002,reorder=0.5%", Link{
			Forward: Model{Delay: 100 * us, Loss: 0.01, Dup: 0.002, Reorder: 0.005},
			Reverse: Model{Delay: 100 * us, Loss: 0.01, Dup: 0.002, Reorder: 0.005}}},
		{"fixed:100us,asym=20us", Link{Forward: Model{Delay: 110 * us}, Reverse: Model{Delay: 90 * us}}},
		{"fixed:100us,asym=-21ns", Link{Forward: Model{Delay: 100*us - 10}, Reverse: Model{Delay: 100*us + 11}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLink(tt.in)
			if err != nil {
				t.Fatalf("ParseLink(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseLink(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			// The printed form parses back to the same link.
			again, err := ParseLink(got.String())
			if err != nil || again != got {
				t.Fatalf("round trip of %q via %q: %+v, %v", tt.in, got.String(), again, err)
			}
		})
	}
}

func TestParseLinkErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty"},
		{"gauss:1us:1us", `distribution "gauss"`},
		{"pareto:100us", "want pareto:DELAY:JITTER"},
		{"fixed:100us:1us", "want fixed:DELAY"},
		{"normal:abc:1us", "delay"},
		{"normal:1us:xyz", "jitter"},
		{"normal:-1us:1us", "must not be negative"},
		{"normal:2s:1us", "not a LAN link"},
		{"fixed:1us,loss=2", "not in [0,1]"},
		{"fixed:1us,loss=-1%", "not in [0,1]"},
		{"fixed:1us,loss=NaN", "not in [0,1]"},
		{"fixed:1us,loss", "want name=value"},
		{"fixed:1us,mtu=1500", `option "mtu"`},
		{"fixed:10us,asym=30us", "must not be negative"},
		{"fixed:1us/fixed:1us/fixed:1us", "at most two"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseLink(tt.in)
			if err == nil {
				t.Fatalf("ParseLink(%q) = nil error, want one containing %q", tt.in, tt.want)
			}
			if !errors.Is(err, ErrLinkSyntax) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseLink(%q) = %v, want ErrLinkSyntax containing %q", tt.in, err, tt.want)
			}
		})
	}
}

func FuzzParseLink(f *testing.F) {
	for _, s := range []string{"direct", "pareto:100us:50us", "fixed:1us,loss=1%", "normal:1us:1us/uniform:2us:1us,asym=1us", "x:y:z,,="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLink(s)
		if err != nil {
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLink(%q) accepted an invalid link: %v", s, err)
		}
		again, err := ParseLink(l.String())
		if err != nil || again != l {
			t.Fatalf("round trip %q -> %q: %+v, %v", s, l.String(), again, err)
		}
		// Planning never panics and never yields a negative delay.
		r := rand.New(rand.NewPCG(1, 2))
		for range 10 {
			for _, d := range l.Forward.Plan(r, nil) {
				if d < 0 {
					t.Fatalf("negative delay %d from %q", d, s)
				}
			}
		}
	})
}

// TestModelDistributions checks each distribution's mean, spread and floor
// against its definition, from 200k seeded draws.
func TestModelDistributions(t *testing.T) {
	us := float64(time.Microsecond)
	tests := []struct {
		name         string
		m            Model
		mean, sd     float64 // ns
		min, max     float64 // bounds every draw must respect, ns
		tolMean, tol float64 // relative tolerance on mean and sd
	}{
		{"fixed", Model{Delay: 100 * time.Microsecond}, 100 * us, 0, 100 * us, 100 * us, 0, 0},
		{"uniform", Model{Delay: 100 * time.Microsecond, Jitter: 30 * time.Microsecond, Dist: DistUniform},
			100 * us, 30 * us / math.Sqrt(3), 70 * us, 130 * us, 0.01, 0.02},
		{"normal", Model{Delay: 100 * time.Microsecond, Jitter: 10 * time.Microsecond, Dist: DistNormal},
			100 * us, 10 * us, 0, math.Inf(1), 0.01, 0.02},
		// Pareto(3) has an infinite fourth moment: its sample sd converges
		// slowly, hence the wider tolerance. Floor: base - 0.577 jitter.
		{"pareto", Model{Delay: 100 * time.Microsecond, Jitter: 50 * time.Microsecond, Dist: DistPareto},
			100 * us, 50 * us, 100*us - 50*us*paretoTailPerJitter - 1, math.Inf(1), 0.01, 0.15},
		// Clamped at zero: the mean rises above the base delay.
		{"normal clamped", Model{Delay: 0, Jitter: 10 * time.Microsecond, Dist: DistNormal},
			10 * us / math.Sqrt(2*math.Pi), -1, 0, math.Inf(1), 0.02, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 11))
			const n = 200000
			var sum, ss float64
			v := make([]float64, n)
			for i := range v {
				d := float64(tt.m.Sample(r))
				if d < tt.min || d > tt.max {
					t.Fatalf("draw %v outside [%v, %v]", d, tt.min, tt.max)
				}
				v[i] = d
				sum += d
			}
			mean := sum / n
			for _, d := range v {
				ss += (d - mean) * (d - mean)
			}
			sd := math.Sqrt(ss / (n - 1))
			if math.Abs(mean-tt.mean) > tt.tolMean*tt.mean+1 {
				t.Errorf("mean %.0f ns, want %.0f +- %.0f%%", mean, tt.mean, 100*tt.tolMean)
			}
			if tt.sd >= 0 && math.Abs(sd-tt.sd) > tt.tol*tt.sd+1 {
				t.Errorf("sd %.0f ns, want %.0f +- %.0f%%", sd, tt.sd, 100*tt.tol)
			}
		})
	}
}

// TestModelPlanRates checks loss, duplication and reordering rates and that
// a seeded generator makes the plan reproducible.
func TestModelPlanRates(t *testing.T) {
	m := Model{Delay: 100 * time.Microsecond, Loss: 0.05, Dup: 0.02, Reorder: 0.1}
	const n = 200000
	run := func() (lost, dup, reord int, seq []int64) {
		r := rand.New(rand.NewPCG(3, 4))
		var buf []int64
		for range n {
			buf = m.Plan(r, buf[:0])
			switch len(buf) {
			case 0:
				lost++
			case 2:
				dup++
			}
			for _, d := range buf {
				if d == 0 {
					reord++
				} else if d != int64(100*time.Microsecond) {
					t.Fatalf("delay %d, want 0 or 100us", d)
				}
			}
			if len(seq) < 1000 {
				seq = append(seq, int64(len(buf)))
			}
		}
		return
	}
	lost, dup, reord, s1 := run()
	check := func(name string, got, want float64) {
		// 4 standard deviations of a binomial proportion.
		tol := 4 * math.Sqrt(want*(1-want)/n)
		if math.Abs(got-want) > tol {
			t.Errorf("%s rate %.4f, want %.4f +- %.4f", name, got, want, tol)
		}
	}
	check("loss", float64(lost)/n, 0.05)
	check("dup", float64(dup)/float64(n-lost), 0.02)
	check("reorder", float64(reord)/float64(n-lost+dup), 0.1)
	_, _, _, s2 := run()
	for i := range s1 {
		if s1[i] != s2[i] {
			t.Fatalf("same seed, different plan at frame %d", i)
		}
	}
}

func TestModelQuantiles(t *testing.T) {
	m := Model{Delay: 100 * time.Microsecond, Jitter: 10 * time.Microsecond, Dist: DistNormal}
	q := m.Quantiles(100000, 1, 0.5, 0.99)
	// Normal: median = mean, p99 = mean + 2.326 sd.
	if d := q[0] - 100000; d < -300 || d > 300 {
		t.Errorf("p50 %d ns, want 100000 +- 300", q[0])
	}
	if d := q[1] - 123263; d < -800 || d > 800 {
		t.Errorf("p99 %d ns, want 123263 +- 800", q[1])
	}
}

func TestLinkModelDirection(t *testing.T) {
	l := Link{Forward: Model{Delay: 1}, Reverse: Model{Delay: 2}}
	for _, tt := range []struct {
		in, out int
		want    time.Duration
	}{{0, 1, 1}, {1, 0, 2}, {2, 3, 1}, {3, 2, 2}} {
		if got := l.Model(tt.in, tt.out).Delay; got != tt.want {
			t.Errorf("Model(%d,%d).Delay = %v, want %v", tt.in, tt.out, got, tt.want)
		}
	}
}

// TestModelFloor: Floor is the least delay Plan gives, and Plan reaches
// within a few percent of the jitter above it.
func TestModelFloor(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		m    Model
		want time.Duration
	}{
		{Model{Delay: 100 * us}, 100 * us},
		{Model{Delay: 100 * us, Jitter: 30 * us, Dist: DistUniform}, 70 * us},
		{Model{Delay: 100 * us, Jitter: 300 * us, Dist: DistUniform}, 0},
		{Model{Delay: 100 * us, Jitter: 50 * us, Dist: DistPareto}, 71132}, // 100 - 50/sqrt(3) us
		{Model{Delay: 100 * us, Jitter: 10 * us, Dist: DistNormal}, 0},
		{Model{Delay: 100 * us, Reorder: 0.01}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.m.String(), func(t *testing.T) {
			got := tt.m.Floor()
			if got != tt.want {
				t.Fatalf("Floor = %v, want %v", got, tt.want)
			}
			r := rand.New(rand.NewPCG(1, 2))
			low := int64(math.MaxInt64)
			for range 20000 {
				for _, d := range tt.m.Plan(r, nil) {
					if d < int64(got) {
						t.Fatalf("Plan gave %d ns, below the floor %v", d, got)
					}
					low = min(low, d)
				}
			}
			if tt.m.Jitter > 0 && tt.m.Dist != DistNormal && low > int64(got)+int64(tt.m.Jitter)/20 {
				t.Errorf("least of 20000 draws %d ns, more than Jitter/20 above the floor %v", low, got)
			}
		})
	}
	l := Link{Forward: Model{Delay: 100 * us}, Reverse: Model{Delay: 80 * us}}
	if l.Floor() != 80*us || (Link{Direct: true}).Floor() != 0 {
		t.Errorf("Link.Floor: %v, direct %v", l.Floor(), Link{Direct: true}.Floor())
	}
}

// TestModelLoadedKeepsFloor: a load (Load.TailScale) stretches the waiting
// above a floor and leaves the floor where it was; jitter without a floor
// widens about its mean.
func TestModelLoadedKeepsFloor(t *testing.T) {
	for _, spec := range []string{"pareto:100us:50us", "exponential:100us:50us", "uniform:100us:40us", "normal:100us:10us", "bimodal:100us:20us"} {
		t.Run(spec, func(t *testing.T) {
			l, err := ParseLink(spec)
			if err != nil {
				t.Fatal(err)
			}
			m := l.Forward
			hot := m.Loaded(4)
			if got, want := hot.Floor(), m.Floor(); got < want-1 || got > want+1 {
				t.Errorf("floor under load %v, want %v (unloaded, +-1 ns of rounding)", got, want)
			}
			if m.Loaded(1) != m || m.Loaded(0) != m {
				t.Errorf("Loaded(1) or Loaded(0) changed the model")
			}
			mean := func(m Model) float64 {
				r := rand.New(rand.NewPCG(1, 2))
				var s float64
				const n = 200000
				for range n {
					s += float64(m.Sample(r))
				}
				return s / n
			}
			base, loaded := mean(m), mean(hot)
			above := func(x float64) float64 { return x - float64(m.Floor()) }
			switch m.Dist {
			case DistPareto, DistExponential, DistUniform:
				// The mean's distance above the floor grows 4x.
				if r := above(loaded) / above(base); math.Abs(r-4) > 0.2 {
					t.Errorf("mean above the floor grew %.2fx under 4x load, want 4x", r)
				}
			default:
				if math.Abs(loaded-base) > 0.02*base {
					t.Errorf("mean moved from %.0f to %.0f ns under load, want it kept", base, loaded)
				}
			}
		})
	}
}
