package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/gclock/gclock/estimate"
)

// What a Message may contain (docs/daemon.md, "Security"). A message from
// the network is checked before Step acts on it: values no engine produces
// (NaN, infinities, skews beyond any crystal, samples with their times out
// of order) and round numbers far from the last accepted one are refused
// whole, so that no single message can move global time to nonsense or
// make the node ignore its real source afterwards.

// Limits on message contents. Package wire decodes within the same limits.
const (
	// MaxMsgTime bounds |t| of every timestamp and mapping anchor: 2^62 ns
	// (146 years), so that the difference of two stays in an int64.
	MaxMsgTime = int64(1) << 62
	// MaxMsgSkew bounds |Mapping.Skew|: 1e-3 = 1000 ppm, ten times the
	// 100 ppm of the worst crystal MaxDrift is meant for.
	MaxMsgSkew = 1e-3
	// MaxMsgSkewErr bounds Mapping.SkewErr: a rate error of 1 (100%) is
	// already meaningless; it only keeps the width arithmetic finite.
	MaxMsgSkewErr = 1.0
	// MaxMsgWander bounds Mapping.Wander (per ns per ns): 1e-9 is 10^6 ppm
	// per second, far beyond any oscillator; it keeps widths finite.
	MaxMsgWander = 1e-9
	// MaxMsgWidth bounds Mapping.W0: the width the engine itself uses for
	// "unbounded" (math.MaxInt64/4).
	MaxMsgWidth = int64(math.MaxInt64 / 4)
	// MaxMsgErr bounds an error report: err/DIFFERENCE_THRESH of 10^15 is a
	// projection off by 11 days at a 1 us threshold.
	MaxMsgErr = 1e15
	// MaxMsgSamples bounds the samples of one time diff: a round of
	// MaxPingsPerRound repeated once (wire.MaxSamples is this bound).
	MaxMsgSamples = 2 * MaxPingsPerRound
	// MaxSampleRTT bounds one exchange's round trip and a reply's
	// turnaround (T3 - T2): a minute, far beyond any probe timeout.
	MaxSampleRTT = int64(60e9)
	// MaxSampleAge is how far in the past of the node's clock a time
	// diff's sample may have been taken: a round is sent when it ends, a
	// child receives it within its probe timeouts; an hour is generous.
	MaxSampleAge = int64(3600e9)
	// MaxRoundJump is how far ahead of the last accepted round (or period
	// change) a source's next one may be. Rounds lost in between are
	// counted here; 4096 is a minute of lost rounds at the shortest
	// period, after which the source is silent and a renumbering is
	// accepted anyway (see admit).
	MaxRoundJump = 4096
)

// Reasons of a RejectError; they are the daemon's drop metric labels.
const (
	RejectMalformed  = "malformed"       // a value no engine produces
	RejectStaleRound = "stale_round"     // a round or change number outside the window of the last accepted one
	RejectSample     = "rejected_sample" // a time diff with an impossible sample
)

// ErrRejected is wrapped by every RejectError.
var ErrRejected = errors.New("message rejected")

// RejectError says why CheckMessage refused a message.
type RejectError struct {
	Reason string // RejectMalformed, RejectStaleRound or RejectSample
	Field  string // the offending field, e.g. "mapping.skew", "round"
	Value  any
}

// Error formats "engine: message rejected (REASON): FIELD = VALUE".
func (e *RejectError) Error() string {
	return fmt.Sprintf("engine: %v (%s): %s = %v", ErrRejected, e.Reason, e.Field, e.Value)
}

// Unwrap returns ErrRejected.
func (e *RejectError) Unwrap() error { return ErrRejected }

// InvalidFields names the first field of m (read as a message of type t)
// that no engine produces, and its value; "" when every field is within
// the limits above. It looks at m alone, not at the node's state.
func InvalidFields(m *Message, t MsgType) (field string, value any) {
	okTime := func(v int64) bool { return v > -MaxMsgTime && v < MaxMsgTime }
	fin := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch t {
	case MsgProbeReply:
		switch {
		case !okTime(m.T2):
			return "t2", m.T2
		case !okTime(m.T3) || m.T3 < m.T2 || m.T3-m.T2 > MaxSampleRTT:
			return "t3", m.T3
		}
	case MsgTimeDiff:
		if len(m.Samples) > MaxMsgSamples {
			return "samples", len(m.Samples)
		}
		for _, s := range m.Samples {
			if !sampleOK(s) {
				return "sample", s
			}
		}
		mp := &m.Mapping
		switch {
		case !okTime(mp.X0):
			return "mapping.x0", mp.X0
		case !okTime(mp.Y0):
			return "mapping.y0", mp.Y0
		case !fin(mp.Skew) || math.Abs(mp.Skew) > MaxMsgSkew:
			return "mapping.skew", mp.Skew
		case mp.W0 < 0 || mp.W0 > MaxMsgWidth:
			return "mapping.w0", mp.W0
		case !fin(mp.SkewErr) || mp.SkewErr < 0 || mp.SkewErr > MaxMsgSkewErr:
			return "mapping.skewerr", mp.SkewErr
		case !fin(mp.Wander) || mp.Wander < 0 || mp.Wander > MaxMsgWander:
			return "mapping.wander", mp.Wander
		}
	case MsgErrReport:
		if !fin(m.Err) || (m.Err < 0 && m.Err != CheckErr && m.Err != BrokeErr) || m.Err > MaxMsgErr {
			return "err", m.Err
		}
	case MsgPeriodChange:
		if m.Period <= 0 || m.Period > maxAnnouncedPeriod {
			return "period", m.Period
		}
	}
	return "", nil
}

// sampleOK: every time within MaxMsgTime, both sides in order, a round
// trip in [0, MaxSampleRTT].
func sampleOK(s estimate.Sample) bool {
	for _, v := range [...]int64{s.SrcSend, s.LocRecv, s.LocSend, s.SrcRecv} {
		if v <= -MaxMsgTime || v >= MaxMsgTime {
			return false
		}
	}
	if s.LocSend < s.LocRecv || s.SrcRecv < s.SrcSend {
		return false
	}
	rtt := s.RTT()
	return rtt >= 0 && rtt <= MaxSampleRTT
}

// CheckMessage reports whether Step would act on m received at local
// (nil), or why it refuses it (a *RejectError). It changes nothing; a
// driver calls it to count what it drops, Step calls it again. Messages
// that Step ignores for other reasons (addressed elsewhere, from a node
// that is neither a source nor a child, a late reply) pass: Step counts
// those itself.
func (n *Node) CheckMessage(m Message, local int64) error {
	_, err := n.check(&m, max(local, n.lastLocal))
	return err
}

// admit is Step's gate: false drops m. A round (or period change) number
// outside the window is accepted as a renumbering of the source (a
// restarted daemon numbers from 1 again) once the source has sent no
// accepted round for as long as it takes to call it silent: so one forged
// number can block a source for that long at most, never for good.
func (n *Node) admit(m Message, local int64) bool {
	renumber, err := n.check(&m, max(local, n.lastLocal))
	if err != nil {
		n.ignore(m, err.Error())
		return false
	}
	if renumber {
		s := n.sources[n.sourceIndex[m.From]]
		n.logger.Info("source renumbered its rounds after a silence", "source", s.id, "old_round", s.round, "round", m.Round)
		s.haveRnd = false
		s.periodSeq = 0
	}
	return true
}

// check is CheckMessage; renumber says that m is accepted as the first
// round of a renumbered source.
func (n *Node) check(m *Message, now int64) (renumber bool, err error) {
	if f, v := InvalidFields(m, m.Type); f != "" {
		reason := RejectMalformed
		if f == "sample" {
			reason = RejectSample
		}
		return false, &RejectError{Reason: reason, Field: f, Value: v}
	}
	if m.To != n.cfg.ID {
		return false, nil
	}
	i, ok := n.sourceIndex[m.From]
	if !ok {
		return false, nil
	}
	s := n.sources[i]
	switch m.Type {
	case MsgTimeDiff:
		if len(m.Samples) == 0 {
			// Every round that ends sends at least one exchange.
			return false, &RejectError{Reason: RejectSample, Field: "samples", Value: 0}
		}
		for _, x := range m.Samples {
			if x.LocSend > now || now-x.LocRecv > MaxSampleAge {
				return false, &RejectError{Reason: RejectSample, Field: "sample", Value: x}
			}
		}
		if !s.haveRnd {
			return false, nil
		}
		if m.Check {
			// A check exchange is about the round last taken (checks.go),
			// one exchange, answered after every exchange taken before it:
			// a replayed check is stale, so that replays cannot keep a
			// dead source heard.
			switch {
			case m.Round != s.round:
				return false, &RejectError{Reason: RejectStaleRound, Field: "round", Value: fmt.Sprintf("check about %d, last round %d", m.Round, s.round)}
			case len(m.Samples) != 1:
				return false, &RejectError{Reason: RejectMalformed, Field: "samples", Value: len(m.Samples)}
			case m.Samples[0].LocRecv <= s.checkRecv:
				return false, &RejectError{Reason: RejectStaleRound, Field: "sample", Value: fmt.Sprintf("check answered at %d, not after %d", m.Samples[0].LocRecv, s.checkRecv)}
			}
			return false, nil
		}
		if inWindow(s.round, m.Round) {
			return false, nil
		}
		if n.renumberable(s, now) {
			return true, nil
		}
		return false, &RejectError{Reason: RejectStaleRound, Field: "round", Value: fmt.Sprintf("%d after %d", m.Round, s.round)}
	case MsgPeriodChange:
		// No renumbering here: a restarted source's changes are accepted
		// again once its rounds have been (admit resets the number).
		if inWindow(s.periodSeq, m.Seq) {
			return false, nil
		}
		return false, &RejectError{Reason: RejectStaleRound, Field: "seq", Value: fmt.Sprintf("%d after %d", m.Seq, s.periodSeq)}
	}
	return false, nil
}

// inWindow: next is in (last, last+MaxRoundJump], without wrapping.
func inWindow(last, next uint32) bool {
	return next > last && uint64(next)-uint64(last) <= MaxRoundJump
}

// renumberable: nothing accepted from s for the engine's silence wait
// (silenceWait), counted from the last accepted round rather than from
// anything heard.
func (n *Node) renumberable(s *source, now int64) bool {
	return float64(now-s.lastAt) > n.silenceWait(s)
}
