package sim

import (
	"log/slog"
	"math"
	"slices"

	"github.com/gclock/gclock/engine"
)

// This file is a chrony stand-in: a Node that does what chronyd does as
// gclock lab runs it (lab/peers.go: `server <ref> minpoll -4 maxpoll -4
// xleave iburst`, chronyd -x), so that the simulator can compare gclock
// with chrony on the same links and seeds. It is modelled on chrony's
// ntp_core.c (one client exchange per poll, offset and delay from T1..T4,
// test C: maxdelaydevratio), sourcestats.c and regress.c (up to 64
// samples, weights from the peer distances, the runs test that drops old
// samples, the jitter asymmetry correction) and reference.c with
// sys_null.c (the offset applied at once to a virtual clock that is never
// steered, the frequency updated with a gain from the skews, the root
// distance as the error bound). It is our own code, not chrony's.
//
// The node reads nothing but what any node gets: its own local clock at
// Tick and Step, and the timestamps in the messages. Its estimate of global
// time at local t is chrony's cooked time, t + corr(t), where corr is the
// piecewise-linear correction the reference updates (null driver); its
// bounds are the estimate +- (root delay/2 + root dispersion), what
// `chronyc tracking` calls the maximum error.
//
// A node without sources is a chrony server of its own clock ("local
// stratum 1"), as the lab's reference is; a node with sources is a client
// of its first source and answers its own children with its cooked time.

// ChronyConfig are a chrony stand-in's settings; DefaultChronyConfig is
// the lab's chrony.conf.
type ChronyConfig struct {
	PollLog2         int     // minpoll = maxpoll: the poll interval is 2^PollLog2 s (lab: -4)
	MinSamples       int     // the runs test keeps at least this many samples (chrony's minsamples default: 6)
	MaxSamples       int     // at most this many samples (chrony: 64)
	MaxDelayDevRatio float64 // test C's maxdelaydevratio (default 10)
	MaxUpdateSkew    float64 // maxupdateskew, s/s (default 1000 ppm): no frequency update above it
	MaxClockError    float64 // maxclockerror, s/s (default 1 ppm)
	Precision        float64 // each end's clock precision, s (Linux: about 2^-25)
	// Asymmetry is the source's asymmetry option: |a| <= 0.5 fixes it, 0
	// disables the correction, anything else (chrony's default 1.0)
	// estimates it.
	Asymmetry float64
}

// DefaultChronyConfig is chrony as gclock lab runs it: 16 polls a second,
// every other setting chrony's default.
func DefaultChronyConfig() ChronyConfig {
	return ChronyConfig{PollLog2: -4, MinSamples: 6, MaxSamples: 64, MaxDelayDevRatio: 10,
		MaxUpdateSkew: 1000e-6, MaxClockError: 1e-6, Precision: 1.0 / (1 << 25), Asymmetry: 1.0}
}

// NewChronyNode builds a chrony stand-in with DefaultChronyConfig; it fits
// Options.NewNode:
//
//	res, err := sim.Run(ctx, sc, sim.Options{NewNode: sim.NewChronyNode})
func NewChronyNode(cfg engine.Config, logger *slog.Logger) (Node, error) {
	return ChronyNodes(DefaultChronyConfig())(cfg, logger)
}

// ChronyNodes returns an Options.NewNode that builds chrony stand-ins with
// cc.
func ChronyNodes(cc ChronyConfig) func(engine.Config, *slog.Logger) (Node, error) {
	return func(cfg engine.Config, _ *slog.Logger) (Node, error) {
		cc := cc
		cc.MaxSamples = min(max(cc.MaxSamples, minSamplesForRegress), chronyMaxSamples)
		return &chronyNode{cfg: cfg, cc: cc, poll: int64(math.Ldexp(1e9, cc.PollLog2)),
			ourSkew: 1.0}, nil
	}
}

const (
	chronyMaxSamples     = 64
	runsRatio            = 2 // REGRESS_RUNS_RATIO: samples kept for the runs test
	minSamplesForRegress = 3
	sdToDistRatio        = 0.7
	minSkew, maxSkew     = 1e-12, 1.0
	minStdDev            = 1e-9
	worstFreqBound       = 2000e-6
	maxAsymmetry         = 0.5
	minAsymmetry         = 0.45
	minAsymmetryRun      = 10
	maxAsymmetryRun      = 1000
)

// chronySample is one measurement, kept in the raw local frame: off is
// raw local minus source time at the sample (s; chrony's sign: positive is
// local fast), so that corrections of the virtual clock need no slewing of
// old samples (the cooked offset is off + corr(at)).
type chronySample struct {
	at        int64   // raw local time, the midpoint of T1 and T4
	off       float64 // s
	delay     float64 // peer delay, s
	disp      float64 // peer dispersion, s
	rootDelay float64
	rootDisp  float64
}

type chronyNode struct {
	cfg  engine.Config
	cc   ChronyConfig
	poll int64 // ns of local clock
	out  engine.Ready
	next int64

	seq    uint32 // the last request; only its reply counts (chrony's origin check)
	sentAt int64

	// sourcestats: the last nRuns+n samples of hist; the first nRuns only
	// extend the runs test.
	hist          []chronySample
	n, nRuns      int
	regressionOK  bool
	lineA, lineB  float64 // raw-frame line: offset(t) = A + B*(t - lineAt)/1e9 (s)
	lineAt        int64
	offsetSD      float64
	skew          float64
	stdDev        float64
	best          int // index in the n samples of the best single sample
	asym          float64
	asymRun       int
	haveRegressed bool

	// The virtual clock (sys_null): cooked = raw + corrC + corrK*(raw - corrAt) ns.
	corrC  float64
	corrK  float64
	corrAt int64

	// reference.c
	synced                  bool
	refTime                 int64 // raw local of the last update
	ourSkew, ourResidFreq   float64
	ourRootDelay, ourRootDp float64
}

func (c *chronyNode) corr(raw int64) float64 {
	return c.corrC + c.corrK*float64(raw-c.corrAt)
}

func (c *chronyNode) cooked(raw int64) int64 {
	return raw + int64(math.Round(c.corr(raw)))
}

func (c *chronyNode) Tick(local int64) {
	if len(c.cfg.Sources) > 0 && (c.next == 0 || local >= c.next) {
		c.seq++
		c.sentAt = local
		c.out.Messages = append(c.out.Messages, engine.Message{Type: engine.MsgProbe, From: c.cfg.ID, To: c.cfg.Sources[0], Seq: c.seq})
		c.next = local + c.poll
	}
	c.out.NextTick = c.next
}

func (c *chronyNode) Step(m engine.Message, local int64) {
	switch m.Type {
	case engine.MsgProbe:
		// A server: receive and transmit stamps on its cooked clock.
		t2 := local
		if m.T2 != 0 && m.T2 <= local {
			t2 = m.T2
		}
		c.out.Messages = append(c.out.Messages, engine.Message{Type: engine.MsgProbeReply, From: c.cfg.ID, To: m.From,
			Seq: m.Seq, T2: c.serverTime(t2), T3: c.serverTime(local)})
	case engine.MsgProbeReply:
		if len(c.cfg.Sources) == 0 || m.From != c.cfg.Sources[0] || m.Seq != c.seq || c.sentAt == 0 {
			break // not the answer to our last request
		}
		t4 := local
		if m.T4 != 0 && m.T4 >= c.sentAt && m.T4 <= local {
			t4 = m.T4
		}
		c.measure(c.sentAt, m.T2, m.T3, t4, local)
		c.sentAt = 0
	}
	c.out.NextTick = c.next
}

// serverTime is what this node serves: its own clock on a reference,
// its cooked time otherwise.
func (c *chronyNode) serverTime(local int64) int64 {
	if len(c.cfg.Sources) == 0 {
		return local
	}
	return c.cooked(local)
}

func (c *chronyNode) Ready() engine.Ready {
	r := c.out
	c.out = engine.Ready{NextTick: c.next}
	return r
}

// Read is chrony's cooked time and its maximum error.
func (c *chronyNode) Read(local int64) engine.Time {
	u := int64(c.cfg.ReadUncertainty)
	if len(c.cfg.Sources) == 0 {
		return engine.Time{Est: local, Earliest: local - u, Latest: local + u, Mono: local, Status: engine.StatusSynced}
	}
	est := c.cooked(local)
	if !c.synced {
		return engine.Time{Est: est, Earliest: math.MinInt64, Latest: math.MaxInt64, Mono: est}
	}
	maxErr := c.ourRootDelay/2 + c.rootDispersion(local)
	e := int64(math.Ceil(maxErr*1e9)) + u
	return engine.Time{Est: est, Earliest: est - e, Latest: est + e, Mono: est, Status: engine.StatusSynced}
}

// rootDispersion is reference.c's get_root_dispersion (without the fuzz
// of the reference time), s.
func (c *chronyNode) rootDispersion(local int64) float64 {
	el := math.Abs(float64(local-c.refTime)) / 1e9
	return c.ourRootDp + el*(c.ourSkew+math.Abs(c.ourResidFreq)+c.cc.MaxClockError)
}

// measure takes one client exchange: t1, t4 raw local, t2, t3 the server's.
func (c *chronyNode) measure(t1, t2, t3, t4, now int64) {
	// In the cooked frame, as chronyd stamps: T1 and T4 on its virtual clock.
	c1, c4 := c.cooked(t1), c.cooked(t4)
	localInterval := float64(c4-c1) / 1e9
	remoteInterval := float64(t3-t2) / 1e9
	precision := 2 * c.cc.Precision
	delay := math.Abs(localInterval - remoteInterval)
	delay = max(delay, precision)
	// NTP's offset (positive: local slow), cooked frame.
	ntpOff := (float64(t2-c1) + float64(t3-c4)) / 2 / 1e9
	mid := t1 + (t4-t1)/2
	skew := c.skew
	if !c.haveRegressed || skew > worstFreqBound {
		skew = worstFreqBound
	}
	disp := precision + skew*math.Abs(localInterval)
	// Test C (maxdelaydevratio), with the statistics as they stand.
	if !c.delayDevOK(mid, ntpOff, delay) {
		return
	}
	// Into the raw frame: cooked offset = raw offset + corr.
	s := chronySample{at: mid, off: -ntpOff - c.corr(mid)/1e9, delay: delay, disp: disp, rootDelay: delay, rootDisp: disp}
	c.accumulate(s)
	c.regress()
	if c.regressionOK {
		c.setReference(now)
	}
}

// delayDevOK is ntp_core's check_delay_dev_ratio.
func (c *chronyNode) delayDevOK(at int64, ntpOff, delay float64) bool {
	if c.n < 6 || !c.haveRegressed {
		return true
	}
	ago := float64(at-c.lineAt) / 1e9
	predicted := c.lineA + c.lineB*ago + c.corr(at)/1e9 // cooked, chrony's sign
	maxDelta := c.stdDev*c.cc.MaxDelayDevRatio + ago*(c.skew+c.cc.MaxClockError)
	delta := (delay - c.minDelay()) / 2
	if delta <= maxDelta {
		return true
	}
	return math.Abs(ntpOff+predicted)-delta > maxDelta
}

func (c *chronyNode) minDelay() float64 {
	d := math.Inf(1)
	for _, s := range c.hist[len(c.hist)-c.n-c.nRuns:] {
		d = min(d, s.delay)
	}
	return d
}

// prune is sourcestats' prune_register.
func (c *chronyNode) prune(k int) {
	if k <= 0 {
		return
	}
	c.n -= k
	c.nRuns = min(c.nRuns+k, c.n*(runsRatio-1))
	if drop := len(c.hist) - c.n - c.nRuns; drop > 0 {
		c.hist = slices.Delete(c.hist, 0, drop)
	}
}

func (c *chronyNode) accumulate(s chronySample) {
	if c.n > 0 && c.n >= c.cc.MaxSamples {
		c.prune(1)
	}
	if c.n > 0 && c.hist[len(c.hist)-1].at >= s.at {
		c.hist, c.n, c.nRuns = c.hist[:0], 0, 0 // out of order: start again
	}
	c.hist = append(c.hist, s)
	c.n++
}

// regress is sourcestats' SST_DoNewRegression in the raw frame (a linear
// fit is the same in any frame that differs by a line).
func (c *chronyNode) regress() {
	all := c.hist[len(c.hist)-c.n-c.nRuns:]
	last := all[len(all)-1].at
	x := make([]float64, len(all))
	y := make([]float64, len(all))
	for i, s := range all {
		x[i] = float64(s.at-last) / 1e9
		y[i] = s.off
	}
	cur := all[c.nRuns:]
	dist := make([]float64, len(cur))
	minDist := math.Inf(1)
	for i, s := range cur {
		dist[i] = s.delay/2 + s.disp
		minDist = min(minDist, dist[i])
	}
	prec := c.cc.Precision
	sd := (median(dist) - minDist) / sdToDistRatio
	sd = max(min(sd, minDist), prec)
	minDist += prec
	w := make([]float64, len(cur))
	for i, d := range dist {
		sw := 1.0
		if d > minDist {
			sw += (d - minDist) / sd
		}
		w[i] = sw * sw
	}
	c.correctAsymmetry(x, y, all)

	fit, ok := findBestRegression(x, y, w, c.nRuns, c.cc.MinSamples)
	c.regressionOK, c.haveRegressed = ok, true
	times := x[c.nRuns:]
	if !ok {
		c.skew, c.offsetSD, c.stdDev = worstFreqBound, 4.0, 4.0
		c.lineA, c.lineB, c.lineAt = cur[len(cur)-1].off, 0, last
		c.bestSample(times)
		return
	}
	c.lineA, c.lineB, c.lineAt = fit.b0, fit.b1, last
	c.skew = min(max(fit.sb1*tCoef(fit.dof), minSkew), maxSkew)
	c.offsetSD = fit.sb0
	c.stdDev = max(minStdDev, math.Sqrt(fit.s2))
	c.prune(fit.start)
	c.bestSample(times[fit.start:])
}

// bestSample is find_best_sample_index: the sample with the smallest root
// distance now; times are the n samples' times back (s, <= 0).
func (c *chronyNode) bestSample(times []float64) {
	cur := c.hist[len(c.hist)-c.n:]
	best, bd := 0, math.Inf(1)
	for i, s := range cur {
		d := s.rootDisp - times[i]*c.skew + s.rootDelay/2
		if d < bd {
			best, bd = i, d
		}
	}
	c.best = best
}

// correctAsymmetry is sourcestats' correct_asymmetry over all (the runs
// samples included); y is corrected in place.
func (c *chronyNode) correctAsymmetry(x, y []float64, all []chronySample) {
	if c.cc.Asymmetry == 0 {
		return
	}
	md := math.Inf(1)
	for _, s := range all {
		md = min(md, s.delay)
	}
	d := make([]float64, len(all))
	for i, s := range all {
		d[i] = s.delay - md
	}
	if math.Abs(c.cc.Asymmetry) <= maxAsymmetry {
		c.asym = c.cc.Asymmetry
	} else {
		a, ok := multipleRegress(x, d, y)
		if !ok || a*float64(c.asymRun) < 0 {
			c.asym, c.asymRun = 0, 0
			return
		}
		if a <= -minAsymmetry && c.asymRun > -maxAsymmetryRun {
			c.asymRun--
		} else if a >= minAsymmetry && c.asymRun < maxAsymmetryRun {
			c.asymRun++
		}
		if c.asymRun < minAsymmetryRun && c.asymRun > -minAsymmetryRun {
			return
		}
		c.asym = min(max(a, -maxAsymmetry), maxAsymmetry)
	}
	for i := range y {
		y[i] -= c.asym * d[i]
	}
}

// setReference is SRC_SelectSource with one source and REF_SetReference
// with the null driver: the offset is taken out of the virtual clock at
// once, the frequency by a gain from the skews.
func (c *chronyNode) setReference(now int64) {
	cur := c.hist[len(c.hist)-c.n:]
	b := cur[c.best]
	// SST_GetTrackingData, cooked frame.
	offset := c.lineA + c.corr(c.lineAt)/1e9 // at lineAt
	freq := c.lineB + c.corrK
	rootDisp := b.rootDisp + c.skew*float64(c.lineAt-b.at)/1e9 + c.offsetSD
	// REF_SetReference: to now.
	offset += float64(now-c.lineAt) / 1e9 * freq
	var gain float64
	if math.Abs(c.skew) <= c.cc.MaxUpdateSkew {
		gain = 3 * c.ourSkew * c.ourSkew / (3*c.ourSkew*c.ourSkew + c.skew*c.skew)
	}
	gain = min(max(gain, 0), 1)
	estFreq := gain * freq
	resid := freq - estFreq
	extra := math.Sqrt(estFreq*estFreq*(1-gain) + resid*resid*gain)
	c.ourSkew = c.ourSkew + gain*(c.skew-c.ourSkew) + extra
	c.ourResidFreq = resid
	c.ourRootDelay, c.ourRootDp = b.rootDelay, rootDisp
	c.refTime, c.synced = now, true
	// LCL_AccumulateFrequencyAndOffset on the null driver.
	c.corrC = c.corr(now) - offset*1e9
	c.corrK -= estFreq
	c.corrAt = now
}

type regression struct {
	b0, b1, s2, sb0, sb1 float64
	start, dof           int
}

// findBestRegression is regress.c's RGR_FindBestRegression: a weighted
// line through the n = len(w) current samples (w large: less reliable),
// the oldest dropped one at a time until the runs of the residuals' signs
// are not too few; xAll and yAll hold m extra older samples first, which
// only extend the runs test.
func findBestRegression(xAll, yAll, w []float64, m, minSamples int) (regression, bool) {
	n := len(w)
	if n < minSamplesForRegress {
		return regression{}, false
	}
	x, y := xAll[m:], yAll[m:]
	resid := make([]float64, 0, len(xAll))
	var a, b, u, W, V float64
	var start, rs int
	for start = 0; ; start++ {
		var U, P, Q float64
		W, V = 0, 0
		for i := start; i < n; i++ {
			U += x[i] / w[i]
			W += 1 / w[i]
		}
		u = U / W
		for i := start; i < n; i++ {
			ui := x[i] - u
			P += y[i] / w[i]
			Q += y[i] * ui / w[i]
			V += ui * ui / w[i]
		}
		b = Q / V
		a = P/W - b*u
		// Residuals also of up to m older samples, for the runs test.
		rs = max(n-(n-start)*runsRatio, -m)
		resid = resid[:0]
		for i := rs; i < n; i++ {
			resid = append(resid, yAll[i+m]-a-b*xAll[i+m])
		}
		if countRuns(resid) > criticalRuns(n-rs) || n-start <= minSamplesForRegress || n-start <= minSamples {
			break
		}
	}
	ss := 0.0
	for i := start; i < n; i++ {
		r := resid[i-rs]
		ss += r * r / w[i]
	}
	np := n - start
	ss /= float64(np - 2)
	sb1 := math.Sqrt(ss / V)
	aa := u * sb1
	return regression{b0: a, b1: b, s2: ss * float64(np) / W, sb0: math.Sqrt(ss/W + aa*aa), sb1: sb1,
		start: start, dof: np - 2}, true
}

func countRuns(r []float64) int {
	n := 1
	for i := 1; i < len(r); i++ {
		if !((r[i-1] < 0 && r[i] < 0) || (r[i-1] > 0 && r[i] > 0)) {
			n++
		}
	}
	return n
}

// criticalRunsTable is regress.c's 5% critical number of runs for n
// residuals.
var criticalRunsTable = [...]int8{
	0, 0, 0, 0, 0, 0, 0, 0, 2, 3,
	3, 3, 4, 4, 5, 5, 5, 6, 6, 7,
	7, 7, 8, 8, 9, 9, 9, 10, 10, 11,
	11, 11, 12, 12, 13, 13, 14, 14, 14, 15,
	15, 16, 16, 17, 17, 18, 18, 18, 19, 19,
	20, 20, 21, 21, 21, 22, 22, 23, 23, 24,
	24, 25, 25, 26, 26, 26, 27, 27, 28, 28,
	29, 29, 30, 30, 30, 31, 31, 32, 32, 33,
	33, 34, 34, 35, 35, 35, 36, 36, 37, 37,
	38, 38, 39, 39, 40, 40, 40, 41, 41, 42,
	42, 43, 43, 44, 44, 45, 45, 46, 46, 46,
	47, 47, 48, 48, 49, 49, 50, 50, 51, 51,
	52, 52, 52, 53, 53, 54, 54, 55, 55, 56,
}

func criticalRuns(n int) int { return int(criticalRunsTable[min(n, len(criticalRunsTable)-1)]) }

// tCoef is regress.c's RGR_GetTCoef: the t distribution's 99.95% quantile.
func tCoef(dof int) float64 {
	coefs := [...]float64{636.6, 31.6, 12.92, 8.61, 6.869,
		5.959, 5.408, 5.041, 4.781, 4.587,
		4.437, 4.318, 4.221, 4.140, 4.073,
		4.015, 3.965, 3.922, 3.883, 3.850,
		3.819, 3.792, 3.768, 3.745, 3.725,
		3.707, 3.690, 3.674, 3.659, 3.646,
		3.633, 3.622, 3.611, 3.601, 3.591,
		3.582, 3.574, 3.566, 3.558, 3.551}
	if dof < 1 {
		return coefs[0]
	}
	if dof <= len(coefs) {
		return coefs[dof-1]
	}
	return 3.5
}

// multipleRegress is regress.c's RGR_MultipleRegress: the slope on x2 of
// y = b0 + b1*x1 + b2*x2 (least squares).
func multipleRegress(x1, x2, y []float64) (float64, bool) {
	n := len(y)
	if n < 4 {
		return 0, false
	}
	var sx1, sx2, sx1x1, sx1x2, sx2x2, sx1y, sx2y, sy float64
	for i := range y {
		sx1 += x1[i]
		sx2 += x2[i]
		sx1x1 += x1[i] * x1[i]
		sx1x2 += x1[i] * x2[i]
		sx2x2 += x2[i] * x2[i]
		sx1y += x1[i] * y[i]
		sx2y += x2[i] * y[i]
		sy += y[i]
	}
	fn := float64(n)
	U := fn*(sx1x2*sx1y-sx1x1*sx2y) + sx1*sx1*sx2y - sx1*sx2*sx1y + sy*(sx2*sx1x1-sx1*sx1x2)
	v1 := fn * (sx1x2*sx1x2 - sx1x1*sx2x2)
	v2 := sx1*sx1*sx2x2 + sx2*sx2*sx1x1
	v3 := -2 * sx1 * sx2 * sx1x2
	V := v1 + v2 + v3
	if math.Abs(V)*1e10 <= -v1+v2+math.Abs(v3) {
		return 0, false
	}
	return U / V, true
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
