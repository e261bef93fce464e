package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/trace"
	"github.com/gclock/gclock/trace/correct"
	"github.com/gclock/gclock/trace/format"
	"github.com/gclock/gclock/trace/probe"
)

// hostPage is node 3's page as it would read on a real host whose
// CLOCK_MONOTONIC_RAW is the emulated clock. The daemon publishes its
// mapping on this machine's real raw clock (so that unmodified readers get
// global time); the process's stamps are on the emulated clock, so the
// mapping is re-expressed on it exactly (the emulated clock is affine: no
// wander, jitter or granularity here). Only the axis changes: the page's
// estimate, and so its error, at any instant is the daemon's own.
type hostPage struct {
	r   *gtime.Reader
	emu *clock.Emulated
}

func (h hostPage) Mapping() (int64, estimate.Mapping, error) {
	from, m, err := h.r.Mapping()
	if err != nil || !m.Valid {
		return from, m, err
	}
	rate := 1 + h.emu.Params().DriftPPM*1e-6
	m.X0 = h.emu.Ideal(m.X0)
	m.Skew = (1+m.Skew)/rate - 1
	m.SkewErr /= rate
	return h.emu.Ideal(from), m, nil
}

// TestTraceLiveDaemon is issue 4's proof with a live daemon: a process on
// node 3's host (emulated clock, +3 ms, +40 ppm) records events, polls its
// daemon's page for the local->global mapping, and makes sync sessions over
// UDP with a reference process on node 1 (whose clock is global time). The
// same file is then corrected with the daemon's mappings and with the
// sessions' linear fit, and every corrected stamp is compared with the
// truth (the emulated clock's inverse: only this test knows it).
//
// Still on loopback in real time: trace/probe.Dial takes an address, not a
// connection, so the sessions cannot run on internal/memnet yet.
func TestTraceLiveDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("runs daemons for a few seconds")
	}
	cfgs := testCluster(t, 3)
	emuCfg := EmulatedClockConfig{Offset: Duration(3 * time.Millisecond), DriftPPM: 40, Seed: 1, OriginRaw: gtime.RawNow()}
	cfgs[2].Clock = ClockConfig{Source: ClockEmulated, Emulated: emuCfg}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	errs := make(chan error, len(cfgs))
	for _, c := range cfgs {
		go func() { errs <- Run(ctx, c, logger.With("node", c.Node.ID)) }()
	}
	deadline := time.Now().Add(20 * time.Second)
	page := openPage(t, cfgs[2].GlobalTime.ShmPath, 3, deadline)
	waitPageSynced(t, page, 3, deadline)

	// The process's clock is node 3's host clock, rebuilt from the same
	// parameters (the daemon's origin is fixed by origin_raw).
	emu, err := clock.NewEmulated(clock.EmuParams{Origin: emuCfg.OriginRaw, Offset: int64(emuCfg.Offset), DriftPPM: emuCfg.DriftPPM, Seed: emuCfg.Seed})
	if err != nil {
		t.Fatal(err)
	}
	local := clock.Func(func() int64 { return emu.Read(gtime.RawNow()) })
	// The reference process (node 1's host: the raw clock is global time).
	srv, err := probe.Listen("127.0.0.1:0", clock.Raw{}, nil)
	if err != nil {
		t.Skipf("no loopback UDP: %v", err)
	}
	defer srv.Close()
	cl, err := probe.Dial(srv.Addr().String(), local, probe.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	var f bytes.Buffer
	rec, err := trace.New(&f, trace.Config{Proc: 3, Host: 3, Name: "rank on node 3", Clock: local, ClockName: "emulated", RefProc: 0, Prober: cl, SyncMaxMessages: 100}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := rec.Track(0)
	tick := rec.Name("tick")
	var stamps []int64
	end := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(end) {
		if _, err := rec.PollMapping(hostPage{page, emu}); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			tr.Instant(tick)
			stamps = append(stamps, local.Now())
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := format.Summarize(bytes.NewReader(f.Bytes()), "node3", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Mappings) == 0 || len(sum.Sessions) != 2 {
		t.Fatalf("%d mappings, %d sessions recorded", len(sum.Mappings), len(sum.Sessions))
	}
	in := []correct.Input{correct.InputOf(sum)}
	for _, m := range []correct.Method{correct.Daemon, correct.Linear} {
		ms, _, err := correct.Build(in, m)
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		errs := make([]int64, 0, len(stamps))
		for _, x := range stamps {
			e := ms[0].Global(x) - emu.TruthAt(x)
			errs = append(errs, max(e, -e))
		}
		slices.Sort(errs)
		p50, p99, mx := errs[len(errs)/2], errs[len(errs)*99/100], errs[len(errs)-1]
		t.Logf("%-6s: %d stamps, |corrected - truth| p50 %d ns, p99 %d ns, max %d ns (%d mappings, %d sessions)",
			m, len(errs), p50, p99, mx, len(sum.Mappings), len(sum.Sessions))
		// Uncorrected the error is 3 ms; the daemon on loopback is within a
		// few us, the sessions' fit within tens of us.
		if mx > 50_000 {
			t.Errorf("%s: corrected stamps off the truth by up to %d ns", m, mx)
		}
	}
	cancel()
	for range cfgs {
		if err := <-errs; err != nil {
			t.Errorf("daemon: %v", err)
		}
	}
}
