package daemon

// The ClockBound output (clockbound: {shm_path: ...}): AWS ClockBound's
// shared-memory segment (daemon/internal/clockbound), written from the
// daemon's own page, so that programs using ClockBound's client libraries
// get gclock's bound on CLOCK_REALTIME.
//
// ClockBound's bound is on CLOCK_REALTIME's error against true time, and
// gclock does not steer CLOCK_REALTIME (chronyd does, or anyone with
// CAP_SYS_TIME). So the bound is measured, not assumed: CLOCK_REALTIME is
// read just before and just after the served UTC interval [E, L] is read
// from the page (R1, R2); at the instant of the page read CLOCK_REALTIME
// was in [R1, R2] and true time in [E, L], so
//
//	|CLOCK_REALTIME - true| <= max(R2 - E, L - R1)
//
// whoever steers CLOCK_REALTIME, and however far it is from gclock's UTC.
// Between updates a client widens it at the max drift: chronyd may slew
// CLOCK_REALTIME at up to real_time.max_slew_ppm (its maxslewrate), and
// an oscillator runs up to clockBoundOscPPM off, so max drift is their
// sum, in ppb.

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/gclock/gclock/daemon/internal/clockbound"
	"github.com/gclock/gclock/gtime"
	"golang.org/x/sys/unix"
)

// ClockBoundConfig is the ClockBound-compatible segment (off by default).
type ClockBoundConfig struct {
	// ShmPath is the segment's file, e.g. /run/gclock/clockbound (a
	// ClockBound client opens /var/run/clockbound/shm0 by default: point
	// it here, or let the daemon write there with
	// deploy/systemd/clockbound.conf); empty: no segment.
	ShmPath string `yaml:"shm_path"`
	// Every is how often the bound is measured and written.
	Every Duration `yaml:"every"`
	// VoidAfter is how long after its as-of time a written bound may be
	// used: a client refuses it after that (the daemon stopped or hangs).
	VoidAfter Duration `yaml:"void_after"`
}

// clockBoundOscPPM is the frequency error of CLOCK_REALTIME that no slew
// explains: a commodity crystal's tolerance (+-100 ppm) the servo has not
// corrected yet, added to the slew rate in the max drift.
const clockBoundOscPPM = 100

func (c *Config) validateClockBound(e *errs) {
	b := c.ClockBound
	if b.ShmPath == "" {
		return
	}
	if !filepath.IsAbs(b.ShmPath) {
		e.add("clockbound.shm_path", "%q: want an absolute path (e.g. /run/gclock/clockbound)", b.ShmPath)
	}
	if c.RealTime.Mode == RealTimeNone {
		e.add("clockbound.shm_path", "%q: ClockBound bounds CLOCK_REALTIME against UTC, but real_time.mode is none: set real_time.mode reference-realtime", b.ShmPath)
	}
	if c.GlobalTime.ShmPath == "" {
		e.add("clockbound.shm_path", "%q: the segment is written from the page, but global_time.shm_path is empty", b.ShmPath)
	}
	if b.ShmPath == c.GlobalTime.ShmPath {
		e.add("clockbound.shm_path", "%q: the same file as global_time.shm_path", b.ShmPath)
	}
	if b.Every < Duration(10*time.Millisecond) || b.Every > Duration(time.Minute) {
		e.add("clockbound.every", "%v outside [10ms, 1m]", b.Every)
	}
	if b.VoidAfter < 2*b.Every || b.VoidAfter > Duration(time.Hour) {
		e.add("clockbound.void_after", "%v outside [2 x every (%v), 1h]: a client must not see the bound void between two updates", b.VoidAfter, 2*b.Every)
	}
}

// clockBoundSample is one measured bound: the served UTC interval
// [earliest, latest] read between CLOCK_REALTIME readings r1 and r2.
func clockBoundSample(r1, earliest, latest, r2 int64) int64 {
	if earliest == math.MinInt64 || latest == math.MaxInt64 {
		return math.MaxInt64
	}
	return max(r2-earliest, latest-r1, 0)
}

// clockBoundStatus maps the page's status to ClockBound's.
func clockBoundStatus(s gtime.Status) clockbound.Status {
	switch s {
	case gtime.StatusSynced:
		return clockbound.StatusSynchronized
	case gtime.StatusStale, gtime.StatusNoDaemon:
		return clockbound.StatusFreeRunning
	}
	return clockbound.StatusUnknown
}

func clockNs(id int32) int64 {
	var ts unix.Timespec
	unix.ClockGettime(id, &ts)
	return ts.Nano()
}

// measureClockBound reads CLOCK_MONOTONIC_COARSE (first: a coarse clock
// lags, so as-of is never later than the measurement), then the page
// between two CLOCK_REALTIME readings.
func measureClockBound(rd *gtime.Reader, every, voidAfter time.Duration, maxSlewPPM float64) (clockbound.Bound, error) {
	asOf := clockNs(unix.CLOCK_MONOTONIC_COARSE)
	r1 := clockNs(unix.CLOCK_REALTIME)
	t, err := rd.Now()
	r2 := clockNs(unix.CLOCK_REALTIME)
	if err != nil {
		return clockbound.Bound{}, err
	}
	b := clockbound.Bound{AsOf: asOf, VoidAfter: asOf + int64(voidAfter),
		BoundNs: clockBoundSample(r1, t.Earliest, t.Latest, r2), Status: clockBoundStatus(t.Status),
		MaxDriftPPB: uint32(math.Ceil((maxSlewPPM + clockBoundOscPPM) * 1000))}
	if b.BoundNs == math.MaxInt64 {
		b.Status = clockbound.StatusUnknown
	}
	return b, nil
}

// startClockBound writes the segment every clockbound.every until ctx is
// done, then once more with status unknown; the returned function waits.
// The segment is created at once (an error stops the start).
func (n *node) startClockBound(ctx context.Context) (wait func(), err error) {
	c := n.cfg.ClockBound
	if c.ShmPath == "" {
		return func() {}, nil
	}
	w, err := clockbound.Create(c.ShmPath)
	if err != nil {
		return nil, fmt.Errorf("clockbound.shm_path: %w", err)
	}
	rd, err := gtime.Open(n.cfg.GlobalTime.ShmPath)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("clockbound: reading the page: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Close()
		defer rd.Close()
		n.log.Info("clockbound segment started", "shm_path", c.ShmPath, "every", c.Every, "void_after", c.VoidAfter)
		t := time.NewTicker(c.Every.D())
		defer t.Stop()
		failing := false
		var last clockbound.Bound
		for {
			b, err := measureClockBound(rd, c.Every.D(), c.VoidAfter.D(), n.cfg.RealTime.MaxSlewPPM)
			if err != nil && !failing {
				n.log.Warn("clockbound: cannot read the page: the segment is not updated (its void-after ends it)", "err", err)
			}
			failing = err != nil
			if err == nil {
				w.Write(b)
				last = b
			}
			select {
			case <-ctx.Done():
				last.Status = clockbound.StatusUnknown // the daemon stops: no promise
				w.Write(last)
				n.log.Info("clockbound segment stopping", "last_bound", time.Duration(last.BoundNs))
				return
			case <-t.C:
			}
		}
	}()
	return func() { <-done }, nil
}
