package realtime

import (
	"fmt"
	"math"
)

// Leap indicators of an Upstream (NTP's values, RFC 5905 figure 9).
const (
	LeapNone   uint8 = 0 // no leap second announced
	LeapInsert uint8 = 1 // the last minute of the day has 61 s
	LeapDelete uint8 = 2 // the last minute of the day has 59 s
)

// UpstreamGrowth is how fast the bound on CLOCK_REALTIME's own error grows
// between two readings of it, per ns: the kernel adds MAXFREQ (500 us) to
// maxerror every second until the NTP daemon sets it again
// (kernel/time/ntp.c, second_overflow), so a maxerror read at g still
// bounds the error at g + d once d*500e-6 is added. Used both ways in time:
// the error moves at most this fast when the clock's frequency is within
// the kernel's 500 ppm.
const UpstreamGrowth = 500e-6

// maxUpstreamErr caps the upstream errors a Scale takes (about 18 min): the
// kernel caps maxerror at NTP_PHASE_LIMIT (16 s); beyond this a value is no
// bound but a broken reading.
const maxUpstreamErr = int64(1) << 40

// maxKernelRate is the largest |Rate| the kernel can run: tick within
// +-10% of its nominal value, frequency within +-500 ppm.
const maxKernelRate = 0.1 + 500e-6

// Upstream is the state of the reference's CLOCK_REALTIME as its own
// discipline reports it: the kernel's adjtimex (STA_UNSYNC, TIME_ERROR,
// maxerror, esterror, STA_INS/STA_DEL) and, when chronyd runs, its
// tracking (stratum, reference id, root delay and dispersion). The
// reference's driver reads it with every sample (Scale.SetUpstream); the
// nodes receive it with the model. It only concerns ModeReference: the
// mean-drift scale promises its own chain, not UTC.
type Upstream struct {
	// Known: the state was read. False (real_time.upstream none, or a
	// reference that sent none): CLOCK_REALTIME is served as UTC with no
	// error of its own, as the operator vouches.
	Known bool
	// Synced: the kernel says CLOCK_REALTIME is synchronised to a source
	// (neither STA_UNSYNC nor TIME_ERROR). False: served time is not UTC
	// and is not served as synced.
	Synced bool
	// MaxErr bounds |CLOCK_REALTIME - UTC| when read (the kernel's
	// maxerror, ns), the guaranteed part; EstErr is the kernel's esterror
	// (ns), a statistical estimate, for information.
	MaxErr, EstErr int64
	// Leap is the leap second announced for the end of the day (LeapNone,
	// LeapInsert, LeapDelete), passed on to NTP clients.
	Leap uint8
	// Stratum of CLOCK_REALTIME's source: the stratum of the NTP daemon
	// disciplining it (chronyd's tracking); 0: not known.
	Stratum uint8
	// RefID is the NTP reference id of that daemon's source (0: not known).
	RefID uint32
	// RootDelay and RootDisp are the daemon's root delay and dispersion
	// (ns; 0: not known). MaxErr already includes them when chronyd sets it.
	RootDelay, RootDisp int64
	// Rate is CLOCK_REALTIME's rate against the reference's local clock,
	// minus 1, as the kernel runs it now (its tick and frequency, adjtimex
	// modes 0), when RateKnown. The reference's model then follows the
	// kernel's rate instead of measuring a slope between samples. Read on
	// the reference only: it is not sent to the nodes (the model's slope
	// carries it).
	Rate      float64
	RateKnown bool
}

// Check names the first field no reader produces.
func (u *Upstream) Check() error {
	bad := func(field string, v any) error {
		return fmt.Errorf("upstream field %s = %v: out of range: %w", field, v, ErrMessage)
	}
	switch {
	case !u.Known && *u != (Upstream{}):
		return bad("known", false)
	case u.MaxErr < 0 || u.MaxErr > maxUpstreamErr:
		return bad("max_err", u.MaxErr)
	case u.EstErr < 0 || u.EstErr > maxUpstreamErr:
		return bad("est_err", u.EstErr)
	case u.Leap > LeapDelete:
		return bad("leap", u.Leap)
	case u.Stratum > 15:
		return bad("stratum", u.Stratum)
	case u.RootDelay < 0 || u.RootDelay > maxUpstreamErr:
		return bad("root_delay", u.RootDelay)
	case u.RootDisp < 0 || u.RootDisp > maxUpstreamErr:
		return bad("root_disp", u.RootDisp)
	case math.IsNaN(u.Rate) || math.Abs(u.Rate) > maxKernelRate || (!u.RateKnown && u.Rate != 0):
		return bad("rate", u.Rate)
	}
	return nil
}

// Problem says why served time must not be called synced UTC because of
// the upstream, or "" when it may.
func (u *Upstream) Problem() string {
	if u.Known && !u.Synced {
		return "upstream-unsynchronised"
	}
	return ""
}

// errAt is the bound on |CLOCK_REALTIME - UTC| at global time g for an
// upstream read at at: MaxErr plus UpstreamGrowth per ns of distance.
func (u *Upstream) errAt(g, at int64) (int64, bool) {
	if !u.Known {
		return 0, true
	}
	d, ok := span(g, at)
	if !ok {
		return 0, false
	}
	return u.MaxErr + int64(math.Ceil(UpstreamGrowth*math.Abs(float64(d)))), true
}

// SetUpstream hands the reference the state of its CLOCK_REALTIME read
// with the sample that follows (the driver calls it right before Sample);
// the model made from that sample carries it to the nodes. An upstream
// Check refuses is kept as unsynchronised (with the error returned): a
// broken reading must not make the served time look better.
func (s *Scale) SetUpstream(u Upstream) error {
	if err := u.Check(); err != nil {
		s.up = Upstream{Known: true}
		return err
	}
	s.up = u
	return nil
}

// Upstream is the upstream state of the model this Scale serves (the
// reference's, or the one a node received with its model), MaxErr as read
// at the model's time; false: no model (or not ModeReference).
func (s *Scale) Upstream() (Upstream, bool) {
	if s.cfg.Mode != ModeReference || !s.haveOff {
		return Upstream{}, false
	}
	return s.off.Up, true
}
