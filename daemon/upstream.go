package daemon

// The reference's CLOCK_REALTIME is not UTC by itself: NTP (chronyd, ntpd)
// disciplines it and tells the kernel how well, through adjtimex: whether
// it is synchronised (STA_UNSYNC, the TIME_ERROR state), a guaranteed
// bound on its error (maxerror, which the kernel grows by 500 us a second
// until the NTP daemon sets it again), an estimate (esterror) and a leap
// second announced for the end of the day (STA_INS, STA_DEL). With
// real_time.upstream kernel (the default) the reference reads that state
// with every sample of CLOCK_REALTIME and folds it into served UTC
// (engine/realtime: Upstream): the bounds widen by maxerror, nothing is
// served as synced while the kernel says unsynchronised, and the NTP
// server passes on the leap announcement (ntp.go).

import (
	"math"
	"sync"
	"time"

	"github.com/gclock/gclock/engine/realtime"
	"github.com/gclock/gclock/internal/chronycmd"
)

// Upstream sources (real_time.upstream).
const (
	// UpstreamKernel reads the kernel's adjtimex state of CLOCK_REALTIME.
	UpstreamKernel = "kernel"
	// UpstreamNone reads nothing: CLOCK_REALTIME is served as UTC with no
	// error of its own, as the operator vouches (a lab whose truth is
	// CLOCK_REALTIME itself, a clock disciplined by a means the kernel
	// does not know of).
	UpstreamNone = "none"
)

// Kernel clock states and status bits (linux/timex.h; the values are those
// of every Linux architecture).
const (
	kernelTimeError = 5    // TIME_ERROR: the clock is not synchronised
	staIns          = 0x10 // STA_INS: insert a leap second at the end of the UTC day
	staDel          = 0x20 // STA_DEL: delete one
	staUnsync       = 0x40 // STA_UNSYNC: the clock is not synchronised
	staPLL          = 0x01 // STA_PLL: the kernel's PLL slews the phase offset
	// userHZ is the kernel's USER_HZ, the unit of adjtimex's tick (us per
	// 1/USER_HZ s): 100 on every Linux architecture.
	userHZ = 100
)

// kernelTimex is what adjtimex (modes 0: read only) returns that the
// upstream needs: the clock state (its return value), the status bits,
// maxerror and esterror in microseconds, and what sets CLOCK_REALTIME's
// rate: the tick (us per 1/USER_HZ s), the frequency (ppm with a 16-bit
// fraction) and the PLL's remaining phase offset.
type kernelTimex struct {
	State              int
	Status             int32
	MaxErrUs, EstErrUs int64
	Tick, Freq, Offset int64
}

// rate is CLOCK_REALTIME's rate against CLOCK_MONOTONIC_RAW, minus 1, as
// the kernel runs it (ntp_tick_length: tick x 1000 x USER_HZ ns a second
// plus the frequency); false while the PLL slews a phase offset (STA_PLL,
// ntpd's mode: the rate then changes every second) or for a tick the
// kernel refuses. chronyd slews by frequency and tick, not with the PLL.
func (k kernelTimex) rate() (float64, bool) {
	if k.Status&staPLL != 0 && k.Offset != 0 {
		return 0, false
	}
	nominal := int64(1e6 / userHZ)
	if k.Tick < nominal*9/10 || k.Tick > nominal*11/10 {
		return 0, false
	}
	r := float64(k.Tick-nominal)/float64(nominal) + float64(k.Freq)/65536e6
	return r, math.Abs(r) <= 0.1+500e-6
}

// kernelMaxErrUs caps maxerror and esterror: the kernel keeps them below
// NTP_PHASE_LIMIT (16 s), and anything above 1000 s is no bound.
const kernelMaxErrUs = 1_000_000_000

// upstreamFromKernel turns the kernel's state into an Upstream: synced
// unless STA_UNSYNC or TIME_ERROR, maxerror and esterror in ns (negative
// or absurd values are read as unsynchronised), the leap announcement from
// STA_INS or STA_DEL (both set, which no NTP daemon does, announces none).
func upstreamFromKernel(k kernelTimex) realtime.Upstream {
	u := realtime.Upstream{Known: true,
		Synced: k.State != kernelTimeError && k.Status&staUnsync == 0,
		MaxErr: min(max(k.MaxErrUs, 0), kernelMaxErrUs) * 1000,
		EstErr: min(max(k.EstErrUs, 0), kernelMaxErrUs) * 1000}
	if k.MaxErrUs < 0 || k.MaxErrUs > kernelMaxErrUs || k.EstErrUs < 0 || k.EstErrUs > kernelMaxErrUs {
		u.Synced = false
	}
	u.Rate, u.RateKnown = k.rate()
	if !u.RateKnown {
		u.Rate = 0
	}
	switch k.Status & (staIns | staDel) {
	case staIns:
		u.Leap = realtime.LeapInsert
	case staDel:
		u.Leap = realtime.LeapDelete
	}
	return u
}

// readKernelUpstream reads CLOCK_REALTIME's state from the kernel.
func readKernelUpstream() (realtime.Upstream, error) {
	k, err := adjtimex()
	if err != nil {
		return realtime.Upstream{}, err
	}
	return upstreamFromKernel(k), nil
}

// chronyTimeout bounds a tracking query (chronyd answers in microseconds).
const chronyTimeout = 100 * time.Millisecond

// chronyEvery is how often the reference asks chronyd for its tracking:
// the kernel is read with every sample (refSampleEvery), chronyd's
// stratum, reference and root delay and dispersion (information: the
// kernel's maxerror is the bound) once a second.
const chronyEvery = time.Second

// upstreamReader reads the kernel's state and, when chronySock is set and
// chronyd answers there, completes it with chronyd's tracking (withChrony).
// chronyd not answering is not an error: the kernel's state stands alone
// (chronyErr reports why, for a log line once per change). The client
// socket goes in clientDir (chronyClientDir).
// chronyd is asked at most every chronyEvery; its last answer is reused
// in between.
func upstreamReader(kernel func() (realtime.Upstream, error), chronySock, clientDir string, chronyErr func(error)) func() (realtime.Upstream, error) {
	var (
		mu     sync.Mutex
		asked  time.Time
		last   chronycmd.Tracking
		lastOK bool
	)
	return func() (realtime.Upstream, error) {
		u, err := kernel()
		if err != nil || chronySock == "" {
			return u, err
		}
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); asked.IsZero() || now.Sub(asked) >= chronyEvery || now.Before(asked) {
			asked = now
			t, cerr := queryChronyTracking(chronySock, clientDir, chronyTimeout)
			chronyErr(cerr)
			last, lastOK = t, cerr == nil
		}
		if !lastOK {
			return u, nil
		}
		return withChrony(u, last), nil
	}
}
