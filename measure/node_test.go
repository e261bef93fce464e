package measure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/transport"
	"golang.org/x/sys/unix"
)

// fakeGlobal is a node's global time with a constant error errNs and
// bounds +-halfNs around the estimate; the truth is the raw clock itself.
func fakeGlobal(errNs, halfNs int64) func(int64) (gtime.Time, error) {
	return func(raw int64) (gtime.Time, error) {
		est := raw + errNs
		return gtime.Time{Est: est, Earliest: est - halfNs, Latest: est + halfNs, Status: gtime.StatusSynced}, nil
	}
}

// runLoopback runs one node per rank on loopback UDP in this process.
func runLoopback(t *testing.T, cfg Config, n int, timestamps bool, errs []int64, half int64) []Stamp {
	t.Helper()
	conns := make([]*transport.UDPConn, n)
	peers := make([]netip.AddrPort, n)
	for i := range n {
		c, err := transport.ListenUDP("127.0.0.1:0", transport.UDPOptions{Timestamps: timestamps})
		if err != nil {
			t.Fatal(err)
		}
		conns[i], peers[i] = c, c.LocalAddr()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	out := make([][]Stamp, n)
	errc := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := cfg
			c.Rank, c.Peers = i, peers
			off := int64(i) * 1_000_000 // local clocks far apart
			out[i], errc[i] = Run(ctx, c, conns[i], Clocks{
				Local:  func(r int64) int64 { return r + off },
				Global: fakeGlobal(errs[i], half),
			})
		}()
	}
	wg.Wait()
	var all []Stamp
	for i := range n {
		if errc[i] != nil {
			t.Fatalf("rank %d: %v", i, errc[i])
		}
		all = append(all, out[i]...)
	}
	return all
}

func identity(r int64) int64 { return r }

// TestLoopbackMethods runs an allreduce on four loopback nodes whose global
// time is off by known constants, and checks each method's error against
// what those constants allow.
func TestLoopbackMethods(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Runs, cfg.Period, cfg.Lead, cfg.Repeat = 20, 5*time.Millisecond, 20*time.Millisecond, 2
	errs := []int64{0, 300, -200, 100}
	stamps := runLoopback(t, cfg, 4, false, errs, 1000)
	// Four nodes in one process share its two Ps: many starts are late.
	// The arithmetic is checked on every execution (late ones kept);
	// leaving them out is TestReproMPIInvalidates's.
	res, err := AnalyzeWith(stamps, identity, Options{LateLimitNs: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Executions["scheduled"] != 20 || res.Executions["barrier"] != 20 || res.Incomplete != 0 {
		t.Fatalf("executions %v, incomplete %d; want 20 of each", res.Executions, res.Incomplete)
	}
	// Global: measured - true = err(end node) - err(node of the earliest
	// estimated start) up to which node that is: within the spread of errs.
	g := res.Method(MethodGlobal)
	if g == nil || g.Err == nil {
		t.Fatal("no global method result")
	}
	if g.Err.MaxAbsNs > 500+1 {
		t.Errorf("global method max |error| %.0f ns, want <= 500 (the spread of the injected errors)", g.Err.MaxAbsNs)
	}
	if g.Err.Coverage != 1 {
		t.Errorf("global method bounds coverage %.3f, want 1", g.Err.Coverage)
	}
	// Barrier: a node's own clock measures from its own barrier exit, so it
	// misses the time since the earliest start: never over, sometimes under.
	b := res.Method(MethodBarrier)
	var under int
	for _, v := range b.Values {
		if v.Ns > v.TrueNs {
			t.Fatalf("barrier method: execution %d rank %d measured %d > true %d with a perfect local clock", v.Exec, v.Rank, v.Ns, v.TrueNs)
		}
		if v.Ns < v.TrueNs {
			under++
		}
	}
	if under == 0 {
		t.Error("barrier method: no node left the barrier after another; the test cannot tell the methods apart")
	}
	w := res.Method(MethodWindow)
	if w == nil || w.N != 20 || w.Err.MaxAbsNs > 500+1 {
		t.Errorf("window: %+v", w)
	}
	if gb := res.Method(MethodGlobalAtBarrier); gb == nil || gb.Err.MaxAbsNs > 500+1 {
		t.Errorf("global@barrier: %+v", gb)
	}
	// The stamps read again at the end (same constant errors here).
	if gr := res.Method(MethodGlobalRetro); gr == nil || gr.N != 4*w.N || gr.Err.MaxAbsNs > 500+1 || gr.Err.Coverage != 1 {
		t.Errorf("global-retro: %+v", gr)
	}
}

func TestLoopbackOps(t *testing.T) {
	for _, tc := range []struct {
		op    string
		n     int
		count int
	}{
		{OpBarrier, 3, 1}, {OpReduce, 5, 16}, {OpAllreduce, 3, 4}, {OpPage, 3, 2}, {OpCmd, 2, 1},
	} {
		t.Run(tc.op, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Op, cfg.Count, cfg.Runs, cfg.Period, cfg.Lead, cfg.Repeat = tc.op, tc.count, 5, 10*time.Millisecond, 20*time.Millisecond, 1
			cfg.Command = []string{"true"}
			if tc.op == OpPage {
				cfg.Keyring = testKeyring(t) // the page server answers authenticated peers only
			}
			stamps := runLoopback(t, cfg, tc.n, false, make([]int64, tc.n), 100)
			res, err := Analyze(stamps, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.Executions["scheduled"] != 5 || res.Executions["barrier"] != 5 || res.Nodes != tc.n {
				t.Fatalf("executions %v over %d nodes", res.Executions, res.Nodes)
			}
		})
	}
}

// TestLoopbackLatency sends the latency test's messages over loopback with
// kernel stamps, size after size and interleaved; node 1's global time is
// 2 us ahead, so the estimate is 2 us long one way and 2 us short the
// other, and the bounds hold.
func TestLoopbackLatency(t *testing.T) {
	for _, interleave := range []bool{false, true} {
		t.Run(fmt.Sprintf("interleave=%v", interleave), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Op, cfg.Count, cfg.Period, cfg.Lead, cfg.Sizes = OpLatency, 5, time.Millisecond, 20*time.Millisecond, []int{64, 40000, 65536}
			cfg.Interleave = interleave
			stamps := runLoopback(t, cfg, 2, true, []int64{0, 2000}, 3000)
			res, err := Analyze(stamps, identity)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Latency) != 6 || res.LostMsgs != 0 {
				t.Fatalf("%d points, %d lost; want 6 (3 sizes, 2 ways), 0 lost", len(res.Latency), res.LostMsgs)
			}
			for _, p := range res.Latency {
				want := 2000.0
				if p.From == 1 {
					want = -2000
				}
				if p.N != 5 || math.Abs(p.Err.MeanNs-want) > 1 || p.Err.Coverage != 1 {
					t.Errorf("%d->%d %d B: n %d, mean error %.0f ns (want %.0f), coverage %.2f", p.From, p.To, p.Size, p.N, p.Err.MeanNs, want, p.Err.Coverage)
				}
				if p.TrueP50 <= 0 {
					t.Errorf("%d->%d %d B: true latency %.0f ns", p.From, p.To, p.Size, p.TrueP50)
				}
			}
		})
	}
}

// TestLatencyMsgOrder: size after size, or every size in turn
// (Interleave); always alternating directions, Count messages per size
// and direction.
func TestLatencyMsgOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		interleave bool
		want       [][2]int // (from, size) of messages 0..
	}{
		{"size after size", false, [][2]int{{0, 64}, {1, 64}, {0, 64}, {1, 64}, {0, 1024}, {1, 1024}, {0, 1024}, {1, 1024}}},
		{"interleaved", true, [][2]int{{0, 64}, {1, 64}, {0, 1024}, {1, 1024}, {0, 64}, {1, 64}, {0, 1024}, {1, 1024}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &node{cfg: Config{Count: 2, Sizes: []int{64, 1024}, Interleave: tc.interleave}}
			for e, w := range tc.want {
				if from, size := n.latencyMsg(e); from != w[0] || size != w[1] {
					t.Errorf("message %d: from %d, %d B; want from %d, %d B", e, from, size, w[0], w[1])
				}
			}
		})
	}
}

func TestNextSlot(t *testing.T) {
	const p = int64(10 * time.Millisecond)
	for _, tc := range []struct {
		name   string
		now    int64
		k      int
		expect int64
	}{
		{"ahead of slot 3", 25 * p / 10, 3, 3 * p},
		{"just before slot 3, within a quarter", 3*p - p/8, 3, 4 * p},
		{"far behind: slot 3 when at 7.5", 75 * p / 10, 3, 8 * p},
		{"behind, next grid point too close", 79 * p / 10, 3, 9 * p},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &node{cfg: Config{Period: time.Duration(p)}, clk: Clocks{Raw: func() int64 { return tc.now }, Global: fakeGlobal(0, 0)}}
			if got := n.nextSlot(0, tc.k); got != tc.expect {
				t.Errorf("nextSlot(0, %d) at %d = %d, want %d", tc.k, tc.now, got, tc.expect)
			}
		})
	}
}

// TestWaitUntilBusyWaits: with SpinWindow 0 the wait for a scheduled start
// polls the page until the instant, as ReproMPI's processes do, and never
// sleeps: on a clock that advances 1 us per reading, a start 10 ms ahead
// takes exactly 10,000 readings (a sleep would take fewer, as the clock
// here does not move while the node sleeps). A cancelled context ends the
// wait within 1024 readings.
func TestWaitUntilBusyWaits(t *testing.T) {
	var now, reads int64
	clk := Clocks{Raw: func() int64 { reads++; now += 1000; return now }, Global: fakeGlobal(0, 0)}
	n := &node{cfg: Config{}, clk: clk}
	if err := n.waitUntil(context.Background(), 10_000_000); err != nil {
		t.Fatal(err)
	}
	if reads != 10_000 || now != 10_000_000 {
		t.Errorf("busy wait: %d readings, stopped at %d ns; want 10000 readings, at 10 ms", reads, now)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	reads = 0
	if err := n.waitUntil(ctx, 1<<62); err != context.Canceled || reads > 1024 {
		t.Errorf("cancelled wait: %v after %d readings", err, reads)
	}
}

// TestPatientGlobal: a node reads its page again for the same raw instant
// while the daemon is in the middle of an update (gtime.ErrBusy), up to
// its retries; other errors are returned at once.
func TestPatientGlobal(t *testing.T) {
	other := errors.New("closed")
	tests := []struct {
		name    string
		busy    int
		fail    error
		reads   int
		wantErr error
	}{
		{"clean", 0, nil, 1, nil},
		{"busy three times", 3, nil, 4, nil},
		{"busy up to the last retry", BusyRetries, nil, BusyRetries + 1, nil},
		{"busy beyond", BusyRetries + 5, nil, BusyRetries + 1, gtime.ErrBusy},
		{"other error", 0, other, 1, other},
	}
	for _, tc := range tests {
		reads := 0
		g := patientGlobal(func(raw int64) (gtime.Time, error) {
			reads++
			if raw != 1234 {
				t.Fatalf("%s: read raw %d, want 1234", tc.name, raw)
			}
			if reads <= tc.busy {
				return gtime.Time{}, fmt.Errorf("page: %w", gtime.ErrBusy)
			}
			if tc.fail != nil {
				return gtime.Time{}, tc.fail
			}
			return gtime.Time{Est: 99, Status: gtime.StatusSynced}, nil
		}, BusyRetries, slog.New(slog.DiscardHandler))
		got, err := g(1234)
		if reads != tc.reads || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("%s: %d reads, err %v; want %d, %v", tc.name, reads, err, tc.reads, tc.wantErr)
		}
		if err == nil && got.Est != 99 {
			t.Errorf("%s: got %+v", tc.name, got)
		}
	}
}

// TestValidateSchedFIFO: a SCHED_FIFO node must sleep until a spin window
// of at most 1 ms (polling all the way under SCHED_FIFO would starve its
// core), and its priority is 1..99.
func TestValidateSchedFIFO(t *testing.T) {
	for _, tc := range []struct {
		name string
		prio int
		spin time.Duration
		want string // "" valid
	}{
		{"none, busy wait", 0, 0, ""},
		{"sched-fifo, 20us window", 1, 20 * time.Microsecond, ""},
		{"sched-fifo, 1ms window", 99, time.Millisecond, ""},
		{"sched-fifo, busy wait", 1, 0, "must sleep until a spin window"},
		{"sched-fifo, 2ms window", 1, 2 * time.Millisecond, "must sleep until a spin window"},
		{"priority 100", 100, 20 * time.Microsecond, "want 1..99"},
		{"priority -1", -1, 0, "want 1..99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Peers = []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:3200"), netip.MustParseAddrPort("127.0.0.1:3201")}
			c.SchedFIFO, c.SpinWindow = tc.prio, tc.spin
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestLoopbackSchedFIFO runs an allreduce with SCHED_FIFO nodes (SCHED_FIFO
// 1 while waiting and running, a 50-us spin window): every execution is
// complete. It
// needs root or CAP_SYS_NICE (skipped otherwise).
func TestLoopbackSchedFIFO(t *testing.T) {
	probe := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedFIFO, Priority: 1, Flags: schedResetOnFork}
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := unix.SchedSetAttr(0, &probe, 0)
		other := unix.SchedAttr{Size: unix.SizeofSchedAttr}
		_ = unix.SchedSetAttr(0, &other, 0)
		done <- err
	}()
	if err := <-done; err != nil {
		t.Skipf("SCHED_FIFO not permitted here: %v", err)
	}
	cfg := DefaultConfig()
	cfg.Op, cfg.Runs, cfg.Period, cfg.Lead, cfg.Repeat = OpAllreduce, 5, 10*time.Millisecond, 20*time.Millisecond, 1
	cfg.SchedFIFO, cfg.SpinWindow = 1, 50*time.Microsecond
	stamps := runLoopback(t, cfg, 3, false, make([]int64, 3), 100)
	res, err := Analyze(stamps, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Executions["scheduled"] != 5 || res.Executions["barrier"] != 5 {
		t.Fatalf("executions %v", res.Executions)
	}
}
