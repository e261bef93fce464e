package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/gclock/gclock/estimate"
)

// view is the Node of one reference. After a takeover the Node runs on a
// frozen mapping of the local clock; after a change of reference, reads
// come from the previous view (prev) until the new one is synced.
//
// A new Node numbers its rounds and period changes from 1 again, and a
// child ignores a round or change numbered below one it has seen. So each
// view shifts the numbers it sends by the largest its predecessor sent
// (roundBase, seqBase) and shifts them back in the answers.
type view struct {
	ref    NodeID
	cur    *Node
	prev   *view
	frozen bool
	fm     estimate.Mapping // local -> engine clock when frozen

	roundBase, seqBase uint32 // added to outgoing Round / period-change Seq
	maxRound, maxSeq   uint32 // largest sent (after the shift)
}

// rebuild makes Order[j] the reference: a new Node for the new roles.
// takeOver (Order[j] is this node): the Node's clock becomes the frozen
// line of global time as this node estimates it at local.
func (m *Member) rebuild(j int, takeOver bool, local int64) {
	ref := m.cfg.Order[j]
	eng, err := m.newNode(j)
	if err != nil {
		m.log.Error("cannot change reference", "reference", ref, "err", err)
		return
	}
	old := m.view
	v := &view{ref: ref, cur: eng, roundBase: old.maxRound, seqBase: old.maxSeq, maxRound: old.maxRound, maxSeq: old.maxSeq}
	if takeOver {
		t0 := old.estimate(local)
		v.frozen = true
		if t0.Status == StatusUnsynced {
			m.log.Warn("taking over unsynced: global time continues from this node's clock")
			v.fm = estimate.Mapping{X0: local, Y0: local, Valid: true}
		} else {
			// The rate: the middle of the bounds 30 s ahead, which follows
			// the middle of the rates the exchanges allow, rather than the
			// selected estimator's line, whose rate a few seconds after
			// synchronizing was up to 14 ppm off on loopback
			// (TestRunFailoverUDP: the old scale 41 us away 4 s after the
			// takeover in one run of ten, at most 7.5 us in eleven with
			// this). Without finite bounds, the estimator's line.
			const far = 30 * int64(time.Second)
			var skew float64
			if tf := old.estimate(local + far); bounded(t0) && bounded(tf) {
				m0 := t0.Earliest/2 + t0.Latest/2
				mf := tf.Earliest/2 + tf.Latest/2
				skew = float64(mf-m0-far) / float64(far)
			} else {
				const d = int64(time.Second)
				skew = float64(old.estimate(local+d).Est-t0.Est-d) / float64(d)
			}
			v.fm = estimate.Mapping{X0: local, Y0: t0.Est, Skew: skew, Valid: true}
			m.log.Info("global time frozen at takeover", "local", local, "global", t0.Est, "skew", v.fm.Skew,
				"width", t0.Latest-t0.Earliest)
		}
	} else if c := m.continueScale; c != nil && ref == m.self {
		m.continueScale = nil
		if c.X0 != 0 || c.Y0 != 0 || c.Skew != 0 { // not the identity
			v.frozen, v.fm = true, *c
		}
	} else {
		v.prev = old
		if old.cur.HasPrior() {
			v.prev = nil // a restored prior bounds the old reference's time, never synced since
		}
		for p := v.prev; p != nil; p = p.prev {
			if p.prev != nil && p.prev.prev != nil {
				p.prev.prev = nil // keep at most two generations
			}
		}
	}
	m.view = v
	m.idx = j
	m.heard = local
	m.qEnd, m.walking = 0, false
	m.changes++
	if ref == m.self {
		m.beatNext = local
		m.refSince = local
	}
	took := 0.0
	if takeOver {
		took = 1
	}
	m.out.Events = append(m.out.Events, Event{Local: local, Kind: EvReferenceChange, Peer: ref, Value: took})
	v.cur.Tick(v.in(local))
	m.drain(local)
}

// In maps a local time onto the current Node's clock: the identity, or
// the frozen line after a takeover.
func (m *Member) In(local int64) int64 { return m.view.in(local) }

// Frozen returns the frozen local->global line of a member that took
// over, and whether it did.
func (m *Member) Frozen() (estimate.Mapping, bool) { return m.view.fm, m.view.frozen }

// Scale returns the definition of global time in the current term when
// this member is that term's reference and serves it (not while it asks
// who the reference is): global time at local time l is
// fm.Y0 + (l - fm.X0)(1 + fm.Skew). It is the identity for a reference
// that did not take over (global time is its clock) and the frozen line
// for one that did. A follower does not know it exactly: ok is false.
func (m *Member) Scale() (term uint32, fm estimate.Mapping, ok bool) {
	if m.Reference() != m.self || !m.started || m.discovering {
		return m.term, estimate.Mapping{}, false
	}
	if m.view.frozen {
		return m.term, m.view.fm, true
	}
	return m.term, estimate.Mapping{Valid: true}, true
}

// RestoreScale gives a member that has not started the scale it defined
// as the reference of term before a restart (Scale, kept in the daemon's
// state file, on the same local clock): if discovery finds the cluster
// still naming it the reference of that term, it leads it on that scale
// (the frozen line of a takeover) instead of restarting global time from
// its clock, which would give the term two scales.
func (m *Member) RestoreScale(term uint32, fm estimate.Mapping) error {
	if m.started {
		return fmt.Errorf("engine: member %d: restore a scale after the start: %w", m.self, ErrConfig)
	}
	if !fm.Valid || math.IsNaN(fm.Skew) || math.IsInf(fm.Skew, 0) || math.Abs(fm.Skew) > MaxMsgSkew ||
		fm.X0 <= -MaxMsgTime || fm.X0 >= MaxMsgTime || fm.Y0 <= -MaxMsgTime || fm.Y0 >= MaxMsgTime {
		return fmt.Errorf("engine: member %d: scale of term %d %+v: want a valid line within the message limits: %w", m.self, term, fm, ErrConfig)
	}
	m.restored, m.restoredTerm, m.haveRestored = estimate.Mapping{X0: fm.X0, Y0: fm.Y0, Skew: fm.Skew, Valid: true}, term, true
	return nil
}

// Numbers returns the largest round and period-change numbers sent.
func (m *Member) Numbers() (round, seq uint32) { return m.view.maxRound, m.view.maxSeq }

// SetNumbers makes the member number its rounds and period changes after
// round and seq (a restarted node's, restored from its state). Call before
// the first Tick.
func (m *Member) SetNumbers(round, seq uint32) {
	v := m.view
	v.roundBase, v.seqBase = round, seq
	v.maxRound, v.maxSeq = round, seq
}

// Serving is the reference whose view the last Estimate or Read at local
// would come from: the current one, or the previous one while the current
// is unsynced.
func (m *Member) Serving(local int64) NodeID {
	v, _ := m.view.serving(local)
	return v.ref
}

// stamps maps a driver's receive stamps (a probe's T2, a reply's T4) onto
// the Node's clock, as the Step time is.
func (v *view) stamps(msg *Message) {
	msg.T4 = v.in(msg.T4)
	if msg.Type == MsgProbe {
		msg.T2 = v.in(msg.T2)
	}
}

// in maps a local time onto the Node's clock.
func (v *view) in(local int64) int64 {
	if !v.frozen || local == 0 {
		return local
	}
	dx := local - v.fm.X0
	return v.fm.Y0 + dx + int64(math.Round(v.fm.Skew*float64(dx)))
}

// out maps a Node time back onto the local clock, rounded up so that a
// timer set there is not early.
func (v *view) out(x int64) int64 {
	if !v.frozen || x == 0 {
		return x
	}
	return v.fm.X0 + int64(math.Ceil(float64(x-v.fm.Y0)/(1+v.fm.Skew))) + 1
}

// unshift takes the view's numbering back out of an answer.
func (v *view) unshift(m *Message) {
	if m.Type == MsgProbeReply || m.Type == MsgErrReport {
		m.Round -= v.roundBase
	}
}

// ready is the Node's output with the view's numbering and timers on the
// local clock.
func (v *view) ready() Ready {
	r := v.cur.Ready()
	r.NextTick = v.out(r.NextTick)
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Type {
		case MsgProbe, MsgTimeDiff, MsgPeriodChange:
			m.Round += v.roundBase
			v.maxRound = max(v.maxRound, m.Round)
		}
		if m.Type == MsgPeriodChange {
			m.Seq += v.seqBase
			v.maxSeq = max(v.maxSeq, m.Seq)
		}
	}
	return r
}

// dropPrev forgets the previous view once the current one is synced.
func (v *view) dropPrev(local int64) {
	if v.prev != nil && v.cur.Estimate(v.in(local)).Status != StatusUnsynced {
		v.prev = nil
	}
}

// serving is the view that answers a reading at local: v, or the newest
// of its previous views while the ones after it are unsynced (fell).
func (v *view) serving(local int64) (s *view, fell bool) {
	for v.prev != nil && v.cur.Estimate(v.in(local)).Status == StatusUnsynced {
		v, fell = v.prev, true
	}
	return v, fell
}

func (v *view) estimate(local int64) Time {
	s, fell := v.serving(local)
	t := s.cur.Estimate(s.in(local))
	if fell {
		t = notPromised(t)
	}
	return t
}

// notPromised marks a reading of the previous view: it bounds the old
// reference's time scale, and the new reference's differs from it by that
// node's error when it took over, which this member does not know. The
// reading continues global time but is not a promise: synced becomes stale.
func notPromised(t Time) Time {
	if t.Status == StatusSynced {
		t.Status = StatusStale
	}
	return t
}

func (v *view) read(local int64) Time {
	s, fell := v.serving(local)
	t := s.cur.Read(s.in(local))
	if fell {
		t = notPromised(t)
	}
	return t
}

// bounded reports whether both of t's bounds are finite.
func bounded(t Time) bool { return t.Earliest > math.MinInt64 && t.Latest < math.MaxInt64 }
