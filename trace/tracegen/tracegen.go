package tracegen

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gclock/gclock/clock"
	"github.com/gclock/gclock/estimate"
	"github.com/gclock/gclock/trace"
	"github.com/gclock/gclock/trace/format"
)

// Config describes a synthetic run. Durations are true time.
type Config struct {
	Procs        int           // processes, the reference (0) included; >= 2
	Duration     time.Duration // run length
	Sessions     int           // sync sessions per process: start, end and Sessions-2 on demand; >= 2
	SyncMessages int           // exchanges per session (SYNC-MAX-MESSAGES)
	RegionGap    time.Duration // mean time between regions on a process
	RegionLen    time.Duration // mean region length
	SendProb     float64       // probability that a region sends a message

	OffsetMax time.Duration // |initial offset| of each clock, uniform
	DriftPPM  float64       // |drift| of each clock, uniform
	WanderPPM float64       // random-walk frequency wander per 10 ms step, ppm
	JitterNs  int64         // clock read jitter

	LatencyMin  time.Duration // minimum one-way message latency
	LatencyMean time.Duration // mean extra latency (exponential)
	TailProb    float64       // probability of a long delay (descheduled process)
	TailMean    time.Duration // mean of the long delay

	DaemonPeriod  time.Duration // daemon mapping period; 0: no daemon mappings
	DaemonErrNs   int64         // |error| of the daemon's offset, uniform
	DaemonSkewPPM float64       // |error| of the daemon's skew, uniform

	// SyncedHost: the last process shares the clock (host) of the one
	// before it and records no sessions (seed 001's SYNCED-HOST).
	SyncedHost bool
	Seed       uint64
}

// DefaultConfig is a small cluster for a quick demo: 8 processes, 2 s, 5
// sessions, 30 ppm drift with wander, a 2 us minimum latency.
func DefaultConfig() Config {
	return Config{
		Procs: 8, Duration: 2 * time.Second, Sessions: 5, SyncMessages: 50,
		RegionGap: 100 * time.Microsecond, RegionLen: 30 * time.Microsecond, SendProb: 0.7,
		OffsetMax: 5 * time.Millisecond, DriftPPM: 30, WanderPPM: 0.02, JitterNs: 20,
		LatencyMin: 2 * time.Microsecond, LatencyMean: 3 * time.Microsecond,
		TailProb: 0.05, TailMean: 50 * time.Microsecond,
		DaemonPeriod: 100 * time.Millisecond, DaemonErrNs: 100, DaemonSkewPPM: 0.05,
		SyncedHost: true, Seed: 1,
	}
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Procs < 2 || c.Procs > 1<<16:
		return fmt.Errorf("tracegen: Procs = %d: want 2..65536", c.Procs)
	case c.Duration <= 0:
		return fmt.Errorf("tracegen: Duration = %v: want > 0", c.Duration)
	case c.Sessions < 2:
		return fmt.Errorf("tracegen: Sessions = %d: want >= 2 (start and end)", c.Sessions)
	case c.SyncMessages < 1:
		return fmt.Errorf("tracegen: SyncMessages = %d: want >= 1", c.SyncMessages)
	case c.RegionGap <= 0 || c.RegionLen <= 0:
		return fmt.Errorf("tracegen: RegionGap %v and RegionLen %v must be > 0", c.RegionGap, c.RegionLen)
	case c.SendProb < 0 || c.SendProb > 1 || c.TailProb < 0 || c.TailProb > 1:
		return errors.New("tracegen: SendProb and TailProb must be in [0, 1]")
	case c.LatencyMin <= 0 || c.LatencyMean < 0 || c.TailMean < 0:
		return fmt.Errorf("tracegen: LatencyMin %v must be > 0 and means >= 0", c.LatencyMin)
	case c.OffsetMax < 0 || c.DriftPPM < 0 || c.WanderPPM < 0 || c.JitterNs < 0 || c.DaemonErrNs < 0 || c.DaemonSkewPPM < 0 || c.DaemonPeriod < 0:
		return errors.New("tracegen: clock and daemon error parameters must be >= 0")
	}
	return nil
}

// Truth holds, per process number, the true global time of each event in
// file order.
type Truth = map[uint32][]int64

// stamp kinds
const (
	stEvent = iota
	stSample
	stMapping
)

type stamp struct {
	t    int64 // true time
	seq  int64 // tie break
	proc int32
	what uint8
	ev   format.Event // stEvent (Time filled when stamped)
	// stSample: session index, exchange index, which of the 4 timestamps
	sess, ex int32
	part     uint8
}

// Generate simulates the run and writes one trace per process to the
// writer open returns for it. It returns the truth per event. log may be nil.
func Generate(cfg Config, open func(proc int) (io.Writer, error), log *slog.Logger) (Truth, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7ace))
	n := cfg.Procs
	// Clocks: one per host.
	host := make([]int, n)
	for p := range host {
		host[p] = p
	}
	if cfg.SyncedHost && n >= 3 {
		host[n-1] = n - 2
	}
	clocks := make([]*clock.Emulated, n)
	for p := range n {
		if host[p] != p {
			continue
		}
		off := int64(0)
		if p != 0 && cfg.OffsetMax > 0 {
			off = rng.Int64N(2*int64(cfg.OffsetMax)+1) - int64(cfg.OffsetMax)
		}
		prm := clock.EmuParams{Offset: off, DriftPPM: (2*rng.Float64() - 1) * cfg.DriftPPM,
			JitterNs: cfg.JitterNs, Seed: int64(cfg.Seed)*1000 + int64(p)}
		if cfg.WanderPPM > 0 {
			prm.WanderPPM, prm.WanderStep = cfg.WanderPPM, int64(10*time.Millisecond)
		}
		c, err := clock.NewEmulated(prm)
		if err != nil {
			return nil, fmt.Errorf("tracegen: clock of process %d: %w", p, err)
		}
		clocks[p] = c
	}
	// The truth is read from a separate copy of the reference clock so that
	// truth queries do not disturb the reference's own reads.
	refTruth, err := clock.NewEmulated(clocks[0].Params())
	if err != nil {
		return nil, fmt.Errorf("tracegen: reference truth clock: %w", err)
	}
	var seq int64
	var st []stamp
	add := func(s stamp) {
		seq++
		s.seq = seq
		st = append(st, s)
	}
	expo := func(mean time.Duration) int64 { return int64(rng.ExpFloat64() * float64(mean)) }
	latency := func() int64 {
		d := int64(cfg.LatencyMin) + expo(cfg.LatencyMean)
		if rng.Float64() < cfg.TailProb {
			d += expo(cfg.TailMean)
		}
		return d
	}
	D := int64(cfg.Duration)
	// Sync sessions: children of the reference, round robin, one exchange
	// each per cycle (seed 001), 20 us apart.
	var children []int
	for p := 1; p < n; p++ {
		if host[p] == p {
			children = append(children, p)
		}
	}
	const spacing = int64(20 * time.Microsecond)
	sessLen := int64(cfg.SyncMessages*max(len(children), 1)) * spacing
	sessStart := make([]int64, cfg.Sessions)
	for s := range cfg.Sessions {
		sessStart[s] = int64(float64(D-sessLen) * float64(s) / float64(cfg.Sessions-1))
	}
	for s, t0 := range sessStart {
		for j := range cfg.SyncMessages {
			for ci, c := range children {
				t1 := t0 + int64(j*len(children)+ci)*spacing
				t2 := t1 + latency()
				t3 := t2 + 1000
				t4 := t3 + latency()
				for part, tt := range []int64{t1, t2, t3, t4} {
					add(stamp{t: tt, proc: int32(c), what: stSample, sess: int32(s), ex: int32(j), part: uint8(part)})
				}
			}
		}
	}
	appStart, appEnd := sessLen+spacing, D-sessLen-spacing
	if appEnd <= appStart {
		return nil, fmt.Errorf("tracegen: Duration %v too short for %d sessions of %d exchanges", cfg.Duration, cfg.Sessions, cfg.SyncMessages)
	}
	// Application: regions with messages inside.
	msgID := make([]uint64, n)
	for p := range n {
		t := appStart + expo(cfg.RegionGap)
		for t < appEnd {
			l := 1000 + expo(cfg.RegionLen)
			add(stamp{t: t, proc: int32(p), what: stEvent, ev: format.Event{Kind: format.Enter, ID: 1}})
			if rng.Float64() < cfg.SendProb {
				q := rng.IntN(n - 1)
				if q >= p {
					q++
				}
				ts := t + l/2
				msgID[p]++
				add(stamp{t: ts, proc: int32(p), what: stEvent, ev: format.Event{Kind: format.Send, Peer: uint32(q), ID: msgID[p], Value: 64}})
				add(stamp{t: ts + latency(), proc: int32(q), what: stEvent, ev: format.Event{Kind: format.Recv, Peer: uint32(p), ID: msgID[p], Value: 64}})
			}
			add(stamp{t: t + l, proc: int32(p), what: stEvent, ev: format.Event{Kind: format.Leave, ID: 1}})
			if rng.IntN(8) == 0 {
				add(stamp{t: t + l, proc: int32(p), what: stEvent, ev: format.Event{Kind: format.Counter, ID: 2, Value: rng.Int64N(100)}})
			}
			t += l + expo(cfg.RegionGap)
		}
	}
	if cfg.DaemonPeriod > 0 {
		for t := int64(0); t < D; t += int64(cfg.DaemonPeriod) {
			for p := 1; p < n; p++ {
				add(stamp{t: t, proc: int32(p), what: stMapping})
			}
		}
	}
	slices.SortFunc(st, func(a, b stamp) int {
		if a.t != b.t {
			if a.t < b.t {
				return -1
			}
			return 1
		}
		return int(a.seq - b.seq)
	})
	// Stamp in true time order (every clock is queried forward only).
	type proc struct {
		ev       []format.Event
		truth    []int64
		samples  [][]estimate.Sample
		mappings []format.DaemonMapping
	}
	ps := make([]proc, n)
	for p := range ps {
		ps[p].samples = make([][]estimate.Sample, cfg.Sessions)
		for s := range ps[p].samples {
			ps[p].samples[s] = make([]estimate.Sample, cfg.SyncMessages)
		}
	}
	for i := range st {
		s := &st[i]
		p := int(s.proc)
		local := clocks[host[p]]
		switch s.what {
		case stEvent:
			e := s.ev
			e.Time = local.Read(s.t)
			ps[p].ev = append(ps[p].ev, e)
			ps[p].truth = append(ps[p].truth, refTruth.Ideal(s.t))
		case stSample:
			x := &ps[p].samples[s.sess][s.ex]
			switch s.part {
			case 0:
				x.LocSend = local.Read(s.t)
			case 1:
				x.SrcRecv = clocks[0].Read(s.t)
			case 2:
				x.SrcSend = clocks[0].Read(s.t)
			case 3:
				x.LocRecv = local.Read(s.t)
			}
		case stMapping:
			x0 := local.Ideal(s.t)
			y0 := refTruth.Ideal(s.t)
			if cfg.DaemonErrNs > 0 {
				y0 += rng.Int64N(2*cfg.DaemonErrNs+1) - cfg.DaemonErrNs
			}
			rate := (1 + refTruth.Skew(s.t)) / (1 + local.Skew(s.t))
			skew := rate - 1 + (2*rng.Float64()-1)*cfg.DaemonSkewPPM*1e-6
			ps[p].mappings = append(ps[p].mappings, format.DaemonMapping{From: x0,
				Mapping: estimate.Mapping{X0: x0, Y0: y0, Skew: skew, W0: cfg.DaemonErrNs, Valid: true}})
		}
	}
	for p := range n {
		if err := clocks[host[p]].Err(); err != nil {
			return nil, fmt.Errorf("tracegen: clock of process %d: %w", p, err)
		}
	}
	if err := refTruth.Err(); err != nil {
		return nil, fmt.Errorf("tracegen: reference clock: %w", err)
	}
	// Write the files.
	truth := make(Truth, n)
	for p := range n {
		w, err := open(p)
		if err != nil {
			return nil, fmt.Errorf("tracegen: open trace of process %d: %w", p, err)
		}
		if err := write(w, cfg, p, host[p], clocks, ps[p].ev, ps[p].samples, ps[p].mappings, sessStart, log); err != nil {
			return nil, fmt.Errorf("tracegen: write trace of process %d: %w", p, err)
		}
		truth[uint32(p)] = ps[p].truth
	}
	return truth, nil
}

func write(w io.Writer, cfg Config, p, host int, clocks []*clock.Emulated, ev []format.Event, samples [][]estimate.Sample,
	maps []format.DaemonMapping, sessStart []int64, log *slog.Logger) error {
	rec, err := trace.New(w, trace.Config{
		Proc: uint32(p), Host: uint32(host), Name: fmt.Sprintf("rank %d", p),
		Clock: clock.Func(func() int64 { return 0 }), ClockName: "emulated",
		Reference: p == 0, SyncedHost: host != p,
		NoStartSession: true, NoEndSession: true,
	}, log)
	if err != nil {
		return err
	}
	if rec.Name("compute") != 1 || rec.Name("queue") != 2 {
		return errors.New("name ids are not 1 and 2")
	}
	ownSessions := p != 0 && host == p
	kind := func(s int) format.SessionKind {
		switch s {
		case 0:
			return format.SessionStart
		case len(sessStart) - 1:
			return format.SessionEnd
		}
		return format.SessionDemand
	}
	if ownSessions {
		if err := rec.RecordSession(kind(0), samples[0]); err != nil {
			return err
		}
	}
	next, mi := 1, 0
	for _, e := range ev {
		// Sessions and mappings go into the file where they happened.
		for ownSessions && next < len(samples)-1 && samples[next][0].LocSend <= e.Time {
			if err := rec.RecordSession(kind(next), samples[next]); err != nil {
				return err
			}
			next++
		}
		for mi < len(maps) && maps[mi].From <= e.Time {
			if err := rec.RecordMapping(maps[mi].From, maps[mi].Mapping); err != nil {
				return err
			}
			mi++
		}
		if err := rec.Record(e); err != nil {
			return err
		}
	}
	for ; ownSessions && next < len(samples); next++ {
		if err := rec.RecordSession(kind(next), samples[next]); err != nil {
			return err
		}
	}
	for ; mi < len(maps); mi++ {
		if err := rec.RecordMapping(maps[mi].From, maps[mi].Mapping); err != nil {
			return err
		}
	}
	return rec.Close()
}
