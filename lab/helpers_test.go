package lab

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gclock/gclock/lab/netlab"
)

// needLab skips the test, saying why, when this process cannot build a lab.
func needLab(t *testing.T) {
	t.Helper()
	if why := netlab.SkipReason(); why != "" {
		t.Skip(why)
	}
	held.Do(func() { releaseHeld = holdLab() })
}

// held takes the lab lock at the first test that needs a lab; TestMain
// calls releaseHeld after the tests.
var (
	held        sync.Once
	releaseHeld = func() {}
)

// parallelLab marks t parallel and returns the default lab config for it
// with hosts hosts and Concurrent set: its own namespaces, beside the other
// parallel tests' labs under this process's hold on the lab lock. For the
// tests that check what holds under any load (the truth inside the bounds,
// synced hosts, failover, restarts), not accuracy: those run alone (not
// parallel, so before every parallel test starts).
func parallelLab(t *testing.T, hosts int) netlab.Config {
	t.Helper()
	needLab(t)
	t.Parallel()
	cfg := netlab.DefaultConfig()
	cfg.Hosts, cfg.RunDir, cfg.SchedFIFO, cfg.Concurrent = hosts, t.TempDir(), true, true
	return cfg
}

// gclockLab brings up parallelLab(t, hosts) (down at t's end) and returns
// it with the default gclock run whose daemons are this test binary
// (TestMain runs the daemon when daemonEnv is set).
func gclockLab(t *testing.T, hosts int) (*Lab, GclockConfig) {
	t.Helper()
	l, err := Up(context.Background(), parallelLab(t, hosts))
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Cleanup(func() { l.Down() })
	gc := DefaultGclockConfig()
	gc.Command = []string{os.Args[0]}
	gc.Env = []string{daemonEnv + "=1"}
	return l, gc
}

// labParallel is how many parallel lab tests run at once unless -parallel
// says otherwise (its default, GOMAXPROCS, is 2 here): a lab test mostly
// waits on timers, its daemons are light.
const labParallel = 4

// setParallel sets -test.parallel to labParallel unless the command line
// set it.
func setParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		flag.Set("test.parallel", strconv.Itoa(labParallel))
	}
}

// holdLab takes the lab lock shared for the rest of the test binary's run
// (netlab.HoldLock): its parallel tests' labs never queue one by one
// behind a measurement another process starts between them, and run beside
// other packages' concurrent labs; its accuracy tests raise it to
// exclusive for their time. It says how long it waited for other
// processes' labs (the time to leave out of the suite's).
func holdLab() (release func()) {
	release, waited, err := netlab.HoldLock(context.Background(), slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab tests: %v\n", err)
		return func() {}
	}
	if waited > time.Second {
		fmt.Fprintf(os.Stderr, "lab tests: waited %v for other processes' labs\n", waited.Round(time.Second))
	}
	return release
}

// gclockOutcome is the outcome of runGclockAsync.
type gclockOutcome struct {
	res GclockResult
	err error
}

// runGclockAsync starts l.RunGclock(ctx, gc) and returns where its outcome
// arrives, for a test that measures beside the run.
func runGclockAsync(ctx context.Context, l *Lab, gc GclockConfig) <-chan gclockOutcome {
	done := make(chan gclockOutcome, 1)
	go func() {
		r, err := l.RunGclock(ctx, gc)
		done <- gclockOutcome{r, err}
	}()
	return done
}
