package engine

import (
	"time"

	"github.com/gclock/gclock/estimate"
)

// NodeID names a node of the cluster. The reference is usually 0.
type NodeID uint32

// MsgType is the kind of an engine message.
type MsgType uint8

// The engine's messages (Liao et al., Figure 1; MyriTime is Probe and
// ProbeReply, MyriTimeDiff is TimeDiff and ErrReport).
const (
	// MsgProbe: a source asks a child for its timestamps (a ping).
	MsgProbe MsgType = iota + 1
	// MsgProbeReply: the child's receive and send times (the pong). The reply
	// is the acknowledgement: a lost probe or reply is retried on timeout.
	MsgProbeReply
	// MsgTimeDiff: a source ends a round: the round's exchanges and the
	// source's own local->global mapping.
	MsgTimeDiff
	// MsgErrReport: a child tells its source that its projection was off by
	// more than DIFFERENCE_THRESH (Err = err/DIFFERENCE_THRESH). A flagged,
	// acknowledged message on the wire.
	MsgErrReport
	// MsgPeriodChange: a source tells a child the new global period it
	// runs rounds with for that child (Period, source's local ns; Seq counts
	// the changes per (source, child), so a late or duplicated one is
	// recognised). The child keeps it to know when the source has gone
	// silent. A flagged, acknowledged message on the wire, like MsgErrReport.
	MsgPeriodChange
	// MsgStatusQuery: a Member asks another who its reference is (Seq
	// names the query). Sent at start (discovery), to a quiet reference
	// and to the next of the order at a failover (member.go).
	MsgStatusQuery
	// MsgStatusReply: the answer to a status query (Seq echoed): the
	// sender's current reference in Reference.
	MsgStatusReply
)

// Message is what engines send each other. Drivers (simulator, UDP daemon)
// carry it; the wire package encodes it.
type Message struct {
	Type  MsgType
	From  NodeID
	To    NodeID
	Round uint32 // per (source, child) round counter
	Seq   uint32 // probe number; unique per (From, To) so late replies are recognised

	// ProbeReply: the child's local receive time of the probe and send time
	// of the reply. Bounds stay guaranteed when a receive stamp is late and
	// a send stamp is early (see estimate.Sample): T3 is the time of the
	// Step that answered, before the reply really leaves; the reply's
	// transmit stamp, when the driver reports one (Node.TxStamp), replaces
	// it in the sample when the time diff brings it back.
	//
	// Probe, set by the child's driver before Step and never sent on the
	// wire: T2 is the probe's arrival (a kernel receive stamp), which may
	// be older than the Step call; 0 is the time of Step. The engine takes
	// it within [Step's time - MaxSampleRTT, Step's time] (stamps.go).
	T2, T3 int64

	// ProbeReply, set by the source's driver before Step and never sent on
	// the wire: T4 is the reply's arrival (a kernel receive stamp), which
	// may be older than the Step call; 0 is the time of Step. The engine
	// takes it within [the probe's send time, Step's time], so a wrong
	// stamp is ignored, never unsafe. The probe's own departure comes
	// through Node.TxStamp.
	T4 int64
	// ProbeReply, set by the source's driver before Step and never sent on
	// the wire: the driver's transport sent the probe more than once (a
	// retransmission under the same probe), so this reply may be the copy
	// the child's transport resent for a later copy of the probe. Its
	// arrival (T4) then does not pair with the T3 it carries (the first
	// reply's), and the probe's departure is ambiguous too: the lab's
	// switch, which can reorder, delivered such a resent copy before the
	// first one, and the reply looked tens of us faster than the link
	// allows. Still inside the bounds (the copy left after T3), but no
	// sample of the link's delays. The engine takes the reply as the
	// probe's acknowledgement and keeps no sample of it
	// (ChildSnapshot.Resent).
	Resent bool

	// TimeDiff: the exchanges of the round, complete on both clocks, in the
	// child's orientation (the child is "local", the source is "source").
	Samples []estimate.Sample
	// TimeDiff: the source's mapping from its own local clock to global time
	// (identity with zero width on the reference), for composition down a tree.
	Mapping estimate.Mapping
	// TimeDiff: the source's own global time was not synced when it sent
	// this (acquiring, degraded or unsynced): the child may use the mapping
	// but must not promise time composed through it.
	Unsure bool
	// TimeDiff: a check exchange's (Config.ChecksPerPeriod), taken after
	// round Round and judged by the child against its line, no round of it.
	Check bool

	// ErrReport: err / DIFFERENCE_THRESH.
	Err float64

	// PeriodChange: the source's new global period for this child, ns of
	// the source's local clock (> 0).
	Period int64

	// StatusReply: the reference the sender follows.
	Reference NodeID

	// Term is the sender's election term (member.go): every message
	// carries it. The reference of term t is Order[t mod len(Order)], so a
	// term names at most one reference. A Member refuses an engine
	// message of an older term and follows the reference of a newer one.
	// A vote request carries the term it asks for.
	Term uint32
	// Flags qualify a status query or reply for the election (FlagVote,
	// FlagBeat, FlagLease); 0 on every other message.
	Flags uint8
	// Sent is a heartbeat's global send time (the reference's clock, or
	// its frozen line): a follower renews its lease only on a heartbeat
	// its own bounds show to be fresh.
	Sent int64
}

// Message flags of the election (Message.Flags).
const (
	// FlagVote: a status query asks for a vote for its sender as the
	// reference of Term; on the reply, the vote is granted.
	FlagVote uint8 = 1 << iota
	// FlagBeat: a status query is the reference's heartbeat; on the
	// reply, the responder follows the sender in Term (an acknowledgement
	// that renews the reference's lease).
	FlagBeat
	// FlagLease: a heartbeat whose sender held a majority's lease when it
	// sent it; a follower promises time only while it has heard one
	// recently. On a reference's status reply: it holds its lease.
	FlagLease
	// FlagResign: a status query tells the nodes that voted for its sender
	// in Term that it gave up that term (no majority): their votes no
	// longer bind them.
	FlagResign
	// FlagScale: on a vote request, the candidate holds bounded global
	// time, so that its takeover continues the scale; a voter that holds
	// it refuses a candidate that does not (which would restart global
	// time from its own clock).
	FlagScale
	// FlagsAll is every defined flag: a decoder refuses others.
	FlagsAll = FlagVote | FlagBeat | FlagLease | FlagResign | FlagScale
)

// EventKind classifies what an engine reports for logs and plots.
type EventKind uint8

// Events.
const (
	EvGlobalResync     EventKind = iota + 1 // a round finished and the estimate was updated (Peer = source)
	EvSelfResync                            // the node applied its drift (self resync)
	EvPeriodChange                          // a child's global period changed (Peer = child, Value = new period ns)
	EvSelfPeriodChange                      // the self period changed (Value = new period ns)
	EvErrReport                             // a child's error report arrived / was sent (Value = err/DIFFERENCE_THRESH)
	EvEstimatorRestart                      // the estimator's window restarted (inconsistent samples)
	EvRoundRepeated                         // the round was repeated (NETWORK_LATENCY_ERROR_THRESH)
	EvSourcePeriod                          // a source announced a new global period (Peer = source, Value = period ns)
	EvSourceSilent                          // nothing from a source for SilentPeriods of its period + slack (Peer = source, Value = ns since last heard)
	EvSourceAlive                           // a silent source was heard again (Peer = source, Value = ns it was silent)
	EvContradiction                         // a round contradicted the clock model (Peer = source, Value = ContraOutside, ContraHull or ContraDrift)
	EvTrustChange                           // a source's trust changed (Peer = source, Value = 1 synced, 2 degraded)
	EvReferenceChange                       // a Member changed reference (Peer = the new reference, Value = 1 if this node took over)
	EvEarlyRound                            // a child's error report brought its next round forward (Peer = child, Value = ns until it starts)
)

// Event is something that happened inside the engine, stamped with the local
// time of the call that caused it.
type Event struct {
	Local int64
	Kind  EventKind
	Peer  NodeID
	Value float64
}

// Ready is the output of the engine since the last call to Ready: messages to
// send, the local time at which Tick must next be called, and events.
type Ready struct {
	Messages []Message
	NextTick int64 // local clock; 0 means no timer wanted
	Events   []Event
	// Rounds are the exchanges of each time diff accepted, transmit stamps
	// applied, for measurement logs: those the floor check then kept out of
	// the estimators (Config.FloorSlack) are included, corrupt ones are not.
	// Drivers must not modify them.
	Rounds []RoundSamples
}

// RoundSamples is one accepted time diff's exchanges, in this node's
// orientation (this node is "local").
type RoundSamples struct {
	Source  NodeID
	Round   uint32
	Samples []estimate.Sample
}

// Status says how much a global time reading can be trusted.
type Status uint8

// Statuses.
const (
	StatusUnsynced Status = iota // no estimate yet: bounds are unbounded
	StatusSynced                 // estimate from a recent round
	StatusStale                  // no round for longer than the staleness limit: bounds keep widening
	_                            // 3 is gtime.StatusNoDaemon, a page-only status
	// StatusDegraded: the data contradicted the clock model (an exchange
	// outside the bounds, an empty hull, a skew beyond MaxDrift): the bounds
	// are widened to what is still certain and the node is re-acquiring.
	// Only StatusSynced promises that the truth is inside the bounds.
	StatusDegraded
)

// String names the status.
func (s Status) String() string {
	switch s {
	case StatusSynced:
		return "synced"
	case StatusStale:
		return "stale"
	case StatusDegraded:
		return "degraded"
	default:
		return "unsynced"
	}
}

// Time is global time read on a node at one local instant.
type Time struct {
	Est      int64 // best estimate of global time; may move backwards between reads
	Earliest int64 // guaranteed lower bound
	Latest   int64 // guaranteed upper bound
	Mono     int64 // never decreases between reads; corrections are slewed
	Status   Status
}

// Config is one node's engine configuration. Durations are in the local
// clock's nanoseconds. The names in capitals are Liao et al.'s.
type Config struct {
	ID NodeID
	// Sources are the neighbours this node follows (the reference has none):
	// in a star, just the reference; in a tree, the neighbours one step
	// closer to the reference, plus a same-depth sub-reference (Jezequel
	// A3). Filled from package topology.
	Sources []NodeID
	// Children are the neighbours that follow this node; it starts every
	// exchange with them.
	Children []NodeID

	Estimator string // "minrtt" (the paper), "regression", "hull" or "center" (estimate.Hull.Center)
	Adaptive  bool   // false: fixed periods, the paper's non-adaptive baseline

	PingsPerRound int // 3
	// RampPingsPerRound is the round's size while the child's period is
	// still below MinGlobalPeriod (the convergence ramp, rounds 1-4 s
	// apart): 0 is PingsPerRound. It is also the least a round shrinks to
	// after the ramp when the source's slots (MaxConcurrentRounds) cannot
	// serve every child a round of PingsPerRound each MinGlobalPeriod, by
	// the paces its children's rounds measured (rounds.go, sharedPings);
	// 0 turns that off too. The precise profile asks for 960 a round, 240
	// on the ramp, so that a reference converging a large star (31
	// children, two rounds at once) serves the ramp's many rounds, and
	// after it rounds as large as its slots hold (docs/engine.md).
	RampPingsPerRound         int
	NetworkLatencyErrorThresh time.Duration // repeat the round once when its shortest RTT exceeds the shortest ever by this
	DifferenceThresh          time.Duration // a child reports when |Tdiff - projection| exceeds this
	ErrorThresh               float64       // accumulated err/DIFFERENCE_THRESH that halves the period
	SuccessThresh             int           // quiet rounds that double the period
	MinGlobalPeriod           time.Duration // halvings (error reports) never bring the period below this
	MaxGlobalPeriod           time.Duration // doublings (quiet rounds) never take it above this
	// InitialGlobalPeriod is each child's period before any change. It may
	// be below MinGlobalPeriod: the node then converges on a ramp, the
	// period doubling every SuccessThresh rounds, quiet or not, and never
	// halved, until it reaches MinGlobalPeriod; from then on Liao's rules
	// apply and halvings stop at MinGlobalPeriod. The traffic is then
	// bounded by construction: one round per InitialGlobalPeriod at most
	// while converging, one per MinGlobalPeriod after.
	InitialGlobalPeriod time.Duration
	MinSelfPeriod       time.Duration
	MaxSelfPeriod       time.Duration
	LargeDrift          float64       // |skew| above which the self period shrinks (e.g. 20e-6)
	ProbeTimeout        time.Duration // retry a probe whose reply has not come (floor; grows with measured RTT)
	StaleAfter          time.Duration // no round for this long: StatusStale
	MaxSlewRate         float64       // Mono's correction rate limit (e.g. 500e-6)
	MaxDrift            float64       // worst-case |skew| assumed before any estimate (e.g. 100e-6)
	MaxWander           float64       // worst-case |d skew/dt| per ns assumed by the bounds
	Granularity         time.Duration // clock read granularity assumed by the hull shift (nu)

	// Fields below were added by the engine owner (not in the first contract).

	// Window is the number of samples each estimator keeps
	// (estimate.HullConfig.Window and the other estimators' windows).
	Window int
	// ContinuousDrift applies the drift continuously between rounds, as if
	// the self period were zero. False is Liao's self resync: the offset is
	// re-projected with the drift once per self period and held in between.
	ContinuousDrift bool
	// MaxConcurrentRounds is how many children a node runs rounds with at
	// once; 1 is Liao's node 0 (one child at a time), 0 means no limit.
	MaxConcurrentRounds int
	// RetryRTTs: a probe is retried after max(ProbeTimeout, RetryRTTs x the
	// smoothed round trip to that child).
	RetryRTTs float64
	// MaxProbeRetries is how many times in a row one probe is retried before
	// the round is ended: with the samples it has, or abandoned without any.
	MaxProbeRetries int
	// RoundBudget bounds the local time a round spends probing: once it
	// has run this long, the round sends no further probe and ends with the
	// exchanges it has (at least one; a probe out when the budget runs out
	// is waited for until its timeout, not retried). A repeated round (Liao's
	// NETWORK_LATENCY_ERROR_THRESH) gets the budget again from the repeat.
	// With MaxConcurrentRounds, a slow host cannot then hold the other
	// children's rounds for the length of PingsPerRound slow exchanges.
	// Rounds it ended are counted in ChildSnapshot.Cut. 0: no budget.
	RoundBudget time.Duration
	// FloorSlack turns on the rejection of impossibly fast exchanges
	// (estimate.FloorFilter, one per source): an exchange whose round trip
	// lies more than the slack (max(FloorSlack, 1/16 of the floor) +
	// MaxDrift x the responder's hold + 2 x Granularity) below the recent
	// floor (the 8th shortest of the last 256 exchanges), and below what a
	// soft floor allows (twice its spread, and no further than the slack or
	// twice the spread below the 3rd shortest of the last 4096), has a
	// wrong stamp and is kept out of the estimators, counted in
	// SourceSnapshot.BelowFloor. In rounds of 32 exchanges or more, one
	// whose round trip fits but one of whose directions lies impossibly
	// far below the rest of its round's (judged on the selected
	// estimator's skew) is kept out too, counted in
	// SourceSnapshot.OneWayBelowFloor. 0 turns both off.
	FloorSlack time.Duration
	// HullMinDelay is Jezequel's mu (4.3): a known lower bound on every
	// one-way delay. The Hull's shift becomes Granularity - HullMinDelay and
	// a single exchange bounds the offset within RTT/2 - HullMinDelay. 0 is
	// causality only; a value above the true minimum breaks the bounds.
	HullMinDelay time.Duration
	// CenterMemory (rounds, "center" only): the centre line weights each
	// exchange by exp(-age/tau), tau this many average gaps between rounds,
	// to follow a wandering frequency (estimate.HullConfig.CenterMemory).
	// 0: every exchange of the window counts the same.
	CenterMemory float64
	// CenterFloorOnly ("center" only) keeps the centre line on the fastest
	// exchanges alone, as before the body line (estimate.HullConfig.
	// CenterFloorOnly): for comparisons. false (the default): the line
	// blends the floor and the body of the delays by their measured
	// variances (docs/estimators.md, "The body line").
	CenterFloorOnly bool
	// CenterNoBreaks ("center" only) keeps the centre line from following
	// frequency breaks (estimate.HullConfig.CenterBreaks: a round missed
	// far beyond the usual, held back, and the window restarted from it
	// when the next round confirms; the source asked for that next round
	// early): for comparisons. false (the default): breaks are followed
	// (docs/estimators.md, "Frequency breaks").
	CenterNoBreaks bool
	// ChecksPerPeriod: between a child's rounds its source sends it this
	// many check exchanges a period (one probe each, never retried;
	// Adaptive only, not on the convergence ramp; period/(ChecksPerPeriod+1)
	// apart and at least 50 ms: with the precise profile's 128 and 6-s
	// period, 20 a second; at most 128), and the child judges
	// each against the centre line it serves (estimate's Hull.Check).
	// Two of them beyond the line on one side within 8 checks
	// (estimate.CheckTally), or their midpoints drifting away from the
	// line (estimate.Hull.CheckTrend), make the child report CheckErr at
	// once, and
	// the source starts a round then
	// (followCheck): a frequency break is found within a fraction of the
	// period instead of at the next round. 0: none (the default).
	ChecksPerPeriod int
	// DiscountDelay: before comparing |Tdiff - projection| with
	// DIFFERENCE_THRESH, subtract half the round's best round trip's excess
	// over the shortest round trip seen from that source, the part of the
	// difference the exchange's own queueing can explain. False is Liao's
	// rule, right for links with microseconds of jitter; on a link with
	// tens of microseconds of jitter Liao's rule reports noise as error and
	// keeps the global period at its minimum.
	DiscountDelay bool
	// HullMaxSpan limits the time span of the samples the Hull keeps per
	// source (estimate.HullConfig.MaxSpan). With MaxWander > 0 the Hull
	// widens its point sets by MaxWander*span^2/2, so a window of an hour
	// gives bounds of tens of ms; a short span gives a loose skew. 0 (the
	// default) chooses the span after every round, where the bound one
	// period ahead is smallest (see HullSpan); a positive value is a fixed
	// span; a negative one keeps the whole Window. The centre-line estimator
	// ("center") keeps its own Hull over the whole Window for its estimate.
	HullMaxSpan time.Duration
	// ReadUncertainty is the largest |reading - ideal reading| of the
	// node's own clock (granularity and read jitter). Read widens Earliest
	// and Latest by it (and by MaxDrift of it), so that the truth stays
	// inside even on the reference, whose bounds are otherwise
	// [local, local]. 0 means Granularity; a negative value adds nothing.
	ReadUncertainty time.Duration
	// SilentPeriods: a source is silent (EvSourceSilent, SourceSnapshot.Silent)
	// when nothing came from it (probe, time diff, period change) for
	// SilentPeriods times the global period it announced (MsgPeriodChange;
	// InitialGlobalPeriod until it does), widened by MaxDrift, plus the
	// slack of a round whose probes all time out, ProbeTimeout x
	// (MaxProbeRetries+1). 0 means 3.
	SilentPeriods float64
	// MaxFreqStep is the largest jump of a node's frequency against its
	// source (|Δskew|, dimensionless: 1e-6 is 1 ppm) the bounds allow at
	// any instant, on top of MaxWander's smooth change: between exchanges
	// the bounds widen by MaxFreqStep per ns elapsed (plus MaxWander's
	// quadratic term), so a frequency step up to it stays inside them.
	// With MaxWander this is the clock model's stated limit on frequency
	// change; a round that contradicts it (or MaxDrift) makes the node
	// StatusDegraded until AcquireRounds rounds agree again.
	MaxFreqStep float64
	// AcquireRounds is how many rounds in a row a source's data must agree
	// with the clock model before reads through it say StatusSynced (after
	// the start and after every contradiction). 0 means 3.
	AcquireRounds int
}
