package daemon

import (
	"errors"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/gclock/gclock/engine"
	"github.com/gclock/gclock/gtime"
	"github.com/gclock/gclock/transport"
	"github.com/gclock/gclock/wire"

	"github.com/prometheus/client_golang/prometheus"
)

// What the daemon drops, and why (docs/daemon.md, "Security"). The
// transport drops datagrams without the right tag, replays, datagrams from
// unknown senders or addresses and undecodable ones (transport.DropReasons);
// the daemon then drops engine messages the engine would refuse
// (engine.CheckMessage: values no engine produces, rounds outside the
// window, impossible samples) and real-time rate reports outside what
// sync.max_drift_ppm allows, and engine messages addressed to another node
// (DropMisaddressed: without a key, a datagram to one node replayed to
// another; such a message is no sign of the sender's life here).

// dropRejectedRate is the reason for a real-time rate report refused.
const dropRejectedRate = "rejected_rate"

// dropReasons is every reason of gclock_packets_dropped_total, in order.
// engine.RejectMalformed equals transport.DropMalformed ("malformed"):
// both are values no sender produces, one caught by the decoder and one by
// the engine's checks.
var dropReasons = []string{transport.DropBadTag, transport.DropReplay, transport.DropUnknownSender,
	transport.DropMalformed, engine.RejectStaleRound, engine.RejectSample, dropRejectedRate,
	transport.DropMisaddressed, transport.DropSeqJump, transport.DropUnverified, engine.RejectTerm,
	transport.DropChallenge}

// security holds the daemon's own drop counters and the status history.
type security struct {
	rejected sync.Map // reason -> *atomic.Uint64 (engine rejections, rate reports)

	mu      sync.Mutex
	status  engine.Status
	haveSt  bool
	changes map[engine.Status]uint64 // changes into each status
}

func (s *security) drop(reason string) {
	v, _ := s.rejected.LoadOrStore(reason, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
}

func (s *security) dropped(reason string) uint64 {
	if v, ok := s.rejected.Load(reason); ok {
		return v.(*atomic.Uint64).Load()
	}
	return 0
}

// admitMsg reports whether the engine would act on m at engine-side local
// time local; a refused message is counted by reason and logged at debug
// level (never above: an attacker must not be able to fill the log).
// Called with n.mu held.
func (n *node) admitMsg(m engine.Message, local int64) bool {
	if m.Type != engine.MsgStatusQuery && m.Type != engine.MsgStatusReply && m.To != engine.NodeID(n.cfg.Node.ID) {
		// The engine would ignore it, but the failover watch would count
		// it as the sender's sign of life (issue 17: replays of the
		// reference's datagrams to others kept a dead reference alive).
		n.sec.drop(transport.DropMisaddressed)
		n.log.Debug("message dropped", "reason", transport.DropMisaddressed, "type", m.Type, "from", m.From, "to", m.To)
		return false
	}
	err := n.eng.CheckMessage(m, local)
	if err == nil || errors.Is(err, engine.ErrStaleTerm) {
		// An older term's message goes on to the Member, which refuses it,
		// counts it and tells the sender the current term.
		return true
	}
	var re *engine.RejectError
	reason := engine.RejectMalformed
	if errors.As(err, &re) {
		reason = re.Reason
	}
	n.sec.drop(reason)
	n.log.Debug("message dropped", "reason", reason, "type", m.Type, "from", m.From, "err", err)
	return false
}

// noteStatus counts a change of the node's status (global time's, as
// served) and logs it.
func (n *node) noteStatus() {
	now := n.clk.now()
	n.mu.Lock()
	t := n.eng.Estimate(now)
	st := t.Status
	n.mu.Unlock()
	if n.sd != nil {
		scale, sst, reason, _ := n.served(t)
		what := "global time"
		if scale != gtime.TimescaleReference.String() {
			what = "UTC (" + scale + ")"
		}
		if err := n.sd.statusChanged(sst, what, reason, st, n.cfg.Node.ID, n.ref.Load()); err != nil {
			n.log.Warn("systemd notify", "err", err)
		}
	}
	s := &n.sec
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.haveSt && st == s.status {
		return
	}
	if s.changes == nil {
		s.changes = map[engine.Status]uint64{}
	}
	if s.haveSt {
		n.log.Info("status changed", "from", s.status, "to", st)
	}
	s.status, s.haveSt = st, true
	s.changes[st]++
}

// isPeer reports whether id is a configured peer.
func (n *node) isPeer(id uint32) bool {
	_, ok := n.peers[engine.NodeID(id)]
	return ok
}

// SecuritySnapshot is what gclock_packets_dropped_total and
// gclock_status_changes_total show.
type SecuritySnapshot struct {
	Node          uint32
	Drops         map[string]uint64 // by reason
	StatusChanges map[string]uint64 // changes into each status (status names)
}

// SecuritySnapshot takes the counters now.
func (n *node) SecuritySnapshot() SecuritySnapshot {
	s := SecuritySnapshot{Node: n.cfg.Node.ID, Drops: map[string]uint64{}, StatusChanges: map[string]uint64{}}
	for r, v := range n.ep.Stats().Drops() {
		s.Drops[r] += v
	}
	for _, r := range dropReasons {
		s.Drops[r] += n.sec.dropped(r)
	}
	s.Drops[engine.RejectTerm] += n.unproven.Load()
	n.sec.mu.Lock()
	for st, v := range n.sec.changes {
		s.StatusChanges[st.String()] = v
	}
	n.sec.mu.Unlock()
	return s
}

// securityCollector exports a SecuritySnapshot taken at every scrape.
type securityCollector struct {
	snap           func() SecuritySnapshot
	dropped, stChg *prometheus.Desc
}

// newSecurityCollector returns a collector over snap.
func newSecurityCollector(snap func() SecuritySnapshot) *securityCollector {
	return &securityCollector{
		snap: snap,
		dropped: prometheus.NewDesc("gclock_packets_dropped_total",
			"Datagrams and messages dropped, by reason: bad_tag, replay, unknown_sender, malformed, stale_round, rejected_sample, rejected_rate, misaddressed, seq_jump, unverified, unproven_term (a newer election term without evidence it was won), challenge (a replayed challenge not answered: at most one answer per 100 ms per sender).",
			[]string{"node", "reason"}, nil),
		stChg: prometheus.NewDesc("gclock_status_changes_total",
			"Changes of the node's status, by the status changed into (the first status counts as one).",
			[]string{"node", "status"}, nil),
	}
}

// Describe sends the descriptors.
func (c *securityCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.dropped
	ch <- c.stChg
}

// Collect sends every drop reason (zeros included, so that an alert can
// use rate() from the start) and the status changes seen.
func (c *securityCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	node := strconv.FormatUint(uint64(s.Node), 10)
	for _, r := range dropReasons {
		ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(s.Drops[r]), node, r)
	}
	for _, st := range statuses {
		if v, ok := s.StatusChanges[st]; ok {
			ch <- prometheus.MustNewConstMetric(c.stChg, prometheus.CounterValue, float64(v), node, st)
		}
	}
}

// anonymousOps are the requests a holder of the cluster key may send from
// outside the peer list (a monitoring tool): read-only, answered with no
// more bytes than asked (wire pads the requests). Real-time rate reports
// from outside the peer list are not counted (handleRealTimeQuery).
var anonymousOps = []wire.Op{wire.OpStatusQuery, wire.OpRealTimeQuery}

// countsAttr logs counters by name as a group of keys (replay=3 bad_tag=1),
// sorted, without the zeros.
func countsAttr(m map[string]uint64) slog.Value {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, len(keys))
	for i, k := range keys {
		attrs[i] = slog.Uint64(k, m[k])
	}
	return slog.GroupValue(attrs...)
}
