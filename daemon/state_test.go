package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/internal/memnet"
)

const testBoot = "0f4e5a3c-1b2d-4c6e-8f90-a1b2c3d4e5f6"

func goodState() savedState {
	return savedState{Version: stateVersion, Node: 2, BootID: testBoot, Clock: "raw", Saved: 5e12, Reference: 1,
		MaxRound: 40, MaxSeq: 3, Prior: &savedPrior{X0: 4e12, Y0: 4.1e12, Skew: 2e-5, W0: 3000, SkewErr: 1e-8, Wander: 1e-21}}
}

func TestParseStateRoundTrip(t *testing.T) {
	s := goodState()
	b, err := s.marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseState(b)
	if err != nil {
		t.Fatalf("parseState(%s): %v", b, err)
	}
	if got.Saved != s.Saved || *got.Prior != *s.Prior || got.MaxRound != s.MaxRound || got.BootID != s.BootID {
		t.Fatalf("round trip: %+v, want %+v", got, s)
	}
	s.Prior = nil
	b, _ = s.marshal()
	if got, err := parseState(b); err != nil || got.Prior != nil || got.Scale != nil {
		t.Fatalf("without a prior: %+v, %v", got, err)
	}
	s.Scale = &savedScale{Term: 4, X0: 5_000_000_000, Y0: -3, Skew: -1.5e-5}
	b, _ = s.marshal()
	if got, err := parseState(b); err != nil || got.Scale == nil || *got.Scale != *s.Scale {
		t.Fatalf("with a scale: %+v, %v", got, err)
	}
}

func TestParseStateErrors(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		edit        func(*savedState)
	}{
		{"version", "version", func(s *savedState) { s.Version = 2 }},
		{"node", "node", func(s *savedState) { s.Node = 0 }},
		{"boot", "boot_id", func(s *savedState) { s.BootID = "not-a-boot-id" }},
		{"clock", "clock", func(s *savedState) { s.Clock = "" }},
		{"saved", "saved_local_ns", func(s *savedState) { s.Saved = -1 }},
		{"reference", "reference", func(s *savedState) { s.Reference = 0 }},
		{"prior after saved", "prior.x0", func(s *savedState) { s.Prior.X0 = s.Saved + 1 }},
		{"prior skew", "prior: mapping.skew", func(s *savedState) { s.Prior.Skew = 0.5 }},
		{"prior w0", "prior: mapping.w0", func(s *savedState) { s.Prior.W0 = -5 }},
		{"prior wander", "prior: mapping.wander", func(s *savedState) { s.Prior.Wander = 1 }},
		{"scale skew", "scale.skew", func(s *savedState) { s.Scale = &savedScale{Term: 1, Skew: 0.5} }},
		{"scale x0", "scale.x0", func(s *savedState) { s.Scale = &savedScale{Term: 1, X0: 1 << 62} }},
		{"scale y0", "scale.y0", func(s *savedState) { s.Scale = &savedScale{Term: 1, Y0: -(1 << 62)} }},
	} {
		s := goodState()
		tc.edit(&s)
		b, _ := s.marshal()
		_, err := parseState(b)
		if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error starting with %q", tc.name, err, tc.field)
		}
	}
	for _, tc := range []struct{ name, data, want string }{
		{"empty", "", "not a state file"},
		{"garbage", "\x00\x01", "not a state file"},
		{"unknown field", `{"version":1,"extra":2}`, "unknown field"},
		{"wrong type", `{"version":"1"}`, "not a state file"},
		{"trailing", `{"version":1,"node":2,"boot_id":"` + testBoot + `","clock":"raw","saved_local_ns":5,"reference":1} {}`, "trailing"},
		{"huge", strings.Repeat(" ", maxStateBytes+1), "bytes"},
		{"nan", `{"version":1,"node":2,"boot_id":"` + testBoot + `","clock":"raw","saved_local_ns":5,"reference":1,"prior":{"x0":1,"y0":1,"skew":1e400}}`, "not a state file"},
	} {
		_, err := parseState([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseState(f *testing.F) {
	b, _ := goodState().marshal()
	f.Add(b)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"node":2,"boot_id":"` + testBoot + `","clock":"raw","saved_local_ns":5,"reference":1,"scale":{"term":3,"x0":5,"y0":-3,"skew":1e-5}}`))
	f.Add([]byte(`{"version":1,"node":2,"boot_id":"` + testBoot + `","clock":"raw","saved_local_ns":5,"reference":1,"prior":{"x0":5,"y0":-3,"skew":0.001,"w0":0,"skew_err":1,"wander":1e-9}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseState(data)
		if err != nil {
			return
		}
		// What is accepted re-encodes to something accepted and equal.
		b, err := s.marshal()
		if err != nil {
			t.Fatalf("accepted state does not encode: %v", err)
		}
		s2, err := parseState(b)
		if err != nil {
			t.Fatalf("re-encoded state refused: %v\n%s", err, b)
		}
		if s2.Saved != s.Saved || (s.Prior == nil) != (s2.Prior == nil) || (s.Prior != nil && *s.Prior != *s2.Prior) ||
			(s.Scale == nil) != (s2.Scale == nil) || (s.Scale != nil && *s.Scale != *s2.Scale) {
			t.Fatalf("round trip changed the state: %+v -> %+v", s, s2)
		}
	})
}

func TestStateUsable(t *testing.T) {
	s := goodState()
	for _, tc := range []struct {
		name, want  string
		node        uint32
		boot, clock string
		now         int64
	}{
		{"usable", "", 2, testBoot, "raw", 6e12},
		{"other node", "node 2, this is node 3", 3, testBoot, "raw", 6e12},
		{"no boot id", "boot's id is unknown", 2, "", "raw", 6e12},
		{"other boot", "another boot", 2, "11111111-2222-3333-4444-555555555555", "raw", 6e12},
		{"emulated without origin", "origin_raw", 2, testBoot, "", 6e12},
		{"other clock", "another clock", 2, testBoot, "emulated {}", 6e12},
		{"future", "after now", 2, testBoot, "raw", 4e12},
		{"too old", "max_age", 2, testBoot, "raw", 5e12 + int64(2*time.Hour)},
	} {
		got := s.usable(tc.node, tc.boot, tc.clock, tc.now, time.Hour)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestWriteState(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	s := goodState()
	for i := range 3 {
		s.MaxRound = uint32(i)
		if err := writeState(path, s); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	got, ok, err := readState(path)
	if err != nil || !ok || got.MaxRound != 2 {
		t.Fatalf("readState: %+v %v %v", got, ok, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("%d files in the directory, want only the state file (no temporary left)", len(ents))
	}
	if _, ok, err := readState(filepath.Join(dir, "missing")); ok || err != nil {
		t.Errorf("missing file: ok %v err %v, want neither", ok, err)
	}
	if err := writeState(filepath.Join(dir, "no", "dir", "state.json"), s); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	os.WriteFile(path, []byte(`{"version":9}`), 0o600)
	if _, _, err := readState(path); err == nil || !strings.Contains(err.Error(), "version") || !strings.Contains(err.Error(), path) {
		t.Errorf("bad file: %v, want an error naming the file and the field", err)
	}
}

func TestStateConfigValidate(t *testing.T) {
	c := DefaultConfig()
	c.State = StateConfig{File: "rel/state.json", SaveEvery: Duration(time.Millisecond), MaxAge: Duration(-time.Second)}
	err := c.Validate()
	for _, f := range []string{"state.file", "state.save_every", "state.max_age"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("Validate: %v, want an error naming %s", err, f)
		}
	}
	c.State = StateConfig{File: "/var/lib/gclock/state.json"}
	if err := c.Validate(); err != nil {
		t.Errorf("good state section: %v", err)
	}
}

// TestRunRestart: node 2 of a pair (emulated clock, 3 ms ahead, +40 ppm)
// synchronises, is stopped for a second and restarted from its state
// file: its first page says stale with the truth (the raw clock) inside
// the bounds, it never says unsynced, and it is synced again.
//
// The daemons run on internal/memnet in a testing/synctest bubble (the raw
// clock is the bubble's fake time): every read's truth is one instant, not
// a window, and the waits cost no real time.
func TestRunRestart(t *testing.T) {
	// In fake time nothing but the rounds takes time: a few rounds at
	// initial_global_period 100 ms (306-311 ms in 10 runs).
	runRestart(t, nil, 600*time.Millisecond, time.Second)
}

// TestRunRestartAfterLongPeriod: a follower restarted (with its state
// file) after its rounds had reached the longest global period (16 s) is
// synced again within a second, not after several 16-s periods: it asks
// who the reference is at start, and the reference gives it its rounds at
// once at the initial period (issue 19: 22-32 s with the production
// config). Failover is on, as in production: the order has two nodes.
func TestRunRestartAfterLongPeriod(t *testing.T) {
	runRestart(t, []uint32{1, 2}, 3*time.Minute, time.Second)
}

// runRestart runs node 2 synced for learn (after order is set, if given),
// stops it, restarts it from its state file and wants it synced again
// within limit, bounded (stale) meanwhile.
func runRestart(t *testing.T, order []uint32, learn, limit time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New(1)
		mn.SetLink(memLink)
		sys := fakeSys(mn, nil)
		read := func(r *gtime.Reader) (gtime.Time, error) { return r.At(fakeRaw()) }
		cfgs := memCluster(t, 2)
		if order != nil {
			for i := range cfgs {
				cfgs[i].Reference.Order = order
			}
		}
		c2 := &cfgs[1]
		c2.Clock = ClockConfig{Source: ClockEmulated, Emulated: EmulatedClockConfig{Offset: Duration(3 * time.Millisecond), DriftPPM: 40, Seed: 1, OriginRaw: fakeRaw()}}
		c2.State = StateConfig{File: filepath.Join(t.TempDir(), "gclock", "state.json"), SaveEvery: Duration(200 * time.Millisecond)}
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 3)
		running := 0
		start := func(ctx context.Context, c Config, l *slog.Logger) {
			running++
			go func() { errs <- run(ctx, c, l, sys) }()
		}
		// Even after a failure, stop every daemon: a bubble must end
		// with no goroutine left.
		defer func() {
			cancel()
			for ; running > 0; running-- {
				<-errs
			}
		}()
		start(ctx, cfgs[0], logger.With("node", 1))
		ctx2, cancel2 := context.WithCancel(ctx)
		start(ctx2, *c2, logger.With("node", 2))
		deadline := time.Now().Add(20 * time.Second)
		r := openPage(t, c2.GlobalTime.ShmPath, 2, deadline)
		defer func() { r.Close() }()
		waitPageSyncedBy(t, read, r, 2, deadline)
		time.Sleep(learn) // a save while synced
		cancel2()
		running--
		if err := <-errs; err != nil {
			t.Fatalf("node 2: %v", err)
		}
		s, ok, err := readState(c2.State.File)
		if err != nil || !ok || s.Prior == nil {
			t.Fatalf("state after the stop: %+v ok %v err %v", s, ok, err)
		}
		time.Sleep(time.Second)
		restartAt := time.Now()
		start(ctx, *c2, logger.With("node", 2, "run", 2))
		sawStale, syncedAfter := false, time.Duration(0)
		for time.Since(restartAt) < 15*time.Second {
			now := fakeRaw()
			tm, err := r.At(now)
			if err != nil {
				t.Fatal(err)
			}
			if tm.Status == gtime.StatusNoDaemon { // the old page, replaced by the restarted daemon's
				if nr, err := gtime.Open(c2.GlobalTime.ShmPath); err == nil {
					r.Close()
					r = nr
				}
				time.Sleep(time.Millisecond)
				continue
			}
			if tm.Status == gtime.StatusUnsynced {
				t.Fatalf("%v after the restart: unsynced", time.Since(restartAt))
			}
			if tm.Latest < now || tm.Earliest > now {
				t.Fatalf("%v after the restart: truth outside [%+d, %+d] (%v)", time.Since(restartAt), tm.Earliest-now, tm.Latest-now, tm.Status)
			}
			if tm.Status == gtime.StatusStale {
				sawStale = true
			}
			if tm.Status == gtime.StatusSynced && sawStale {
				syncedAfter = time.Since(restartAt)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !sawStale || syncedAfter == 0 {
			t.Fatalf("after the restart: stale seen %v, synced again after %v", sawStale, syncedAfter)
		}
		t.Logf("synced again %v after the restart, bounded (stale) before", syncedAfter.Round(time.Millisecond))
		if syncedAfter > limit {
			t.Errorf("synced again %v after the restart, want within %v (a few rounds of 100 ms)", syncedAfter, limit)
		}
		cancel()
		for ; running > 0; running-- {
			if err := <-errs; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})
}

// sampleOf is one sample (name with its labels, as exposed) of a metrics
// exposition; -1 if absent.
func sampleOf(t *testing.T, body, sample string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", sample, v)
			}
			return f
		}
	}
	return -1
}

// TestRunRestartReference: the reference restarted from its state file
// numbers its rounds after those it sent before, so its child takes them
// at once (no stale_round drops), instead of ignoring them until the
// reference has been silent for three of its periods.
//
// The daemons run on internal/memnet in a testing/synctest bubble; node 2's
// metrics are called as a handler (fakeMetrics), with no socket.
func TestRunRestartReference(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mn := memnet.New(1)
		mn.SetLink(memLink)
		var metrics fakeMetrics
		sys := fakeSys(mn, &metrics)
		read := func(r *gtime.Reader) (gtime.Time, error) { return r.At(fakeRaw()) }
		cfgs := memCluster(t, 2)
		for i := range cfgs {
			// Rounds every second: the renumbering allowance is then over 3 s.
			cfgs[i].Sync.InitialGlobalPeriod = Duration(time.Second)
			cfgs[i].Sync.MinGlobalPeriod = Duration(time.Second)
			cfgs[i].Sync.MaxGlobalPeriod = Duration(time.Second)
		}
		c1 := &cfgs[0]
		c1.State = StateConfig{File: filepath.Join(t.TempDir(), "state.json"), SaveEvery: Duration(200 * time.Millisecond)}
		cfgs[1].Metrics.Listen = "10.0.0.2:9100"
		logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 3)
		running := 0
		start := func(ctx context.Context, c Config, l *slog.Logger) {
			running++
			go func() { errs <- run(ctx, c, l, sys) }()
		}
		defer func() { // a bubble must end with no goroutine left
			cancel()
			for ; running > 0; running-- {
				<-errs
			}
		}()
		ctx1, cancel1 := context.WithCancel(ctx)
		start(ctx1, *c1, logger.With("node", 1))
		start(ctx, cfgs[1], logger.With("node", 2))
		deadline := time.Now().Add(20 * time.Second)
		r := openPage(t, cfgs[1].GlobalTime.ShmPath, 2, deadline)
		defer r.Close()
		waitPageSyncedBy(t, read, r, 2, deadline)
		time.Sleep(2500 * time.Millisecond) // a few rounds, and saves
		cancel1()
		running--
		if err := <-errs; err != nil {
			t.Fatalf("node 1: %v", err)
		}
		s, ok, err := readState(c1.State.File)
		if err != nil || !ok || s.MaxRound == 0 || s.Prior != nil {
			t.Fatalf("reference's state: %+v ok %v err %v; want rounds and no prior", s, ok, err)
		}
		scrape := func(sample string) float64 {
			return sampleOf(t, metrics.get(t, cfgs[1].Metrics.Listen, "/metrics"), sample)
		}
		const roundsOf1 = `gclock_source_rounds_total{node="2",source="1"}`
		const staleDrops = `gclock_packets_dropped_total{node="2",reason="stale_round"}`
		rounds := scrape(roundsOf1)
		if rounds <= 0 {
			t.Fatalf("node 2 took %v rounds from node 1 before its restart", rounds)
		}
		start(ctx, *c1, logger.With("node", 1, "run", 2))
		restart := time.Now()
		for scrape(roundsOf1) <= rounds {
			// In fake time, within its first period (1 s) and the poll;
			// the stale rounds' allowance would be over 3 s.
			if time.Since(restart) > time.Second+20*time.Millisecond {
				t.Fatalf("no round accepted from the restarted reference in %v (stale_round drops %v)", time.Since(restart), scrape(staleDrops))
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("a round from the restarted reference accepted %v after its restart", time.Since(restart).Round(time.Millisecond))
		if d := scrape(staleDrops); d != 0 {
			t.Errorf("%v stale_round drops, want 0", d)
		}
		cancel()
		for ; running > 0; running-- {
			if err := <-errs; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	})
}

// TestStateFileRefused (issue 17, safe defaults): like the key file, a
// state file that another user owns, that group or others can write, or
// that is a symbolic link is refused with errStateFilePerm naming the file
// and what is wrong; the daemon's own 0600 (or 0644) file is read.
func TestStateFileRefused(t *testing.T) {
	b, err := goodState().marshal()
	if err != nil {
		t.Fatal(err)
	}
	other := 65534
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string // "" accepted
	}{
		{"own 0600", func(t *testing.T, p string) { writeMode(t, p, b, 0o600) }, ""},
		{"own 0644", func(t *testing.T, p string) { writeMode(t, p, b, 0o644) }, ""},
		{"0666", func(t *testing.T, p string) { writeMode(t, p, b, 0o666) }, "mode 0666, writable by group or others"},
		{"0620", func(t *testing.T, p string) { writeMode(t, p, b, 0o620) }, "mode 0620"},
		{"another user's", func(t *testing.T, p string) {
			if os.Geteuid() != 0 {
				t.Skip("giving a file to another user needs root")
			}
			writeMode(t, p, b, 0o600)
			if err := os.Chown(p, other, other); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 65534"},
		{"symlink to a good file", func(t *testing.T, p string) {
			writeMode(t, p+".real", b, 0o600)
			if err := os.Symlink(p+".real", p); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			tt.setup(t, path)
			s, ok, err := readState(path)
			if tt.want == "" {
				if err != nil || !ok || s.Node != goodState().Node {
					t.Fatalf("readState: %+v %v %v, want the state", s, ok, err)
				}
				return
			}
			if !errors.Is(err, errStateFilePerm) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("readState: %v; want errStateFilePerm naming %s and %q", err, path, tt.want)
			}
			if ok {
				t.Errorf("ok with an error")
			}
		})
	}
}

// TestRunPlantedStateFile: a daemon whose state file was planted (a valid
// state of mode 0666) starts fresh: it logs the refusal, does not restore
// the planted prior, and replaces the file with its own (0600) at the
// first save.
//
// On the kernel: file modes are the kernel's.
func TestRunPlantedStateFile(t *testing.T) {
	c := testCluster(t, 1)[0]
	c.State = StateConfig{File: filepath.Join(t.TempDir(), "state.json"), SaveEvery: Duration(100 * time.Millisecond)}
	boot, err := bootID()
	if err != nil {
		t.Skipf("no boot id: %v", err)
	}
	s := goodState()
	s.Node, s.BootID, s.Reference, s.Saved = 1, boot, 1, gtime.RawNow()-int64(time.Second)
	s.Prior.X0 = s.Saved - 1000
	b, err := s.marshal()
	if err != nil {
		t.Fatal(err)
	}
	writeMode(t, c.State.File, b, 0o666)
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, c, slog.New(slog.NewTextHandler(&logs, nil))) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fi, err := os.Stat(c.State.File)
		if err == nil && fi.Mode().Perm() == 0o600 {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("the planted state file was not replaced: %v %v\n%s", fi.Mode(), err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "state file refused") || !strings.Contains(out, "mode 0666") {
		t.Errorf("no warning naming the refused state file:\n%s", out)
	}
	if strings.Contains(out, "state restored") {
		t.Errorf("the planted state was restored:\n%s", out)
	}
}

func writeMode(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
